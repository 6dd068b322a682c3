// Package testkit holds the helpers tests across the repository kept
// writing for themselves: a Buffer that a process's or a logger's writer
// goroutine and the test may share; Eventually, a poll with a deadline and
// a message for a condition another goroutine or process makes true (Poll
// when the failure message needs what is known only at the deadline); and
// GoroutinesAtMost, for goroutines that end after a Close returned.
// A wait on the clock itself (a TTL, a backoff) is testing/synctest's
// where no real process or network is involved, not a poll.
// It imports nothing of ours.
package testkit

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
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
