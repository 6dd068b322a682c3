package supervisor

import (
	"container/list"
	"context"
	"log/slog"
	"sync"
	"time"
)

// admission is L7: Slots concurrent leases, then a strict FIFO queue of at
// most MaxQueue waiters, each waiting at most QueueTimeout.
type admission struct {
	slots, maxQueue int
	timeout         time.Duration
	m               *metrics
	log             *slog.Logger

	mu       sync.Mutex
	active   int
	queue    list.List // of *waiter
	closed   bool
	closedCh chan struct{}
	totals   Totals
	waitSum  time.Duration
	waitMax  time.Duration
	waitN    int64
}

type waiter struct {
	granted chan struct{} // closed when handed a slot
	elem    *list.Element
	done    bool // granted or removed, under admission.mu
}

// Totals count admission decisions since start.
type Totals struct {
	Admitted, Queued, Rejected, Cancelled, Closed int64
}

// Snapshot is the admission state (for /health and tests).
type Snapshot struct {
	Slots, MaxQueue int
	QueueTimeout    time.Duration
	Active, Queued  int
	Closed          bool
	Totals          Totals
	QueueWaitCount  int64
	QueueWaitTotal  time.Duration
	QueueWaitMax    time.Duration
}

func newAdmission(slots, maxQueue int, timeout time.Duration, m *metrics, log *slog.Logger) *admission {
	a := &admission{slots: slots, maxQueue: maxQueue, timeout: timeout, m: m, log: log, closedCh: make(chan struct{})}
	m.slots.Set(float64(slots))
	return a
}

func (a *admission) overloaded(msg string) *ExecError {
	a.log.Warn("execution rejected: executor overloaded", "reason", msg, "slots", a.slots, "maxQueue", a.maxQueue)
	return &ExecError{Code: CodeOverloaded, Message: msg, Retryable: true, RetryAfterMs: a.timeout.Milliseconds()}
}

// acquire takes a slot or fails with *ExecError.
func (a *admission) acquire(ctx context.Context) error {
	a.mu.Lock()
	switch {
	case a.closed:
		a.totals.Closed++
		a.mu.Unlock()
		a.m.rejections.WithLabelValues("closed").Inc()
		return &ExecError{Code: CodeClosed, Message: msgClosed}
	case ctx.Err() != nil:
		a.totals.Cancelled++
		a.mu.Unlock()
		a.m.rejections.WithLabelValues("cancelled").Inc()
		return &ExecError{Code: CodeCancelled, Message: msgCancelledBefore}
	case a.active < a.slots && a.queue.Len() == 0:
		a.active++
		a.totals.Admitted++
		a.publishLocked()
		a.mu.Unlock()
		a.m.admissions.Inc()
		a.m.queueWait.Observe(0)
		return nil
	case a.queue.Len() >= a.maxQueue:
		a.totals.Rejected++
		a.mu.Unlock()
		a.m.rejections.WithLabelValues("queue_full").Inc()
		return a.overloaded(msgQueueFull)
	}
	w := &waiter{granted: make(chan struct{})}
	w.elem = a.queue.PushBack(w)
	a.totals.Queued++
	a.publishLocked()
	a.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(a.timeout)
	defer timer.Stop()
	reason := ""
	select {
	case <-w.granted:
	case <-ctx.Done():
		reason = "cancelled"
	case <-timer.C:
		reason = "timeout"
	case <-a.closedCh:
		reason = "closed"
	}
	a.mu.Lock()
	switch {
	case isGranted(w):
		if reason != "" || a.closed {
			// Handed a slot in the instant we gave up: pass it on.
			if reason == "" {
				reason = "closed"
			}
			a.releaseLocked()
		}
	case !w.done: // still queued: withdraw
		w.done = true
		a.queue.Remove(w.elem)
		a.publishLocked()
	default: // removed by close
		reason = "closed"
	}
	switch reason {
	case "closed":
		a.totals.Closed++
	case "cancelled":
		a.totals.Cancelled++
	case "timeout":
		a.totals.Rejected++
	default:
		a.totals.Admitted++
		waited := time.Since(start)
		a.waitN++
		a.waitSum += waited
		a.waitMax = max(a.waitMax, waited)
	}
	a.mu.Unlock()
	switch reason {
	case "closed":
		a.m.rejections.WithLabelValues("closed").Inc()
		return &ExecError{Code: CodeClosed, Message: msgClosed}
	case "cancelled":
		a.m.rejections.WithLabelValues("cancelled").Inc()
		return &ExecError{Code: CodeCancelled, Message: msgCancelledQueued}
	case "timeout":
		a.m.rejections.WithLabelValues("timeout").Inc()
		return a.overloaded(msgAdmissionTimeout(a.timeout))
	}
	a.m.admissions.Inc()
	a.m.queueWait.Observe(time.Since(start).Seconds())
	return nil
}

func isGranted(w *waiter) bool {
	select {
	case <-w.granted:
		return true
	default:
		return false
	}
}

// release returns a slot, handing it straight to the head waiter.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked()
}

func (a *admission) releaseLocked() {
	if front := a.queue.Front(); front != nil && !a.closed {
		w := a.queue.Remove(front).(*waiter)
		w.done = true
		close(w.granted) // the slot moves to w; active unchanged
	} else {
		a.active--
	}
	a.publishLocked()
}

// close refuses new acquisitions and fails every waiter with executor_closed.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	close(a.closedCh)
	for e := a.queue.Front(); e != nil; e = a.queue.Front() {
		w := a.queue.Remove(e).(*waiter)
		w.done = true // not granted: the waiter reports closed
	}
	a.publishLocked()
}

func (a *admission) publishLocked() {
	a.m.inUse.Set(float64(a.active))
	a.m.queued.Set(float64(a.queue.Len()))
}

func (a *admission) snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Snapshot{
		Slots: a.slots, MaxQueue: a.maxQueue, QueueTimeout: a.timeout,
		Active: a.active, Queued: a.queue.Len(), Closed: a.closed, Totals: a.totals,
		QueueWaitCount: a.waitN, QueueWaitTotal: a.waitSum, QueueWaitMax: a.waitMax,
	}
}
