package admission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Window is a rolling-window budget: at most Max takes in any Span. It is
// not safe for concurrent use on its own; Partitions guards its windows.
type Window struct {
	max   int
	span  time.Duration
	times []time.Time // takes still in the window, oldest first
}

// NewWindow returns an empty window of max takes per span (max ≥ 1).
func NewWindow(maxTakes int, span time.Duration) *Window {
	return &Window{max: max(maxTakes, 1), span: span}
}

// Take records one take at now when fewer than Max happened in
// (now−Span, now]. Otherwise it records nothing and returns how long until
// enough takes leave the window for one more to fit: exactly until the
// oldest one that must leave does.
func (w *Window) Take(now time.Time) (ok bool, retryAfter time.Duration) {
	w.prune(now)
	if n := len(w.times); n >= w.max {
		return false, w.times[n-w.max].Add(w.span).Sub(now)
	}
	w.times = append(w.times, now)
	return true, 0
}

// Live is the number of takes still in the window at now.
func (w *Window) Live(now time.Time) int {
	w.prune(now)
	return len(w.times)
}

func (w *Window) prune(now time.Time) {
	i := 0
	for i < len(w.times) && !w.times[i].Add(w.span).After(now) {
		i++
	}
	if i > 0 {
		w.times = append(w.times[:0], w.times[i:]...)
	}
}

// ErrPartitionsFull: every partition is in use (calls held, queued, or takes
// still in its window) and a new key would exceed the bound.
var ErrPartitionsFull = errors.New("admission: every partition is in use")

// PartitionOptions size a Partitions.
type PartitionOptions struct {
	// Queue is each partition's concurrency queue; nil: no concurrency bound.
	Queue *Options
	// Window, when set, gives each partition its own rolling budget of
	// Window.Max takes per Window.Span, kept in this process.
	Window *WindowOptions
	// MaxKeys bounds the partitions kept at once (at least 1).
	MaxKeys int
}

// WindowOptions size a Window.
type WindowOptions struct {
	Max  int
	Span time.Duration
}

// Partitions keeps one instance of a rule (a Queue and a Window, each
// optional) per key, at most MaxKeys at once. A partition is evicted only
// when idle — no permit held, nobody queued, nothing left in its window — so
// eviction never resets a live budget or a queue.
type Partitions struct {
	opts PartitionOptions

	mu      sync.Mutex
	byKey   map[string]*partition
	retired Snapshot // the queue totals and waits of evicted partitions
}

type partition struct {
	q     *Queue  // nil: no concurrency bound
	w     *Window // nil: no local budget
	users int     // Acquires in progress and permits held; under Partitions.mu
}

// NewPartitions returns an empty set.
func NewPartitions(opts PartitionOptions) *Partitions {
	opts.MaxKeys = max(opts.MaxKeys, 1)
	return &Partitions{opts: opts, byKey: map[string]*partition{}}
}

// Permit is one admitted partition slot: it holds the partition's queue
// permit (when it has a queue) and keeps the partition from eviction until
// Release.
type Permit struct {
	ps     *Partitions
	p      *partition
	Waited time.Duration // time spent in the queue
	once   sync.Once
}

// Acquire takes a permit in key's partition (creating it, evicting idle
// ones at the bound). It fails with ErrPartitionsFull, or what the
// partition's Queue.Acquire fails with (ErrQueueFull, ErrTimeout,
// ErrClosed, *Cancelled).
func (ps *Partitions) Acquire(ctx context.Context, key string, now time.Time) (*Permit, error) {
	ps.mu.Lock()
	p := ps.byKey[key]
	if p == nil {
		if len(ps.byKey) >= ps.opts.MaxKeys {
			ps.evictIdleLocked(now)
		}
		if len(ps.byKey) >= ps.opts.MaxKeys {
			ps.mu.Unlock()
			return nil, ErrPartitionsFull
		}
		p = &partition{}
		if ps.opts.Queue != nil {
			p.q = New(*ps.opts.Queue)
		}
		if w := ps.opts.Window; w != nil {
			p.w = NewWindow(w.Max, w.Span)
		}
		ps.byKey[key] = p
	}
	p.users++
	ps.mu.Unlock()

	permit := &Permit{ps: ps, p: p}
	if p.q != nil {
		waited, err := p.q.Acquire(ctx)
		if err != nil {
			ps.unuse(p)
			return nil, err
		}
		permit.Waited = waited
	}
	return permit, nil
}

// TakeWindow takes from the partition's own window at now; ok is true when
// the partition has no window.
func (pm *Permit) TakeWindow(now time.Time) (ok bool, retryAfter time.Duration) {
	if pm.p.w == nil {
		return true, 0
	}
	pm.ps.mu.Lock()
	defer pm.ps.mu.Unlock()
	return pm.p.w.Take(now)
}

// Release returns the queue permit; it is idempotent.
func (pm *Permit) Release() {
	pm.once.Do(func() {
		if pm.p.q != nil {
			pm.p.q.Release()
		}
		pm.ps.unuse(pm.p)
	})
}

func (ps *Partitions) unuse(p *partition) {
	ps.mu.Lock()
	p.users--
	ps.mu.Unlock()
}

func (ps *Partitions) evictIdleLocked(now time.Time) {
	for key, p := range ps.byKey {
		if p.users > 0 || (p.w != nil && p.w.Live(now) > 0) {
			continue
		}
		if p.q != nil {
			addSnapshot(&ps.retired, p.q.Snapshot())
		}
		delete(ps.byKey, key)
	}
}

// PartitionsSnapshot is the set's state: partitions kept, and the sum of
// their queues (evicted partitions' totals and waits included).
type PartitionsSnapshot struct {
	Partitions int
	Queues     Snapshot // Active, Queued, Totals and waits summed; WaitMax the largest
}

// Snapshot reports the set's state.
func (ps *Partitions) Snapshot() PartitionsSnapshot {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := PartitionsSnapshot{Partitions: len(ps.byKey), Queues: ps.retired}
	out.Queues.Active, out.Queues.Queued = 0, 0
	for _, p := range ps.byKey {
		if p.q != nil {
			s := p.q.Snapshot()
			addSnapshot(&out.Queues, s)
			out.Queues.Active += s.Active
			out.Queues.Queued += s.Queued
		} else {
			out.Queues.Active += p.users
		}
	}
	return out
}

func addSnapshot(to *Snapshot, s Snapshot) {
	to.Totals.Admitted += s.Totals.Admitted
	to.Totals.Queued += s.Totals.Queued
	to.Totals.Rejected += s.Totals.Rejected
	to.Totals.Cancelled += s.Totals.Cancelled
	to.Totals.Closed += s.Totals.Closed
	to.WaitCount += s.WaitCount
	to.WaitTotal += s.WaitTotal
	to.WaitMax = max(to.WaitMax, s.WaitMax)
}
