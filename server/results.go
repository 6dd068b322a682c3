package server

import (
	"context"
	"math"

	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handleGetResult pages a stashed call_tool result (§7).
func (s *Server) handleGetResult(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, aerr := parseArgs(req.Params.Arguments)
	if aerr != nil {
		return argFailure(aerr), nil
	}
	id, aerr := args.requiredStr("id")
	if aerr != nil {
		return argFailure(aerr), nil
	}
	maxBytes, given, aerr := args.integer("maxBytes", 1, math.MaxInt32)
	if aerr != nil {
		return argFailure(aerr), nil
	}
	if !given {
		// The deployment-wide cap, not a connector's (§7).
		maxBytes = int64(s.opts.MaxInlineBytes)
	}
	offset, _, aerr := args.integer("offset", 0, math.MaxInt32)
	if aerr != nil {
		return argFailure(aerr), nil
	}
	page, err := s.opts.Stash.Get(ctx, id, int(offset), int(maxBytes))
	if err != nil {
		// An id the stash does not hold is the caller's argument (DECISIONS).
		return failureResult(gateway.Errorf(gateway.CodeInvalidArgs, false,
			"Unknown or expired result id %s", quote(jstext.Clamp(id, jstext.MaxEchoBytes)))), nil
	}
	return jsonResult(page), nil
}

// handleAuthorizeConnector answers operator_config or unavailable (§8;
// downstream OAuth is out of scope).
func (s *Server) handleAuthorizeConnector(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, aerr := parseArgs(req.Params.Arguments)
	if aerr != nil {
		return argFailure(aerr), nil
	}
	id, aerr := args.requiredStr("connector")
	if aerr != nil {
		return argFailure(aerr), nil
	}
	if _, aerr := args.boolean("force"); aerr != nil {
		return argFailure(aerr), nil
	}
	obj, gerr := s.opts.Gateway.Authorize(ctx, id)
	if gerr != nil {
		return failureResult(gerr), nil
	}
	return jsonResult(obj), nil
}
