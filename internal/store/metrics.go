package store

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Operation names, the `op` label of the store metrics.
const (
	opPutResult     = "put_result"
	opResultWindow  = "get_result"
	opSweepResults  = "sweep_results"
	opAppendActiv   = "append_activity"
	opListActivity  = "list_activity"
	opPruneActivity = "prune_activity"
	opPutSecret     = "put_secret"
	opGetSecret     = "get_secret"
	opDeleteSecret  = "delete_secret"
	opListSecrets   = "list_secrets"
	opReplaceSecret = "replace_secret"
	opPutFlow       = "put_oauth_flow"
	opTakeFlow      = "take_oauth_flow"
	opAppendAudit   = "append_audit"
	opListAudit     = "list_audit"
	opPutToken      = "put_token"
	opGetToken      = "get_token"
	opListTokens    = "list_tokens"
	opRevokeToken   = "revoke_token"
	opRenameToken   = "rename_token"
	opPutSession    = "put_session"
	opGetSession    = "get_session"
	opDeleteSession = "delete_session"
	opPutCatalog    = "put_catalog"
	opGetCatalog    = "get_catalog"
	opPutApprovals  = "put_approvals"
	opListApprovals = "list_approvals"
	opPing          = "ping"
	opMigrate       = "migrate"
)

var allOps = []string{
	opPutResult, opResultWindow, opSweepResults, opAppendActiv, opListActivity, opPruneActivity,
	opPutSecret, opGetSecret, opDeleteSecret, opListSecrets, opReplaceSecret,
	opPutFlow, opTakeFlow, opAppendAudit, opListAudit,
	opPutToken, opGetToken, opListTokens, opRevokeToken, opRenameToken, opPutSession, opGetSession, opDeleteSession,
	opPutCatalog, opGetCatalog, opPutApprovals, opListApprovals,
	opPing, opMigrate, opTakeCall, opSweepBudgets,
}

// metrics are connecta_store_operation_duration_seconds{op} and
// connecta_store_errors_total{op} (docs/DECISIONS.md, "Metrics added"); every op
// exists at zero from the start.
type metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	tracer   trace.Tracer // nil: no spans
}

// StoreSpanThreshold: only store operations slower than this get a span
// (a fast one is noise in a trace; the histogram has them all).
const StoreSpanThreshold = time.Millisecond

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "connecta_store_operation_duration_seconds",
			Help:    "Duration of store operations, by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_store_errors_total",
			Help: "Store operations that failed in the backend, by operation.",
		}, []string{"op"}),
	}
	for _, op := range allOps {
		m.duration.WithLabelValues(op)
		m.errors.WithLabelValues(op)
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.errors)
	}
	return m
}

// observe records one operation. A caller's own cancellation is not a
// backend error and is not counted as one.
func (m *metrics) observe(ctx context.Context, op string, start time.Time, err error) {
	took := time.Since(start)
	m.duration.WithLabelValues(op).Observe(took.Seconds())
	// A span only inside a traced request: a background sweep starts none.
	if m.tracer != nil && took > StoreSpanThreshold && trace.SpanFromContext(ctx).IsRecording() {
		_, span := m.tracer.Start(ctx, "connecta.store", trace.WithTimestamp(start),
			trace.WithAttributes(attribute.String("db.operation.name", op)))
		if err != nil {
			span.SetStatus(codes.Error, "store_error")
		}
		span.End()
	}
	if err != nil && errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		m.errors.WithLabelValues(op).Inc()
	}
}
