// Package supervisor is the parent side of the sandbox: admission (L7), warm
// spare children, one disposable child per program, the per-execution
// session (host calls, streamed logs, deadline, kills), and metrics.
//
// Every child is this binary re-executed with a marker in argv (see package
// sandbox and ipc.ChildArgs): sandbox.MaybeRunChild must run first in main
// and in TestMain of any package whose tests start a Pool.
package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connecta-dev/connecta/ipc"
)

// Pool runs programs in disposable sandbox children.
type Pool struct {
	opts     Options
	log      *slog.Logger
	m        *metrics
	adm      *admission
	cacheDir string
	snapshot string // "<file>:<sha256>" for ChildArgs.Snapshot; "" = none
	exe      *childExe

	ready   chan *child // a seat hands its ready child to a session
	closing chan struct{}
	// forks runs every cmd.Start on one locked OS thread that lives as long
	// as the pool: the parent-death signal fires when the forking thread
	// exits, and Go destroys a thread whose locked goroutine exits, so a
	// child forked from an arbitrary thread could die with it.
	forks      chan func()
	forkerDone chan struct{}

	// seats is how many seat goroutines keep a warm spare each: Spares at
	// start, one more per miss up to MaxSpares, one less per spare above
	// Spares that sat idle for SpareIdle.
	seatsMu sync.Mutex
	seats   int

	mu        sync.Mutex
	closed    bool
	wg        sync.WaitGroup // every goroutine the pool starts
	nsRefused atomic.Bool
}

// New starts a pool: it warms the compilation cache with one child (ctx
// bounds that), then starts Spares warm children. The pool lives until Close.
func New(ctx context.Context, opts Options) (*Pool, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.normalized()
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		opts:       opts,
		log:        opts.Logger.With("component", "supervisor"),
		m:          m,
		ready:      make(chan *child),
		closing:    make(chan struct{}),
		forks:      make(chan func()),
		forkerDone: make(chan struct{}),
	}
	go p.forker()
	p.adm = newAdmission(opts.Slots, opts.MaxQueue, opts.QueueTimeout, m, p.log)
	if !opts.DisableCache {
		if p.cacheDir, err = p.prepareCacheDir(); err != nil {
			p.Close()
			return nil, err
		}
	}
	if p.exe, err = p.prepareChild(); err != nil {
		p.Close()
		return nil, err
	}
	p.m.setChild(p.exe.kind)
	if err := p.warm(ctx); err != nil {
		p.Close()
		return nil, err
	}
	p.m.sparesMinimum.Set(float64(opts.Spares))
	p.seatsMu.Lock()
	p.seats = opts.Spares
	p.m.sparesTarget.Set(float64(p.seats))
	p.seatsMu.Unlock()
	for range opts.Spares {
		p.track(p.seat)
	}
	return p, nil
}

// track runs f on a goroutine Close waits for. Callers are New (before the
// pool is shared) or goroutines that are themselves tracked, so the
// WaitGroup's count is never zero here while Close waits.
func (p *Pool) track(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// enter registers a session Close must wait for; false once closed.
func (p *Pool) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// prepareCacheDir returns the directory children use as their compilation
// cache: the configured one (or <os.UserCacheDir()>/connecta/wazero) when it
// is ours and 0700, else a private subdirectory of it, connecta-<uid>, that
// is. Nothing in a directory others can write is trusted: its entries are
// native code. When neither can be had it is an error naming the fix;
// "" (compile in memory) only when there is no user cache directory at all.
func (p *Pool) prepareCacheDir() (string, error) {
	dir := p.opts.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			p.log.Warn("no user cache directory; sandbox children compile in memory", "err", err)
			return "", nil
		}
		dir = filepath.Join(base, "connecta", "wazero")
	}
	dir, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return "", fmt.Errorf("supervisor: compilation cache directory %s: %w (set executor.cacheDir to a directory this user owns)", dir, err)
	}
	err = privateDir(dir)
	if err == nil {
		return dir, nil
	}
	sub := filepath.Join(dir, "connecta-"+strconv.Itoa(os.Getuid()))
	if mkErr := os.Mkdir(sub, 0o700); mkErr != nil && !errors.Is(mkErr, fs.ErrExist) {
		return "", fmt.Errorf("supervisor: compilation cache directory %s is %v, and its private subdirectory cannot be made: %w; "+
			"run chmod 700 %s (it must be owned by uid %d), or set executor.cacheDir to a private directory", dir, err, mkErr, dir, os.Getuid())
	}
	if subErr := privateDir(sub); subErr != nil {
		return "", fmt.Errorf("supervisor: compilation cache directory %s is %v, and its subdirectory %s is %v; "+
			"run chmod 700 %s (it must be owned by uid %d), or set executor.cacheDir to a private directory", dir, err, sub, subErr, dir, os.Getuid())
	}
	p.log.Info("compilation cache directory is not private; using a private subdirectory", "dir", dir, "reason", err.Error(), "using", sub)
	return sub, nil
}

// privateDir reports why dir is not a real directory owned by us with no
// group or other access.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return errors.New("not a directory")
	case st == nil || int(st.Uid) != os.Getuid():
		return fmt.Errorf("not owned by uid %d", os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("mode %04o, not 0700", fi.Mode().Perm())
	}
	return nil
}

// warm compiles the module into the cache once, in a child (the parent never
// loads the engine), before any serving child starts. The warm-up also
// persists the post-initialization snapshot and names it in a ready frame;
// the parent checksums the file and hands name and checksum to every child.
func (p *Pool) warm(ctx context.Context) error {
	if p.cacheDir == "" {
		return nil
	}
	start := time.Now()
	c, err := p.spawn(ipc.ModeWarm)
	if err != nil {
		return err
	}
	c.closeInput()
	// No exit grace here: compiling takes about 0.7 s of CPU, seconds of
	// wall on a busy machine; ctx bounds it.
	var snapshot string
	for reading := true; reading; {
		select {
		case in := <-c.in:
			switch {
			case in.err != nil:
				reading = false
			case in.m.Type == ipc.TypeReady && snapshot == "" && in.m.Snapshot != "":
				snapshot = in.m.Snapshot
			default:
				p.log.Warn("warm-up child sent an unexpected frame; killed", "type", in.m.Type)
				c.kill(killProtocol, p.m)
			}
		case <-ctx.Done():
			c.kill(killStartup, p.m)
			<-c.exited
			return fmt.Errorf("supervisor: warming the compilation cache: %w", ctx.Err())
		}
	}
	select {
	case <-c.exited:
	case <-ctx.Done():
		c.kill(killStartup, p.m)
		<-c.exited
		return fmt.Errorf("supervisor: warming the compilation cache: %w", ctx.Err())
	}
	if st := c.exitStatus(); st != "code 0" {
		tailText, _ := c.stderr.String()
		p.log.Warn("warming the compilation cache failed; children will try again themselves", "status", st, "stderr", tailText)
		return nil
	}
	if snapshot != "" {
		sum, err := snapshotChecksum(p.cacheDir, snapshot)
		if err != nil {
			p.log.Warn("warm-up snapshot unusable; children initialize afresh", "err", err)
		} else {
			p.snapshot = snapshot + ":" + sum
		}
	}
	p.log.Debug("compilation cache warm", "dir", p.cacheDir, "snapshot", p.snapshot, "duration", time.Since(start))
	return nil
}

// maxSnapshotBytes bounds the snapshot file the parent reads (~260 KB).
const maxSnapshotBytes = 64 << 20

// snapshotChecksum is the hex sha256 of the snapshot file name in dir, which
// must be a plain snapshot-*.bin name (it came from a child).
func snapshotChecksum(dir, name string) (string, error) {
	if filepath.Base(name) != name || !strings.HasPrefix(name, "snapshot-") || !strings.HasSuffix(name, ".bin") {
		return "", fmt.Errorf("snapshot name %q refused", name)
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxSnapshotBytes+1))
	if err != nil {
		return "", err
	}
	if n > maxSnapshotBytes {
		return "", fmt.Errorf("snapshot %s is over %d bytes", name, maxSnapshotBytes)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cpuLimitSeconds is the RLIMIT_CPU backstop: above any wall deadline a run
// can have, so only a child that escaped every other bound meets it.
func (p *Pool) cpuLimitSeconds() uint64 {
	return uint64((p.opts.Limits.Wall+p.opts.ReadyTimeout)/time.Second) + 10
}

// seat keeps one warm spare: spawn, wait for ready, offer it until a session
// takes it, then spawn its replacement at once. A child that fails before
// ready is replaced after min(5 s, 100 ms·2^(n−1)). The seat ends with the
// pool, or when its spare sat idle while the pool keeps more than Spares.
func (p *Pool) seat() {
	failures := 0
	for {
		select {
		case <-p.closing:
			return
		default:
		}
		c, err := p.startChild(context.Background())
		if errors.Is(err, errPoolClosing) {
			return // not a failure of the child: no crash counted, no retry
		}
		if err != nil {
			failures++
			p.m.crashes.WithLabelValues("startup").Inc()
			d := backoff(failures)
			p.log.Warn("sandbox child failed before ready; retrying", "attempt", failures, "backoff", d, "err", err)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-p.closing:
				t.Stop()
				return
			}
			continue
		}
		failures = 0
		if !p.offer(c) {
			return
		}
	}
}

// offer holds the ready child c for the next session. True: c was taken or
// lost, and the seat replaces it. False: the pool is closing, or c sat idle
// for SpareIdle while this seat was surplus (then c is discarded: its input
// closes and it exits), and the seat ends.
func (p *Pool) offer(c *child) bool {
	p.m.spares.Inc()
	defer p.m.spares.Dec()
	var idle <-chan time.Time
	if p.surplus() {
		t := time.NewTimer(p.opts.SpareIdle)
		defer t.Stop()
		idle = t.C
	}
	for {
		select {
		case p.ready <- c:
			return true
		case in := <-c.in:
			// An idle spare has nothing to say: it died or misbehaved.
			if in.err == nil {
				c.kill(killProtocol, p.m)
			} else {
				p.m.crashes.WithLabelValues("startup").Inc()
			}
			p.log.Warn("idle sandbox child lost; replacing", "err", in.err)
			p.retire(c, false)
			return true
		case <-idle:
			if p.leaveSeat() {
				p.log.Debug("idle sandbox spare discarded", "spares", p.opts.Spares)
				p.retire(c, false)
				return false
			}
			idle = nil // another surplus seat left first: this one stays
		case <-p.closing:
			c.kill(killShutdown, p.m)
			p.retire(c, false)
			return false
		}
	}
}

// surplus reports whether the pool keeps more seats than Spares.
func (p *Pool) surplus() bool {
	p.seatsMu.Lock()
	defer p.seatsMu.Unlock()
	return p.seats > p.opts.Spares
}

// leaveSeat gives up one surplus seat; false when there is none.
func (p *Pool) leaveSeat() bool {
	p.seatsMu.Lock()
	defer p.seatsMu.Unlock()
	if p.seats <= p.opts.Spares {
		return false
	}
	p.seats--
	p.m.sparesTarget.Set(float64(p.seats))
	return true
}

// grow adds a seat after a miss (a session found no warm child), up to
// MaxSpares; false when at the maximum or closing. Its caller is a session
// the pool's WaitGroup already counts (see track).
func (p *Pool) grow() bool {
	p.seatsMu.Lock()
	defer p.seatsMu.Unlock()
	if p.seats >= p.opts.MaxSpares {
		return false
	}
	select {
	case <-p.closing:
		return false
	default:
	}
	p.seats++
	p.m.sparesTarget.Set(float64(p.seats))
	p.track(p.seat)
	return true
}

func backoff(n int) time.Duration {
	d := baseBackoff << min(n-1, 16)
	return min(d, maxBackoff)
}

// startChild spawns a serving child and waits for its ready frame (or ctx).
func (p *Pool) startChild(ctx context.Context) (*child, error) {
	start := time.Now()
	c, err := p.spawn(ipc.ModeServe)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(p.opts.ReadyTimeout)
	defer t.Stop()
	select {
	case in := <-c.in:
		if in.err == nil && in.m.Type == ipc.TypeReady {
			p.m.spawnDuration.Observe(time.Since(start).Seconds())
			if in.m.SnapshotFallback != "" {
				p.m.snapshotFallbacks.Inc()
				p.log.Warn("sandbox child initialized afresh instead of restoring the snapshot", "reason", in.m.SnapshotFallback)
			}
			return c, nil
		}
		if in.err == nil || !errors.Is(in.err, io.EOF) {
			c.kill(killStartup, p.m)
			p.retire(c, false)
			if in.err == nil {
				return nil, fmt.Errorf("sandbox child sent %q before ready", in.m.Type)
			}
			return nil, fmt.Errorf("sandbox child broke the protocol before ready: %w", in.err)
		}
		p.retire(c, false)
		<-c.exited
		return nil, errors.New(c.crashReport())
	case <-t.C:
		c.kill(killStartup, p.m)
		p.retire(c, false)
		return nil, fmt.Errorf("sandbox child did not become ready within %dms", p.opts.ReadyTimeout.Milliseconds())
	case <-p.closing:
		c.kill(killShutdown, p.m)
		p.retire(c, false)
		return nil, errPoolClosing
	case <-ctx.Done():
		c.kill(killCancel, p.m)
		p.retire(c, false)
		return nil, ctx.Err()
	}
}

// errPoolClosing ends a start-up the pool's Close interrupted.
var errPoolClosing = errors.New("supervisor: pool closing")

// takeChild waits for a warm child.
func (p *Pool) takeChild(ctx context.Context) (*child, error) {
	if ctx.Err() != nil {
		// Never spend a warm child on a caller who already left.
		return nil, &ExecError{Code: CodeCancelled, Message: msgCancelledBeforeStart}
	}
	select {
	case c := <-p.ready:
		return c, nil
	default:
	}
	// A miss: demand outran the warm children. Keep one more from now on;
	// with no seats at all (MaxSpares 0) this caller spawns its own.
	if !p.grow() && p.opts.MaxSpares == 0 {
		return p.spawnFor(ctx)
	}
	// Bounded: when children cannot start at all, a caller must not hold its
	// slot for as long as its context lives.
	timer := time.NewTimer(p.opts.ReadyTimeout)
	defer timer.Stop()
	select {
	case c := <-p.ready:
		return c, nil
	case <-ctx.Done():
		return nil, &ExecError{Code: CodeCancelled, Message: msgCancelledStarting}
	case <-p.closing:
		return nil, &ExecError{Code: CodeClosed, Message: msgClosed}
	case <-timer.C:
		return nil, errNoChild
	}
}

// spawnFor starts a child for one caller when the pool keeps no spares.
func (p *Pool) spawnFor(ctx context.Context) (*child, error) {
	c, err := p.startChild(ctx)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, errPoolClosing):
		return nil, &ExecError{Code: CodeClosed, Message: msgClosed}
	case ctx.Err() != nil:
		return nil, &ExecError{Code: CodeCancelled, Message: msgCancelledStarting}
	}
	p.m.crashes.WithLabelValues("startup").Inc()
	p.log.Warn("sandbox child failed before ready", "err", err)
	return nil, fmt.Errorf("%w: %v", errNoChild, err)
}

// errNoChild: no sandbox child became ready within ReadyTimeout.
var errNoChild = errors.New("no sandbox child became ready")

// Acquire admits one execution (L7) or fails with *ExecError:
// executor_overloaded (queue full, or the wait expired; retryable, with
// RetryAfterMs), executor_cancelled (ctx ended first) or executor_closed.
// The lease must be Run or Released.
func (p *Pool) Acquire(ctx context.Context) (*Lease, error) {
	start := time.Now()
	if err := p.adm.acquire(ctx); err != nil {
		return nil, err
	}
	return &Lease{p: p, waited: time.Since(start)}, nil
}

// Snapshot reports admission state.
func (p *Pool) Snapshot() Snapshot { return p.adm.snapshot() }

// Close stops admitting, fails waiters with executor_closed, kills running
// and spare children, and returns once every child is reaped and every pool
// goroutine has ended. Idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	if !already {
		p.adm.close()
		close(p.closing)
	}
	p.wg.Wait()
	if !already {
		close(p.forks) // every child is reaped: the forking thread may go
	}
	<-p.forkerDone
	if !already {
		p.exe.close()
	}
	return nil
}

// ChildKind is what the pool's children execute: ChildEmbedded (the slim
// child) or ChildSelf (this binary re-executed).
func (p *Pool) ChildKind() string { return p.exe.kind }

func (p *Pool) forker() {
	runtime.LockOSThread()
	defer close(p.forkerDone)
	defer runtime.UnlockOSThread()
	for f := range p.forks {
		f()
	}
}

// onForkThread runs start on the forking thread.
func (p *Pool) onForkThread(start func() error) error {
	var err error
	done := make(chan struct{})
	p.forks <- func() {
		err = start()
		close(done)
	}
	<-done
	return err
}

// Lease is one admitted execution slot.
type Lease struct {
	p        *Pool
	waited   time.Duration
	used     atomic.Bool
	released atomic.Bool
	release  sync.Once
}

// Waited is how long admission took.
func (l *Lease) Waited() time.Duration { return l.waited }

// Release returns the slot without running; idempotent, and harmless after Run.
func (l *Lease) Release() {
	l.release.Do(func() {
		l.released.Store(true)
		l.p.adm.release()
	})
}

// errLeaseUsed is returned by a second Run.
var errLeaseUsed = errors.New("supervisor: an executor lease may execute only once, and not after Release")

// Alive reports whether the pool's own loop — the forking thread every
// child starts from — answers within ctx. It takes no slot and spawns
// nothing, so a pool whose slots are all busy is alive; a closed pool is not.
// The systemd watchdog is pinged only while this holds.
func (p *Pool) Alive(ctx context.Context) bool {
	if !p.enter() {
		return false
	}
	defer p.wg.Done()
	answered := make(chan struct{})
	select {
	case p.forks <- func() { close(answered) }:
	case <-ctx.Done():
		return false
	}
	select {
	case <-answered:
		return true
	case <-ctx.Done():
		return false
	}
}
