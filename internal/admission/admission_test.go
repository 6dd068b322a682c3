package admission

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// queued starts Acquire on its own goroutine and returns once it waits in
// the queue (synctest.Wait: every goroutine of the bubble is blocked).
func queued(t *testing.T, q *Queue, ctx context.Context) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := q.Acquire(ctx)
		done <- err
	}()
	synctest.Wait()
	return done
}

func TestFIFO_ReleaseHandsThePermitToTheOldestWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 3, QueueTimeout: time.Hour})
		if _, err := q.Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 1; i <= 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := q.Acquire(t.Context()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				q.Release()
			}()
			synctest.Wait() // i is queued before i+1 arrives
		}
		if _, err := q.Acquire(t.Context()); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("fourth waiter: %v, want ErrQueueFull", err)
		}
		q.Release()
		wg.Wait()
		if len(order) != 3 || order[0] != 1 || order[1] != 2 || order[2] != 3 {
			t.Fatalf("admitted in order %v", order)
		}
		s := q.Snapshot()
		if s.Active != 0 || s.Queued != 0 || s.Totals.Admitted != 4 || s.Totals.Queued != 3 || s.Totals.Rejected != 1 || s.WaitCount != 3 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestTimeout_RefusesAfterQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 1, QueueTimeout: 5 * time.Second})
		q.Acquire(t.Context())
		start := time.Now()
		if _, err := q.Acquire(t.Context()); !errors.Is(err, ErrTimeout) {
			t.Fatalf("err %v, want ErrTimeout", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("waited %v, want the queue timeout", waited)
		}
		if s := q.Snapshot(); s.Queued != 0 || s.Totals.Rejected != 1 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestZeroQueue_FailsFast(t *testing.T) {
	q := New(Options{Active: 1, MaxQueue: 0, QueueTimeout: time.Hour})
	q.Acquire(context.Background())
	if _, err := q.Acquire(context.Background()); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err %v", err)
	}
}

// A cancel is free: counted as cancelled, never as a rejection, and the
// queue position is given up.
func TestCancel_BeforeAndWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 2, QueueTimeout: time.Hour})
		done, cancel := context.WithCancel(t.Context())
		cancel()
		var c *Cancelled
		if _, err := q.Acquire(done); !errors.As(err, &c) || c.Queued || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled on arrival: %v", err)
		}
		q.Acquire(t.Context())
		ctx, cancel := context.WithCancel(t.Context())
		waiting := queued(t, q, ctx)
		cancel()
		if err := <-waiting; !errors.As(err, &c) || !c.Queued || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled while queued: %v", err)
		}
		if s := q.Snapshot(); s.Queued != 0 || s.Totals.Cancelled != 2 || s.Totals.Rejected != 0 {
			t.Fatalf("snapshot %+v", s)
		}
		q.Release()
		if s := q.Snapshot(); s.Active != 0 {
			t.Fatalf("permit leaked: %+v", s)
		}
	})
}

func TestClose_RefusesTheQueueAndLaterArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 2, QueueTimeout: time.Hour})
		q.Acquire(t.Context())
		a, b := queued(t, q, t.Context()), queued(t, q, t.Context())
		q.Close()
		q.Close() // idempotent
		for _, w := range []<-chan error{a, b} {
			if err := <-w; !errors.Is(err, ErrClosed) {
				t.Fatalf("queued waiter: %v, want ErrClosed", err)
			}
		}
		if _, err := q.Acquire(t.Context()); !errors.Is(err, ErrClosed) {
			t.Fatalf("after close: %v", err)
		}
		q.Release() // the held permit stays valid until released
		if s := q.Snapshot(); s.Active != 0 || s.Queued != 0 || !s.Closed || s.Totals.Closed != 3 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestOnChange_SeesEveryCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var last [2]int
		q := New(Options{Active: 1, MaxQueue: 1, QueueTimeout: time.Hour, OnChange: func(a, w int) {
			mu.Lock()
			last = [2]int{a, w}
			mu.Unlock()
		}})
		q.Acquire(t.Context())
		w := queued(t, q, t.Context())
		mu.Lock()
		if last != [2]int{1, 1} {
			t.Errorf("after queueing %v", last)
		}
		mu.Unlock()
		q.Release()
		<-w
		q.Release()
		mu.Lock()
		defer mu.Unlock()
		if last != [2]int{0, 0} {
			t.Errorf("at rest %v", last)
		}
	})
}

// Under contention the permits are never over-issued and all come back.
func TestConcurrent_NeverMoreThanActive(t *testing.T) {
	q := New(Options{Active: 3, MaxQueue: 100, QueueTimeout: time.Second})
	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*time.Millisecond)
			defer cancel()
			if _, err := q.Acquire(ctx); err != nil {
				return
			}
			mu.Lock()
			held++
			peak = max(peak, held)
			mu.Unlock()
			time.Sleep(time.Millisecond) // work, not synchronisation
			mu.Lock()
			held--
			mu.Unlock()
			q.Release()
		}()
	}
	wg.Wait()
	if s := q.Snapshot(); peak > 3 || s.Active != 0 || s.Queued != 0 {
		t.Fatalf("peak %d, snapshot %+v", peak, s)
	}
}

// Keyed, under contention with cancels, timeouts and shedding: never more
// than Active permits, and every permit, waiter and key comes back.
func TestConcurrent_KeyedNeverMoreThanActiveAndAllComesBack(t *testing.T) {
	q := New(Options{Active: 4, MaxQueue: 6, QueueTimeout: 20 * time.Millisecond, MaxActivePerKey: 2})
	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := string(rune('a' + i%5))
			if i%3 == 0 {
				key = "heavy"
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%11)*time.Millisecond)
			defer cancel()
			if _, err := q.AcquireAs(ctx, key); err != nil {
				return
			}
			mu.Lock()
			held++
			peak = max(peak, held)
			mu.Unlock()
			time.Sleep(time.Millisecond) // work, not synchronisation
			mu.Lock()
			held--
			mu.Unlock()
			q.ReleaseAs(key)
		}()
	}
	wg.Wait()
	s := q.Snapshot()
	q.mu.Lock()
	keys, ring := len(q.keys), q.ring.Len()
	q.mu.Unlock()
	if peak > 4 || s.Active != 0 || s.Queued != 0 || keys != 0 || ring != 0 {
		t.Fatalf("peak %d, %d keys, ring %d, snapshot %+v", peak, keys, ring, s)
	}
}

// A reload that grows the pool hands the new permits to the oldest waiters
// at once; one that shrinks it lets held permits run out.
func TestResize_GrowAdmitsWaitersShrinkKeepsHeldPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 4, QueueTimeout: time.Minute})
		ctx := context.Background()
		if _, err := q.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		first, second := queued(t, q, ctx), queued(t, q, ctx)
		q.Resize(3, 4, time.Minute)
		for _, ch := range []<-chan error{first, second} {
			if err := <-ch; err != nil {
				t.Fatalf("waiter after growing: %v", err)
			}
		}
		if s := q.Snapshot(); s.Active != 3 || s.MaxActive != 3 || s.Queued != 0 {
			t.Fatalf("after growing %+v", s)
		}
		q.Resize(1, 0, time.Minute)
		q.Release()
		q.Release()
		if _, err := q.Acquire(ctx); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a third permit with one allowed and one held: %v", err)
		}
		q.Release()
		if _, err := q.Acquire(ctx); err != nil {
			t.Fatalf("after the held permits ran out: %v", err)
		}
	})
}

// queuedAs is queued for a key: it reports the key when admitted (and
// releases at once when hold is nil, else when hold is closed).
func queuedAs(t *testing.T, q *Queue, key string, admitted chan<- string, hold <-chan struct{}) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := q.AcquireAs(t.Context(), key)
		if err == nil {
			admitted <- key
			if hold != nil {
				<-hold
			}
			q.ReleaseAs(key)
		}
		done <- err
	}()
	synctest.Wait()
	return done
}

// Fair admission: while two keys wait, a released permit goes round-robin
// to the keys and never above a key's cap; a lone key uses every permit.
func TestFair_RoundRobinAndPerKeyCapWhileTwoKeysWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 4, MaxQueue: 16, QueueTimeout: time.Hour, MaxActivePerKey: 2})
		// A lone key takes every permit.
		for range 4 {
			if _, err := q.AcquireAs(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
		}
		admitted := make(chan string, 16)
		hold := make(chan struct{})
		for range 4 {
			queuedAs(t, q, "a", admitted, hold)
		}
		queuedAs(t, q, "b", admitted, hold)
		queuedAs(t, q, "b", admitted, hold)
		// "a" holds 4 (over its cap of 2) and two keys wait: the first
		// released permits go to "b" although "a" queued first.
		q.ReleaseAs("a")
		q.ReleaseAs("a")
		synctest.Wait()
		if got := []string{<-admitted, <-admitted}; got[0] != "b" || got[1] != "b" {
			t.Fatalf("admitted %v, want b b", got)
		}
		// "b" has no more waiters: "a" is the lone waiting key again and
		// may go back to every permit.
		q.ReleaseAs("a")
		q.ReleaseAs("a")
		synctest.Wait()
		if got := []string{<-admitted, <-admitted}; got[0] != "a" || got[1] != "a" {
			t.Fatalf("admitted %v, want a a", got)
		}
		close(hold)
		synctest.Wait()
		if s := q.Snapshot(); s.Active != 0 || s.Queued != 0 || len(q.keys) != 0 {
			t.Fatalf("after all released: %+v, %d keys kept", s, len(q.keys))
		}
	})
}

// Round-robin between three keys, each key's own waiters in order.
func TestFair_KeysServedRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 1, MaxQueue: 16, QueueTimeout: time.Hour})
		if _, err := q.AcquireAs(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		admitted := make(chan string, 16)
		for _, k := range []string{"a", "a", "a", "b", "b", "c"} {
			queuedAs(t, q, k, admitted, nil)
		}
		q.ReleaseAs("x")
		synctest.Wait()
		var got []string
		for range 6 {
			got = append(got, <-admitted)
		}
		if want := "a b c a b a"; strings.Join(got, " ") != want {
			t.Fatalf("order %v, want %s", got, want)
		}
	})
}

// A full queue held by one key makes room for another key's arrival: the
// heavy key's newest waiter is refused as queue full, not the newcomer.
func TestFair_OneKeyCannotFillTheQueueAgainstAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 2, MaxQueue: 3, QueueTimeout: time.Hour, MaxActivePerKey: 1})
		for range 2 {
			if _, err := q.AcquireAs(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
		}
		admitted := make(chan string, 8)
		var as []<-chan error
		for range 3 {
			as = append(as, queuedAs(t, q, "a", admitted, nil))
		}
		if _, err := q.AcquireAs(t.Context(), "a"); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a fourth waiter of a: %v, want ErrQueueFull", err)
		}
		b := queuedAs(t, q, "b", admitted, nil)
		if err := <-as[2]; !errors.Is(err, ErrQueueFull) {
			t.Fatalf("a's newest waiter: %v, want ErrQueueFull (shed)", err)
		}
		q.ReleaseAs("a")
		synctest.Wait()
		if k := <-admitted; k != "b" {
			t.Fatalf("first admitted after the release: %s, want b", k)
		}
		if err := <-b; err != nil {
			t.Fatal(err)
		}
		q.ReleaseAs("a")
		for _, c := range as[:2] {
			if err := <-c; err != nil {
				t.Fatal(err)
			}
		}
		s := q.Snapshot()
		if s.Active != 0 || s.Queued != 0 || s.Totals.Rejected != 2 || s.Totals.Admitted != 5 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

// A waiter of the second key giving up makes the first key the lone waiter
// again: permits the cap kept idle are handed out at once.
func TestFair_CapLiftsWhenTheOtherKeyStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options{Active: 4, MaxQueue: 8, QueueTimeout: time.Hour, MaxActivePerKey: 1})
		for _, k := range []string{"a", "a", "b", "b"} {
			if _, err := q.AcquireAs(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
		admitted := make(chan string, 8)
		queuedAs(t, q, "a", admitted, nil)
		ctx, cancel := context.WithCancel(t.Context())
		b := make(chan error, 1)
		go func() { _, err := q.AcquireAs(ctx, "b"); b <- err }()
		synctest.Wait()
		// Both keys wait and both hold at least their cap: a released
		// permit stays idle.
		q.ReleaseAs("a")
		if s := q.Snapshot(); s.Active != 3 || s.Queued != 2 {
			t.Fatalf("both keys at their cap: %+v", s)
		}
		cancel()
		if err := <-b; !errors.Is(err, context.Canceled) {
			t.Fatalf("b: %v", err)
		}
		synctest.Wait()
		if k := <-admitted; k != "a" {
			t.Fatalf("admitted %s", k)
		}
		q.ReleaseAs("a")
		q.ReleaseAs("b")
		q.ReleaseAs("b")
		if s := q.Snapshot(); s.Active != 0 || s.Queued != 0 || len(q.keys) != 0 {
			t.Fatalf("end: %+v", s)
		}
	})
}
