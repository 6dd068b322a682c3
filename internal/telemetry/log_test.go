package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A record logged with a sampled span's context carries its traceId and
// spanId, also through With and WithGroup loggers; one without a context,
// or with an unsampled span, is unchanged.
func TestLogHandler_SampledSpanNamesItsTrace(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	for _, c := range []struct {
		name  string
		log   func()
		trace bool
	}{
		{"sampled", func() { log.WarnContext(sampled, "w", "k", "v") }, true},
		{"sampled, many attributes", func() { log.InfoContext(sampled, "i", "a", 1, "b", 2, "c", 3, "d", 4, "e", 5, "f", 6) }, true},
		{"no context", func() { log.Warn("w") }, false},
		{"unsampled", func() { log.WarnContext(unsampled, "w") }, false},
	} {
		buf.Reset()
		c.log()
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, buf.Bytes())
		}
		has := rec["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736" && rec["spanId"] == "00f067aa0ba902b7"
		if has != c.trace || (!c.trace && (rec["traceId"] != nil || rec["spanId"] != nil)) || rec["component"] != "x" {
			t.Errorf("%s: %s", c.name, buf.Bytes())
		}
	}
	buf.Reset()
	log.WithGroup("g").WarnContext(sampled, "w", "k", "v")
	if !bytes.Contains(buf.Bytes(), []byte(`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"`)) {
		t.Errorf("WithGroup lost the trace: %s", buf.Bytes())
	}
}
