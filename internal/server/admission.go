package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionq "github.com/connecta-dev/connecta/internal/admission"
	"github.com/prometheus/client_golang/prometheus"
)

// Admission refusals. Callers branch on these to pick the JSON-RPC error.
var (
	errOverloaded   = errors.New("server overloaded")
	errShuttingDown = errors.New("server shutting down")
)

// admission is the global request pool of docs/DECISIONS.md "Request
// admission" and "Fair request admission": internal/admission's queue with
// the server's refusals, /health view and metrics. It is taken before
// authentication so an unauthenticated flood cannot queue more work than an
// authenticated one, and it is fair between callers, keyed by admissionKey.
type admission struct {
	q          *admissionq.Queue
	retryAfter atomic.Int64 // time.Duration; a reload may change it
	metrics    *admissionMetrics
	log        *slog.Logger // nil: no log lines
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

// AdmissionSnapshot is the payload-free `/health` view of the pool (docs/meta-tools.md §14 Snap).
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

func newAdmission(r RequestLimits, reg prometheus.Registerer) (*admission, error) {
	a := &admission{
		q: admissionq.New(admissionq.Options{Active: r.MaxActive, MaxQueue: r.MaxQueue, QueueTimeout: r.QueueTimeout,
			MaxActivePerKey: r.perCaller()}),
	}
	a.retryAfter.Store(int64(r.RetryAfter))
	if reg == nil {
		return a, nil
	}
	m := &admissionMetrics{
		active: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "connecta_requests_active", Help: "MCP requests holding an admission permit.",
		}, func() float64 { return float64(a.q.Active()) }),
		queued: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "connecta_requests_queued", Help: "MCP requests waiting for an admission permit.",
		}, func() float64 { return float64(a.q.Snapshot().Queued) }),
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
	// Every reason exists at zero from start, so an alert on it can fire
	// on a fresh server.
	for _, r := range []string{"queue_full", "queue_timeout", "shutting_down"} {
		m.rejected.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.active, m.queued, m.rejected, m.queueWait, m.admitted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	a.metrics = m
	return a, nil
}

// acquire returns a release function once a permit is held for the caller
// key names. It fails with errOverloaded (queue full or wait timed out),
// errShuttingDown, or the context's error when the caller gave up (a free
// cancel).
func (a *admission) acquire(ctx context.Context, key string) (release func(), err error) {
	waited, err := a.q.AcquireAs(ctx, key)
	switch {
	case err == nil:
		if a.metrics != nil {
			a.metrics.admitted.Inc()
			a.metrics.queueWait.Observe(waited.Seconds())
		}
		var once sync.Once
		return func() { once.Do(func() { a.q.ReleaseAs(key) }) }, nil
	case errors.Is(err, admissionq.ErrClosed):
		a.reject("shutting_down")
		return nil, errShuttingDown
	case errors.Is(err, admissionq.ErrQueueFull):
		a.reject("queue_full")
		return nil, errOverloaded
	case errors.Is(err, admissionq.ErrTimeout):
		a.reject("queue_timeout")
		return nil, errOverloaded
	}
	var c *admissionq.Cancelled
	if errors.As(err, &c) {
		return nil, c.Cause
	}
	return nil, err
}

func (a *admission) reject(reason string) {
	if a.metrics != nil {
		a.metrics.rejected.WithLabelValues(reason).Inc()
	}
	if a.log != nil && reason != "shutting_down" {
		s := a.q.Snapshot()
		a.log.Warn("request rejected: server overloaded", "reason", reason, "maxActive", s.MaxActive, "maxQueue", s.MaxQueue)
	}
}

// close stops admitting: queued requests are refused with errShuttingDown and
// later ones too. Active permits run to completion.
func (a *admission) close() { a.q.Close() }

// resize applies reloaded limits (see admissionq.Queue.Resize).
func (a *admission) resize(r RequestLimits) {
	a.q.Resize(r.MaxActive, r.MaxQueue, r.QueueTimeout)
	a.q.SetMaxActivePerKey(r.perCaller())
	a.retryAfter.Store(int64(r.RetryAfter))
}

// perCaller is the per-caller permit cap: MaxActivePerCaller, by default
// half of MaxActive rounded up (docs/DECISIONS.md "Fair request admission"),
// at most MaxActive.
func (r RequestLimits) perCaller() int {
	if r.MaxActivePerCaller <= 0 {
		return (r.MaxActive + 1) / 2
	}
	return min(r.MaxActivePerCaller, r.MaxActive)
}

// admissionKey names the caller of a request before authentication: a
// hash of the credential it presents (every Authorization value), else its
// peer address (the connection's, never a forwarded-for header). A caller
// with a bad credential is still one caller; authentication refuses it
// right after admission, before it can be slow with a body.
func admissionKey(r *http.Request) string {
	if v := r.Header.Values("Authorization"); len(v) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(v, "\n")))
		return "credential:" + hex.EncodeToString(sum[:16])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "peer:" + host
}

// activeCount reports permits in use (for draining).
func (a *admission) activeCount() int { return a.q.Active() }

func (a *admission) snapshot() AdmissionSnapshot {
	s := a.q.Snapshot()
	t := s.Totals
	return AdmissionSnapshot{
		Concurrency:    s.MaxActive,
		MaxQueueSize:   s.MaxQueue,
		QueueTimeoutMs: s.QueueTimeout.Milliseconds(),
		RetryAfterMs:   time.Duration(a.retryAfter.Load()).Milliseconds(),
		Active:         s.Active,
		Queued:         s.Queued,
		Closed:         s.Closed,
		Totals:         AdmissionTotals{Admitted: t.Admitted, Queued: t.Queued, Rejected: t.Rejected, Cancelled: t.Cancelled, Closed: t.Closed},
		QueueWaitMs:    QueueWaitStats{Count: s.WaitCount, Total: s.WaitTotal.Milliseconds(), Max: s.WaitMax.Milliseconds()},
	}
}
