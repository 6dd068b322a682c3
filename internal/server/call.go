package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// truncationHint is the get_result notice hint (docs/meta-tools.md §6).
const truncationHint = "use get_result {id, offset} to page, or re-call with fields to select less"

func (s *Server) handleCallTool(ctx context.Context, info *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.handleCall(ctx, info, req, false)
}

func (s *Server) handleCallDestructiveTool(ctx context.Context, info *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return s.handleCall(ctx, info, req, true)
}

type callArgs struct {
	address     string
	args        json.RawMessage
	fields      []string
	valueMode   bool
	timeout     time.Duration
	diagnostics bool
}

func parseCallArgs(raw json.RawMessage, destructive bool, defaultTimeout time.Duration) (callArgs, error) {
	var c callArgs
	a, err := parseArgs(raw)
	if err != nil {
		return c, err
	}
	if c.address, err = a.requiredStr("address"); err != nil {
		return c, err
	}
	if c.args, err = a.object("args"); err != nil {
		return c, err
	}
	if c.args == nil {
		c.args = json.RawMessage("{}") // omitted args are {} (S5)
	}
	if c.fields, err = a.strings("fields"); err != nil {
		return c, err
	}
	mode, _, err := a.enum("resultMode", "mcp", "value")
	if err != nil {
		return c, err
	}
	c.valueMode = mode == "value"
	ms, given, err := a.integer("timeoutMs", 1, math.MaxInt32)
	if err != nil {
		return c, err
	}
	c.timeout = defaultTimeout
	if given {
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	if c.diagnostics, err = a.boolean("diagnostics"); err != nil {
		return c, err
	}
	if destructive {
		// reason is validated and then dropped: it is never forwarded (docs/meta-tools.md §6).
		reason, _, err := a.str("reason")
		if err != nil {
			return c, err
		}
		if jstext.Len(reason) > MaxReasonChars {
			return c, argErrorf("Invalid arguments: %q must be at most %d characters", "reason", MaxReasonChars)
		}
	}
	return c, nil
}

// handleCall is call_tool / call_destructive_tool (docs/meta-tools.md §6): one gateway scope,
// one Invoke with source = the tool name, then the result envelope.
func (s *Server) handleCall(ctx context.Context, info *requestInfo, req *mcp.CallToolRequest, destructive bool) (*mcp.CallToolResult, error) {
	set := s.settingsNow()
	c, err := parseCallArgs(req.Params.Arguments, destructive, set.hostCallTimeout)
	if err != nil {
		return s.callFailure(invalidArgs(err), c, 0, 0, timing{}), nil
	}
	if c.timeout > s.writeTimeout()-set.requests.QueueTimeout-writeGrace && info.extendWrite != nil {
		info.extendWrite(c.timeout)
	}
	source := ToolCallTool
	if destructive {
		source = ToolCallDestructiveTool
	}
	scope := s.opts.Gateway.NewScope()
	defer scope.Close()
	start := time.Now()
	// The gateway measures a success the way callSuccess will inline it, so
	// the call's activity event carries result_too_large exactly when the
	// result is truncated (V2); the shaped result is reused below.
	var shaped *inlineResult
	var progress func(gateway.Progress)
	if st := streamFrom(ctx); st != nil && st.token != nil {
		progress = st.forward // as the downstream sent it, as its result is
	}
	res, gerr := s.opts.Gateway.Invoke(ctx, scope, gateway.CallRequest{
		Progress:       progress,
		Address:        c.address,
		Args:           c.args,
		Front:          gateway.FrontDoorTopLevel,
		Source:         source,
		AllowWrite:     destructive,
		Timeout:        c.timeout,
		RequestID:      info.id,
		Actor:          info.actor,
		MaxInlineBytes: s.opts.MaxInlineBytes,
		InlineBytes: func(r *gateway.CallResult) int {
			shaped = c.shape(r)
			return shaped.size()
		},
	})
	callDone := time.Now()
	if gerr != nil {
		attempts := attemptsFor(gerr)
		t := timing{TotalMs: callDone.Sub(start).Milliseconds()}
		if res != nil {
			attempts = res.Attempts
			t = successTiming(res, start, callDone)
		}
		return s.callFailure(gerr, c, callDone.Sub(start), attempts, t), nil
	}
	if shaped == nil { // the gateway records no activity: nothing measured yet
		shaped = c.shape(res)
	}
	out, err := s.callSuccess(ctx, res, c, shaped, start, callDone)
	if isStoreDown(err) {
		s.log.WarnContext(ctx, "call_tool: the result needed the stash and the store is unavailable", "error", err.Error())
		return s.callFailure(storeUnavailable(err), c, time.Since(start), res.Attempts, successTiming(res, start, callDone)), nil
	}
	if err != nil {
		e := gateway.Errorf(gateway.CodeResultProcessingFailed, false, "Result processing failed: %v", err)
		return s.callFailure(e, c, time.Since(start), res.Attempts, successTiming(res, start, callDone)), nil
	}
	return out, nil
}

// timing is docs/meta-tools.md §6's diagnostics block, in contract key order.
type timing struct {
	CatalogMs          int64 `json:"catalogMs"`
	AdmissionMs        int64 `json:"admissionMs"`
	ConnectorMs        int64 `json:"connectorMs"`
	BackoffMs          int64 `json:"backoffMs"`
	ResultProcessingMs int64 `json:"resultProcessingMs"`
	TotalMs            int64 `json:"totalMs"`
}

// attemptsFor is 0 for refusals connecta makes before dispatch, else 1
// (0.24.4 makes exactly one attempt); used only when Invoke returned no
// CallResult.
func attemptsFor(e *gateway.Error) int {
	switch e.Code {
	case gateway.CodeUnknownAddress, gateway.CodeUnknownTool, gateway.CodeDestructiveNeedsApproval,
		gateway.CodeInvalidArgs, gateway.CodeCatalogLookupFailed, gateway.CodeBudgetExceeded:
		return 0
	}
	return 1
}

// callFailure renders a failed call in the one typed envelope, with the
// call's duration and attempts (and timing on request).
func (s *Server) callFailure(e *gateway.Error, c callArgs, d time.Duration, attempts int, t timing) *mcp.CallToolResult {
	extra := []gateway.Field{
		{Key: "durationMs", Value: d.Milliseconds()},
		{Key: "attempts", Value: attempts},
	}
	if c.diagnostics {
		extra = append(extra, gateway.Field{Key: "timing", Value: t})
	}
	return failureResult(e, extra...)
}

// inlineResult is a success shaped for call_tool before the inline cap:
// value mode's (projected) data, or MCP mode's (projected) content and its
// compact serialization (nil when it cannot be serialized: it then passes
// through whole).
type inlineResult struct {
	valueMode  bool
	data       json.RawMessage
	content    []mcp.Content
	serialized []byte
	err        error // projection failed: result_processing_failed
}

// shape applies result mode and fields to a success (docs/meta-tools.md §6).
func (c callArgs) shape(res *gateway.CallResult) *inlineResult {
	if c.valueMode {
		data := res.Value
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		if len(c.fields) > 0 {
			p, err := project(data, c.fields)
			if err != nil {
				return &inlineResult{valueMode: true, err: err}
			}
			data = p
		}
		return &inlineResult{valueMode: true, data: data}
	}
	// MCP mode: content passes through, structuredContent is dropped.
	var content []mcp.Content
	if res.Result != nil {
		content = res.Result.Content
	} else {
		v := res.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		content = []mcp.Content{&mcp.TextContent{Text: string(v)}}
	}
	if content == nil {
		content = []mcp.Content{}
	}
	if len(c.fields) > 0 {
		content = projectContent(content, c.fields)
	}
	serialized, err := marshalCompact(content)
	if err != nil {
		serialized = nil
	}
	return &inlineResult{content: content, serialized: serialized}
}

// size is what the inline cap is compared with (0 when nothing is inlined
// by size: a failed projection, or content that cannot be serialized).
func (r *inlineResult) size() int {
	if r.valueMode {
		return len(r.data)
	}
	return len(r.serialized)
}

func (s *Server) callSuccess(ctx context.Context, res *gateway.CallResult, c callArgs, in *inlineResult, start, callDone time.Time) (*mcp.CallToolResult, error) {
	limit := s.opts.MaxInlineBytes
	if in.err != nil {
		return nil, in.err
	}
	if in.valueMode {
		data := in.data
		if len(data) > limit {
			notice, err := s.stashNotice(ctx, data)
			if err != nil {
				return nil, err
			}
			data = notice
		}
		fields := []gateway.Field{
			{Key: "ok", Value: true},
			{Key: "data", Value: data},
			{Key: "durationMs", Value: time.Since(start).Milliseconds()},
			{Key: "attempts", Value: max(res.Attempts, 1)},
		}
		if c.diagnostics {
			fields = append(fields, gateway.Field{Key: "timing", Value: successTiming(res, start, callDone)})
		}
		b, err := gateway.Object(fields).MarshalJSON()
		if err != nil {
			return nil, err
		}
		return rawJSONResult(b, false), nil
	}

	content, serialized := in.content, in.serialized
	if serialized == nil {
		// Content that cannot be serialized passes through (docs/meta-tools.md §6).
		return &mcp.CallToolResult{Content: content}, nil
	}
	if len(serialized) <= limit {
		return &mcp.CallToolResult{Content: content}, nil
	}
	notice, err := s.stashNotice(ctx, serialized)
	if err != nil {
		return nil, err
	}
	allText := true
	for _, block := range content {
		if _, ok := block.(*mcp.TextContent); !ok {
			allText = false
		}
	}
	if allText {
		head := headBytes(serialized, limit)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(head) + "\n" + string(notice)}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(notice)}}}, nil
}

func successTiming(res *gateway.CallResult, start, callDone time.Time) timing {
	return timing{
		CatalogMs:          res.CatalogTime.Milliseconds(),
		AdmissionMs:        res.AdmissionTime.Milliseconds(),
		ConnectorMs:        res.ConnectorTime.Milliseconds(),
		ResultProcessingMs: time.Since(callDone).Milliseconds(),
		TotalMs:            time.Since(start).Milliseconds(),
	}
}

// stashNotice stores the full text and returns the truncation notice (docs/meta-tools.md §6).
func (s *Server) stashNotice(ctx context.Context, full []byte) (json.RawMessage, error) {
	if !utf8.Valid(full) {
		full = bytes.ToValidUTF8(full, []byte("\uFFFD"))
	}
	id, err := s.opts.Stash.Put(ctx, callerOf(ctx), string(full))
	if err != nil {
		return nil, fmt.Errorf("stash: %w", err)
	}
	return gateway.Object{
		{Key: "truncated", Value: true},
		{Key: "resultId", Value: id},
		{Key: "totalBytes", Value: len(full)},
		{Key: "hint", Value: truncationHint},
		{Key: "nextAction", Value: gateway.Object{
			{Key: "tool", Value: ToolGetResult},
			{Key: "arguments", Value: gateway.Object{{Key: "id", Value: id}, {Key: "offset", Value: 0}}},
		}},
	}.MarshalJSON()
}

// projectContent applies fields to each text block that holds JSON.
func projectContent(content []mcp.Content, fields []string) []mcp.Content {
	out := make([]mcp.Content, len(content))
	for i, block := range content {
		out[i] = block
		tc, ok := block.(*mcp.TextContent)
		if !ok || !json.Valid([]byte(tc.Text)) {
			continue
		}
		p, err := project(json.RawMessage(tc.Text), fields)
		if err != nil {
			continue
		}
		cp := *tc
		cp.Text = string(p)
		out[i] = &cp
	}
	return out
}
