package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	metaParent   = "00-11111111111111111111111111111111-1111111111111111-01"
	headerParent = "00-22222222222222222222222222222222-2222222222222222-01"
)

func parentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// SEP-414: params._meta wins over the headers when valid; a malformed one
// is ignored (never an error) and the headers' is taken; none is none.
func TestIncoming_MetaWinsWhenValidMalformedIgnored(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", headerParent)
	for _, c := range []struct {
		name    string
		meta    map[string]any
		headers http.Header
		want    string
	}{
		{"meta wins", map[string]any{"traceparent": metaParent}, h, "11111111111111111111111111111111"},
		{"malformed meta: header", map[string]any{"traceparent": "00-zz-1-01"}, h, "22222222222222222222222222222222"},
		{"meta not a string: header", map[string]any{"traceparent": 42}, h, "22222222222222222222222222222222"},
		{"all-zero trace id is invalid", map[string]any{"traceparent": "00-00000000000000000000000000000000-1111111111111111-01"}, nil, ""},
		{"header only", nil, h, "22222222222222222222222222222222"},
		{"malformed header", nil, http.Header{"Traceparent": {"garbage"}}, ""},
		{"none", nil, nil, ""},
	} {
		var carrier propagation.TextMapCarrier
		if c.headers != nil {
			carrier = propagation.HeaderCarrier(c.headers)
		}
		if got := parentOf(Incoming(context.Background(), carrier, c.meta)); got != c.want {
			t.Errorf("%s: parent trace %q, want %q", c.name, got, c.want)
		}
	}
}

func TestInject_WritesTraceparentAndNothingWithoutASpan(t *testing.T) {
	m := MetaCarrier{}
	Inject(context.Background(), m)
	if len(m) != 0 {
		t.Fatalf("injected without a span: %v", m)
	}
	ctx := Incoming(context.Background(), nil, map[string]any{"traceparent": metaParent, "tracestate": "a=b"})
	Inject(ctx, m)
	if m["traceparent"] != metaParent || m["tracestate"] != "a=b" {
		t.Fatalf("meta %v", m)
	}
}

// Off is free: no provider, a no-op tracer, the counter at zero.
func TestNew_AbsentEndpointIsOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr, err := New(Config{}, reg)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.Provider() != nil {
		t.Fatal("tracing on without an endpoint")
	}
	if _, span := Tracer(tr.Provider()).Start(context.Background(), "x"); span.IsRecording() {
		t.Fatal("the off tracer records")
	}
	if n, err := testutil.GatherAndCount(reg, "connecta_trace_spans_dropped_total"); err != nil || n != 1 {
		t.Fatalf("dropped counter registered %d times (%v)", n, err)
	}
}

func TestNew_RefusesANonHTTPEndpoint(t *testing.T) {
	if _, err := New(Config{Endpoint: "grpc://x:4317"}, nil); err == nil {
		t.Fatal("accepted grpc://")
	}
}

// blockingExporter holds every export until released: a collector that
// accepted the connection and never answers.
type blockingExporter struct {
	release  chan struct{}
	exported atomic.Int64
}

func (b *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.exported.Add(int64(len(spans)))
	return nil
}
func (b *blockingExporter) Shutdown(context.Context) error { return nil }

// A collector that hangs never holds a span's end: past the queue's bound
// spans are dropped and counted, at once; every ended span is exported or
// counted, none lost silently.
func TestQueue_FullQueueDropsAndCountsWithoutWaiting(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "d"})
	q := newQueueProcessor(exp, 4, 2, time.Millisecond, dropped)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("t")
	for range 20 {
		_, s := tr.Start(context.Background(), "s")
		s.End() // must not block
	}
	// At most 2 in the exporter's hands and 4 queued: the rest dropped.
	if n := testutil.ToFloat64(dropped); n < 20-2-4 {
		t.Fatalf("dropped %v, want at least 14", n)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exp.exported.Load() + int64(testutil.ToFloat64(dropped)); got != 20 {
		t.Fatalf("exported %d + dropped %v ≠ 20 ended spans", exp.exported.Load(), testutil.ToFloat64(dropped))
	}
}

// A refused export (collector answering 503) is counted as dropped.
func TestQueue_RefusedExportIsCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	tr, err := New(Config{Endpoint: srv.URL, SampleRatio: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, s := Tracer(tr.Provider()).Start(context.Background(), "s")
		s.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
	mfs, _ := reg.Gather()
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "connecta_trace_spans_dropped_total" {
			n = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if n != 3 {
		t.Fatalf("dropped %v, want 3", n)
	}
}
