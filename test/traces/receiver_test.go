package traces_test

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/connecta-dev/connecta/test/testkit"
)

// backend is where the live connecta exports to and the trace is read
// back from.
type backend interface {
	endpoint() string
	// trace returns the spans of traceID once at least want have arrived
	// (or what there is after a bound).
	trace(t testing.TB, traceID string, want int) []span
	// named returns the spans called name, of any trace, once at least
	// want have arrived (or what there is after a bound).
	named(t testing.TB, name string, want int) []span
	// stop takes the collector down: connections are refused from then on.
	stop()
}

func newBackend(t testing.TB) backend {
	if j := newJaeger(t); j != nil {
		return j
	}
	return newReceiver(t)
}

// receiver is an OTLP/HTTP endpoint decoding each export with the OTLP
// protobuf types (the fallback when no Jaeger binary is built).
type receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans map[string][]span // by trace id
	auth  []string          // Authorization of each export
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{spans: map[string][]span{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.TraceId)
					r.spans[id] = append(r.spans[id], fromOTLP(s))
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range r.auth {
			if a != "Bearer "+otlpSecret {
				t.Errorf("an export carried Authorization %q, want the configured header", a)
			}
		}
	})
	t.Log("backend: the test's OTLP/HTTP receiver (no Jaeger binary)")
	return r
}

func (r *receiver) endpoint() string { return r.srv.URL }

func (r *receiver) stop() { r.srv.Close() }

func (r *receiver) trace(t testing.TB, traceID string, want int) []span {
	var out []span
	testkit.Poll(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = append([]span(nil), r.spans[traceID]...)
		return len(out) >= want
	})
	return out
}

func (r *receiver) named(t testing.TB, name string, want int) []span {
	var out []span
	testkit.Poll(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = out[:0]
		for _, spans := range r.spans {
			for _, s := range spans {
				if s.Name == name {
					out = append(out, s)
				}
			}
		}
		return len(out) >= want
	})
	return out
}

func fromOTLP(s *tracepb.Span) span {
	out := span{Name: s.Name, ID: hex.EncodeToString(s.SpanId), Parent: hex.EncodeToString(s.ParentSpanId), Attrs: map[string]string{}}
	out.Kind = strings.ToLower(strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"))
	for _, kv := range s.Attributes {
		out.Attrs[kv.Key] = anyValue(kv.Value)
	}
	for _, e := range s.Events {
		for _, kv := range e.Attributes {
			out.Attrs["event."+e.Name+"."+kv.Key] = anyValue(kv.Value)
		}
	}
	if s.Status != nil && s.Status.Message != "" {
		out.Attrs["status.message"] = s.Status.Message
	}
	return out
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}
