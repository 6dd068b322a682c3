// Package telemetry is connecta's tracing: an OpenTelemetry tracer provider
// exporting OTLP/HTTP when telemetry.otlp.endpoint is set, a no-op provider
// (no cost) when it is not, and the W3C trace context in and out.
//
// A dead collector never slows or fails a call: finished spans go into a
// bounded queue that a single goroutine drains to the exporter in batches;
// a full queue or a failed export drops the spans and counts them
// (connecta_trace_spans_dropped_total). Nothing here is package-level
// state: every component is handed the trace.TracerProvider explicitly.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Instrumentation is the instrumentation scope every connecta span carries.
const Instrumentation = "github.com/connecta-dev/connecta"

// Defaults of the telemetry block (docs/CONFIG.md).
const (
	DefaultServiceName = "connecta"
	DefaultSampleRatio = 1.0
	// QueueSize bounds the finished spans waiting for export; past it new
	// spans are dropped and counted.
	QueueSize = 2048
	// BatchSize is the most spans one export carries.
	BatchSize = 512
	// BatchDelay is how long a partial batch waits for more spans.
	BatchDelay = time.Second
	// ExportTimeout bounds one export: a collector that accepts the
	// connection and never answers costs the export goroutine this long,
	// never a call.
	ExportTimeout = 5 * time.Second
)

// Config is the telemetry block, resolved (credential references in
// Headers already replaced).
type Config struct {
	Endpoint    string            // OTLP/HTTP base URL, e.g. http://127.0.0.1:4318; "" = off
	Headers     map[string]string // sent with every export
	SampleRatio float64           // parent-based: an incoming sampled trace is kept
	ServiceName string
	Version     string // service.version
}

// Tracing is the process's tracer provider and its export pipeline.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
	queue    *queueProcessor          // nil when off
}

// Off is tracing switched off: a no-op provider.
func Off() *Tracing { return &Tracing{provider: noop.NewTracerProvider()} }

// New builds the tracer provider for cfg; reg receives
// connecta_trace_spans_dropped_total (registered even when off, at zero).
func New(cfg Config, reg prometheus.Registerer) (*Tracing, error) {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "connecta_trace_spans_dropped_total",
		Help: "Finished spans never exported: the export queue was full or the collector refused or did not answer.",
	})
	if reg != nil {
		if err := reg.Register(dropped); err != nil {
			return nil, fmt.Errorf("telemetry: metrics: %w", err)
		}
	}
	if cfg.Endpoint == "" {
		return Off(), nil
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: otlp.endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(strings.TrimRight(cfg.Endpoint, "/") + "/v1/traces"),
		otlptracehttp.WithTimeout(ExportTimeout),
		// Retrying would hold the export goroutine while the queue fills:
		// a failed batch is dropped and counted instead.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	q := newQueueProcessor(exp, QueueSize, BatchSize, BatchDelay, dropped)
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(q),
	)
	return &Tracing{provider: sdk, sdk: sdk, queue: q}, nil
}

// Provider is what components are handed: nil when tracing is off, which
// every component reads as "no spans, and no trace context taken in or
// passed on" (Tracer(nil) is the no-op tracer).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.provider
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Shutdown exports what is queued (bounded by ctx) and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Tracer is p's connecta tracer; a nil p is the no-op one.
func Tracer(p trace.TracerProvider) trace.Tracer {
	if p == nil {
		p = noop.NewTracerProvider()
	}
	return p.Tracer(Instrumentation)
}

// propagator is W3C trace context (traceparent, tracestate); a value, not
// package state: it holds nothing.
var propagator propagation.TraceContext

// Inject writes ctx's span context as traceparent/tracestate into carrier
// (HTTP headers or a _meta map); nothing when ctx has no valid span.
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, carrier)
}

// Extract reads a remote parent from carrier; a missing or malformed
// traceparent gives ctx back unchanged.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) (context.Context, bool) {
	out := propagator.Extract(ctx, carrier)
	sc := trace.SpanContextFromContext(out)
	if !sc.IsValid() || !sc.IsRemote() {
		return ctx, false
	}
	return out, true
}

// MetaCarrier is a params._meta map (SEP-414: traceparent, tracestate keys)
// as a propagation carrier. Values that are not strings are ignored.
type MetaCarrier map[string]any

func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m MetaCarrier) Set(key, value string) { m[key] = value }

func (m MetaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Incoming is the remote parent of an authenticated request: the _meta's
// trace context when it is valid, else the headers', else none (ctx as is).
func Incoming(ctx context.Context, headers propagation.TextMapCarrier, meta map[string]any) context.Context {
	if meta != nil {
		if out, ok := Extract(ctx, MetaCarrier(meta)); ok {
			return out
		}
	}
	if headers != nil {
		if out, ok := Extract(ctx, headers); ok {
			return out
		}
	}
	return ctx
}

// TraceID is ctx's trace id in hex when its span is sampled (exported), ""
// otherwise: activity and logs name only traces an operator can open.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// errQueueClosed: an export after Shutdown.
var errQueueClosed = errors.New("telemetry: export queue closed")

// Observe records v into o with ctx's trace id as its exemplar when ctx's
// span is sampled (a Prometheus scrape in OpenMetrics shows it), plainly
// otherwise.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}
