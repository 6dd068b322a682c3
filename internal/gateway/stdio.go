package gateway

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/stdioshim"
)

// stdioExitWait is how long a failed exchange with a stdio server waits for
// the process's exit status, so the error can say how it ended.
const stdioExitWait = time.Second

// stdioExited is a stdio server that ended: the model sees only how (the
// exit status), the operator the stderr tail too (log, doctor).
type stdioExited struct{ how string }

func (e *stdioExited) Error() string { return "the stdio server exited (" + e.how + ")" }

// startStdio starts the connector's command through the shim, its program
// resolved by commandPath.
func (c *connector) startStdio(ctx context.Context) (*stdioshim.Process, error) {
	path, err := commandPath(c.spec.Command[0], c.spec.Env)
	if err != nil {
		return nil, &stdioshim.StartError{Reason: err.Error()}
	}
	env := make([]string, 0, len(c.spec.Env))
	for k, v := range c.spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	proc, err := c.g.forker.Start(ctx, stdioshim.Command{Path: path, Args: c.spec.Command, Env: env, Stderr: c.stderr})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.starts++
	starts := c.starts
	c.proc = proc
	c.mu.Unlock()
	if starts > 1 {
		c.logger.InfoContext(ctx, "stdio server restarted", "restarts", starts-1)
	}
	return proc, nil
}

// commandPath resolves a command's program as the child will run it: a
// name without a slash through the connector's env.PATH when it sets one
// (the program the operator's PATH names, not one that happens to be first
// in connecta's), else through connecta's own PATH (the child's environment
// is explicit and often has none), as exec.Command would. Only absolute
// env.PATH entries are searched: an empty or relative one would mean
// connecta's working directory.
func commandPath(name string, env map[string]string) (string, error) {
	dirs, ok := env["PATH"]
	if !ok || strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(dirs) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in the connector's env.PATH", name)
}

// exitOf waits up to stdioExitWait for the last stdio process to end and
// returns how it ended, or nil while it still runs.
func (c *connector) exitOf() *stdioExited {
	c.mu.Lock()
	proc := c.proc
	c.mu.Unlock()
	if proc == nil {
		return nil
	}
	t := time.NewTimer(stdioExitWait)
	defer t.Stop()
	select {
	case <-proc.Done():
		return &stdioExited{how: proc.ExitText()}
	case <-t.C:
		return nil
	}
}

// StderrTail returns the last StderrTailBytes of a stdio connector's stderr
// with every resolved secret value redacted, for the operator (doctor, the
// log); never for the model. "" for other connectors.
func (g *Gateway) StderrTail(connectorID string) string {
	c := g.lookup(connectorID)
	if c == nil || c.stderr == nil {
		return ""
	}
	return c.stderr.String()
}

// procConn is the MCP stream to a stdio process: writes go to its stdin,
// Close is the MCP stdio shutdown (close stdin, wait, kill the group).
type procConn struct{ p *stdioshim.Process }

func (w procConn) Write(b []byte) (int, error) { return w.p.Stdin().Write(b) }
func (w procConn) Close() error {
	w.p.Stop(stdioTerminateGrace)
	return nil
}

// stdioReader reads the process's stdout; exec closes it once the process
// is reaped, so closing it early (which would SIGPIPE a server mid-write)
// is left to that.
func stdioReader(p *stdioshim.Process) io.ReadCloser { return io.NopCloser(p.Stdout()) }

// tailBuffer keeps the last max bytes written (a stdio server's stderr);
// exec's copier goroutine drains the pipe into it continuously. It keeps
// enough extra bytes that a secret cut by the window's start is still
// recognised and redacted (by the connector's redactor).
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	keep int
	red  *redactor
	buf  []byte
}

func newTailBuffer(limit int, red *redactor) *tailBuffer {
	// Any occurrence that overlaps the last limit bytes lies wholly inside
	// the last limit+len(form). A stdio server is sent no headers, so the
	// redactor's forms are fixed.
	return &tailBuffer{max: limit, keep: limit + red.longest, red: red}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.keep {
		p = p[len(p)-t.keep:]
		t.buf = append(t.buf[:0], p...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.keep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is the redacted tail: at most max bytes, starting on a character
// boundary.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	s = t.red.Redact(s)
	if len(s) > t.max {
		s = s[len(s)-t.max:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
