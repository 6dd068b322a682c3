package store

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// connecta.store spans: only operations over StoreSpanThreshold, and only
// inside a traced request (a background sweep starts no trace).
func TestStoreSpan_OnlySlowOperationsOfATracedRequest(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	m := newMetrics(nil)
	m.tracer = tp.Tracer("t")
	traced, span := m.tracer.Start(context.Background(), "request")
	slow := time.Now().Add(-2 * StoreSpanThreshold)
	m.observe(traced, opGetSecret, slow, nil)                  // kept
	m.observe(traced, opGetSecret, time.Now(), nil)            // fast: none
	m.observe(context.Background(), opSweepResults, slow, nil) // untraced: none
	span.End()
	var got []string
	for _, s := range exp.GetSpans() {
		got = append(got, s.Name)
		if s.Name == "connecta.store" && (s.Parent.SpanID() != span.SpanContext().SpanID() || s.Attributes[0].Value.AsString() != opGetSecret) {
			t.Errorf("store span %+v", s)
		}
	}
	if len(got) != 2 || got[0] != "connecta.store" {
		t.Fatalf("spans %v, want one connecta.store and the request", got)
	}
}
