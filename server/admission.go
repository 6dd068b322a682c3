package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Admission refusals. Callers branch on these to pick the JSON-RPC error.
var (
	errOverloaded   = errors.New("server overloaded")
	errShuttingDown = errors.New("server shutting down")
)

// admission is the global FIFO request pool of spec-meta-tools §12: a fixed
// number of active permits, a bounded queue and a queue wait timeout. It is
// taken before authentication so an unauthenticated flood cannot queue more
// work than an authenticated one.
type admission struct {
	maxActive    int
	maxQueue     int
	queueTimeout time.Duration
	retryAfter   time.Duration

	mu      sync.Mutex
	active  int
	waiters []*waiter // FIFO
	closed  bool
	totals  AdmissionTotals
	wait    QueueWaitStats

	metrics *admissionMetrics
}

type waiter struct {
	granted chan struct{} // closed when a permit is handed over
	done    bool          // handed a permit or refused; guarded by admission.mu
	refused error
}

// AdmissionTotals count admission decisions since start.
type AdmissionTotals struct {
	Admitted  int64 `json:"admitted"`
	Queued    int64 `json:"queued"`
	Rejected  int64 `json:"rejected"`
	Cancelled int64 `json:"cancelled"`
	Closed    int64 `json:"closed"`
}

// QueueWaitStats summarize queue waits in milliseconds.
type QueueWaitStats struct {
	Count int64 `json:"count"`
	Total int64 `json:"total"`
	Max   int64 `json:"max"`
}

// AdmissionSnapshot is the payload-free `/health` view of the pool (§14 Snap).
type AdmissionSnapshot struct {
	Concurrency    int             `json:"concurrency"`
	MaxQueueSize   int             `json:"maxQueueSize"`
	QueueTimeoutMs int64           `json:"queueTimeoutMs"`
	RetryAfterMs   int64           `json:"retryAfterMs"`
	Active         int             `json:"active"`
	Queued         int             `json:"queued"`
	Closed         bool            `json:"closed"`
	Totals         AdmissionTotals `json:"totals"`
	QueueWaitMs    QueueWaitStats  `json:"queueWaitMs"`
}

type admissionMetrics struct {
	active    prometheus.GaugeFunc
	queued    prometheus.GaugeFunc
	rejected  *prometheus.CounterVec
	queueWait prometheus.Histogram
	admitted  prometheus.Counter
}

func newAdmission(maxActive, maxQueue int, queueTimeout, retryAfter time.Duration, reg prometheus.Registerer) (*admission, error) {
	a := &admission{maxActive: maxActive, maxQueue: maxQueue, queueTimeout: queueTimeout, retryAfter: retryAfter}
	if reg == nil {
		return a, nil
	}
	m := &admissionMetrics{
		active: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "connecta_requests_active", Help: "MCP requests holding an admission permit.",
		}, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(a.active) }),
		queued: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "connecta_requests_queued", Help: "MCP requests waiting for an admission permit.",
		}, func() float64 { a.mu.Lock(); defer a.mu.Unlock(); return float64(len(a.waiters)) }),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_requests_rejected_total", Help: "MCP requests refused by admission, by reason.",
		}, []string{"reason"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "connecta_requests_queue_wait_seconds", Help: "Time MCP requests waited for admission.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10},
		}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "connecta_requests_admitted_total", Help: "MCP requests admitted.",
		}),
	}
	for _, c := range []prometheus.Collector{m.active, m.queued, m.rejected, m.queueWait, m.admitted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	a.metrics = m
	return a, nil
}

// acquire returns a release function once a permit is held. It fails with
// errOverloaded (queue full or wait timed out), errShuttingDown, or the
// context's error when the caller gave up while queued (a free cancel).
func (a *admission) acquire(ctx context.Context) (release func(), err error) {
	start := time.Now()
	a.mu.Lock()
	if a.closed {
		a.totals.Closed++
		a.mu.Unlock()
		a.reject("shutting_down")
		return nil, errShuttingDown
	}
	if a.active < a.maxActive && len(a.waiters) == 0 {
		a.active++
		a.totals.Admitted++
		a.mu.Unlock()
		a.admitted(0)
		return a.releaseOnce(), nil
	}
	if len(a.waiters) >= a.maxQueue {
		a.totals.Rejected++
		a.mu.Unlock()
		a.reject("queue_full")
		return nil, errOverloaded
	}
	w := &waiter{granted: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	a.totals.Queued++
	wait := a.queueTimeout
	a.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var cause error
	select {
	case <-w.granted:
	case <-timer.C:
		cause = errOverloaded
	case <-ctx.Done():
		cause = ctx.Err()
	}

	a.mu.Lock()
	if cause != nil && !w.done {
		a.removeWaiter(w)
		w.done = true
		switch {
		case errors.Is(cause, errOverloaded):
			a.totals.Rejected++
		default:
			a.totals.Cancelled++
		}
		a.mu.Unlock()
		if errors.Is(cause, errOverloaded) {
			a.reject("queue_timeout")
		}
		return nil, cause
	}
	// Granted (possibly racing with a timeout that lost): the permit is ours.
	refused := w.refused
	waited := time.Since(start)
	if refused == nil {
		a.totals.Admitted++
		a.recordWait(waited)
	}
	a.mu.Unlock()
	if refused != nil {
		a.reject("shutting_down")
		return nil, refused
	}
	a.admitted(waited)
	return a.releaseOnce(), nil
}

func (a *admission) admitted(waited time.Duration) {
	if a.metrics != nil {
		a.metrics.admitted.Inc()
		a.metrics.queueWait.Observe(waited.Seconds())
	}
}

func (a *admission) reject(reason string) {
	if a.metrics != nil {
		a.metrics.rejected.WithLabelValues(reason).Inc()
	}
}

func (a *admission) recordWait(d time.Duration) {
	ms := d.Milliseconds()
	a.wait.Count++
	a.wait.Total += ms
	if ms > a.wait.Max {
		a.wait.Max = ms
	}
}

func (a *admission) removeWaiter(w *waiter) {
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			return
		}
	}
}

func (a *admission) releaseOnce() func() {
	var once sync.Once
	return func() { once.Do(a.release) }
}

// release hands the permit to the oldest waiter, or frees it.
func (a *admission) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.waiters) > 0 {
		w := a.waiters[0]
		a.waiters = a.waiters[1:]
		if w.done {
			continue
		}
		w.done = true
		close(w.granted)
		return // the permit moves to w; active is unchanged
	}
	a.active--
}

// resize applies reloaded limits. Permits held stay held; when the pool
// grows, waiters take the new permits at once. Waits already timing keep
// the timeout they started with.
func (a *admission) resize(maxActive, maxQueue int, queueTimeout, retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.maxActive, a.maxQueue, a.queueTimeout, a.retryAfter = maxActive, maxQueue, queueTimeout, retryAfter
	for a.active < a.maxActive && len(a.waiters) > 0 {
		w := a.waiters[0]
		a.waiters = a.waiters[1:]
		if w.done {
			continue
		}
		w.done = true
		a.active++
		close(w.granted)
	}
}

// close stops admitting: queued requests are refused with errShuttingDown and
// later ones too. Active permits run to completion.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, w := range a.waiters {
		if !w.done {
			w.done = true
			w.refused = errShuttingDown
			a.totals.Closed++
			close(w.granted)
		}
	}
	a.waiters = nil
}

// activeCount reports permits in use (for draining).
func (a *admission) activeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active
}

func (a *admission) snapshot() AdmissionSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AdmissionSnapshot{
		Concurrency:    a.maxActive,
		MaxQueueSize:   a.maxQueue,
		QueueTimeoutMs: a.queueTimeout.Milliseconds(),
		RetryAfterMs:   a.retryAfter.Milliseconds(),
		Active:         a.active,
		Queued:         len(a.waiters),
		Closed:         a.closed,
		Totals:         a.totals,
		QueueWaitMs:    a.wait,
	}
}
