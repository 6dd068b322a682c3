// Package oauth is connecta's downstream OAuth client: the MCP
// authorization flow for connectors configured with `oauth: {}`, run so that
// any replica can finish it.
//
// Discovery follows the MCP authorization specification: the downstream's
// 401 WWW-Authenticate challenge, its protected resource metadata (RFC 9728)
// and its authorization server's metadata (RFC 8414 / OpenID Connect
// discovery), fetched and validated by the go-sdk's auth and oauthex
// packages. Client identity is, in order, the configured clientId, a client
// ID metadata document at {publicUrl}/oauth/client-metadata.json when the
// server supports it, then dynamic registration (RFC 7591). PKCE S256 is
// always used (a server without it is refused) and every authorization and
// token request carries the resource indicator (RFC 8707).
//
// What the SDK's AuthorizationCodeHandler does in one process — wait for
// the code, exchange it, keep the token source — is done here through a
// Store instead: the flow (state hash, verifier, endpoints) is sealed under
// the connector when the flow starts, the callback on any replica takes it
// (single use), exchanges the code and seals the grant; every replica reads
// the grant, refreshes it under the store's lock, and drops it on
// invalid_grant.
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// Connector is one OAuth-protected downstream.
type Connector struct {
	ID    string
	Title string // shown on the callback page; ID when empty
	// URL is the MCP endpoint; it is also the resource indicator.
	URL string
	// ClientID/ClientSecret: a client registered by the operator (optional).
	ClientID, ClientSecret string
	// Scopes requested; empty means what the downstream's challenge or
	// metadata names.
	Scopes []string
	// PerCaller (`grants: caller`): each signed-in person's own grant.
	PerCaller bool
}

// Options configure a Manager.
type Options struct {
	// PublicURL is where browsers reach connecta; the redirect URI is
	// {PublicURL}/oauth/callback/{connector}. Required.
	PublicURL string
	Store     Store
	// HTTPClient makes discovery, registration and token requests (nil: a
	// default client with a 30 s timeout). The SDK's discovery refuses
	// private addresses unless this client's transport dials by itself.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Metrics    prometheus.Registerer // nil: no metrics
	Now        func() time.Time
	// FlowTTL bounds a pending authorization (default DefaultFlowTTL).
	FlowTTL time.Duration
	// RefreshBefore refreshes an access token this long before it expires
	// (default DefaultRefreshBefore).
	RefreshBefore time.Duration
	// OnGrantChange runs after a grant is stored, replaced or dropped (the
	// gateway invalidates the connector's catalog).
	OnGrantChange func(connector string)
	// Audit receives one record per grant change and per flow started.
	Audit func(ctx context.Context, rec AuditRecord)
	// SessionActor finds the browser's console session at the callback; a
	// per-caller connector's flow completes only in a browser signed in as
	// the actor that started it. nil: no per-caller flow can complete.
	SessionActor SessionActor
	// Stylesheet is the same-origin path of the stylesheet the callback
	// page links (the console's); "" leaves the page unstyled.
	Stylesheet string
	// Tracer receives connecta.oauth.refresh spans; nil is the no-op one.
	Tracer trace.TracerProvider
}

// Defaults.
const (
	DefaultFlowTTL       = 10 * time.Minute
	DefaultRefreshBefore = 60 * time.Second
	// TokenRequestTimeout bounds a token request connecta finishes on its
	// own, with the store work around it: a refresh (the lock, the token
	// request, the store update) or a callback's code exchange (taking the
	// flow, the token request, sealing the grant). Both run detached from
	// whoever needed them (flight.go), so that a call or a browser giving
	// up cannot lose what the authorization server has already issued — a
	// rotated refresh token, a grant for a spent code; this is their own
	// bound.
	TokenRequestTimeout = 30 * time.Second
	// ClientName is sent in dynamic registrations and the metadata document.
	ClientName = "connecta"
)

// AuditRecord is a grant change or a started flow, with no secret in it.
type AuditRecord struct {
	Connector string `json:"connector"`
	// Action: flow_started, granted, refreshed_failed, dropped, revoked.
	Action string `json:"action"`
	Actor  string `json:"actor,omitempty"`
	// Owner is whose grant, on a per-caller connector (display form).
	Owner   string `json:"owner,omitempty"`
	Issuer  string `json:"issuer,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Message string `json:"message,omitempty"`
}

// Manager runs flows and serves grants for the configured connectors. Safe
// for concurrent use; its only goroutines are flights — refreshes and
// callbacks' code exchanges under way — each bounded by
// TokenRequestTimeout, which Close waits for.
type Manager struct {
	opts       Options
	tracer     trace.Tracer
	connectors atomic.Pointer[map[string]*Connector] // replaced whole by SetConnectors
	http       *http.Client
	token      tokenClients // token requests: no redirects, no local addresses (tokenclient.go)
	log        *slog.Logger
	now        func() time.Time
	metrics    *metrics

	mu    sync.Mutex
	cache map[string]*grant // last grant read or written per connector
	// The flights under way (flight.go): refreshes by owner and the access
	// token they replace (grant.go), callbacks by owner and state hash
	// (flow.go); closed refuses new ones once Close has begun.
	refreshes           map[string]*flight[*grant]
	callbacks           map[string]*flight[callbackResult]
	closed              bool
	flying              sync.WaitGroup
	tokenRequestTimeout time.Duration // TokenRequestTimeout; tests shorten it
}

// New validates the configuration. No server is contacted.
func New(opts Options, connectors []Connector) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("oauth: a store is required")
	}
	if !strings.HasPrefix(opts.PublicURL, "https://") && !strings.HasPrefix(opts.PublicURL, "http://") {
		return nil, fmt.Errorf("oauth: publicUrl %q must be an http(s) URL", opts.PublicURL)
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	if opts.FlowTTL <= 0 {
		opts.FlowTTL = DefaultFlowTTL
	}
	if opts.RefreshBefore <= 0 {
		opts.RefreshBefore = DefaultRefreshBefore
	}
	m := &Manager{
		tracer: telemetry.Tracer(opts.Tracer),
		opts:   opts,
		http:   opts.HTTPClient,
		log:    opts.Logger,
		now:    opts.Now,
		cache:  map[string]*grant{},

		refreshes:           map[string]*flight[*grant]{},
		callbacks:           map[string]*flight[callbackResult]{},
		tokenRequestTimeout: TokenRequestTimeout,
	}
	if m.http == nil {
		m.http = &http.Client{Timeout: 30 * time.Second}
	}
	m.token = newTokenClients(m.http)
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	var err error
	if m.metrics, err = newMetrics(opts.Metrics); err != nil {
		return nil, err
	}
	if err := m.SetConnectors(connectors); err != nil {
		return nil, err
	}
	return m, nil
}

// SetConnectors replaces the set of OAuth connectors (a configuration
// reload); grants and flows of a connector that stays are untouched.
func (m *Manager) SetConnectors(connectors []Connector) error {
	next := make(map[string]*Connector, len(connectors))
	for i := range connectors {
		c := connectors[i]
		if c.ID == "" || c.URL == "" {
			return fmt.Errorf("oauth: connector %d needs an id and a url", i)
		}
		if c.Title == "" {
			c.Title = c.ID
		}
		next[c.ID] = &c
		m.metrics.zero(c.ID)
	}
	m.connectors.Store(&next)
	return nil
}

func (m *Manager) connector(id string) *Connector { return (*m.connectors.Load())[id] }

// Has reports whether id is an OAuth connector.
func (m *Manager) Has(id string) bool { return m.connector(id) != nil }

// RedirectURL is the connector's callback.
func (m *Manager) RedirectURL(id string) string {
	return m.opts.PublicURL + "/oauth/callback/" + id
}

// ClientMetadataURL is the client ID metadata document's URL (the client
// ID when the authorization server supports such documents).
func (m *Manager) ClientMetadataURL() string {
	return m.opts.PublicURL + "/oauth/client-metadata.json"
}

func (m *Manager) audit(ctx context.Context, rec AuditRecord) {
	m.log.LogAttrs(ctx, slog.LevelInfo, "oauth audit", slog.String("connector", rec.Connector),
		slog.String("action", rec.Action), slog.String("actor", rec.Actor), slog.String("owner", rec.Owner), slog.String("issuer", rec.Issuer),
		slog.String("outcome", rec.Outcome), slog.String("message", rec.Message))
	if m.opts.Audit != nil {
		m.opts.Audit(ctx, rec)
	}
}

func (m *Manager) grantChanged(id string) {
	if m.opts.OnGrantChange != nil {
		m.opts.OnGrantChange(id)
	}
}

// load reads and decodes a sealed value; (false, nil) when absent.
func (m *Manager) load(ctx context.Context, connector, name string, v any) (bool, error) {
	raw, err := m.opts.Store.Open(ctx, connector, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storeFailed("read the "+name, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		// A value this binary cannot read is as good as absent; say so once.
		m.log.ErrorContext(ctx, "oauth: stored value is unreadable; treating it as missing", "connector", connector, "name", name)
		return false, nil
	}
	return true, nil
}

func (m *Manager) save(ctx context.Context, connector, name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return storeFailed("encode the "+name, err)
	}
	if err := m.opts.Store.Seal(ctx, connector, name, raw); err != nil {
		return storeFailed("write the "+name, err)
	}
	return nil
}
