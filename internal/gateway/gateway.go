package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/observe"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/stdioshim"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// ConnectorSpec is one configured downstream, already resolved by config.
// Exactly one of URL (remote MCP over streamable HTTP), Command (stdio MCP)
// or InProcess (an in-process go-sdk server, e.g. the demo) is set.
type ConnectorSpec struct {
	ID, Title, Description, Guide string
	Demo                          bool

	URL     string
	Headers map[string]string // resolved values; never logged

	Command []string
	Env     map[string]string // the child's whole environment (explicit only)

	// Secrets are the values secret references in Headers or Env resolved
	// to; a stdio server's stderr tail shows each as "[redacted]".
	Secrets []string

	// Admission bounds the tools/call attempts that reach the downstream
	// (calladmission.go); nil: no bound. Admission is inside the call
	// deadline.
	Admission *CallAdmission

	// SharedSession (HTTP only): every scope shares the connector's one
	// downstream session instead of opening its own (P4, scoped.go).
	SharedSession bool

	// LegacyVersion (versionNegotiation: legacy) pins the session protocols:
	// no server/discover, initialize from 2025-11-25 down. Otherwise
	// (auto) 2026-07-28 is tried first.
	LegacyVersion bool

	// Operator classification of tools the downstream leaves unannotated:
	// ReadOnly makes a tool callable without approval, ApprovalRequired
	// forces approval (and wins when a tool is in both lists: fail closed).
	ReadOnly, ApprovalRequired []string

	// MissingCredential is the reference (e.g. "${credential:tracker-token}")
	// config could not resolve; every catalog load and call fails
	// auth_required with recovery operator_config naming it.
	MissingCredential string

	// CredentialRefs optionally names the references the connector's
	// headers/env were resolved from, so authorize_connector can tell the
	// operator what to set. Optional.
	CredentialRefs []string

	InProcess func() *mcp.Server

	// Credential (URL connectors only) is a header whose value an operator
	// sets in the vault; Options.Credentials supplies it on every request.
	Credential *CredentialSlot

	// OAuth marks a URL connector whose requests carry a downstream OAuth
	// grant (Options.OAuth supplies the transport); its auth failures
	// recover through authorize_connector with recovery "oauth".
	OAuth bool

	// CatalogPin is the connector's catalog.pin: PinOff, PinWarn (the
	// default when empty) or PinQuarantine (needs Options.Store).
	CatalogPin string

	// PerCaller (url connectors, not with SharedSession): every request
	// carries the calling actor's own grant or credential, and catalogs and
	// sessions are kept per (connector, actor) (percaller.go).
	PerCaller bool
}

// OAuthTransport wraps a connector's HTTP transport so that every request
// carries the connector's OAuth access token (package oauth). Its failures
// are *oauth.Error.
type OAuthTransport interface {
	// Transport's who is the actor whose own grant the requests carry on a
	// per-caller connector; the zero ID is the connector's one grant.
	Transport(connectorID string, who actor.ID, base http.RoundTripper) http.RoundTripper
}

// CredentialSlot names the header a connector's operator-set credential
// is sent in, and its scheme ("" sends the value as is).
type CredentialSlot struct {
	Label, Header, Scheme string
}

// ErrNoCredential: no credential is set for the connector.
var ErrNoCredential = errors.New("no credential is set")

// CredentialSource reads a connector's operator-set credential, on every
// request (so a replaced value applies at once). It answers
// ErrNoCredential when none is set. who is the actor whose own value is
// asked for on a per-caller connector; the zero ID is the connector's one.
type CredentialSource interface {
	Credential(ctx context.Context, connectorID string, who actor.ID) (string, error)
}

// Options configure a Gateway.
type Options struct {
	Connectors []ConnectorSpec
	CatalogTTL time.Duration // default DefaultCatalogTTL
	// CatalogStale is how long after its load a catalog is still served
	// while refreshes fail (catalog.staleMs); default DefaultCatalogStale,
	// never below CatalogTTL.
	CatalogStale time.Duration
	// Store persists catalogs, approvals and their audit records; nil keeps
	// catalogs in memory only (quarantine then refuses).
	Store CatalogStore
	// NoFirstApproval turns off the automatic approval of a quarantined
	// connector's first catalog (catalog.approveFirst: false).
	NoFirstApproval bool
	CallTimeout     time.Duration // default DefaultCallTimeout
	Activity        *activity.Recorder
	Observer        *observe.Observer
	Validator       *validate.Validator
	Logger          *slog.Logger
	Metrics         prometheus.Registerer // nil: no metrics
	HTTPClient      *http.Client          // optional base; its Transport is wrapped
	// Version is reported to downstreams as the client implementation
	// version (optional, added).
	Version string
	// Now is the clock (optional, for tests; added).
	Now func() time.Time
	// MaxResponseBytes caps one downstream HTTP response body (optional,
	// added); default MaxResponseBodyBytes.
	MaxResponseBytes int64
	// MaxCatalogBytes bounds one catalog's tool definitions across all its
	// pages (optional); default MaxCatalogBytes.
	MaxCatalogBytes int
	// OAuth is required when a connector sets OAuth.
	OAuth OAuthTransport
	// Credentials is required when a connector sets Credential.
	Credentials CredentialSource
	// Tracer receives the downstream call and catalog load spans; nil is
	// the no-op provider.
	Tracer trace.TracerProvider
	// SharedBudgets, when set, keeps every connector's call budget where
	// all replicas count against it (PostgreSQL); nil keeps budgets in
	// this process.
	SharedBudgets SharedBudgets
	// OperatorURL is the console page where an operator sets credentials
	// (authorize_connector's operatorUrl); "" when there is no console.
	OperatorURL string
}

// Gateway is the connector registry and the one invocation path both front
// doors use (S6). Safe for concurrent use.
type Gateway struct {
	opts       Options
	tracer     trace.Tracer
	logger     *slog.Logger
	now        func() time.Time
	ttl        time.Duration
	stale      time.Duration
	timeout    time.Duration
	maxBody    int64
	maxCatalog int
	// reg is the current generation of connectors (reload.go); live is
	// every connector not yet closed, of any generation.
	regMu    sync.RWMutex
	reg      *registry
	live     map[*connector]struct{}
	reloadMu sync.Mutex // one reload at a time
	metrics  *metrics
	forker   *stdioshim.Forker // starts stdio shims from one long-lived thread
	progress progressRoutes    // downstream progress back to the call that asked

	life   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closeO sync.Once
	// lateMu guards lateClosed: set before Close waits on wg, after which
	// closeLater adds nothing to it.
	lateMu     sync.Mutex
	lateClosed bool
	// passMu guards passLogged: the (connector, tool, reason) triples whose
	// validation pass-through was logged (once each; counted always).
	passMu     sync.Mutex
	passLogged map[passThroughKey]bool
}

// ConnectorHealth is a payload-free snapshot of one connector.
type ConnectorHealth struct {
	ID                  string    `json:"id"`
	Kind                string    `json:"kind"` // http, stdio, inprocess
	Connected           bool      `json:"connected"`
	LastSuccess         time.Time `json:"lastSuccess,omitzero"`
	LastFailure         time.Time `json:"lastFailure,omitzero"`
	LastErrorCode       string    `json:"lastErrorCode,omitempty"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	CatalogTools        int       `json:"catalogTools"`
	CatalogFetchedAt    time.Time `json:"catalogFetchedAt,omitzero"`
	CatalogQuarantined  int       `json:"catalogQuarantined,omitempty"` // listed tools hidden until approved
	CatalogPin          string    `json:"catalogPin"`
	Restarts            int       `json:"restarts,omitempty"`        // stdio processes started after the first
	ProtocolVersion     string    `json:"protocolVersion,omitempty"` // negotiated with the downstream at the last connect
}

// New builds the registry. No downstream is contacted until first use; the
// returned Gateway owns every goroutine it starts until Close.
func New(ctx context.Context, opts Options) (*Gateway, error) {
	g := &Gateway{
		opts:    opts,
		tracer:  telemetry.Tracer(opts.Tracer),
		logger:  opts.Logger,
		now:     opts.Now,
		ttl:     opts.CatalogTTL,
		timeout: opts.CallTimeout,
		live:    map[*connector]struct{}{},
	}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.ttl <= 0 {
		g.ttl = DefaultCatalogTTL
	}
	g.stale = opts.CatalogStale
	if g.stale <= 0 {
		g.stale = DefaultCatalogStale
	}
	g.stale = max(g.stale, g.ttl)
	if g.timeout <= 0 {
		g.timeout = DefaultCallTimeout
	}
	g.maxCatalog = opts.MaxCatalogBytes
	if g.maxCatalog <= 0 {
		g.maxCatalog = MaxCatalogBytes
	}
	g.maxBody = opts.MaxResponseBytes
	if g.maxBody <= 0 {
		g.maxBody = MaxResponseBodyBytes
	}
	m, err := newMetrics(opts.Metrics, opts.Observer, opts.Validator)
	if err != nil {
		return nil, err
	}
	g.metrics = m
	g.life, g.stop = context.WithCancel(context.WithoutCancel(ctx))
	reg, err := g.buildRegistry(opts.Connectors, nil)
	if err != nil {
		g.stop()
		return nil, err
	}
	for _, c := range reg.byID {
		c.gens = 1
		g.live[c] = struct{}{}
	}
	g.reg = reg
	g.metrics.zero(reg.order)
	if opts.Metrics != nil {
		for _, c := range []prometheus.Collector{newCatalogCollector(g), newUpCollector(g), newAdmissionCollector(g)} {
			if err := opts.Metrics.Register(c); err != nil {
				g.stop()
				return nil, fmt.Errorf("gateway: metrics: %w", err)
			}
		}
	}
	g.forker = stdioshim.NewForker()
	return g, nil
}

// Close ends every session and waits for the goroutines the gateway started.
func (g *Gateway) Close() error {
	g.closeO.Do(func() {
		g.stop() // ends every in-flight call first (Invoke ties calls to g.life)
		// Sessions close concurrently: each may spend up to
		// sessionDeleteTimeout on a downstream that is slow to let go.
		var closing sync.WaitGroup
		g.regMu.Lock()
		for c := range g.live {
			closing.Go(c.close)
		}
		g.regMu.Unlock()
		closing.Wait()
		g.lateMu.Lock()
		g.lateClosed = true
		g.lateMu.Unlock()
		g.wg.Wait()
		g.forker.Close() // every stdio process is reaped by now
	})
	return nil
}

// Connectors lists the configured connectors in configuration order.
func (g *Gateway) Connectors() []ConnectorInfo {
	reg := g.current()
	out := make([]ConnectorInfo, 0, len(reg.order))
	for _, id := range reg.order {
		s := reg.byID[id].spec
		out = append(out, ConnectorInfo{ID: s.ID, Title: s.Title, Description: s.Description, Guide: s.Guide, Demo: s.Demo})
	}
	return out
}

// Tools returns a connector's cached listing (refreshing it when stale).
// The error is a *Error: unknown connector, auth_required or
// catalog_lookup_failed.
func (g *Gateway) Tools(ctx context.Context, connectorID string) ([]Tool, error) {
	reg := g.hold() // a reload must not close the connector under this load
	defer g.release(reg)
	c := reg.lookup(connectorID)
	if c == nil {
		return nil, UnknownConnector(connectorID)
	}
	cc, hold := c.forCaller(ctx)
	defer hold.release()
	snap, gerr := cc.catalog(ctx, connectorID)
	if gerr != nil {
		return nil, gerr
	}
	return slices.Clone(snap.tools), nil
}

// ReadOnly is the fail-closed predicate (S6): operator classification first
// (approvalRequired forces false, readOnly forces true), otherwise only an
// explicit readOnlyHint:true not contradicted by destructiveHint:true.
func (g *Gateway) ReadOnly(t *Tool) bool {
	if t == nil {
		return false
	}
	if c := g.lookup(t.ConnectorID); c != nil {
		if c.approval[t.Name] {
			return false
		}
		if c.readOnly[t.Name] {
			return true
		}
	}
	return annotatedReadOnly(t.Annotations)
}

func annotatedReadOnly(a *Annotations) bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint &&
		(a.DestructiveHint == nil || !*a.DestructiveHint)
}

// ObservedOutputSchema is the S9 observation for a tool that declares no
// output schema (a provider declaration always wins), nil when none.
func (g *Gateway) ObservedOutputSchema(t *Tool) json.RawMessage {
	if t == nil || len(t.OutputSchema) > 0 || g.opts.Observer == nil || len(t.Definition) == 0 {
		return nil
	}
	return g.opts.Observer.Schema(t.Definition)
}

// Health returns one snapshot per connector in configuration order.
func (g *Gateway) Health() []ConnectorHealth {
	reg := g.current()
	out := make([]ConnectorHealth, 0, len(reg.order))
	for _, id := range reg.order {
		out = append(out, reg.byID[id].healthSnapshot())
	}
	return out
}

// InvalidateCatalog drops a connector's cached catalog (after its OAuth
// grant changed); unknown ids are ignored.
func (g *Gateway) InvalidateCatalog(connectorID string) {
	if c := g.lookup(connectorID); c != nil {
		c.invalidateCatalog()
		for _, cc := range c.callerConnectors() {
			cc.invalidateCatalog()
		}
	}
}

// Authorize answers authorize_connector for connectors without OAuth (the
// server asks package oauth for the others): which config key or credential
// the operator must set (operator_config), or that there is nothing to set
// (unavailable).
func (g *Gateway) Authorize(ctx context.Context, connectorID string) (Object, *Error) {
	c := g.lookup(connectorID)
	if c == nil {
		return nil, UnknownConnector(connectorID)
	}
	s := c.spec
	switch {
	case s.Credential != nil && s.PerCaller:
		// Each caller's own value: the caller sets it, not the operator.
		return Object{
			{Key: "connector", Value: s.ID},
			{Key: "recovery", Value: "credential"},
			{Key: "credential", Value: Object{
				{Key: "label", Value: s.Credential.Label},
				{Key: "per", Value: "caller"},
			}},
			{Key: "instructions", Value: fmt.Sprintf("Connector %q uses each caller's own %s. The person sets theirs on connecta's /me page (signed in as themselves); for a token caller an operator runs `connecta credential set %s value --actor ACTOR`. Then retry the call. The credential is never passed through this tool.", s.ID, s.Credential.Label, s.ID)},
		}, nil
	case s.Credential != nil:
		out := Object{
			{Key: "connector", Value: s.ID},
			{Key: "recovery", Value: "operator_config"},
			{Key: "credential", Value: Object{
				{Key: "label", Value: s.Credential.Label},
				{Key: "fields", Value: []Object{{{Key: "name", Value: "value"}, {Key: "guidance", Value: s.Credential.Label}}}},
			}},
		}
		where := "with `connecta credential set " + s.ID + " value`"
		if u := g.opts.OperatorURL; u != "" {
			out = append(out, Field{Key: "operatorUrl", Value: u})
			where = "on the console's Credentials page (" + u + ")"
		}
		return append(out, Field{Key: "instructions", Value: fmt.Sprintf("An operator must set the %s of connector %q %s; then retry the call. The credential is never passed through this tool.", s.Credential.Label, s.ID, where)}), nil
	case s.MissingCredential != "":
		return Object{
			{Key: "connector", Value: s.ID},
			{Key: "recovery", Value: "operator_config"},
			{Key: "credential", Value: Object{{Key: "reference", Value: s.MissingCredential}, {Key: "configKey", Value: c.credentialKey()}}},
			{Key: "instructions", Value: fmt.Sprintf("The operator must provide %s (used by %s) and restart connecta; then retry the call. The credential is never passed through this tool.", s.MissingCredential, c.credentialKey())},
		}, nil
	case len(s.CredentialRefs) > 0 || len(s.Headers) > 0 || (c.kind == kindStdio && len(s.Env) > 0):
		refs := slices.Clone(s.CredentialRefs)
		sort.Strings(refs)
		cred := Object{{Key: "configKey", Value: c.credentialKey()}}
		if len(refs) > 0 {
			cred = append(cred, Field{Key: "references", Value: refs})
		}
		return Object{
			{Key: "connector", Value: s.ID},
			{Key: "recovery", Value: "operator_config"},
			{Key: "credential", Value: cred},
			{Key: "instructions", Value: fmt.Sprintf("Credentials for this connector come from %s. If the downstream rejects them, the operator must update that value and restart connecta; then retry the call.", c.credentialKey())},
		}, nil
	default:
		return Object{
			{Key: "connector", Value: s.ID},
			{Key: "recovery", Value: "unavailable"},
			{Key: "message", Value: fmt.Sprintf("Connector %q has no credential to configure and does not use OAuth (connectors[].oauth).", s.ID)},
		}, nil
	}
}

// UnknownConnector is the refusal for a connector id that names no
// configured connector (and, byte for byte, for one the caller's view hides).
func UnknownConnector(connectorID string) *Error {
	return Errorf(CodeInvalidArgs, false, "Unknown connector %q", jstext.Clamp(connectorID, jstext.MaxIdentityBytes))
}

// lookup returns a configured connector, nil when unknown.
func (g *Gateway) lookup(id string) *connector { return g.current().lookup(id) }

// errGatewayClosed is returned for work arriving after Close.
var errGatewayClosed = errors.New("gateway closed")
