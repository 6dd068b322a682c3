// Package admission is the one FIFO admission queue of the repository: a
// fixed number of active permits, then a strict first-in-first-out queue of
// bounded length whose waiters each wait at most a timeout. The server admits
// MCP requests with it (docs/DECISIONS.md "Request admission") and the
// supervisor admits executions (L7); each maps the refusals below to its own
// error and metrics.
//
// A released permit is handed straight to a waiter, so a later arrival can
// never overtake the queue. A waiter whose context ends is removed without
// counting as a rejection (a "free cancel"). Close refuses the queue and
// everything after it; permits already held run to completion.
//
// Waiters may be keyed (AcquireAs: the server keys a request by its
// caller). With one key — the executor, or a lone caller — the queue is the
// plain FIFO above. While waiters of more than one key are queued, it is fair
// between keys: keys are served round-robin (each key's own waiters in
// order), a key holding MaxActivePerKey permits is passed over, and an
// arrival of a key with fewer waiters than the most-queued key, at a full
// queue, takes the place of that key's newest waiter (which is refused as
// queue full) instead of being refused itself. A lone key may use every
// permit and the whole queue.
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
	Active   int // permits held at once; at least 1
	MaxQueue int // waiters; 0 fails fast when every permit is held
	// MaxActivePerKey caps a key's permits while waiters of more than one
	// key are queued; 0 (or above Active) means Active.
	MaxActivePerKey int
	QueueTimeout    time.Duration // longest wait in the queue
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
	queued   int
	keys     map[string]*keyState // keys holding permits or waiting
	ring     list.List            // of *keyState with waiters, in round-robin order
	next     *list.Element        // the ring's next key to serve
	closed   bool
	closedCh chan struct{}
	totals   Totals
	waitN    int64
	waitSum  time.Duration
	waitMax  time.Duration
}

// keyState is one key's permits and waiters.
type keyState struct {
	key     string
	active  int
	waiting list.List     // of *waiter, oldest first
	inRing  *list.Element // nil while it has no waiters
}

type waiter struct {
	granted chan struct{} // closed when handed a permit
	shed    chan struct{} // closed when displaced by another key's arrival
	ks      *keyState
	elem    *list.Element
	done    bool // granted or removed; under Queue.mu
}

// New returns an open queue.
func New(opts Options) *Queue {
	opts.Active = max(opts.Active, 1)
	opts.MaxQueue = max(opts.MaxQueue, 0)
	return &Queue{opts: opts, keys: map[string]*keyState{}, closedCh: make(chan struct{})}
}

// Acquire is AcquireAs with the one unnamed key: a plain FIFO.
func (q *Queue) Acquire(ctx context.Context) (waited time.Duration, err error) {
	return q.AcquireAs(ctx, "")
}

// Release returns a permit of Acquire.
func (q *Queue) Release() { q.ReleaseAs("") }

// AcquireAs returns once a permit is held for key, with how long it waited
// in the queue (0 when admitted at once). Otherwise it fails with
// ErrClosed, ErrQueueFull, ErrTimeout or a *Cancelled. Every successful
// AcquireAs must be followed by exactly one ReleaseAs of the same key.
func (q *Queue) AcquireAs(ctx context.Context, key string) (waited time.Duration, err error) {
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
	case q.active < q.opts.Active && q.queued == 0:
		q.keyLocked(key).active++
		q.active++
		q.totals.Admitted++
		q.changedLocked()
		q.mu.Unlock()
		return 0, nil
	case q.queued >= q.opts.MaxQueue && !q.shedForLocked(key):
		q.totals.Rejected++
		q.mu.Unlock()
		return 0, ErrQueueFull
	}
	w := &waiter{granted: make(chan struct{}), shed: make(chan struct{}), ks: q.keyLocked(key)}
	q.enqueueLocked(w)
	q.totals.Queued++
	q.dispatchLocked() // a permit left idle by the per-key cap may be this key's
	q.changedLocked()
	wait := q.opts.QueueTimeout // Resize may change it
	q.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var refusal error
	select {
	case <-w.granted:
	case <-w.shed:
		refusal = ErrQueueFull
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
			q.releaseLocked(w.ks)
		case q.closed:
			refusal = ErrClosed
			q.releaseLocked(w.ks)
		default:
			refusal = nil
		}
	case !w.done: // still queued: withdraw
		q.withdrawLocked(w)
		q.dispatchLocked() // fewer keys waiting may lift the per-key cap
		q.forgetLocked(w.ks)
		q.changedLocked()
	case isShed(w):
		refusal = ErrQueueFull
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
	case errors.Is(refusal, ErrTimeout), errors.Is(refusal, ErrQueueFull):
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

func isShed(w *waiter) bool {
	select {
	case <-w.shed:
		return true
	default:
		return false
	}
}

// ReleaseAs returns a permit of key, handing it to the next waiter.
func (q *Queue) ReleaseAs(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ks := q.keys[key]; ks != nil && ks.active > 0 {
		q.releaseLocked(ks)
	}
}

func (q *Queue) releaseLocked(ks *keyState) {
	ks.active--
	q.active--
	q.dispatchLocked()
	q.forgetLocked(ks)
	q.changedLocked()
}

// keyLocked is key's state, made on first use.
func (q *Queue) keyLocked(key string) *keyState {
	ks := q.keys[key]
	if ks == nil {
		ks = &keyState{key: key}
		q.keys[key] = ks
	}
	return ks
}

// forgetLocked drops a key that holds nothing and waits for nothing, so
// the map is bounded by permits plus waiters.
func (q *Queue) forgetLocked(ks *keyState) {
	if ks.active == 0 && ks.waiting.Len() == 0 && q.keys[ks.key] == ks {
		delete(q.keys, ks.key)
	}
}

func (q *Queue) enqueueLocked(w *waiter) {
	w.elem = w.ks.waiting.PushBack(w)
	q.queued++
	if w.ks.inRing == nil {
		// A key new to the ring is served after every key already in it.
		if q.next != nil {
			w.ks.inRing = q.ring.InsertBefore(w.ks, q.next)
		} else {
			w.ks.inRing = q.ring.PushBack(w.ks)
		}
	}
}

// withdrawLocked takes w out of its key's waiters (and the key out of the
// ring when it has none left).
func (q *Queue) withdrawLocked(w *waiter) {
	w.done = true
	ks := w.ks
	ks.waiting.Remove(w.elem)
	q.queued--
	if ks.waiting.Len() == 0 && ks.inRing != nil {
		if q.next == ks.inRing {
			q.next = ks.inRing.Next()
		}
		q.ring.Remove(ks.inRing)
		ks.inRing = nil
	}
}

// dispatchLocked hands free permits to waiters: keys round-robin from the
// ring's cursor, each key's oldest waiter first, passing over a key at its
// cap while more than one key waits.
func (q *Queue) dispatchLocked() {
	for q.active < q.opts.Active && q.queued > 0 && !q.closed {
		capped := q.ring.Len() > 1
		limit := q.opts.MaxActivePerKey
		if limit <= 0 || limit > q.opts.Active {
			limit = q.opts.Active
		}
		var pick *keyState
		e := q.next
		for range q.ring.Len() {
			if e == nil {
				e = q.ring.Front()
			}
			if ks := e.Value.(*keyState); !capped || ks.active < limit {
				pick = ks
				break
			}
			e = e.Next()
		}
		if pick == nil {
			return // every waiting key is at its cap
		}
		q.next = pick.inRing.Next()
		w := pick.waiting.Front().Value.(*waiter)
		q.withdrawLocked(w)
		pick.active++
		q.active++
		close(w.granted)
	}
}

// shedForLocked makes room at a full queue for an arrival of key by
// refusing the newest waiter of the key with the most waiters, when that
// key has more waiters than key has: one caller cannot fill the queue
// against the others. It reports whether it made room.
func (q *Queue) shedForLocked(key string) bool {
	if q.opts.MaxQueue == 0 {
		return false
	}
	mine := 0
	if ks := q.keys[key]; ks != nil {
		mine = ks.waiting.Len()
	}
	var most *keyState
	for e := q.ring.Front(); e != nil; e = e.Next() {
		if ks := e.Value.(*keyState); most == nil || ks.waiting.Len() > most.waiting.Len() {
			most = ks
		}
	}
	if most == nil || most.key == key || most.waiting.Len() <= mine+1 {
		return false
	}
	w := most.waiting.Back().Value.(*waiter)
	q.withdrawLocked(w)
	close(w.shed)
	q.forgetLocked(most)
	return true
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
	for q.ring.Len() > 0 {
		ks := q.ring.Front().Value.(*keyState)
		q.withdrawLocked(ks.waiting.Front().Value.(*waiter)) // not granted: the waiter reports closed
		q.forgetLocked(ks)
	}
	q.changedLocked()
}

// Resize changes the limits (a configuration reload). Held permits stay
// held; when Active grows, waiters take the new permits at once; waits
// already timing keep the timeout they started with.
func (q *Queue) Resize(active, maxQueue int, queueTimeout time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.opts.Active, q.opts.MaxQueue, q.opts.QueueTimeout = max(active, 1), max(maxQueue, 0), queueTimeout
	q.dispatchLocked()
	q.changedLocked()
}

// SetMaxActivePerKey changes Options.MaxActivePerKey (a reload); permits
// held stay held, and a raised cap is used at once.
func (q *Queue) SetMaxActivePerKey(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.opts.MaxActivePerKey = n
	q.dispatchLocked()
	q.changedLocked()
}

func (q *Queue) changedLocked() {
	if q.opts.OnChange != nil {
		q.opts.OnChange(q.active, q.queued)
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
		Active: q.active, MaxActive: q.opts.Active, Queued: q.queued, MaxQueue: q.opts.MaxQueue,
		QueueTimeout: q.opts.QueueTimeout, Closed: q.closed, Totals: q.totals,
		WaitCount: q.waitN, WaitTotal: q.waitSum, WaitMax: q.waitMax,
	}
}
