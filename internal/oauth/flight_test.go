package oauth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Callers of one key share one flight, which runs once, goes on when a
// caller stops waiting, and is the Manager's: Close waits for it, and no
// flight starts after Close.
func TestFly_OneKeyOneFlightOwnedByTheManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := New(Options{PublicURL: "http://127.0.0.1:1", Store: NewMemoryStore()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	flights := map[string]*flight[int]{}
	var runs atomic.Int32
	release := make(chan struct{})
	work := func(ctx context.Context) (int, error) {
		runs.Add(1)
		select {
		case <-release:
			return 7, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	caller, leave := context.WithCancel(ctx)
	a := fly(caller, m, flights, "k", work)
	b := fly(ctx, m, flights, "k", work)
	if a == nil || a != b {
		t.Fatalf("two callers of one key: flights %p and %p, want one", a, b)
	}
	leave()
	if a.wait(caller) {
		t.Fatal("a caller who left was answered before the flight ended")
	}
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	close(release)
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return after the flight ended")
	}
	if !b.wait(ctx) || b.v != 7 || b.err != nil || runs.Load() != 1 {
		t.Fatalf("the flight: %v %v after %d runs; want 7, nil after 1 (its first caller left, it went on)", b.v, b.err, runs.Load())
	}
	if f := fly(ctx, m, flights, "k", work); f != nil {
		t.Fatal("a flight started after Close")
	}
}
