// Package testkit holds the helpers tests across the repository kept
// writing for themselves: a Buffer that a process's or a logger's writer
// goroutine and the test may share; Eventually, a poll with a deadline and
// a message for a condition another goroutine or process makes true (Poll
// when the failure message needs what is known only at the deadline);
// GoroutinesAtMost, for goroutines that end after a Close returned; Clock,
// a clock the test moves; Golden, a golden-file check; FreeAddr, a loopback
// address to start a server on, and ClosedAddr, one that refuses
// connections; MCPRequest, the POST an MCP client sends;
// TSClientNode, the TypeScript client's node or a skip; RowsOutsideVault, a
// store's rows outside the vault as text; ProcessCPU and ChildrenCPU, for
// per-op CPU in benchmarks; and VersionedMCP, a downstream that speaks only
// the protocol versions it is given and records what it is sent.
// A wait on the clock itself (a TTL, a backoff) is testing/synctest's
// where no real process or network is involved, not a poll.
// It imports nothing of ours.
package testkit

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer safe for concurrent Write and String.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// PollInterval is how often Eventually asks.
const PollInterval = 10 * time.Millisecond

// Eventually asks cond every PollInterval until it is true, and fails the
// test (t.Fatalf) with the message format, args when within does not see it
// true. cond is asked once more at the deadline, so a condition that
// became true while the last interval slept is not missed.
func Eventually(t testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("after %v: %s", within, fmt.Sprintf(format, args...))
	}
}

// Poll is Eventually's loop without the test: whether cond became true
// within the duration.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(PollInterval)
	}
}

// FreeAddr is a loopback host:port nothing listens on (it was free a moment
// ago: a server the test starts there takes it).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ClosedAddr is a loopback host:port that refuses connections for as long
// as t runs: a TCP socket is bound there and never listens, so the port is
// held (no server, this test's or another's, can take it, as one could a
// FreeAddr) and a connection to it is reset at once.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// MCPRequest is the POST an MCP client makes to a streamable HTTP endpoint
// (url names it, /mcp included): a JSON body, a JSON or event-stream answer
// accepted. The test adds its own headers (Authorization, Origin, …) and
// sends it.
func MCPRequest(t testing.TB, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req
}

// GoroutinesAtMost waits until at most n goroutines run — what a Close
// stopped ends on its own schedule — and fails the test with every
// goroutine's stack when within passes first.
func GoroutinesAtMost(t testing.TB, within time.Duration, n int) {
	t.Helper()
	if Poll(within, func() bool { return runtime.NumGoroutine() <= n }) {
		return
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("after %v: %d goroutines, want at most %d\n%s", within, runtime.NumGoroutine(), n, buf)
}
