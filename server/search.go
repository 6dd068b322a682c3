package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/gateway/discovery"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultTooLargeHint names the ways to ask for less (S3).
const resultTooLargeHint = "lower limit, drop fullDescriptions, or use includeSchemas: \"compact\""

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
	res := jsonResult(page)
	n, err := resultSize(res)
	if err != nil {
		return failureResult(gateway.Errorf(gateway.CodeResultProcessingFailed, false, "search result could not be serialized")), nil
	}
	if n > MaxDiscoveryResultBytes {
		return failureResult(gateway.Errorf(gateway.CodeResultTooLarge, false,
			"search_tools result is %d bytes, over the %d-byte limit; %s", n, MaxDiscoveryResultBytes, resultTooLargeHint)), nil
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

// MeasureTopLevel is the serialized size of the complete search_tools
// result for page: text and structuredContent, JSON escaping included, as the
// SDK will write it. Discovery takes it as Options.MeasureTopLevel.
func MeasureTopLevel(page []byte) int {
	n, err := resultSize(jsonResult(json.RawMessage(page)))
	if err != nil {
		return len(page) * 3 // unreachable for valid JSON; errs large
	}
	return n
}
