package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/admission"
	"github.com/prometheus/client_golang/prometheus"
)

// CallAdmission is a connector's downstream call admission rule
// (docs/DECISIONS.md "Call admission"), resolved by config. It bounds the
// tools/call attempts that reach the downstream — a program's connecta.call
// and call_tool alike, since both come through Invoke — and nothing else:
// catalog loads, initialize and session teardown are never admitted here.
type CallAdmission struct {
	MaxConcurrency int // 0: no concurrency bound
	MaxQueueSize   int
	QueueTimeout   time.Duration
	RetryAfter     time.Duration // hint of queue and partition refusals, and of a 429 without Retry-After
	Budget         *CallBudget
	PerCaller      bool // partition: caller
	MaxPartitions  int
}

// CallBudget is a rolling window of at most MaxCalls attempts per Window.
type CallBudget struct {
	MaxCalls int
	Window   time.Duration
}

// SharedBudgets keeps call budgets every replica counts against (a
// PostgreSQL store, package store). TakeCall records one attempt of
// (connector, partition) when fewer than maxCalls happened in the last
// window; otherwise it records nothing and says how long until one fits.
// Its error is the store's failure: the call is then refused `unavailable`
// with details.component "store", never admitted unbudgeted.
type SharedBudgets interface {
	TakeCall(ctx context.Context, connector, partition string, maxCalls int, window time.Duration) (ok bool, retryAfter time.Duration, err error)
}

// MaxRetryAfterMs clamps every retryAfterMs taken from a downstream's
// Retry-After (one hour).
const MaxRetryAfterMs = 3_600_000

// defaultRetryAfter is a downstream 429's hint when neither the response
// nor a rule gives one.
const defaultRetryAfter = time.Second

// callerPartition is the one accessor of the actor a `partition: caller`
// rule keys on: the actor the request carries today (a string; the typed
// (kind, id) actor replaces it here alone).
func callerPartition(req CallRequest) string { return req.Actor }

// callGate is one connector's admission state. It outlives a reload that
// keeps the connector's rule (buildRegistry), so a reload never resets a
// live budget.
type callGate struct {
	connector string
	rule      *CallAdmission // nil: no bound (counted only)
	parts     *admission.Partitions
	shared    SharedBudgets // nil: the budget is the partitions' own windows
	now       func() time.Time
	wait      prometheus.Observer // nil: no metrics

	admitted, rateLimited, partitionsFull, cancelled atomic.Int64
	unbounded                                        atomic.Int64 // in flight through a gate without a rule
}

func newCallGate(g *Gateway, id string, rule *CallAdmission) *callGate {
	cg := &callGate{connector: id, rule: rule, now: g.now}
	if g.metrics != nil {
		cg.wait = g.metrics.queueWait.WithLabelValues(id)
	}
	if rule == nil {
		return cg
	}
	opts := admission.PartitionOptions{MaxKeys: 1}
	if rule.PerCaller {
		opts.MaxKeys = max(rule.MaxPartitions, 1)
	}
	if rule.MaxConcurrency > 0 {
		opts.Queue = &admission.Options{Active: rule.MaxConcurrency, MaxQueue: rule.MaxQueueSize, QueueTimeout: rule.QueueTimeout}
	}
	if b := rule.Budget; b != nil {
		if g.opts.SharedBudgets != nil {
			cg.shared = g.opts.SharedBudgets
		} else {
			opts.Window = &admission.WindowOptions{Max: b.MaxCalls, Span: b.Window}
		}
	}
	cg.parts = admission.NewPartitions(opts)
	return cg
}

// errAdmissionCancelled: the call's context ended while it waited; the
// caller reports it as the call's cancellation or deadline (it costs
// nothing: no budget entry was taken).
var errAdmissionCancelled = errors.New("cancelled while waiting for call admission")

// admit takes the permit for one tools/call attempt, immediately before it
// (release is idempotent):
// the partition's concurrency permit first (queueing), then one entry of
// its budget. A refusal is a *Error (rate_limited, or unavailable when a
// shared budget's store failed); errAdmissionCancelled when ctx ended.
func (cg *callGate) admit(ctx context.Context, actor string) (release func(), gerr *Error, err error) {
	if cg.rule == nil {
		cg.unbounded.Add(1)
		cg.admitted.Add(1)
		var once sync.Once
		return func() { once.Do(func() { cg.unbounded.Add(-1) }) }, nil, nil
	}
	key := ""
	if cg.rule.PerCaller {
		key = actor
	}
	permit, err := cg.parts.Acquire(ctx, key, cg.now())
	var cancelled *admission.Cancelled
	switch {
	case err == nil:
	case errors.As(err, &cancelled):
		return nil, nil, errAdmissionCancelled
	case errors.Is(err, admission.ErrPartitionsFull):
		cg.partitionsFull.Add(1)
		return nil, cg.refusal(fmt.Sprintf("all %d caller partitions of its rule are in use", cg.rule.MaxPartitions), cg.rule.RetryAfter), nil
	case errors.Is(err, admission.ErrQueueFull):
		return nil, cg.refusal(fmt.Sprintf("%d calls are in flight and its queue of %d is full", cg.rule.MaxConcurrency, cg.rule.MaxQueueSize), cg.rule.RetryAfter), nil
	case errors.Is(err, admission.ErrTimeout):
		return nil, cg.refusal(fmt.Sprintf("the call waited %dms for one of its %d slots", cg.rule.QueueTimeout.Milliseconds(), cg.rule.MaxConcurrency), cg.rule.RetryAfter), nil
	default: // ErrClosed: partitions are never closed
		return nil, cg.refusal("its admission is closed", cg.rule.RetryAfter), nil
	}
	if cg.wait != nil && cg.rule.MaxConcurrency > 0 {
		cg.wait.Observe(permit.Waited.Seconds())
	}
	if b := cg.rule.Budget; b != nil {
		var ok bool
		var retryAfter time.Duration
		if cg.shared != nil {
			ok, retryAfter, err = cg.shared.TakeCall(ctx, cg.connector, key, b.MaxCalls, b.Window)
		} else {
			ok, retryAfter = permit.TakeWindow(cg.now())
		}
		switch {
		case err != nil && ctx.Err() != nil:
			permit.Release()
			cg.cancelled.Add(1)
			return nil, nil, errAdmissionCancelled
		case err != nil:
			permit.Release()
			return nil, &Error{
				Code:      CodeUnavailable,
				Message:   fmt.Sprintf("Connector %q has a call budget shared by every replica, and the store that keeps it could not be reached; the call was not sent.", cg.connector),
				Retryable: true,
				Details:   []Field{{Key: "details", Value: Object{{Key: "component", Value: "store"}}}},
			}, nil
		case !ok:
			permit.Release()
			cg.rateLimited.Add(1)
			return nil, cg.refusal(fmt.Sprintf("its budget of %d calls per %dms is spent", b.MaxCalls, b.Window.Milliseconds()), retryAfter), nil
		}
	}
	cg.admitted.Add(1)
	return permit.Release, nil, nil
}

// refusal is rate_limited with retryAfterMs rounded up to a whole
// millisecond, so a caller retrying after it finds room.
func (cg *callGate) refusal(why string, retryAfter time.Duration) *Error {
	ms := ceilMs(retryAfter)
	return &Error{
		Code:         CodeRateLimited,
		Message:      fmt.Sprintf("Connector %q is rate limited by connecta's call admission: %s. The call was not sent; retry after %dms.", cg.connector, why, ms),
		Retryable:    true,
		RetryAfterMs: &ms,
	}
}

func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := int64(d / time.Millisecond) // no addition: d may be the saturated maximum
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// retryHint is a downstream 429's retryAfterMs when it sent no Retry-After.
func (cg *callGate) retryHint() int64 {
	if cg.rule != nil {
		return cg.rule.RetryAfter.Milliseconds()
	}
	return defaultRetryAfter.Milliseconds()
}

// CallAdmissionSnapshot is one connector's /health entry under
// admission.downstreamCalls (docs/DECISIONS.md "Call admission").
type CallAdmissionSnapshot struct {
	Rules       []CallAdmissionRule  `json:"rules"`
	Partitions  int                  `json:"partitions"`
	Active      int                  `json:"active"`
	Queued      int                  `json:"queued"`
	Totals      CallAdmissionTotals  `json:"totals"`
	QueueWaitMs CallAdmissionWaitsMs `json:"queueWaitMs"`
}

// CallAdmissionRule is a rule as configured.
type CallAdmissionRule struct {
	MaxConcurrency *int                     `json:"maxConcurrency,omitempty"`
	MaxQueueSize   *int                     `json:"maxQueueSize,omitempty"`
	QueueTimeoutMs *int64                   `json:"queueTimeoutMs,omitempty"`
	RetryAfterMs   int64                    `json:"retryAfterMs"`
	Budget         *CallAdmissionBudgetRule `json:"budget,omitempty"`
	Partition      string                   `json:"partition"`
	MaxPartitions  *int                     `json:"maxPartitions,omitempty"`
}

// CallAdmissionBudgetRule is a budget as configured; Scope says where it
// is counted: "replicas" (the PostgreSQL store) or "process".
type CallAdmissionBudgetRule struct {
	MaxCalls int    `json:"maxCalls"`
	WindowMs int64  `json:"windowMs"`
	Scope    string `json:"scope"`
}

// CallAdmissionTotals count decisions since start: admitted (sent
// downstream), queued (waited for a slot), rejected (queue full, queue
// timeout, partitions exhausted), rateLimited (budget spent), cancelled
// (the caller gave up while waiting).
type CallAdmissionTotals struct {
	Admitted    int64 `json:"admitted"`
	Queued      int64 `json:"queued"`
	Rejected    int64 `json:"rejected"`
	RateLimited int64 `json:"rateLimited"`
	Cancelled   int64 `json:"cancelled"`
}

// CallAdmissionWaitsMs summarize the waits of the calls that queued.
type CallAdmissionWaitsMs struct {
	Count int64 `json:"count"`
	Total int64 `json:"total"`
	Max   int64 `json:"max"`
}

func (cg *callGate) snapshot() CallAdmissionSnapshot {
	s := CallAdmissionSnapshot{Rules: []CallAdmissionRule{}}
	s.Totals.Admitted = cg.admitted.Load()
	s.Totals.RateLimited = cg.rateLimited.Load()
	s.Totals.Cancelled = cg.cancelled.Load()
	s.Totals.Rejected = cg.partitionsFull.Load()
	if cg.rule == nil {
		s.Active = int(cg.unbounded.Load())
		return s
	}
	r := cg.rule
	view := CallAdmissionRule{RetryAfterMs: r.RetryAfter.Milliseconds(), Partition: "connector"}
	if r.MaxConcurrency > 0 {
		mc, mq, qt := r.MaxConcurrency, r.MaxQueueSize, r.QueueTimeout.Milliseconds()
		view.MaxConcurrency, view.MaxQueueSize, view.QueueTimeoutMs = &mc, &mq, &qt
	}
	if b := r.Budget; b != nil {
		scope := "process"
		if cg.shared != nil {
			scope = "replicas"
		}
		view.Budget = &CallAdmissionBudgetRule{MaxCalls: b.MaxCalls, WindowMs: b.Window.Milliseconds(), Scope: scope}
	}
	if r.PerCaller {
		mp := r.MaxPartitions
		view.Partition, view.MaxPartitions = "caller", &mp
	}
	s.Rules = append(s.Rules, view)
	ps := cg.parts.Snapshot()
	q := ps.Queues
	s.Partitions, s.Active, s.Queued = ps.Partitions, q.Active, q.Queued
	s.Totals.Queued = q.Totals.Queued
	s.Totals.Rejected += q.Totals.Rejected
	s.Totals.Cancelled += q.Totals.Cancelled
	s.QueueWaitMs = CallAdmissionWaitsMs{Count: q.WaitCount, Total: q.WaitTotal.Milliseconds(), Max: q.WaitMax.Milliseconds()}
	return s
}

// CallAdmission returns every configured connector's admission state by id.
func (g *Gateway) CallAdmission() map[string]CallAdmissionSnapshot {
	reg := g.current()
	out := make(map[string]CallAdmissionSnapshot, len(reg.order))
	for _, id := range reg.order {
		out[id] = reg.byID[id].gate.snapshot()
	}
	return out
}

// Admission outcomes, the values of connecta_downstream_admissions_total's
// outcome label.
var admissionOutcomes = []string{"admitted", "queued", "rejected", "rate_limited", "cancelled"}

// admissionCollector serves connecta_downstream_admissions_total from the
// same totals /health shows, read at scrape time (so every configured
// connector's series exist at zero from start and never drift).
type admissionCollector struct {
	g    *Gateway
	desc *prometheus.Desc
}

func newAdmissionCollector(g *Gateway) *admissionCollector {
	return &admissionCollector{g: g, desc: prometheus.NewDesc("connecta_downstream_admissions_total",
		"Downstream tools/call admission decisions by connector and outcome (admitted, queued, rejected, rate_limited, cancelled).",
		[]string{"connector", "outcome"}, nil)}
}

func (a *admissionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	for id, s := range a.g.CallAdmission() {
		t := s.Totals
		for i, v := range []int64{t.Admitted, t.Queued, t.Rejected, t.RateLimited, t.Cancelled} {
			ch <- prometheus.MustNewConstMetric(a.desc, prometheus.CounterValue, float64(v), id, admissionOutcomes[i])
		}
	}
}
