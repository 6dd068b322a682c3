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
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/caps"
	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/privdir"
)

// Pool runs programs in disposable sandbox children.
type Pool struct {
	opts     Options
	log      *slog.Logger
	m        *metrics
	adm      *admission
	cacheDir *privdir.Dir // nil = nothing persisted between starts
	code     *sealedFile  // the warm-up's compiled code; nil = children compile in memory
	snap     *sealedFile  // the warm-up's snapshot; nil = children initialize afresh
	exe      *childExe    // what every child executes

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
	capsErr   error // set by the forker before its first fork
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
		if p.cacheDir, err = p.openCacheDir(); err != nil {
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

// warm runs the warm-up child once, before any serving child starts: it
// loads the compiled code the parent read from the cache directory, or
// compiles it, into one memfd, and writes the post-initialization snapshot
// into another. Once it is reaped the parent seals both and hands them to
// every child (descriptors.go). A failed warm-up is not fatal: children then
// compile in memory, slower and still correct.
func (p *Pool) warm(ctx context.Context) error {
	start := time.Now()
	code, err := newMemfd("connecta-code")
	if err != nil {
		return err
	}
	snap, err := newMemfd("connecta-snapshot")
	if err != nil {
		code.Close()
		return err
	}
	keep := false
	defer func() {
		if !keep {
			code.Close()
			snap.Close()
		}
	}()
	loaded := p.loadPersistedCode(code)
	c, err := p.spawnWith(ipc.ModeWarm, loaded, false, []*os.File{code, snap})
	if err != nil {
		return err
	}
	c.closeInput()
	// No exit grace here: compiling takes about 0.7 s of CPU, seconds of
	// wall on a busy machine; ctx bounds it.
	var key string
	for reading := true; reading; {
		select {
		case in := <-c.in:
			switch {
			case in.err != nil:
				reading = false
			case in.m.Type == ipc.TypeReady && key == "" && in.m.CompiledKey != "":
				key = in.m.CompiledKey
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
	if st := c.exitStatus(); st != "code 0" || key == "" {
		tailText, _ := c.stderr.String()
		p.log.Warn("warming the compilation cache failed; children compile in memory", "status", st, "stderr", tailText)
		return nil
	}
	// The warm-up child is reaped: nobody else holds these descriptors.
	if err := seal(code, maxCodeBytes); err != nil {
		p.log.Warn("warm-up compiled code unusable; children compile in memory", "err", err)
		return nil
	}
	keep = true
	p.code = &sealedFile{f: code, key: key}
	if err := seal(snap, maxSnapshotBytes); err != nil {
		p.log.Warn("warm-up snapshot unusable; children initialize afresh", "err", err)
		snap.Close()
	} else {
		p.snap = &sealedFile{f: snap}
	}
	if key != loaded {
		p.persistCode(code, key)
	}
	p.log.Debug("compilation cache warm", "loaded", loaded != "", "snapshot", p.snap != nil, "duration", time.Since(start))
	return nil
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

// takeChild waits for a warm child; spare reports one was ready at once.
func (p *Pool) takeChild(ctx context.Context) (c *child, spare bool, err error) {
	if ctx.Err() != nil {
		// Never spend a warm child on a caller who already left.
		return nil, false, &ExecError{Code: CodeCancelled, Message: msgCancelledBeforeStart}
	}
	select {
	case c := <-p.ready:
		return c, true, nil
	default:
	}
	c, err = p.waitChild(ctx)
	return c, false, err
}

// waitChild is takeChild's miss: demand outran the warm children.
func (p *Pool) waitChild(ctx context.Context) (*child, error) {
	// Keep one more from now on; with no seats at all (MaxSpares 0) this
	// caller spawns its own.
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
		p.closeDescriptors()
		p.exe.close()
	}
	return nil
}

// ChildKind is what the pool's children execute: ChildEmbedded (the slim
// child) or ChildSelf (this binary re-executed).
func (p *Pool) ChildKind() string { return p.exe.kind }

// forker runs every fork on one locked thread (see Pool.forks). The thread
// has no bounding, inheritable or ambient capabilities, so a
// child it starts as root has none at all (internal/caps). It is never
// unlocked: the thread ends with the goroutine instead of going back to the
// scheduler without them.
func (p *Pool) forker() {
	runtime.LockOSThread()
	defer close(p.forkerDone)
	if err := caps.DropForExec(); err != nil {
		p.capsErr = err // every spawn fails with it
	}
	for f := range p.forks {
		f()
	}
}

// onForkThread runs start on the forking thread.
func (p *Pool) onForkThread(start func() error) error {
	var err error
	done := make(chan struct{})
	p.forks <- func() {
		if p.capsErr != nil { // never fork with capabilities to pass on
			err = p.capsErr
		} else {
			err = start()
		}
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
