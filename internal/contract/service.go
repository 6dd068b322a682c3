package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/required"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"github.com/connecta-dev/connecta/internal/telemetry"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// ToolName is the code-mode tool.
const ToolName = "execute_code"

// ProviderName is the one guest global (P2).
const ProviderName = "connecta"

// providerFunctions are exactly the provider's own members (P2, X8).
var providerFunctions = []string{"search", "describe", "call", "emit"}

// Gateway is what a program's calls reach: gateway core (*gateway.Gateway).
type Gateway interface {
	Connectors() []gateway.ConnectorInfo
	NewScope() *gateway.Scope
	Invoke(ctx context.Context, scope *gateway.Scope, req gateway.CallRequest) (*gateway.CallResult, *gateway.Error)
}

// Discovery serves connecta.search and connecta.describe
// (*discovery.Service).
type Discovery interface {
	Search(ctx context.Context, front gateway.FrontDoor, p discovery.SearchParams) (json.RawMessage, *gateway.Error)
	Describe(ctx context.Context, front gateway.FrontDoor, p discovery.DescribeParams) (json.RawMessage, *gateway.Error)
}

// Options configure a Service. The numeric bounds are required (package
// config holds their defaults); New refuses a zero.
type Options struct {
	Gateway   Gateway
	Discovery Discovery
	Pool      *supervisor.Pool

	MaxHostCalls     int           // execute.maxHostCalls (L4)
	HostCallTimeout  time.Duration // execute.hostCallTimeoutMs (L4)
	MaxEmittedBytes  int           // execute.maxEmittedBytes (M5)
	MaxEmittedBlocks int           // execute.maxEmittedBlocks (M5)
	MaxCodeBytes     int           // code size bound, checked before admission

	// Identity names the request and the actor for activity; optional.
	Identity func(ctx context.Context) (requestID, actor string)
	// Notifier returns where a running program's console entries and its
	// calls' downstream progress are streamed for the request ctx belongs
	// to; nil (or a nil result) streams nothing.
	Notifier func(ctx context.Context) Notifier
	Logger   *slog.Logger
	// Now is the clock for diagnostics; nil is time.Now.
	Now func() time.Time
	// Tracer receives the admission, execution and host-call spans; nil
	// is the no-op provider.
	Tracer trace.TracerProvider
}

// Notifier shows a caller what its program does while it runs. Calls come
// in order, on the run's goroutines, and must not block for long.
type Notifier interface {
	// ConsoleEntry is one console entry the child accepted under its caps
	// (R5, X4), as the program wrote it (secret-redacted); method is the
	// console method (log, info, warn, error, debug).
	ConsoleEntry(method, text string)
	// Progress is one progress notification a downstream sent for a host
	// call: no downstream text passes the program.
	Progress()
}

// Service is execute_code: the host side of the guest API contract.
type Service struct {
	opts   Options
	tool   *mcp.Tool
	tracer trace.Tracer
}

// New validates opts and builds the tool definition once (its connector
// inventory is configuration, not catalog: nothing is loaded for it).
func New(opts Options) (*Service, error) {
	if opts.Gateway == nil || opts.Discovery == nil || opts.Pool == nil {
		return nil, errors.New("contract: Gateway, Discovery and Pool are required")
	}
	if err := requireOptions("contract", []requiredOption{
		{opts.MaxHostCalls <= 0, "MaxHostCalls (execute.maxHostCalls)"},
		{opts.HostCallTimeout <= 0, "HostCallTimeout (execute.hostCallTimeoutMs)"},
		{opts.MaxEmittedBytes <= 0, "MaxEmittedBytes (execute.maxEmittedBytes)"},
		{opts.MaxEmittedBlocks <= 0, "MaxEmittedBlocks (execute.maxEmittedBlocks)"},
		{opts.MaxCodeBytes <= 0, "MaxCodeBytes (config.ExecuteMaxCodeBytes)"},
	}); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Service{opts: opts, tracer: telemetry.Tracer(opts.Tracer)}
	s.tool = &mcp.Tool{
		Name:        ToolName,
		Title:       "Execute code",
		Description: Description(opts.MaxHostCalls, opts.HostCallTimeout, opts.Gateway.Connectors()),
		InputSchema: json.RawMessage(fmt.Sprintf(inputSchemaFormat, opts.MaxCodeBytes)),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(true)},
	}
	return s, nil
}

func ptr[T any](v T) *T { return &v }

// Tool is execute_code's definition.
func (s *Service) Tool() *mcp.Tool { return s.tool }

// ToolFor is execute_code's definition for a caller whose view shows only
// connectors: the same tool with their inventory (A2), as a server
// configured with just them would describe it.
func (s *Service) ToolFor(connectors []gateway.ConnectorInfo) *mcp.Tool {
	t := *s.tool
	t.Description = Description(s.opts.MaxHostCalls, s.opts.HostCallTimeout, connectors)
	return &t
}

// inputSchemaFormat takes the configured code bound (%d).
const inputSchemaFormat = `{"type":"object","properties":{"code":{"type":"string","description":"One JavaScript async arrow function, e.g. async () => { const page = await connecta.search({ query: \"issues\" }); return page.tools.map((t) => t.address); }. At most %d UTF-8 bytes."},"diagnostics":{"type":"boolean","description":"Add payload-free timing and per-operation aggregates to the response."}},"required":["code"]}`

// input is execute_code's decoded arguments. Unknown keys are ignored.
type input struct {
	code        string
	diagnostics bool
}

func (s *Service) decodeInput(raw json.RawMessage) (input, *gateway.Error) {
	var in input
	var fields map[string]json.RawMessage
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return in, gateway.Errorf(gateway.CodeInvalidArgs, false, "execute_code takes an object: { code: \"async () => …\", diagnostics?: boolean }.")
	}
	// A JSON null unmarshals into a string without error; it is no program.
	c, ok := fields["code"]
	if !ok || string(c) == "null" || json.Unmarshal(c, &in.code) != nil {
		return in, gateway.Errorf(gateway.CodeInvalidArgs, false, "code must be a string holding one JavaScript async arrow function, e.g. async () => 1 + 1.")
	}
	if n := len(in.code); n > s.opts.MaxCodeBytes {
		return in, gateway.Errorf(gateway.CodeInvalidArgs, false,
			"code is %d UTF-8 bytes, over the %d-byte limit. Send a shorter program.", n, s.opts.MaxCodeBytes)
	}
	if d, ok := fields["diagnostics"]; ok && string(d) != "null" {
		if json.Unmarshal(d, &in.diagnostics) != nil {
			return in, gateway.Errorf(gateway.CodeInvalidArgs, false, "diagnostics must be a boolean.")
		}
	}
	return in, nil
}

// Handle runs one execute_code call. Protocol-level errors are never
// returned for a program's outcome: every failure is a tool result.
func (s *Service) Handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	now := s.opts.Now
	start := now()
	var raw json.RawMessage
	if req != nil && req.Params != nil {
		raw = req.Params.Arguments
	}
	in, gerr := s.decodeInput(raw)
	if gerr != nil {
		return (&reply{errObject: typedObject(gerr)}).toolResult(), nil
	}
	var diag *diagnostics
	if in.diagnostics {
		diag = &diagnostics{}
	}
	finish := func(r *reply, admitted, runStart, runEnd time.Time, emitted, emittedBytes int) *mcp.CallToolResult {
		if diag != nil {
			diag.totalMs = ms(now().Sub(start))
			if !admitted.IsZero() {
				diag.admissionMs = ms(admitted.Sub(start))
			}
			if !runStart.IsZero() {
				diag.setupMs = ms(runStart.Sub(admitted))
				diag.executorWallMs = ms(runEnd.Sub(runStart))
			}
			r.diag = diag.json(emitted, emittedBytes)
		}
		return r.toolResult()
	}

	// L7: admission before any scope, catalog or provider exists.
	_, admSpan := s.tracer.Start(ctx, "connecta.admission")
	lease, err := s.opts.Pool.Acquire(ctx)
	if err != nil {
		endWithError(admSpan, execErrorCode(err))
		r := &reply{}
		s.execFailure(ctx, r, err, 0, "")
		return finish(r, time.Time{}, time.Time{}, time.Time{}, 0, 0), nil
	}
	admSpan.End()
	admitted := now()
	secret, err := newSecret()
	if err != nil {
		lease.Release()
		line := "Executor failed: " + err.Error()
		return finish(&reply{untyped: &line}, admitted, time.Time{}, time.Time{}, 0, 0), nil
	}
	scope := s.opts.Gateway.NewScope() // P4: one downstream request scope per execution
	defer scope.Close()                // L2: aborts whatever is still in flight
	h := &host{
		svc:    s,
		scope:  scope,
		framer: newFramer(secret),
		emit:   &emitCollector{maxBytes: s.opts.MaxEmittedBytes, maxBlocks: s.opts.MaxEmittedBlocks},
		diag:   diag,
		view:   gateway.ViewFrom(ctx),
		who:    gateway.ActorFrom(ctx),
	}
	if s.opts.Identity != nil {
		h.requestID, h.actor = s.opts.Identity(ctx)
	}
	if s.opts.Notifier != nil {
		h.notify = s.opts.Notifier(ctx)
	}
	h.secret = secret
	job := supervisor.Job{
		Code:      in.code,
		Prelude:   Prelude(secret),
		Providers: []supervisor.Provider{{Name: ProviderName, Functions: providerFunctions}},
	}
	runStart := now()
	execStart := time.Now() // the span's clock, not the diagnostics' (opts.Now)
	execCtx, execSpan := s.tracer.Start(ctx, "connecta.execution", trace.WithTimestamp(execStart))
	res, err := lease.Run(execCtx, job, h)
	runEnd := now()
	s.endExecution(execCtx, execSpan, execStart, res, err)
	scope.Close()
	blocks, emittedBytes := h.emit.snapshot()

	r := &reply{}
	switch {
	case err != nil:
		s.execFailure(ctx, r, err, len(blocks), secret)
	case res.Err != nil:
		r.logs = presentLogs(redact(res.Logs, secret), res.LogChars)
		r.discarded = len(blocks)
		if res.Err.Kind == supervisor.ErrThrown {
			if obj, ok := h.framer.failures.match(res.Err.Message); ok {
				r.errObject = obj // E6: the escaped failure keeps its type
				break
			}
		}
		line := programErrorText(redact(res.Err.Message, secret))
		r.untyped = &line
	default:
		r.hasResult = res.Value != nil
		r.result = json.RawMessage(redact(string(res.Value), secret))
		r.logs = presentLogs(redact(res.Logs, secret), res.LogChars)
		r.emitted = blocks
	}
	emittedCount := len(blocks)
	return finish(r, admitted, runStart, runEnd, emittedCount, emittedBytes), nil
}

// execFailure shapes an execution failure (E5): typed for admission,
// cancellation and shutdown, with the logs received so far and, when the
// program had started, the discarded blocks (M4); untyped otherwise.
func (s *Service) execFailure(ctx context.Context, r *reply, err error, emitted int, secret string) {
	var ee *supervisor.ExecError
	if errors.As(err, &ee) {
		e := &gateway.Error{Code: gateway.Code(ee.Code), Message: ee.Message, Retryable: ee.Retryable}
		if ee.Code == supervisor.CodeOverloaded || ee.RetryAfterMs > 0 {
			e.RetryAfterMs = ptr(ee.RetryAfterMs)
		}
		r.errObject = typedObject(e)
		r.logs = presentLogs(redact(ee.Logs, secret), ee.LogChars)
		if ee.Started {
			r.discarded = emitted
		}
		return
	}
	s.opts.Logger.ErrorContext(ctx, "execute_code: executor failed", "err", err)
	line := "Executor failed: " + redact(err.Error(), secret)
	r.untyped = &line
	r.discarded = emitted
}

// redact removes the run secret from anything bound for the model. The
// prelude never lets a frame reach guest code; this is the second wall.
func redact(s, secret string) string {
	if secret == "" || !strings.Contains(s, secret) {
		return s
	}
	return strings.ReplaceAll(s, secret, secretRedacted)
}

// Description is execute_code's description: the bounds a program must plan
// around (L4, L8), the connector inventory (A2) and the missing runtime
// authority (X5).
func Description(maxHostCalls int, hostCallTimeout time.Duration, connectors []gateway.ConnectorInfo) string {
	var b strings.Builder
	b.WriteString("Run a JavaScript program against the connectors' read-only tools and get back only its answer. ")
	b.WriteString("`code` is one async arrow function, e.g. async () => { const page = await connecta.search({ query: \"open issues\", includeSchemas: \"compact\" }); return page.tools.map((t) => t.address); }.\n\n")
	b.WriteString("The whole API: connecta.search({ query, connector?, safety?, limit?, offset?, includeSchemas? }) returns { tools, total, offset, limit, hasMore }; ")
	b.WriteString("connecta.describe({ address } or { addresses }) returns { tools }; ")
	b.WriteString("connecta.call(\"<connectorId>.<toolName>\", args) returns the tool's unwrapped result (explicitly read-only tools only; writes go through call_destructive_tool); ")
	b.WriteString("connecta.emit({ type: \"text\", text } or { type: \"image\" | \"audio\", data, mimeType }) adds a content block to a successful response. ")
	b.WriteString("console.log/warn/error come back as logs. Use Promise.all or Promise.allSettled for parallel calls.\n\n")
	fmt.Fprintf(&b, "Limits: %d host calls per execution, shared by search, describe and call (refused calls count); %s deadline per host call. ", maxHostCalls, formatDuration(hostCallTimeout))
	fmt.Fprintf(&b, "Results over %s characters are truncated: filter, map and slice inside the program and return only what you need. ", groupThousands(supervisor.MaxResultChars))
	b.WriteString("A failed connecta call throws an Error with code, retryable and details; retry only when retryable is true, never rate_limited immediately. ")
	b.WriteString("Plain JavaScript only: no timers (setTimeout), no fetch, no crypto, no imports or require; values cross as JSON.\n\n")
	b.WriteString(Inventory(connectors))
	return b.String()
}

// groupThousands writes n with comma thousands separators, as the
// description's prose states numbers.
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// Inventory is the bounded connector line: canonical ids with their
// configured titles, whole entries only, at most MaxInventoryBytes.
func Inventory(connectors []gateway.ConnectorInfo) string {
	if len(connectors) == 0 {
		return "Connectors: none."
	}
	const head = "Connectors: "
	var entries []string
	used := len(head) + 1 // the final "."
	for i, c := range connectors {
		e := c.ID
		if t := normalizeTitle(c.Title); t != "" {
			e += " (" + t + ")"
		}
		sep := 0
		if len(entries) > 0 {
			sep = 2
		}
		rest := len(connectors) - i - 1
		more := 0
		if rest > 0 {
			more = len(fmt.Sprintf("; +%d more", rest))
		}
		if used+sep+len(e)+more > MaxInventoryBytes {
			return head + strings.Join(entries, ", ") + fmt.Sprintf("; +%d more.", len(connectors)-len(entries))
		}
		entries = append(entries, e)
		used += sep + len(e)
	}
	return head + strings.Join(entries, ", ") + "."
}

// normalizeTitle collapses whitespace and clamps to MaxTitleBytes with "…".
func normalizeTitle(t string) string {
	t = strings.Join(strings.Fields(t), " ")
	if len(t) <= MaxTitleBytes {
		return t
	}
	return jstext.Clamp(t, MaxTitleBytes-len(jstext.Marker))
}

// requiredOption is one option New refuses to leave zero: package config is
// the one home of its default.
type requiredOption = required.Field

func requireOptions(pkg string, opts []requiredOption) error {
	return required.Check(pkg, "Options.", opts)
}
