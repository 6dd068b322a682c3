package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWindow_RefusesUntilTheOldestTakeThatMustLeaveHasLeft(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := NewWindow(2, time.Second)
	for _, at := range []time.Duration{0, 100 * time.Millisecond} {
		if ok, _ := w.Take(t0.Add(at)); !ok {
			t.Fatalf("take at %v refused", at)
		}
	}
	if ok, wait := w.Take(t0.Add(400 * time.Millisecond)); ok || wait != 600*time.Millisecond {
		t.Fatalf("third take: %v %v, want refused for 600ms", ok, wait)
	}
	// At exactly 1 s the first take has left (the window is (now−1s, now]).
	if ok, _ := w.Take(t0.Add(time.Second)); !ok {
		t.Fatal("take at 1s refused")
	}
	if got := w.Live(t0.Add(1100 * time.Millisecond)); got != 1 {
		t.Fatalf("live at 1.1s = %d", got)
	}
}

func TestPartitions_KeysAreIndependentAndOnlyIdleOnesAreEvicted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ps := NewPartitions(PartitionOptions{
		Queue:   &Options{Active: 1, MaxQueue: 0, QueueTimeout: time.Second},
		Window:  &WindowOptions{Max: 1, Span: time.Minute},
		MaxKeys: 2,
	})
	ctx := context.Background()
	a, err := ps.Acquire(ctx, "a", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Acquire(ctx, "a", t0); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a's second permit: %v", err)
	}
	b, err := ps.Acquire(ctx, "b", t0) // b's own queue
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.TakeWindow(t0); !ok {
		t.Fatal("b's budget")
	}
	b.Release()
	b.Release() // idempotent
	a.Release()
	// a is idle; b still has a take in its window: only a may go.
	c, err := ps.Acquire(ctx, "c", t0)
	if err != nil {
		t.Fatalf("c: %v", err)
	}
	if _, err := ps.Acquire(ctx, "d", t0); !errors.Is(err, ErrPartitionsFull) {
		t.Fatalf("d: %v, want ErrPartitionsFull (b's budget is live, c holds a permit)", err)
	}
	c.Release()
	s := ps.Snapshot()
	if s.Partitions != 2 || s.Queues.Active != 0 || s.Queues.Totals.Rejected != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	// b's take is still counted against it: eviction never reset it.
	b2, err := ps.Acquire(ctx, "b", t0.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ok, wait := b2.TakeWindow(t0.Add(time.Second)); ok || wait != 59*time.Second {
		t.Fatalf("b's budget after eviction of others: %v %v", ok, wait)
	}
	b2.Release()
}
