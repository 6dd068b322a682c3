package server

import (
	"context"
	"math"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handleGetResult pages a stashed call_tool result (docs/meta-tools.md §7).
func (s *Server) handleGetResult(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := parseArgs(req.Params.Arguments)
	if err != nil {
		return argFailure(err), nil
	}
	id, err := args.requiredStr("id")
	if err != nil {
		return argFailure(err), nil
	}
	maxBytes, given, err := args.integer("maxBytes", 1, math.MaxInt32)
	if err != nil {
		return argFailure(err), nil
	}
	if !given {
		// The deployment-wide cap, not a connector's (docs/meta-tools.md §7).
		maxBytes = int64(s.opts.MaxInlineBytes)
	}
	offset, _, err := args.integer("offset", 0, math.MaxInt32)
	if err != nil {
		return argFailure(err), nil
	}
	page, err := s.opts.Stash.Get(ctx, callerOf(ctx), id, int(offset), int(maxBytes))
	if isStoreDown(err) {
		s.log.WarnContext(ctx, "get_result: store unavailable", "error", err.Error())
		return failureResult(storeUnavailable(err)), nil
	}
	if err != nil {
		// An id the stash does not hold is the caller's argument (docs/DECISIONS.md).
		return failureResult(gateway.Errorf(gateway.CodeInvalidArgs, false,
			"Unknown or expired result id %s", quote(jstext.Clamp(id, jstext.MaxEchoBytes)))), nil
	}
	return jsonResult(page), nil
}

// handleAuthorizeConnector answers docs/meta-tools.md §8: for an OAuth connector the flow's
// status (package oauth), otherwise operator_config or unavailable.
func (s *Server) handleAuthorizeConnector(ctx context.Context, info *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := parseArgs(req.Params.Arguments)
	if err != nil {
		return argFailure(err), nil
	}
	id, err := args.requiredStr("connector")
	if err != nil {
		return argFailure(err), nil
	}
	force, err := args.boolean("force")
	if err != nil {
		return argFailure(err), nil
	}
	if !gateway.ViewFrom(ctx).ConnectorVisible(id) {
		// A connector the caller cannot reach does not exist for it.
		return failureResult(gateway.UnknownConnector(id)), nil
	}
	if s.opts.OAuth != nil && s.opts.OAuth.Has(id) {
		who := oauth.Caller{}
		if info != nil {
			who = oauth.Caller{Actor: info.actor, Who: info.who, Operator: info.operator}
		}
		st, oerr := s.opts.OAuth.Authorize(ctx, id, force, who)
		if oerr != nil {
			return failureResult(oauthError(oerr)), nil
		}
		return jsonResult(oauthStatus(st)), nil
	}
	obj, gerr := s.opts.Gateway.Authorize(ctx, id)
	if gerr != nil {
		return failureResult(gerr), nil
	}
	return jsonResult(obj), nil
}

// oauthStatus is the pinned answer {connector, recovery: "oauth", status,
// reason?, authorizationUrl?, expiresAt?, instructions?} (message when
// authorized, or when a step-up needs an operator).
func oauthStatus(st *oauth.Status) gateway.Object {
	obj := gateway.Object{{Key: "connector", Value: st.Connector}, {Key: "recovery", Value: "oauth"}, {Key: "status", Value: st.Status}}
	if st.Reason != "" { // "insufficient_scope": a step-up
		obj = append(obj, gateway.Field{Key: "reason", Value: st.Reason})
	}
	if st.AuthorizationURL != "" {
		obj = append(obj, gateway.Field{Key: "authorizationUrl", Value: st.AuthorizationURL})
	}
	if !st.ExpiresAt.IsZero() {
		obj = append(obj, gateway.Field{Key: "expiresAt", Value: st.ExpiresAt.UTC().Format(time.RFC3339)})
	}
	if st.Instructions != "" {
		obj = append(obj, gateway.Field{Key: "instructions", Value: st.Instructions})
	}
	if st.Message != "" {
		obj = append(obj, gateway.Field{Key: "message", Value: st.Message})
	}
	return obj
}

// oauthError is a failed flow start as a typed error: auth_required (the
// downstream or its authorization server cannot be used as configured) or
// unavailable (one of them, or the store, is down).
func oauthError(oe *oauth.Error) *gateway.Error {
	e := &gateway.Error{Code: gateway.Code(oe.Code), Message: oe.Message, Retryable: oe.Code == oauth.CodeUnavailable}
	var details gateway.Object
	if oe.Host != "" {
		details = append(details, gateway.Field{Key: "host", Value: oe.Host})
	}
	if oe.Component != "" {
		details = append(details, gateway.Field{Key: "component", Value: oe.Component})
	}
	if len(details) > 0 {
		e.Details = append(e.Details, gateway.Field{Key: "details", Value: details})
	}
	return e
}
