package server

import (
	"context"
	"errors"

	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/gateway/discovery"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handleSearchTools runs discovery with the top-level front door (grouped
// page, recovery keyed tool: "search_tools") over the cached catalogs, then
// measures the complete tool result — both copies, JSON escaping included —
// against the 256,000-byte bound (S3).
func (s *Server) handleSearchTools(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params, err := discovery.DecodeSearchArgs(req.Params.Arguments)
	if err != nil {
		return discoveryFailure(err), nil
	}
	page, err := s.opts.Discovery.Search(ctx, gateway.FrontDoorTopLevel, params)
	if err != nil {
		return discoveryFailure(err), nil
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

// discoveryFailure renders a discovery error in the typed envelope; an
// error discovery did not type is result_processing_failed.
func discoveryFailure(err error) *mcp.CallToolResult {
	var gerr *gateway.Error
	if !errors.As(err, &gerr) {
		gerr = gateway.Errorf(gateway.CodeResultProcessingFailed, false, "search_tools failed: %s", err.Error())
	}
	return failureResult(gerr)
}
