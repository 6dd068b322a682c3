package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Scope is one downstream request scope: one per execution or per
// top-level request. Within it each connector's catalog is loaded at most
// once (P4; failures are not kept, so a later call may load again), and
// Close aborts every call still in flight.
type Scope struct {
	g      *Gateway
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	catalogs map[string]*catalogEntry
	sess     scopedSessions // P4: per-scope downstream sessions (scoped.go)

	reg     *registry // the connector generation this scope runs on (reload.go)
	release sync.Once
}

// NewScope opens a request scope.
func (g *Gateway) NewScope() *Scope {
	ctx, cancel := context.WithCancel(g.life)
	return &Scope{g: g, ctx: ctx, cancel: cancel, catalogs: map[string]*catalogEntry{}, reg: g.hold()}
}

// Close aborts the scope's in-flight calls (they end `cancelled`), then
// closes the downstream sessions the scope opened (P4).
func (s *Scope) Close() {
	s.cancel()
	s.closeSessions()
	s.release.Do(func() { s.g.release(s.reg) })
}

func (s *Scope) catalog(ctx context.Context, c *connector, operation string) (*catalogEntry, *Error) {
	s.mu.Lock()
	e := s.catalogs[c.spec.ID]
	s.mu.Unlock()
	if e != nil {
		return e, nil
	}
	e, err := c.catalogRaw(ctx)
	if err != nil {
		return nil, c.catalogError(ctx, err, operation)
	}
	s.mu.Lock()
	if prev := s.catalogs[c.spec.ID]; prev != nil {
		e = prev // a concurrent load won; the scope sees one catalog
	} else {
		s.catalogs[c.spec.ID] = e
	}
	s.mu.Unlock()
	return e, nil
}

// CallRequest is one call as a front door hands it over.
type CallRequest struct {
	Address    string
	Args       json.RawMessage // a JSON object; nil/empty means {}
	Front      FrontDoor
	Source     string // "execute_code" or the tool name (call_tool, call_destructive_tool)
	AllowWrite bool   // call_destructive_tool: no read-only gate
	Timeout    time.Duration
	RequestID  string
	Actor      string

	// MaxInlineBytes is the front door's inline result cap (call_tool's
	// results.maxInlineBytes); 0 means no cap. A success whose inline size
	// exceeds it is truncated by the front door, so its activity event
	// carries friction result_too_large (V2); the outcome stays success.
	MaxInlineBytes int
	// InlineBytes measures a success the way the front door will inline it
	// (after its own projection and serialization); nil measures the S5
	// value's serialized bytes.
	InlineBytes func(*CallResult) int

	// Progress, when set, asks the downstream for progress notifications
	// and receives each one (its progress, total and message) while the call
	// runs, so a program's caller sees it live. Calls come from the connector's session, in order,
	// and every notification the downstream sent before its result is
	// delivered before Invoke returns.
	Progress func(Progress)
}

// CallResult is a call's outcome. On success Value is the S5-unwrapped value
// and Result the downstream result as the SDK decoded it (call_tool's mcp
// mode). Invoke also returns a CallResult beside a failure, with Value and
// Result nil, so callers can report attempts and timing.
type CallResult struct {
	Value  json.RawMessage
	Result *mcp.CallToolResult

	CatalogTime   time.Duration
	AdmissionTime time.Duration
	ConnectorTime time.Duration
	Duration      time.Duration
	Attempts      int   // downstream attempts: 0 or 1 (Y1)
	Tool          *Tool // the resolved tool, nil when the address did not resolve
}

// errCallDeadline is the cause recorded when the per-call deadline fires.
var errCallDeadline = errors.New("per-call deadline expired")

// callerContext forwards cancellation and deadline to the caller's context
// but carries none of its values (Value answers as context.Background
// does), so nothing the caller's context carries reaches a downstream
// session. In particular the go-sdk server
// stores the inbound request's protocol version in its handler context and
// the go-sdk client reads that same key when it sends, so a front-door
// handler's context would otherwise make downstream sessions (which live on
// after the call: the SDK keeps the connect context's values) speak the
// front-door client's protocol version (TestCallerContextValuesNeverReachDownstream).
type callerContext struct{ caller context.Context }

func (c callerContext) Deadline() (time.Time, bool) { return c.caller.Deadline() }
func (c callerContext) Done() <-chan struct{}       { return c.caller.Done() }
func (c callerContext) Err() error                  { return c.caller.Err() }
func (c callerContext) Value(any) any               { return nil }

// AfterFunc lets context.WithTimeout register on the caller's context
// instead of starting a goroutine per call to watch it.
func (c callerContext) AfterFunc(f func()) func() bool { return context.AfterFunc(c.caller, f) }

// Invoke runs one call end to end: resolve the address, load the catalog,
// the read-only gate (unless AllowWrite), argument validation, admission and
// exactly one downstream attempt, all inside one deadline; then unwrap,
// learn S9 and record exactly one payload-free activity event.
func (g *Gateway) Invoke(ctx context.Context, scope *Scope, req CallRequest) (*CallResult, *Error) {
	started := g.now()
	res := &CallResult{}
	connID, toolName, split := splitAddress(req.Address)
	var resolved *connector
	denied := false // the view hid the connector or tool
	finish := func(e *Error) (*CallResult, *Error) {
		res.Duration = g.now().Sub(started)
		if resolved != nil {
			e = resolved.red.redactError(e) // the downstream's words may echo what it was sent
		}
		if split { // V3: no interior dot records nothing
			g.record(req, telemetry.TraceID(ctx), connID, toolName, res, e, denied)
		}
		if denied {
			g.metrics.denied(connID)
		}
		if resolved != nil && res.Attempts > 0 {
			outcome := "success"
			if e != nil {
				outcome = string(e.Code)
			}
			g.metrics.call(connID, outcome, res.ConnectorTime)
		}
		if e != nil {
			res.Value, res.Result = nil, nil
		}
		return res, e
	}
	if !split {
		return finish(UnknownAddress(req.Front, req.Address))
	}
	reg := g.hold()
	if scope != nil {
		g.release(reg)
		reg = scope.reg
	} else {
		defer g.release(reg)
	}
	// A connector the caller's view hides is refused here, before any
	// catalog work, exactly as one that is not configured (view.go).
	view := ViewFrom(ctx)
	c := reg.lookup(connID)
	if c == nil {
		return finish(UnknownAddress(req.Front, req.Address))
	}
	if !view.ConnectorVisible(connID) {
		denied = true
		return finish(UnknownAddress(req.Front, req.Address))
	}
	c, hold := c.forCaller(ctx) // a per-caller connector: the calling actor's own (percaller.go)
	defer hold.release()
	resolved = c

	timeout := req.Timeout
	if timeout <= 0 {
		timeout = g.timeout
	}
	// The call runs under the caller's cancellation and deadline but none of
	// its values (callerContext), and also ends when the scope closes or the
	// gateway closes: Close must not wait on a hung downstream. Ending
	// callCtx aborts the downstream request itself: the SDK sends the
	// tools/call POST (and reads its JSON body or SSE stream) under the
	// call's context, so the HTTP request is torn down and the downstream
	// handler's request context ends (TestL2_CancelAbortsDownstreamRequest).
	callCtx, cancel := context.WithTimeoutCause(callerContext{caller: ctx}, timeout, errCallDeadline)
	defer cancel()
	// The one value carried across: the caller's span, so the catalog load
	// and the downstream call are its children (and the downstream hears
	// of the trace through traceparent, not through the SDK's context).
	callCtx = trace.ContextWithSpan(callCtx, trace.SpanFromContext(ctx))
	defer context.AfterFunc(g.life, cancel)()
	if scope != nil {
		defer context.AfterFunc(scope.ctx, cancel)()
	}
	ctxFailure := func() *Error {
		if !errors.Is(callCtx.Err(), context.DeadlineExceeded) {
			return cancelledError()
		}
		if context.Cause(callCtx) == errCallDeadline {
			return timeoutError(timeout)
		}
		// The caller's own, earlier deadline: report the time actually spent.
		return timeoutError(g.now().Sub(started))
	}

	// Catalog.
	t0 := g.now()
	var entry *catalogEntry
	var gerr *Error
	if scope != nil {
		entry, gerr = scope.catalog(callCtx, c, req.Address)
	} else {
		entry, gerr = c.catalog(callCtx, req.Address)
	}
	res.CatalogTime = g.now().Sub(t0)
	if gerr != nil {
		if callCtx.Err() != nil {
			return finish(ctxFailure())
		}
		return finish(gerr)
	}
	// A tool the view hides took the same catalog path as an unknown tool
	// and fails the same way.
	t, ok := entry.lookup(toolName)
	if !ok {
		return finish(UnknownTool(req.Front, connID, toolName))
	}
	if !view.ToolVisible(connID, t.Address(), g.ReadOnly(t)) {
		denied = true
		return finish(UnknownTool(req.Front, connID, toolName))
	}
	res.Tool = t

	// Arguments: one JSON object, compacted (E4 measures the serialization).
	args, argErr := normalizeArgs(req.Args)
	if !req.AllowWrite && !g.ReadOnly(t) {
		return finish(destructiveRefusal(t, args, argErr == nil))
	}
	if argErr != nil {
		return finish(invalidArgs(req.Front, t, []validate.Finding{{Path: "/", Code: "type", Expected: "object"}}, 1))
	}
	if g.opts.Validator != nil && len(t.InputSchema) > 0 {
		r := entry.inputSchema(t, g.opts.Validator).Evaluate(args)
		if r.Passthrough != validate.ReasonNone {
			g.validationPassedThrough(ctx, connID, toolName, r.Passthrough)
		}
		if len(r.Findings) > 0 {
			return finish(invalidArgs(req.Front, t, r.Findings, r.Total))
		}
	}

	// Call admission, immediately before the attempt and inside the same
	// deadline: a refusal is never sent downstream.
	t1 := g.now()
	release, refusal, err := c.gate.admit(callCtx, callerPartition(req))
	res.AdmissionTime = g.now().Sub(t1)
	switch {
	case err != nil:
		return finish(ctxFailure())
	case refusal != nil:
		return finish(refusal)
	}
	defer release() // also on a panic; released right after the attempt below

	// Exactly one downstream attempt (Y1).
	res.Attempts = 1
	ex := &rawmcp.Exchange{}
	t2 := g.now()
	spanCtx, span := c.startCallSpan(callCtx, toolName)
	raw, result, err := c.call(withProgress(rawmcp.WithExchange(spanCtx, ex), req.Progress), scope, toolName, args)
	release() // the permit covers the attempt only, not what is done with its result
	res.ConnectorTime = g.now().Sub(t2)
	endCallSpan(span, ex.Snapshot(), result, err)
	if err != nil {
		// The gateway or scope closing ends callCtx through AfterFunc, on
		// another goroutine: a failure the close caused may be seen first.
		if callCtx.Err() != nil || g.life.Err() != nil || (scope != nil && scope.ctx.Err() != nil) {
			e := ctxFailure()
			if e.Code == CodeTimeout {
				c.recordFailure(CodeTimeout)
			}
			return finish(e)
		}
		f := c.classify(callCtx, err, ex.Snapshot())
		if f.code != CodeCancelled {
			c.recordFailure(f.code)
		}
		return finish(c.callError(f, t.Address(), timeout))
	}
	if result.NeedsInput() {
		c.recordFailure(CodeInputRequiredUnsupported)
		return finish(&Error{Code: CodeInputRequiredUnsupported, Message: "Tool " + quote(t.Address()) + " asked for mid-call input, which connecta does not support.", Retryable: false})
	}
	parsed := parseResult(raw)
	if result.IsError || parsed.isError {
		c.recordFailure(CodeConnectorCallFailed)
		text := c.boundText(parsed.errorText())
		return finish(&Error{Code: CodeConnectorCallFailed, Message: text, Retryable: looksRetryable(text)})
	}
	c.recordSuccess()
	res.Value = parsed.unwrap(raw)
	res.Result = result
	if g.ReadOnly(t) {
		g.learn(t, res.Value)
	}
	return finish(nil)
}

// learn feeds S9; an observation failure never changes a successful call.
func (g *Gateway) learn(t *Tool, value json.RawMessage) {
	if g.opts.Observer == nil || len(t.OutputSchema) > 0 || len(t.Definition) == 0 {
		return
	}
	g.opts.Observer.Learn(t.Definition, value) // recovers, logs and counts its own panics
}

// record writes the call's one activity event (V1–V3): canonical address
// where the tool resolved, otherwise the address as written.
func (g *Gateway) record(req CallRequest, traceID, connID, toolName string, res *CallResult, e *Error, denied bool) {
	if g.opts.Activity == nil {
		return
	}
	ev := activity.Event{
		RequestID:   req.RequestID,
		Actor:       req.Actor,
		ConnectorID: connID,
		ToolName:    toolName,
		Address:     req.Address,
		Source:      req.Source,
		Outcome:     activity.OutcomeSuccess,
		DurationMs:  res.Duration.Milliseconds(),
		Attempts:    max(1, res.Attempts),
		TraceID:     traceID,
	}
	if res.Tool != nil {
		ev.ConnectorID, ev.ToolName, ev.Address = res.Tool.ConnectorID, res.Tool.Name, res.Tool.Address()
	}
	if e != nil {
		switch e.Code {
		case CodeTimeout:
			ev.Outcome = activity.OutcomeTimeout
		case CodeCancelled:
			ev.Outcome = activity.OutcomeCancelled
		default:
			ev.Outcome = activity.OutcomeError
		}
		ev.ErrorCode = string(e.Code)
		ev.Friction = activity.Friction(string(e.Code))
		if denied {
			// Operators see the denial; the caller's own view of this
			// event is the unknown-address one (activity.Event.AsSeenBy).
			ev.Outcome = activity.OutcomeDenied
		}
	} else if req.MaxInlineBytes > 0 && inlineBytes(req, res) > req.MaxInlineBytes {
		ev.Friction = activity.Friction(resultTooLarge)
	}
	g.opts.Activity.Record(ev)
}

// resultTooLarge is the V2 friction class of a truncated call_tool success;
// it is not an error code the gateway raises.
const resultTooLarge = "result_too_large"

func inlineBytes(req CallRequest, res *CallResult) int {
	if req.InlineBytes != nil {
		return req.InlineBytes(res)
	}
	return len(res.Value)
}

// splitAddress splits at the FIRST dot; ok is false unless both sides are
// non-empty (an interior dot).
func splitAddress(address string) (connID, toolName string, ok bool) {
	i := strings.IndexByte(address, '.')
	if i <= 0 || i == len(address)-1 {
		return "", "", false
	}
	return address[:i], address[i+1:], true
}

// normalizeArgs returns args as a compact JSON object ({} when absent); a
// value that is not a JSON object is an error.
func normalizeArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, errors.New("arguments are not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, err
	}
	return json.RawMessage(buf.Bytes()), nil
}

func rawOrEmpty(args []byte) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

func quote(s string) string { return jstext.Quote(s) }

// call makes the one tools/call attempt. A 404 session expiry means the
// downstream never processed the request: reconnect once and send it then.
func (c *connector) call(ctx context.Context, scope *Scope, name string, args json.RawMessage) ([]byte, *mcp.CallToolResult, error) {
	// P4: an HTTP connector's call runs on its scope's own session unless
	// the operator declared the downstream stateless (scoped.go).
	session, drop := c.session, c.drop
	if scope != nil && c.perScope() {
		session = func(ctx context.Context) (*liveSession, error) { return scope.session(ctx, c) }
		drop = func(ls *liveSession) { scope.forget(c, ls) }
	}
	// A connection a catalog refresh retired mid-way (catalogSession) takes
	// no new call: the next session is the refresh's.
	inUse := func() (*liveSession, error) {
		for {
			ls, err := session(ctx)
			if err != nil || ls.use() {
				return ls, err
			}
		}
	}
	ls, err := inUse()
	if err != nil {
		return nil, nil, err
	}
	defer func() { ls.done(c.g) }()
	meta, token, endProgress := c.g.progressMeta(ctx)
	meta = traceMeta(ctx, meta) // SEP-414: the downstream's parent is this call's span
	if ir := ls.cs.InitializeResult(); ir != nil {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("mcp.protocol.version", ir.ProtocolVersion))
	}
	seen := 0
	defer func() { endProgress(seen) }()
	for attempt := 0; ; attempt++ {
		// A downstream asking for input ends the call at once (OnInput):
		// connecta has no one to ask.
		attemptCtx, stop := context.WithCancel(ctx)
		slot := &rawmcp.Slot{ProgressToken: token, OnInput: stop}
		result, err := ls.cs.CallTool(rawmcp.WithSlot(attemptCtx, slot), &mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
		stop()
		raw, _ := slot.Result()
		seen += slot.ProgressSeen()
		slot.Release()
		if m := slot.InputRequested(); m != "" && raw == nil {
			return nil, nil, &failure{code: CodeInputRequiredUnsupported, message: "it sent " + m}
		}
		if err != nil && attempt == 0 && errors.Is(err, mcp.ErrSessionMissing) {
			drop(ls)
			if ex := rawmcp.ExchangeFrom(ctx); ex != nil {
				ex.Reset()
			}
			ls.done(c.g)
			ls = nil // released: the deferred done has nothing left to end
			if ls, err = inUse(); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			if !isRPCError(err) && ctx.Err() == nil {
				drop(ls)
			}
			return nil, nil, err
		}
		if raw == nil {
			if raw, err = json.Marshal(result); err != nil {
				return nil, nil, err
			}
		}
		return raw, result, nil
	}
}

// parsedResult is the part of a raw CallToolResult S5 reads.
type parsedResult struct {
	structured json.RawMessage
	texts      []string
	allText    bool
	isError    bool
}

func parseResult(raw []byte) parsedResult {
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
	}
	_ = json.Unmarshal(raw, &r)
	p := parsedResult{structured: nonNull(r.StructuredContent), isError: r.IsError, allText: len(r.Content) > 0}
	for _, block := range r.Content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(block, &b) != nil || b.Type != "text" {
			p.allText = false
			continue
		}
		p.texts = append(p.texts, b.Text)
	}
	return p
}

func (p parsedResult) errorText() string {
	if t := strings.Join(p.texts, "\n"); t != "" {
		return t
	}
	return "Downstream tool call failed"
}

// unwrap is S5: structuredContent when present, else all-text content
// joined with "\n" and JSON-parsed when it parses (else the raw text), else
// the raw result. Values pass through as exact (compacted) JSON.
func (p parsedResult) unwrap(raw []byte) json.RawMessage {
	if p.structured != nil {
		return compactJSON(p.structured)
	}
	if p.allText {
		text := strings.Join(p.texts, "\n")
		if trimmed := strings.TrimSpace(text); trimmed != "" && json.Valid([]byte(trimmed)) {
			return compactJSON([]byte(trimmed))
		}
		return []byte(jstext.Quote(text))
	}
	return compactJSON(raw)
}

func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return append(json.RawMessage(nil), b...)
	}
	return json.RawMessage(buf.Bytes())
}
