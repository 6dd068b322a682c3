package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that every record logged with a context whose span
// is sampled carries that span's traceId and spanId: an operator goes from
// a log line of a request to its trace. Only the *Context slog calls hand
// the handler a context; a record without a sampled span (tracing off, a
// background task, a call that passed no context) is h's unchanged.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ h slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsSampled() {
		// A copy: r's attributes may share storage with the caller's record.
		r = r.Clone()
		r.AddAttrs(slog.String("traceId", sc.TraceID().String()), slog.String("spanId", sc.SpanID().String()))
	}
	return l.h.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.h.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.h.WithGroup(name)} }
