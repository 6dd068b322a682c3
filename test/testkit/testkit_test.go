package testkit

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Writers on many goroutines and a reader at once: nothing lost, no race
// (go test -race).
func TestBuffer_ConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "%d", i%10)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("%d bytes, want 800", n)
	}
}

// Poll sees a condition another goroutine makes true, and gives up on one
// that never is once the duration has passed.
func TestPoll_SeesTheConditionOrGivesUp(t *testing.T) {
	var done atomic.Bool
	go func() { done.Store(true) }()
	if !Poll(time.Minute, done.Load) {
		t.Fatal("a condition made true was not seen")
	}
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a false condition was reported true")
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("gave up before the duration passed")
	}
}

// GoroutinesAtMost returns once goroutines another goroutine is ending have
// ended.
func TestGoroutinesAtMost_WaitsForEndingGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	stop := make(chan struct{})
	for range 4 {
		go func() { <-stop }()
	}
	go close(stop) // ends them, most likely after the wait began
	GoroutinesAtMost(t, time.Minute, base)
}

func TestClosedAddr_RefusesAndHoldsItsPort(t *testing.T) {
	addr := ClosedAddr(t)
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("%s accepted a connection", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want connection refused", addr, err)
		}
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Fatalf("a server could take %s", addr)
	}
}
