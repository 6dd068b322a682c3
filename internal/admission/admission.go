// Package admission is the one FIFO admission queue of the repository: a
// fixed number of active permits, then a strict first-in-first-out queue of
// bounded length whose waiters each wait at most a timeout. The server admits
// MCP requests with it (docs/DECISIONS.md "Request admission") and the
// supervisor admits executions (L7); each maps the refusals below to its own
// error and metrics.
//
// A released permit is handed straight to the oldest waiter, so a later
// arrival can never overtake the queue. A waiter whose context ends is
// removed without counting as a rejection (a "free cancel"). Close refuses
// the queue and everything after it; permits already held run to completion.
package admission

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// Refusals Acquire reports. A cancelled caller gets a *Cancelled instead.
var (
	ErrQueueFull = errors.New("admission: queue full")
	ErrTimeout   = errors.New("admission: queue wait timed out")
	ErrClosed    = errors.New("admission: closed")
)

// Cancelled is the caller's context ending before a permit was granted.
// It unwraps to the context's error.
type Cancelled struct {
	Queued bool  // false: the context was already done on arrival
	Cause  error // ctx.Err()
}

func (c *Cancelled) Error() string {
	if c.Queued {
		return "admission: cancelled while queued: " + c.Cause.Error()
	}
	return "admission: cancelled before admission: " + c.Cause.Error()
}

func (c *Cancelled) Unwrap() error { return c.Cause }

// Options size a Queue.
type Options struct {
	Active       int           // permits held at once; at least 1
	MaxQueue     int           // waiters; 0 fails fast when every permit is held
	QueueTimeout time.Duration // longest wait in the queue
	// OnChange, when set, is called with the active and queued counts after
	// every change, under the queue's lock: it must be quick (a gauge Set).
	OnChange func(active, queued int)
}

// Totals count decisions since the queue was made.
type Totals struct {
	Admitted, Queued, Rejected, Cancelled, Closed int64
}

// Snapshot is the queue's state.
type Snapshot struct {
	Active, MaxActive, Queued, MaxQueue int
	QueueTimeout                        time.Duration
	Closed                              bool
	Totals                              Totals
	// Waits of the admitted requests that queued.
	WaitCount          int64
	WaitTotal, WaitMax time.Duration
}

// Queue is safe for concurrent use.
type Queue struct {
	opts Options

	mu       sync.Mutex
	active   int
	queue    list.List // of *waiter, oldest first
	closed   bool
	closedCh chan struct{}
	totals   Totals
	waitN    int64
	waitSum  time.Duration
	waitMax  time.Duration
}

type waiter struct {
	granted chan struct{} // closed when handed a permit
	elem    *list.Element
	done    bool // granted or removed; under Queue.mu
}

// New returns an open queue.
func New(opts Options) *Queue {
	opts.Active = max(opts.Active, 1)
	opts.MaxQueue = max(opts.MaxQueue, 0)
	return &Queue{opts: opts, closedCh: make(chan struct{})}
}

// Acquire returns once a permit is held, with how long it waited in the
// queue (0 when admitted at once). Otherwise it fails with ErrClosed,
// ErrQueueFull, ErrTimeout or a *Cancelled. Every successful Acquire must be
// followed by exactly one Release.
func (q *Queue) Acquire(ctx context.Context) (waited time.Duration, err error) {
	q.mu.Lock()
	switch {
	case q.closed:
		q.totals.Closed++
		q.mu.Unlock()
		return 0, ErrClosed
	case ctx.Err() != nil:
		q.totals.Cancelled++
		q.mu.Unlock()
		return 0, &Cancelled{Cause: ctx.Err()}
	case q.active < q.opts.Active && q.queue.Len() == 0:
		q.active++
		q.totals.Admitted++
		q.changedLocked()
		q.mu.Unlock()
		return 0, nil
	case q.queue.Len() >= q.opts.MaxQueue:
		q.totals.Rejected++
		q.mu.Unlock()
		return 0, ErrQueueFull
	}
	w := &waiter{granted: make(chan struct{})}
	w.elem = q.queue.PushBack(w)
	q.totals.Queued++
	q.changedLocked()
	wait := q.opts.QueueTimeout // Resize may change it
	q.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var refusal error
	select {
	case <-w.granted:
	case <-ctx.Done():
		refusal = &Cancelled{Queued: true, Cause: ctx.Err()}
	case <-timer.C:
		refusal = ErrTimeout
	case <-q.closedCh:
		refusal = ErrClosed
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case isGranted(w):
		// A grant that raced the timeout is kept. One that raced the caller
		// giving up, or the queue closing, is passed on (after Close, that
		// frees it).
		var c *Cancelled
		switch {
		case errors.As(refusal, &c):
			q.releaseLocked()
		case q.closed:
			refusal = ErrClosed
			q.releaseLocked()
		default:
			refusal = nil
		}
	case !w.done: // still queued: withdraw
		w.done = true
		q.queue.Remove(w.elem)
		q.changedLocked()
	default: // removed by Close
		refusal = ErrClosed
	}
	switch {
	case refusal == nil:
		waited = time.Since(start)
		q.totals.Admitted++
		q.waitN++
		q.waitSum += waited
		q.waitMax = max(q.waitMax, waited)
		return waited, nil
	case errors.Is(refusal, ErrClosed):
		q.totals.Closed++
	case errors.Is(refusal, ErrTimeout):
		q.totals.Rejected++
	default:
		q.totals.Cancelled++
	}
	return 0, refusal
}

func isGranted(w *waiter) bool {
	select {
	case <-w.granted:
		return true
	default:
		return false
	}
}

// Release returns a permit, handing it straight to the oldest waiter.
func (q *Queue) Release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *Queue) releaseLocked() {
	if front := q.queue.Front(); front != nil && !q.closed {
		w := q.queue.Remove(front).(*waiter)
		w.done = true
		close(w.granted) // the permit moves to w; active is unchanged
	} else {
		q.active--
	}
	q.changedLocked()
}

// Close refuses every queued waiter and every later Acquire with ErrClosed.
// Held permits stay valid until released. Close is idempotent.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	close(q.closedCh)
	for e := q.queue.Front(); e != nil; e = q.queue.Front() {
		q.queue.Remove(e).(*waiter).done = true // not granted: the waiter reports closed
	}
	q.changedLocked()
}

// Resize changes the limits (a configuration reload). Held permits stay
// held; when Active grows, the oldest waiters take the new permits at once;
// waits already timing keep the timeout they started with.
func (q *Queue) Resize(active, maxQueue int, queueTimeout time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.opts.Active, q.opts.MaxQueue, q.opts.QueueTimeout = max(active, 1), max(maxQueue, 0), queueTimeout
	for q.active < q.opts.Active && !q.closed {
		front := q.queue.Front()
		if front == nil {
			break
		}
		w := q.queue.Remove(front).(*waiter)
		w.done = true
		q.active++
		close(w.granted)
	}
	q.changedLocked()
}

func (q *Queue) changedLocked() {
	if q.opts.OnChange != nil {
		q.opts.OnChange(q.active, q.queue.Len())
	}
}

// Active is the number of permits held.
func (q *Queue) Active() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active
}

// Snapshot reports the queue's state.
func (q *Queue) Snapshot() Snapshot {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Snapshot{
		Active: q.active, MaxActive: q.opts.Active, Queued: q.queue.Len(), MaxQueue: q.opts.MaxQueue,
		QueueTimeout: q.opts.QueueTimeout, Closed: q.closed, Totals: q.totals,
		WaitCount: q.waitN, WaitTotal: q.waitSum, WaitMax: q.waitMax,
	}
}
