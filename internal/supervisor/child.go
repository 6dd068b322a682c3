package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// selfExe is re-executed for every child: /proc/self/exe, never the path
// os.Executable reports (after an upgrade that names a different binary).
const selfExe = "/proc/self/exe"

// child is one sandbox process seen from the parent. Its reader goroutine
// delivers every frame (then exactly one error, io.EOF at a clean end) on in;
// whoever holds the child consumes in until that error. Its waiter goroutine
// reaps it and closes exited.
type child struct {
	log     *slog.Logger
	pid     int
	cmd     *exec.Cmd
	w       *ipc.Writer
	toChild *os.File
	in      chan inbound
	exited  chan struct{}
	stderr  *tail

	closeIn sync.Once
	mu      sync.Mutex
	reaped  bool
	killed  string // first kill reason
	state   *os.ProcessState
}

type inbound struct {
	m   *ipc.Message
	err error
}

// spawn starts a serving child with the sealed code and snapshot
// descriptors. The caller owns the result and must end it through retire.
func (p *Pool) spawn(mode string) (*child, error) {
	files, key, snapshot, err := p.childFiles()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, f := range files {
			f.Close() // the child has its copies, or never will
		}
	}()
	return p.spawnWith(mode, key, snapshot, files)
}

// spawnWith starts a child in mode with extra descriptors after the IPC
// pipes (ChildCodeFD, ChildSnapshotFD) and what its argv says of them.
func (p *Pool) spawnWith(mode, compiledKey string, snapshot bool, extra []*os.File) (*child, error) {
	inR, inW, err := os.Pipe() // parent → child
	if err != nil {
		return nil, fmt.Errorf("supervisor: pipe: %w", err)
	}
	outR, outW, err := os.Pipe() // child → parent
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("supervisor: pipe: %w", err)
	}
	var argv []string
	if p.opts.testChildArgv != nil {
		argv = p.opts.testChildArgv(mode)
	} else {
		argv = ipc.ChildArgs{
			Mode:             mode,
			ParentPID:        os.Getpid(),
			CompiledKey:      compiledKey,
			MemoryLimitBytes: p.opts.MemoryLimitBytes,
			CPULimitSeconds:  p.cpuLimitSeconds(),
			Snapshot:         snapshot,
		}.Argv()
	}
	c := &child{
		log:     p.log,
		toChild: inW,
		w:       ipc.NewWriter(inW),
		in:      make(chan inbound, 16),
		exited:  make(chan struct{}),
		stderr:  &tail{max: stderrTailBytes},
	}
	attr := &syscall.SysProcAttr{
		Setpgid:   true,            // its own group: one kill reaches everything it is
		Pdeathsig: syscall.SIGKILL, // follows the forking thread: see Pool.forker
	}
	if p.opts.Namespaces && !p.nsRefused.Load() {
		attr.Cloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNS
	}
	path, files := p.command(append([]*os.File{inR, outW}, extra...)) // fd 3, 4, then 5, 6, then the executable
	newCmd := func() *exec.Cmd {
		return &exec.Cmd{
			Path:        path,
			Args:        append([]string{"connecta-sandbox"}, argv...),
			Env:         []string{}, // nil would inherit ours
			Dir:         "/",
			Stdin:       nil, // /dev/null
			Stdout:      nil, // /dev/null
			Stderr:      c.stderr,
			ExtraFiles:  files, // fd 3, 4, then 5, 6, then the child's executable
			SysProcAttr: attr,
			WaitDelay:   time.Second,
		}
	}
	cmd := newCmd()
	err = p.onForkThread(cmd.Start)
	if err != nil && attr.Cloneflags != 0 && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
		if !p.nsRefused.Swap(true) {
			p.log.Warn("sandbox namespaces unavailable; children spawn without them", "err", err)
		}
		attr.Cloneflags = 0
		cmd = newCmd()
		err = p.onForkThread(cmd.Start)
	}
	// The child has its copies now (or never will): close ours, or EOF never comes.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("supervisor: starting sandbox child (%s): %w", p.exe.describe(), err)
	}
	c.cmd = cmd
	c.pid = cmd.Process.Pid
	p.track(func() { c.read(outR) })
	p.track(c.wait)
	return c, nil
}

// read delivers frames until the stream ends or breaks; it closes the
// parent's read end when done.
func (c *child) read(f *os.File) {
	defer f.Close()
	r := ipc.NewReader(f)
	for {
		m, err := r.Read()
		if err != nil {
			c.in <- inbound{err: err}
			close(c.in)
			return
		}
		c.in <- inbound{m: m}
	}
}

func (c *child) wait() {
	_ = c.cmd.Wait()
	c.mu.Lock()
	c.reaped = true
	c.state = c.cmd.ProcessState
	c.mu.Unlock()
	close(c.exited)
}

// kill SIGKILLs the child's process group (once reaped, its pgid may be
// reused: never signal it then). The first reason is kept.
func (c *child) kill(reason string, m *metrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped || c.killed != "" {
		return
	}
	c.killed = reason
	m.kills.WithLabelValues(reason).Inc()
	_ = unix.Kill(-c.pid, unix.SIGKILL)
	// Payload-free: the reason and the process, never the program.
	level := slog.LevelWarn
	if reason == killCancel || reason == killShutdown {
		level = slog.LevelInfo // the caller or the operator asked for it
	}
	c.log.Log(context.Background(), level, "sandbox child killed", "reason", reason, "pid", c.pid)
}

// closeInput closes the parent's write end: the child reads EOF, which it
// treats as the parent's death, and exits.
func (c *child) closeInput() {
	c.closeIn.Do(func() { c.toChild.Close() })
}

// exitStatus describes how the child ended (after exited is closed).
func (c *child) exitStatus() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return "status unknown"
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("code %d", c.state.ExitCode())
}

// cpuTotal is the reaped child's CPU (user + system, every thread); false
// before it is reaped.
func (c *child) cpuTotal() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == nil {
		return 0, false
	}
	return c.state.UserTime() + c.state.SystemTime(), true
}

// crashReport is the message of a child that died on its own.
func (c *child) crashReport() string {
	msg := fmt.Sprintf("Sandbox exited unexpectedly (%s).", c.exitStatus())
	if t, n := c.stderr.String(); t != "" {
		msg += fmt.Sprintf("\nRecent sandbox stderr (last %d bytes):\n%s", n, t)
	}
	return msg
}

// retire ends a child the caller is done with: close its input (a healthy
// child exits on EOF), consume its frames until the stream ends (killing it
// if it says anything more, or lingers past exitGrace, stream ended or not),
// and let the waiter reap it.
func (p *Pool) retire(c *child, expectQuiet bool) {
	c.closeInput()
	p.track(func() {
		timer := time.NewTimer(exitGrace)
		defer timer.Stop()
		for {
			select {
			case in, ok := <-c.in:
				if !ok || in.err != nil {
					// The stream ended, which need not mean the process did.
					select {
					case <-c.exited:
					case <-timer.C:
						c.kill(killLinger, p.m)
						<-c.exited
					}
					return
				}
				if expectQuiet {
					p.log.Warn("sandbox child sent a frame after its run ended; killed", "type", in.m.Type)
					c.kill(killProtocol, p.m)
				}
			case <-timer.C:
				c.kill(killLinger, p.m)
			}
		}
	})
}

// tail keeps the last max bytes written (the child's stderr), and counts all.
type tail struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += len(b)
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// ReadFrom drains the child's stderr pipe through a small stack buffer:
// without it os/exec's copy allocates 32 KiB per child for a stream that is
// almost always empty.
func (t *tail) ReadFrom(r io.Reader) (int64, error) {
	var b [512]byte
	var n int64
	for {
		k, err := r.Read(b[:])
		if k > 0 {
			_, _ = t.Write(b[:k])
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// String is the retained tail (valid UTF-8, trimmed) and its length in bytes.
func (t *tail) String() (string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.ToValidUTF8(string(t.buf), "\uFFFD")
	s = strings.TrimSpace(s)
	return s, len(t.buf)
}

var _ io.ReaderFrom = (*tail)(nil)
