package stdioshim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// selfExe is re-executed as the shim: /proc/self/exe, never the path from
// os.Executable (after an upgrade it names a different binary).
const selfExe = "/proc/self/exe"

// Forker starts shims from one locked OS thread that lives until Close. The
// parent-death signal of a child follows the thread that forked it, so a
// shim forked from an ordinary goroutine's thread would be told its parent
// died whenever the runtime retires that thread.
type Forker struct {
	reqs chan func()
	done chan struct{}
	once sync.Once
	mu   sync.Mutex // guards closed against sends on reqs
	shut bool
}

// NewForker starts the forking thread.
func NewForker() *Forker {
	f := &Forker{reqs: make(chan func()), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *Forker) loop() {
	runtime.LockOSThread()
	// No UnlockOSThread: when the loop ends the runtime destroys this
	// thread, which delivers the parent-death signal to any shim still
	// alive — a last resort after Close, never the normal path.
	defer close(f.done)
	for fn := range f.reqs {
		fn()
	}
}

// errClosed is returned by Start after Close.
var errClosed = errors.New("stdioshim: forker closed")

func (f *Forker) onThread(fn func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shut {
		return errClosed
	}
	var err error
	ran := make(chan struct{})
	f.reqs <- func() { err = fn(); close(ran) }
	<-ran
	return err
}

// Close ends the forking thread. Call it after every Process it started
// has been stopped.
func (f *Forker) Close() {
	f.once.Do(func() {
		f.mu.Lock()
		f.shut = true
		close(f.reqs)
		f.mu.Unlock()
		<-f.done
	})
}

// Command describes one stdio server to start.
type Command struct {
	Path   string    // resolved executable (exec.LookPath in the server)
	Args   []string  // argv, Args[0] as configured
	Env    []string  // the whole environment; never nil
	Stderr io.Writer // receives the command's stderr (copied continuously)
}

// StartError is a command that could not be started: the exec error as the
// shim saw it (e.g. permission denied, a missing interpreter).
type StartError struct{ Reason string }

func (e *StartError) Error() string { return "could not be started: " + e.Reason }

// Process is one running shim and its command.
type Process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	group  atomic.Int64 // the command's pid and process group; 0 until started

	done     chan struct{} // closed when the shim is reaped
	exitText string        // "exit status 3", "signal: killed"; valid after done
	stopOnce sync.Once
}

// Start starts c through the shim and returns once the command runs (or
// could not be started: a *StartError). ctx bounds only the start.
func (f *Forker) Start(ctx context.Context, c Command) (*Process, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdioshim: pipe: %w", err)
	}
	env := c.Env
	if env == nil {
		env = []string{} // nil would inherit ours
	}
	args := append([]string{"connecta-stdio-shim", Marker, strconv.Itoa(os.Getpid()), c.Path}, c.Args...)
	cmd := &exec.Cmd{
		Path:       selfExe,
		Args:       args,
		Env:        env,
		Dir:        "",
		Stderr:     c.Stderr,
		ExtraFiles: []*os.File{statusW},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // away from our group: a terminal's Ctrl-C is ours to handle
			Pdeathsig: syscall.SIGTERM, // the shim kills the command's group on it
		},
		WaitDelay: time.Second,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	err = f.onThread(cmd.Start)
	statusW.Close() // the shim has its copy, or never will
	if err != nil {
		statusR.Close()
		return nil, fmt.Errorf("stdioshim: starting the shim: %w", err)
	}
	p := &Process{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	first := make(chan error, 1)
	go p.watch(bufio.NewReader(statusR), statusR, first)
	select {
	case err := <-first:
		if err != nil {
			<-p.done
			return nil, err
		}
		return p, nil
	case <-ctx.Done():
		p.Kill()
		<-p.done
		return nil, ctx.Err()
	}
}

// watch reads the shim's report, then reaps it.
func (p *Process) watch(r *bufio.Reader, f *os.File, first chan<- error) {
	defer close(p.done)
	kind, rest, err := readReport(r)
	switch {
	case err != nil:
		first <- errors.New("could not be started: the shim ended before it reported")
	case kind == lineFailed:
		first <- &StartError{Reason: rest}
	case kind == lineStarted:
		g, _ := strconv.Atoi(rest)
		p.group.Store(int64(g))
		first <- nil
		if kind, rest, err := readReport(r); err == nil && kind == lineExited {
			p.exitText = rest
		}
	default:
		first <- fmt.Errorf("could not be started: unexpected shim report %q", rest)
	}
	f.Close()
	werr := p.cmd.Wait()
	if p.exitText == "" {
		if werr != nil {
			p.exitText = werr.Error()
		} else {
			p.exitText = "exit status 0"
		}
	}
}

// Stdin is the command's stdin; Stdout its stdout.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Group is the command's process group id.
func (p *Process) Group() int { return int(p.group.Load()) }

// Done is closed once the shim (and so the command's group) is gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitText describes how the command ended ("exit status 3", "signal:
// killed"); "" while it runs.
func (p *Process) ExitText() string {
	select {
	case <-p.done:
		return p.exitText
	default:
		return ""
	}
}

// Kill kills the command's group and the shim at once.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if g := p.Group(); g > 0 {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	_ = p.cmd.Process.Kill()
}

// Stop is the MCP stdio shutdown: close the command's stdin, wait up to
// grace for it to exit, then kill its whole group. It returns once the
// shim is reaped.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.Kill()
		<-p.done
	})
}
