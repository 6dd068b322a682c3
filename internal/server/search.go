package server

import (
	"context"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// handleSearchTools runs discovery with the top-level front door (grouped
// page, recovery keyed tool: "search_tools") over the cached catalogs, then
// measures the complete tool result — both copies, JSON escaping included —
// against the 256,000-byte bound (S3).
func (s *Server) handleSearchTools(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params, gerr := discovery.DecodeSearchArgs(req.Params.Arguments)
	if gerr != nil {
		return failureResult(gerr), nil
	}
	dctx, span := s.tracer.Start(ctx, "connecta.discovery", trace.WithAttributes(attribute.String("connecta.discovery.operation", "search")))
	page, gerr := s.opts.Discovery.Search(dctx, gateway.FrontDoorTopLevel, params)
	endDiscovery(span, gerr)
	if gerr != nil {
		return failureResult(gerr), nil
	}
	// The complete tool result is ours to measure (S3 at the top level):
	// discovery bounded the page, this bounds both copies as the SDK writes
	// them, with discovery's refusal.
	res := jsonResult(page)
	n, err := resultSize(res)
	if err != nil {
		return failureResult(gateway.Errorf(gateway.CodeResultProcessingFailed, false, "search result could not be serialized")), nil
	}
	if n > discovery.MaxResultBytes {
		return failureResult(discovery.SearchResultTooLarge(n)), nil
	}
	return res, nil
}
