package server

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/telemetry"
)

// startRequestSpan starts the server span of one MCP request, named as the
// OpenTelemetry MCP conventions name it: "{method} {tool}" for a tools/call
// ("tools/call execute_code"), "{method}" for every other method
// ("tools/list", "initialize"). It runs only once the caller is
// authenticated — the MCP server is reached through authenticated — so only
// an authenticated caller's trace context (params._meta's when valid, else
// the traceparent header; a malformed one is ignored) parents it, and it
// starts when the request arrived.
func (s *Server) startRequestSpan(ctx context.Context, info *requestInfo, method, tool string, meta map[string]any) (context.Context, trace.Span) {
	if s.opts.Tracer == nil { // tracing off: no span, no context taken in
		return ctx, trace.SpanFromContext(ctx)
	}
	var headers propagation.TextMapCarrier
	if info.header != nil {
		headers = propagation.HeaderCarrier(info.header)
	}
	parent := telemetry.Incoming(ctx, headers, meta)
	start := info.start
	if start.IsZero() { // stdio: no arrival time of its own
		start = time.Now()
	}
	name := method
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", method),
		attribute.String("connecta.actor", info.actor),
	}
	if tool != "" {
		name += " " + tool
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool), attribute.String("gen_ai.operation.name", "execute_tool"))
	}
	if info.id != "" {
		attrs = append(attrs, attribute.String("connecta.request_id", info.id))
	}
	if info.rpcID != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", info.rpcID))
	}
	ctx, span := s.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	info.traceID = telemetry.TraceID(ctx)
	return ctx, span
}

// requestSpans is the receiving middleware that gives every MCP request
// but tools/call (runTool starts that one: it knows the tool and the
// outcome) its server span. Notifications have none: they are not requests,
// and notifications/cancelled is answered before the SDK (rpcRouted). Only
// methods the SDK serves reach a middleware, so the span names are a fixed
// set whatever a client sends.
func (s *Server) requestSpans(next mcp.MethodHandler) mcp.MethodHandler {
	if s.opts.Tracer == nil {
		return next
	}
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		info := infoFrom(ctx)
		if info == nil || method == "tools/call" || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		var meta map[string]any
		if p := req.GetParams(); p != nil && !isNilParams(p) {
			meta = p.GetMeta()
		}
		ctx, span := s.startRequestSpan(ctx, info, method, "", meta)
		res, err := next(ctx, method, req)
		outcome := "success"
		if err != nil {
			outcome = "protocol_error"
		}
		endRequestSpan(span, outcome)
		return res, err
	}
}

// isNilParams: a request without params holds a typed nil (GetMeta on it
// would dereference nil).
func isNilParams(p mcp.Params) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func endRequestSpan(span trace.Span, outcome string) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("connecta.outcome", outcome))
	if outcome != "success" {
		span.SetAttributes(attribute.String("error.type", outcome))
		span.SetStatus(codes.Error, outcome)
	}
}

func endDiscovery(span trace.Span, gerr *gateway.Error) {
	if gerr != nil {
		span.SetAttributes(attribute.String("connecta.outcome", string(gerr.Code)))
		span.SetStatus(codes.Error, string(gerr.Code))
	}
	span.End()
}

// spanned gives each request to next (the console, the OAuth callback) a
// server span of its own: a new root, whatever traceparent the browser
// sent (nobody authenticated it here). Payload-free: the method, the route
// name and the status, never the path's parameters or the query.
func (s *Server) spanned(name string, next http.Handler) http.Handler {
	if s.opts.Tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := s.tracer.Start(r.Context(), name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	})
}
