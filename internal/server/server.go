// Package server is connecta's MCP front door: the seven top-level tools over
// the official Go SDK, served as stateless streamable HTTP on /mcp (one MCP
// server shared by every request) or over stdio, with request admission before auth,
// bearer tokens, a body cap, origin protection, /health, /metrics and
// /activity.
//
// Failures keep their concrete types where this package writes their
// fields: checkAuthorizationShape and verifyBearer return *inbound.Rejection
// (refuse writes its status, reason and message), and the helpers that build
// a tool's typed failure return *gateway.Error (failureResult renders it).
// The argument decoders (parseArgs, parseCallArgs and toolArgs' methods)
// return error: their callers only pass it on.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/gateway/stash"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/telemetry"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// CodeTool is execute_code as the code-mode contract provides it
// (*contract.Service satisfies it).
type CodeTool interface {
	Tool() *mcp.Tool
	Handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)
}

// Gateway is what the server needs of the gateway core (*gateway.Gateway).
type Gateway interface {
	Connectors() []gateway.ConnectorInfo
	NewScope() *gateway.Scope
	Invoke(ctx context.Context, scope *gateway.Scope, req gateway.CallRequest) (*gateway.CallResult, *gateway.Error)
	Authorize(ctx context.Context, connectorID string) (gateway.Object, *gateway.Error)
	ConnectorStates() map[string]gateway.ConnectorState
	CallAdmission() map[string]gateway.CallAdmissionSnapshot
	// CatalogDrift is /health's catalogDrift by connector.
	CatalogDrift() map[string]gateway.Drift
}

// Discovery is the catalog search service (internal/gateway/discovery) with the front
// door as a parameter: the top level gets the grouped page.
type Discovery interface {
	Search(ctx context.Context, front gateway.FrontDoor, p discovery.SearchParams) (json.RawMessage, *gateway.Error)
}

// OAuthFlows is package oauth's Manager as the server uses it.
type OAuthFlows interface {
	Has(connectorID string) bool
	Authorize(ctx context.Context, connectorID string, force bool, who oauth.Caller) (*oauth.Status, *oauth.Error)
	Callback(w http.ResponseWriter, r *http.Request)
	ClientMetadata(w http.ResponseWriter, r *http.Request)
}

// Token is one accepted bearer token; Name is the actor recorded in activity.
type Token struct {
	Name  string
	Value string
	// Operator: the caller may force a new downstream OAuth authorization.
	Operator bool
}

// RequestLimits configure /mcp admission and the body cap (docs/meta-tools.md §12).
type RequestLimits struct {
	MaxActive int
	// MaxActivePerCaller caps one caller's permits while requests of more
	// than one caller wait; 0 means half of MaxActive, rounded up.
	MaxActivePerCaller int
	MaxQueue           int // 0 = fail fast
	QueueTimeout       time.Duration
	RetryAfter         time.Duration
	MaxBodyBytes       int64
	// BodyTimeout bounds the arrival of a body once its request holds a
	// permit (408 after it).
	BodyTimeout time.Duration
}

// Options configure a Server. The request limits, MaxInlineBytes and the
// deadlines are required (package config holds their defaults); New refuses
// a zero, naming the option and its configuration key.
type Options struct {
	Name    string // server name reported to clients and /health
	Version string

	Gateway   Gateway
	Discovery Discovery
	Stash     stash.Store
	Activity  *activity.Recorder // serves /activity; nil = empty
	Code      CodeTool           // execute_code; nil leaves six tools (tests only)
	// ExecutorName is reported by /health (docs/meta-tools.md §14); sanitized to [\w .+-], ≤ 40.
	ExecutorName string
	// ExecutorChild is what sandbox children execute, for /health's
	// executor.child: "embedded" (the slim child) or "self".
	ExecutorChild string
	// CodeAdmission returns the executor's payload-free admission snapshot
	// for /health, in the requests' shape; nil reports
	// {managedByExecutor:true}. The application constructor (package app)
	// fills it from the executor pool.
	CodeAdmission func() AdmissionSnapshot
	// StoreState reports the store into /health (nil: no store entry). It
	// must answer from state the store already has, without a round trip.
	StoreState func() StoreState

	Tokens []Token // checked first
	// Access is the access rules (nil: every caller reaches everything);
	// each caller's view is fixed when it authenticates.
	Access *access.Policy
	// Inbound admits issued access tokens and auth.oidc access tokens
	// (nil: none). With neither Tokens nor Inbound the server serves
	// loopback clients only.
	Inbound *inbound.Authenticator
	// Operator serves the operator console under /operator (nil: none).
	Operator http.Handler
	// OAuth runs downstream OAuth flows (nil: no connector uses OAuth); its
	// callback and client metadata document are served under /oauth/.
	OAuth          OAuthFlows
	TrustedOrigins []string
	// PublicURL is where clients reach the server (e.g. through a local
	// reverse proxy); its host passes the DNS-rebinding check and its origin
	// the cross-origin check.
	PublicURL string
	Requests  RequestLimits

	MaxInlineBytes   int           // results.maxInlineBytes
	HostCallTimeout  time.Duration // execute.hostCallTimeoutMs: call_tool's default deadline
	ExecutionTimeout time.Duration // executor.timeoutMs: sizes the HTTP write timeout
	// ExecutorQueueTimeout is executor.queueTimeoutMs: a program may wait
	// this long for a slot before its wall deadline starts, so it sizes the
	// HTTP write timeout too.
	ExecutorQueueTimeout time.Duration

	// Inflight matches a client's notifications/cancelled to the request it
	// names; nil is this process's own (one replica).
	Inflight Inflight

	// Registry receives the server's metrics and is served on /metrics.
	Registry *prometheus.Registry
	// Tracer receives the MCP request spans; nil is the no-op provider.
	Tracer trace.TracerProvider
	// MetricsElsewhere leaves /metrics off Handler: the caller serves
	// MetricsHandler on its own listener (metricsListen).
	MetricsElsewhere bool
	Logger           *slog.Logger
}

// Server serves the seven tools. Safe for concurrent use.
type Server struct {
	opts       Options
	log        *slog.Logger
	admission  *admission
	registerer prometheus.Registerer
	gatherer   prometheus.Gatherer
	metrics    *serverMetrics
	tracer     trace.Tracer

	tools          []toolEntry // built once
	instructions   string
	implementation *mcp.Implementation

	mcp *mcp.Server // the one MCP server: every HTTP request and the stdio session
	// Two front ends over it: JSON replies, and event streams for a request
	// that asks for progress or log messages (routed by rpcRouted).
	mcpJSON, mcpSSE http.Handler
	inflight        Inflight
	publicHost      string // host[:port] of PublicURL, "" when unset
	draining        atomic.Bool
	live            atomic.Pointer[settings] // what a reload may change (reload.go)
	bigBodies       bigBodyGate              // large bodies take turns at decoding (body.go)
	perView         perViewTools             // tools/list by caller view (tools.go)
}

type serverMetrics struct {
	httpRequests *prometheus.CounterVec
	toolCalls    *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	cancels      *prometheus.CounterVec
	bodyTimeouts prometheus.Counter
	// authRejections: connecta_auth_rejections_total{reason}.
	authRejections *prometheus.CounterVec
}

// New builds a Server: tool definitions and schemas are built here, once.
func New(opts Options) (*Server, error) {
	if opts.Gateway == nil || opts.Discovery == nil || opts.Stash == nil {
		return nil, errors.New("server: Gateway, Discovery and Stash are required")
	}
	if opts.Name == "" {
		opts.Name = "connecta"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	var extra []string
	if opts.MaxInlineBytes <= 0 {
		extra = append(extra, "MaxInlineBytes (results.maxInlineBytes)")
	}
	if opts.ExecutionTimeout <= 0 {
		extra = append(extra, "ExecutionTimeout (executor.timeoutMs)")
	}
	var err error
	if opts.Requests, err = checkRequests(opts.Requests, opts.HostCallTimeout <= 0, extra...); err != nil {
		return nil, err
	}
	r := &opts.Requests
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &Server{opts: opts, log: log, registerer: reg, gatherer: reg, tracer: telemetry.Tracer(opts.Tracer)}
	if opts.PublicURL != "" {
		u, err := url.Parse(opts.PublicURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("server: publicUrl %q is not an absolute URL", opts.PublicURL)
		}
		s.publicHost = u.Host
		s.opts.TrustedOrigins = append(s.opts.TrustedOrigins, u.Scheme+"://"+u.Host)
	}
	s.bigBodies = newBigBodyGate(opts.Requests.MaxBodyBytes)
	tokens, err := hashTokens(opts.Tokens)
	if err != nil {
		return nil, err
	}
	s.live.Store(&settings{tokens: tokens, inbound: opts.Inbound, requests: opts.Requests, hostCallTimeout: opts.HostCallTimeout, code: opts.Code, access: opts.Access})
	s.admission, err = newAdmission(*r, reg)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.admission.log = log
	s.metrics = &serverMetrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "code"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_tool_calls_total", Help: "Top-level tool calls by tool and outcome.",
		}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "connecta_tool_call_duration_seconds", Help: "Top-level tool call duration.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"tool"}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_cancellations_total",
			Help: "Client notifications/cancelled by result: matched (one in-flight request of that actor had the id), ambiguous (several), unknown (none).",
		}, []string{"result"}),
	}
	for _, r := range []CancelResult{CancelMatched, CancelAmbiguous, CancelUnknown} {
		s.metrics.cancels.WithLabelValues(string(r)) // exist at zero
	}
	s.metrics.bodyTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "connecta_requests_body_timeouts_total", Help: "MCP requests ended with 408: the body did not arrive within requests.bodyTimeoutMs.",
	})
	s.metrics.authRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "connecta_auth_rejections_total", Help: "Requests refused by inbound auth, by reason (missing, unknown_token, expired, wrong_audience, provider_unavailable, ...).",
	}, []string{"reason"})
	for _, r := range inbound.Reasons() {
		s.metrics.authRejections.WithLabelValues(r) // exist at zero
	}
	for _, c := range []prometheus.Collector{s.metrics.httpRequests, s.metrics.toolCalls, s.metrics.toolDuration, s.metrics.cancels, s.metrics.bodyTimeouts, s.metrics.authRejections} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: metrics: %w", err)
		}
	}
	s.implementation = &mcp.Implementation{Name: opts.Name, Version: opts.Version}
	s.instructions = instructions
	s.tools = s.buildTools()

	s.inflight = opts.Inflight
	if s.inflight == nil {
		s.inflight = NewMemoryInflight()
	}
	s.mcp = s.newMCPServer()
	front := func(jsonResponse bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
			Stateless:    true,
			JSONResponse: jsonResponse,
			// bodyRead enforces requests.maxBodyBytes as reloaded; this
			// is only the SDK's own backstop, at the largest value config
			// accepts.
			MaxRequestBodyBytes:          maxReloadableBodyBytes,
			PropagateRequestCancellation: true,
			// Our own rebinding check (hostChecked, on every route) also admits PublicURL's host.
			DisableLocalhostProtection: true,
			Logger:                     log.With("component", "mcp"),
		})
	}
	s.mcpJSON, s.mcpSSE = front(true), front(false)
	return s, nil
}

// newMCPServer builds the one MCP server every request and the stdio session
// share: tools are registered once, so their schemas are marshalled once.
// Per-request identity does not live in the server: the SDK hands the
// session's connect context (the HTTP request's, carrying our requestInfo) to
// every handler as its parent, and runTool reads it from there.
func (s *Server) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(s.implementation, &mcp.ServerOptions{
		Instructions: s.instructions,
		// logging: connecta sends notifications/message (program console
		// output at the requested level), which 2025-11-25 requires it to
		// declare.
		//lint:ignore SA1019 program output streams through the deprecated logging feature (stream.go)
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}},
		SetCacheable: func(ctx context.Context, req mcp.Request, c *mcp.Cacheable) {
			// With access rules tools/list is per caller: private, and
			// short-lived so a reloaded rule shows within a minute.
			accessOn := false
			if info := infoFrom(ctx); info != nil {
				accessOn = info.accessOn
			}
			switch req.(type) {
			case *mcp.ListToolsRequest:
				c.TTLMs, c.CacheScope = ToolsListTTLMs, "private"
				if accessOn {
					c.TTLMs = AccessToolsListTTLMs
				}
			case *mcp.ServerRequest[*mcp.DiscoverParams]: // server/discover
				// Per caller, as tools/list (docs/DECISIONS.md "MCP versions and scopes").
				c.CacheScope = "private"
				if accessOn {
					c.TTLMs = AccessToolsListTTLMs
				}
			}
		},
	})
	srv.AddReceivingMiddleware(s.perCallerToolsList)
	for i := range s.tools {
		t := &s.tools[i]
		srv.AddTool(t.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.runTool(ctx, t, req)
		})
	}
	srv.AddReceivingMiddleware(metaLogLevelMiddleware)
	srv.AddReceivingMiddleware(s.requestSpans) // outermost: the span covers the others
	return srv
}

// runTool runs one top-level tool call: the request's context is merged in
// (disconnect cancels), the actor and request id are attached, metrics taken.
func (s *Server) runTool(ctx context.Context, t *toolEntry, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	info := infoFrom(ctx)
	if info == nil { // a handler reached without our front door: no identity to borrow
		info = &requestInfo{actor: actor.LocalUser.String(), who: actor.LocalUser}
	}
	// The work runs on a context that carries none of the SDK's values: the
	// SDK server stores the inbound request's protocol version in its
	// context, and the SDK client reads that same key when it talks to a
	// downstream, so a 2026-07-28 client would leak its version into our
	// 2025-11-25 downstream sessions (observed: HTTP 400 from the
	// downstream). Cancellation still flows from both the SDK handler
	// context and the HTTP request (a client disconnect cancels the work).
	sdkCtx := ctx
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(sdkCtx, cancel)()
	if info.ctx != nil {
		defer context.AfterFunc(info.ctx, cancel)()
	}
	if deadline, ok := sdkCtx.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
		defer cancelDeadline()
	}
	if info.id == "" { // stdio: one session, a request id per call
		perCall := *info
		perCall.id = newRequestID()
		info = &perCall
	}
	ctx = context.WithValue(ctx, requestInfoKey{}, info)
	ctx = gateway.WithActor(ctx, info.who) // per-caller connectors use this actor's own grant
	if info.view != nil {                  // every door below asks this view (gateway.View)
		ctx = gateway.WithView(ctx, info.view)
	}
	// A cancellation naming this request (actor, JSON-RPC id) does what a
	// client disconnect does: it cancels ctx.
	if info.rpcID != "" {
		defer s.inflight.Register(info.who.Key(), info.rpcID, cancel)()
	}
	var meta map[string]any
	if req != nil && req.Params != nil {
		meta = req.Params.Meta
	}
	if st := newRequestStream(sdkCtx, req.Session, meta); st != nil {
		defer st.close() // runs before the result is written
		ctx = context.WithValue(ctx, streamKey{}, st)
		if info.flush != nil {
			st.gate = info.flush
			info.flush.stream.Store(st)
		}
	}
	ctx, span := s.startRequestSpan(ctx, info, "tools/call", t.tool.Name, meta)
	start := time.Now()
	res, err := t.handle(ctx, info, req)
	outcome := "success"
	switch {
	case err != nil:
		outcome = "protocol_error"
	case res != nil && res.IsError:
		outcome = "error"
	}
	s.metrics.toolCalls.WithLabelValues(t.tool.Name, outcome).Inc()
	telemetry.Observe(ctx, s.metrics.toolDuration.WithLabelValues(t.tool.Name), time.Since(start).Seconds())
	endRequestSpan(span, outcome)
	return res, err
}

// ServeStdio serves one MCP session over stdin/stdout until the client
// leaves or ctx ends. Logs must go to stderr (the caller's logger).
func (s *Server) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	// The session's context is every handler's parent: the stdio identity
	// rides on it (runTool gives each call its own request id).
	ctx = context.WithValue(ctx, requestInfoKey{}, &requestInfo{actor: actor.StdioClient.String(), who: actor.StdioClient})
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// BeginShutdown stops admitting new /mcp requests; /health turns 503.
func (s *Server) BeginShutdown() {
	s.draining.Store(true)
	s.admission.close()
}

// InFlight reports requests holding an admission permit.
func (s *Server) InFlight() int { return s.admission.activeCount() }

// drainPoll is how often WaitIdle looks at the in-flight count.
const drainPoll = 20 * time.Millisecond

// WaitIdle returns nil once no request holds an admission permit, or ctx's
// error. A draining server keeps its listener open meanwhile, so /health
// answers shutting_down and new /mcp requests get server_shutting_down
// instead of a refused connection (docs/lifecycle-health-reload.md).
func (s *Server) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for s.InFlight() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Health statuses: degraded (HTTP 200) when a connector or the store has
// failed, shutting_down (503) while draining.
const (
	StatusOK           = "ok"
	StatusDegraded     = "degraded"
	StatusShuttingDown = "shutting_down"
)

// HealthReport is the payload-free /health body (docs/meta-tools.md §14 and docs/DECISIONS.md
// "Health, versions, reload").
type HealthReport struct {
	Status          string                            `json:"status"`
	Version         string                            `json:"version"`
	Connectors      int                               `json:"connectors"`
	ConnectorStates map[string]gateway.ConnectorState `json:"connectorStates"`
	CatalogDrift    map[string]gateway.Drift          `json:"catalogDrift"`
	Store           *StoreState                       `json:"store,omitempty"`
	Server          healthServer                      `json:"server"`
	Executor        *healthExecutor                   `json:"executor,omitempty"`
	Admission       healthAdmission                   `json:"admission"`
}

// StoreState is the store's /health entry; any State but "ok" makes the
// server degraded.
type StoreState struct {
	State         string `json:"state"`
	LastErrorCode string `json:"lastErrorCode,omitempty"`
}

type healthServer struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type healthExecutor struct {
	Name  string `json:"name"`
	Child string `json:"child,omitempty"` // supervisor.ChildEmbedded | ChildSelf
}

// AdmissionPolicy is /health's admission.policy: requests are served
// round-robin between callers, each capped (docs/DECISIONS.md "Request
// admission"). The Node peer's "global-fifo" no longer describes the queue.
const AdmissionPolicy = "per-caller-fair"

type healthAdmission struct {
	Policy   string            `json:"policy"`
	Requests AdmissionSnapshot `json:"requests"`
	Code     any               `json:"code"`
	// DownstreamCalls is each connector's call admission (docs/DECISIONS.md
	// "Call admission").
	DownstreamCalls map[string]gateway.CallAdmissionSnapshot `json:"downstreamCalls"`
}

// Health returns the /health report.
func (s *Server) Health() HealthReport {
	states := s.opts.Gateway.ConnectorStates()
	h := HealthReport{
		Status:          StatusOK,
		Version:         s.opts.Version,
		Connectors:      len(states),
		ConnectorStates: states,
		CatalogDrift:    s.opts.Gateway.CatalogDrift(),
		Server:          healthServer{Name: s.opts.Name, Version: s.opts.Version},
		Admission: healthAdmission{
			Policy:   AdmissionPolicy,
			Requests: s.admission.snapshot(),
			Code:     map[string]bool{"managedByExecutor": true},

			DownstreamCalls: s.opts.Gateway.CallAdmission(),
		},
	}
	if s.opts.CodeAdmission != nil {
		h.Admission.Code = s.opts.CodeAdmission()
	}
	for _, st := range states {
		if st.State == gateway.StateFailed {
			h.Status = StatusDegraded
		}
	}
	if s.opts.StoreState != nil {
		st := s.opts.StoreState()
		h.Store = &st
		if st.State != "ok" {
			h.Status = StatusDegraded
		}
	}
	if s.draining.Load() {
		h.Status = StatusShuttingDown
	}
	if name := sanitizeExecutorName(s.opts.ExecutorName); name != "" {
		h.Executor = &healthExecutor{Name: name, Child: s.opts.ExecutorChild}
	}
	return h
}

// sanitizeExecutorName keeps [\w .+-] and at most 40 characters (docs/meta-tools.md §14).
func sanitizeExecutorName(name string) string {
	out := make([]rune, 0, len(name))
	for _, r := range name {
		if len(out) == 40 {
			break
		}
		if r == '_' || r == ' ' || r == '.' || r == '+' || r == '-' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			out = append(out, r)
		}
	}
	return string(out)
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// CodeTool returns the execute_code tool the server serves (nil when none).
func (s *Server) CodeTool() CodeTool { return s.settingsNow().code }

// RequestIdentity returns the request id and actor of the top-level request
// ctx belongs to (for execute_code's activity events); empty when none.
func RequestIdentity(ctx context.Context) (requestID, actor string) {
	if info := infoFrom(ctx); info != nil {
		return info.id, info.actor
	}
	return "", ""
}

// callerOf is the typed actor of the request ctx belongs to (the key of
// everything kept per actor, e.g. get_result entries); a handler reached
// without our front door is the local user.
func callerOf(ctx context.Context) actor.ID {
	if info := infoFrom(ctx); info != nil && !info.who.IsZero() {
		return info.who
	}
	return actor.LocalUser
}
