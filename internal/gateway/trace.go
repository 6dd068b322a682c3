package gateway

import (
	"context"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/telemetry"
)

// The downstream tools/call span follows the OpenTelemetry MCP conventions
// (client side: "tools/call {tool}", mcp.method.name, gen_ai.tool.name);
// connecta's own attributes are connecta.*. Payload-free: names, codes and
// the HTTP status, never arguments or results.
func (c *connector) startCallSpan(ctx context.Context, tool string) (context.Context, trace.Span) {
	return c.g.tracer.Start(ctx, "tools/call "+tool,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("connecta.connector", c.spec.ID),
		))
}

func endCallSpan(span trace.Span, ex rawmcp.ExchangeSnapshot, result *mcp.CallToolResult, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if ex.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", ex.Status))
	}
	if ex.RetryAfter != "" {
		if secs, perr := strconv.Atoi(ex.RetryAfter); perr == nil {
			span.SetAttributes(attribute.Int("connecta.retry_after_s", secs))
		}
	}
	switch {
	case err != nil:
		span.SetAttributes(attribute.String("error.type", "call_failed"))
		span.SetStatus(codes.Error, "call_failed")
	case result != nil && result.IsError:
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
}

// traceMeta adds ctx's trace context to a downstream request's _meta
// (SEP-414) beside what it already carries; meta as is without a span.
func traceMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	out := make(mcp.Meta, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	telemetry.Inject(ctx, telemetry.MetaCarrier(out))
	return out
}
