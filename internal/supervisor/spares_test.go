package supervisor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// gateHost holds every host call until open is closed; started receives one
// value per call as it begins.
type gateHost struct {
	*testHost
	started chan struct{}
	open    chan struct{}
}

func newGateHost() *gateHost {
	return &gateHost{testHost: newTestHost(), started: make(chan struct{}, 16), open: make(chan struct{})}
}

func (h *gateHost) Call(ctx context.Context, _, _ string, args json.RawMessage) (json.RawMessage, error) {
	h.started <- struct{}{}
	select {
	case <-h.open:
		return args, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startHeld starts a run that waits in a host call and returns once that
// call is in flight; the run's result arrives on the returned channel.
func startHeld(t *testing.T, p *Pool, h *gateHost) <-chan *Result {
	t.Helper()
	out := make(chan *Result, 1)
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		res, err := l.Run(context.Background(), Job{
			Code:      "async () => await t.hold(1)",
			Providers: []Provider{{Name: "t", Functions: []string{"hold"}}},
		}, h)
		if err != nil {
			res = &Result{Err: &ProgramError{Kind: ErrInternal, Message: err.Error()}}
		}
		out <- res
	}()
	<-h.started
	return out
}

func wantHeldValue(t *testing.T, ch <-chan *Result) {
	t.Helper()
	res := <-ch
	if res.Err != nil || string(res.Value) != "[1]" {
		t.Fatalf("held run: %+v %s", res.Err, res.Value)
	}
}

func sparesGauges(t *testing.T, p *Pool) (ready, minimum, target float64) {
	return counter(t, p.m.spares), counter(t, p.m.sparesMinimum), counter(t, p.m.sparesTarget)
}

// spares: 0 with maxSpares: 0 keeps no child at all: each run spawns its own.
func TestSpares_ZeroMeansNone(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 2, Spares: 0, MaxSpares: 0, SpareIdle: time.Minute})
	if kids := liveChildren(); len(kids) != 0 {
		t.Fatalf("children before any run: %v", kids)
	}
	for i := range 2 {
		res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{})
		if err != nil || res.Err != nil || string(res.Value) != "2" {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
	waitFor(t, func() bool { return len(liveChildren()) == 0 })
	if r, m, tg := sparesGauges(t, p); r != 0 || m != 0 || tg != 0 {
		t.Fatalf("spares %v, minimum %v, target %v", r, m, tg)
	}
}

// A taken spare is replaced while the run that took it is still going.
func TestSpares_TakenSpareReplacedAtOnce(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 2, Spares: 2, MaxSpares: 2})
	waitFor(t, func() bool { return counter(t, p.m.spares) == 2 })
	h := newGateHost()
	held := startHeld(t, p, h)
	// The run holds its child; the pool is back to two warm ones beside it.
	waitFor(t, func() bool { return counter(t, p.m.spares) == 2 && len(liveChildren()) == 3 })
	close(h.open)
	wantHeldValue(t, held)
	if _, _, tg := sparesGauges(t, p); tg != 2 {
		t.Fatalf("target %v: a run that found a spare is no miss", tg)
	}
}

// A miss (no warm child when a run arrives) keeps one more spare from then
// on, up to maxSpares; a spare above the minimum that sits idle for
// spareIdleMs is discarded, back to the minimum.
func TestSpares_GrowOnMissShrinkWhenIdle(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 4, Spares: 0, MaxSpares: 2, SpareIdle: 200 * time.Millisecond})
	if _, m, tg := sparesGauges(t, p); m != 0 || tg != 0 {
		t.Fatalf("minimum %v, target %v", m, tg)
	}
	h := newGateHost()
	held := startHeld(t, p, h) // a miss: there is no spare at all
	if _, _, tg := sparesGauges(t, p); tg != 1 {
		t.Fatalf("target after a miss %v, want 1", tg)
	}
	waitFor(t, func() bool { return counter(t, p.m.spares) == 1 })
	close(h.open)
	wantHeldValue(t, held)

	// Concurrent arrivals grow the pool, never past maxSpares.
	h = newGateHost()
	var helds []<-chan *Result
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := startHeld(t, p, h)
			mu.Lock()
			helds = append(helds, ch)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if _, _, tg := sparesGauges(t, p); tg < 1 || tg > 2 {
		t.Fatalf("target %v, want 1..2", tg)
	}
	waitFor(t, func() bool { return counter(t, p.m.spares) == counter(t, p.m.sparesTarget) })
	close(h.open)
	for _, ch := range helds {
		wantHeldValue(t, ch)
	}

	// Idle: back to spares (0), every child gone.
	waitFor(t, func() bool {
		r, _, tg := sparesGauges(t, p)
		return r == 0 && tg == 0 && len(liveChildren()) == 0
	})
	res, err := run(t, p, "async () => 5", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "5" {
		t.Fatal(err, res)
	}
}

// The minimum survives idleness: only spares above it are discarded.
func TestSpares_ShrinkStopsAtTheMinimum(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 2, Spares: 1, MaxSpares: 3, SpareIdle: 100 * time.Millisecond})
	waitFor(t, func() bool { return counter(t, p.m.spares) == 1 })
	// Grow by the miss path's own step (a seat goroutine keeps the pool's
	// WaitGroup above zero), then let the surplus idle away.
	for i, want := range []bool{true, true, false} {
		if got := p.grow(); got != want {
			t.Fatalf("grow %d: %v, want two more seats, then refusal at maxSpares", i, got)
		}
	}
	waitFor(t, func() bool {
		r, m, tg := sparesGauges(t, p)
		return r == 1 && m == 1 && tg == 1 && len(liveChildren()) == 1
	})
}
