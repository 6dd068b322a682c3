package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/stdioshim"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/singleflight"

	"go.opentelemetry.io/otel/trace"
)

type connectorKind int

const (
	kindHTTP connectorKind = iota
	kindStdio
	kindInProcess
)

func (k connectorKind) String() string {
	switch k {
	case kindHTTP:
		return "http"
	case kindStdio:
		return "stdio"
	default:
		return "inprocess"
	}
}

// connector is one configured downstream: its session (connected lazily,
// reconnected after a failure, stdio restarted with backoff), its catalog
// cache and its health.
type connector struct {
	g        *Gateway
	spec     ConnectorSpec
	kind     connectorKind
	origin   string // details.host for HTTP connectors
	http     *http.Client
	logger   *slog.Logger
	readOnly map[string]bool
	approval map[string]bool
	gate     *callGate   // downstream call admission (calladmission.go)
	pin      string      // PinOff, PinWarn or PinQuarantine
	stderr   *tailBuffer // stdio only: redacted on read
	red      *redactor   // every downstream text the model or operator reads

	connTok chan struct{} // one connect at a time

	mu       sync.Mutex
	closed   bool
	sess     *liveSession
	starts   int                // stdio processes started
	crashes  int                // consecutive stdio exits/failed starts since the last success
	lastExit time.Time          // when the last stdio process ended or failed to start
	proc     *stdioshim.Process // the last stdio process started
	cat      catalogState
	proto    string // protocol version negotiated at the last connect
	// discover bounds server/discover (discover.go).
	discover discoverBound
	// refresh is the one catalog refresh in flight; waiters share its
	// outcome (golang.org/x/sync/singleflight).
	refresh singleflight.Group
	health  healthState

	gens int // live generations containing this connector; guarded by Gateway.regMu

	// who is the actor a per-caller connector's child belongs to (zero for
	// the configured connector itself); callers are its children by actor,
	// guarded by mu (percaller.go).
	who       actor.ID
	callers   map[actor.ID]*callerChild
	lastSweep time.Time  // the last idle-child sweep (percaller.go)
	parent    *connector // a per-caller child's configured connector
}

type healthState struct {
	lastSuccess, lastFailure time.Time
	lastCode                 Code
	consecutive              int
}

// liveSession is one connected MCP session (under 2026-07-28 a connection
// without session state).
type liveSession struct {
	cs     *mcp.ClientSession
	server *mcp.ServerSession // in-process only
	proc   *stdioshim.Process // stdio only
	dead   atomic.Bool
	// listed: a catalog refresh has listed on this connection (catalogSession).
	listed atomic.Bool

	// A retired connection closes when its last call ends (retire).
	useMu    sync.Mutex
	users    int
	retiring bool
}

// stateless reports whether the version is one without sessions.
func stateless(version string) bool { return version >= statelessProtocolVersion }

// use counts a call on ls; false once ls is retiring (take another).
func (ls *liveSession) use() bool {
	ls.useMu.Lock()
	defer ls.useMu.Unlock()
	if ls.retiring {
		return false
	}
	ls.users++
	return true
}

// done ends a call counted by use, closing a retired connection after its
// last call. A nil ls is nothing to end.
func (ls *liveSession) done(g *Gateway) {
	if ls == nil {
		return
	}
	ls.useMu.Lock()
	ls.users--
	last := ls.retiring && ls.users == 0
	ls.useMu.Unlock()
	if last {
		g.closeLater(ls)
	}
}

// retire stops new calls on ls and closes it once the calls on it end.
func (ls *liveSession) retire(g *Gateway) {
	ls.useMu.Lock()
	first := !ls.retiring
	ls.retiring = true
	idle := ls.users == 0
	ls.useMu.Unlock()
	if first && idle {
		g.closeLater(ls)
	}
}

func newConnector(g *Gateway, spec ConnectorSpec) (*connector, error) {
	return newConnectorFor(g, spec, actor.ID{})
}

// newConnectorFor builds a connector whose requests carry who's own grant
// or credential (the zero ID: the connector's one).
func newConnectorFor(g *Gateway, spec ConnectorSpec, who actor.ID) (*connector, error) {
	c := &connector{
		who:      who,
		g:        g,
		spec:     spec,
		logger:   g.logger.With("connector", spec.ID),
		readOnly: setOf(spec.ReadOnly),
		approval: setOf(spec.ApprovalRequired),
		red:      newRedactor(spec.Secrets),
		connTok:  make(chan struct{}, 1),
		pin:      spec.CatalogPin,
	}
	c.discover.timeout = DiscoverTimeout
	switch c.pin {
	case "":
		c.pin = PinWarn
	case PinOff, PinWarn:
	case PinQuarantine:
		if g.opts.Store == nil {
			return nil, fmt.Errorf("catalog pin quarantine needs a store for its approvals")
		}
	default:
		return nil, fmt.Errorf("catalog pin %q is not one of off, warn, quarantine", c.pin)
	}
	kinds := 0
	if spec.URL != "" {
		kinds++
		c.kind = kindHTTP
		c.origin = originOf(spec.URL)
		if c.origin == "" {
			return nil, fmt.Errorf("url is not an http(s) URL")
		}
		base := http.RoundTripper(http.DefaultTransport)
		if g.opts.HTTPClient != nil && g.opts.HTTPClient.Transport != nil {
			base = g.opts.HTTPClient.Transport
		}
		obs := &observingTransport{base: base, red: c.red}
		if spec.Credential != nil {
			obs.also = spec.Credential.Header
		}
		base = obs
		if spec.OAuth {
			if g.opts.OAuth == nil {
				return nil, fmt.Errorf("oauth is set but the gateway has no OAuth transport")
			}
			base = g.opts.OAuth.Transport(spec.ID, who, base)
		}
		if spec.Credential != nil {
			if g.opts.Credentials == nil {
				return nil, fmt.Errorf("credential is set but the gateway has no credential source")
			}
			base = &credentialTransport{base: base, id: spec.ID, who: who, noCaller: spec.PerCaller && who.IsZero(), slot: *spec.Credential, src: g.opts.Credentials}
		}
		c.http = &http.Client{
			Transport: &captureTransport{base: base, headers: spec.Headers, maxBytes: g.maxBody, discover: &c.discover},
			// Redirects are not followed: a redirect could carry the
			// configured credential headers to another origin.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if len(spec.Command) > 0 {
		kinds++
		c.kind = kindStdio
		c.stderr = newTailBuffer(StderrTailBytes, c.red)
	}
	if spec.Credential != nil && spec.URL == "" {
		return nil, fmt.Errorf("credential applies only to url connectors")
	}
	if spec.OAuth && spec.URL == "" {
		return nil, fmt.Errorf("oauth applies only to url connectors")
	}
	if spec.PerCaller && (spec.URL == "" || spec.SharedSession) {
		return nil, fmt.Errorf("a per-caller grant or credential needs a url connector without sharedSession")
	}
	if spec.InProcess != nil {
		kinds++
		c.kind = kindInProcess
	}
	if kinds != 1 {
		return nil, fmt.Errorf("exactly one of url, command or an in-process server must be set")
	}
	c.gate = newCallGate(g, spec.ID, spec.Admission)
	return c, nil
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// credentialKey names the config key an operator edits for this connector.
func (c *connector) credentialKey() string {
	if c.kind == kindStdio {
		return "connectors." + c.spec.ID + ".env"
	}
	return "connectors." + c.spec.ID + ".headers"
}

// session returns a live session, connecting (or restarting a stdio
// process, after its backoff) when there is none. ctx carries the caller's
// exchange, so a failed initialize classifies like a failed call.
func (c *connector) session(ctx context.Context) (*liveSession, error) {
	select {
	case c.connTok <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.connTok }()

	c.mu.Lock()
	closed, ls, crashes, lastExit := c.closed, c.sess, c.crashes, c.lastExit
	c.mu.Unlock()
	if closed {
		return nil, errGatewayClosed
	}
	if ls != nil && !ls.dead.Load() {
		return ls, nil
	}
	if c.kind == kindStdio && crashes > 0 {
		wait := time.Until(lastExit.Add(stdioBackoff(crashes)))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
	}
	ls, err := c.connect(ctx, false)
	c.mu.Lock()
	if err != nil {
		if c.kind == kindStdio && ctx.Err() == nil {
			c.crashes++
			c.lastExit = c.g.now()
		}
		c.mu.Unlock()
		if c.kind == kindStdio && ctx.Err() == nil {
			c.logger.WarnContext(ctx, "stdio server could not be started", "reason", c.boundText(err.Error()), "stderrTail", c.stderr.String())
		}
		return nil, err
	}
	if c.closed {
		c.mu.Unlock()
		ls.close()
		return nil, errGatewayClosed
	}
	c.sess = ls
	c.g.wg.Add(1)
	c.mu.Unlock()
	go c.watch(ls)
	return ls, nil
}

// stdioBackoff is min(5 s, 100 ms·2^(n−1)) for the n-th consecutive failure.
func stdioBackoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := stdioRestartBackoffInitial
	for i := 1; i < n && d < stdioRestartBackoffMax; i++ {
		d *= 2
	}
	return min(d, stdioRestartBackoffMax)
}

// connect opens a session. A scoped one (P4) opens no standalone SSE
// stream: it lives for one execution or call, and the connector's own
// session hears list changes.
func (c *connector) connect(ctx context.Context, scoped bool) (*liveSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "connecta", Version: c.g.opts.Version}, &mcp.ClientOptions{
		Logger:       c.logger,
		Capabilities: &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.invalidateCatalog()
		},
		ProgressNotificationHandler: c.g.progress.deliver,
		// Mid-call input is unsupported (input_required_unsupported), so the
		// SDK must hand input-required results back instead of answering them.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	ls := &liveSession{}
	var transport mcp.Transport
	switch c.kind {
	case kindHTTP:
		transport = &mcp.StreamableClientTransport{Endpoint: c.spec.URL, HTTPClient: c.http, DisableStandaloneSSE: scoped}
	case kindStdio:
		proc, err := c.startStdio(ctx)
		if err != nil {
			return nil, err
		}
		ls.proc = proc
		transport = &mcp.IOTransport{Reader: stdioReader(proc), Writer: procConn{proc}}
	case kindInProcess:
		server := c.spec.InProcess()
		if server == nil {
			return nil, errors.New("in-process server constructor returned nil")
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(c.g.life, st, nil)
		if err != nil {
			return nil, fmt.Errorf("connect in-process server: %w", err)
		}
		ls.server = ss
		transport = ct
	}
	if c.kind != kindHTTP { // HTTP results are captured by the round tripper (rawmcp.Sniff)
		transport = rawmcp.Transport(transport)
	}
	// auto tries 2026-07-28 first; a scoped session (P4) of a downstream
	// already known to speak a session protocol goes straight to initialize,
	// and so does every session of one that left a discover unanswered.
	version := statelessProtocolVersion
	c.mu.Lock()
	known := c.proto
	c.mu.Unlock()
	if c.spec.LegacyVersion || (scoped && known != "" && !stateless(known)) || c.discover.silent.Load() {
		version = mcpProtocolVersion
	}
	if version == statelessProtocolVersion && c.kind != kindHTTP {
		transport = c.discover.transport(transport) // HTTP: captureTransport bounds it
	}
	// The session outlives the call that opened it (the SDK keeps the
	// connect context's values): its later requests belong to no trace.
	cs, err := client.Connect(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		if ls.server != nil {
			_ = ls.server.Close()
		}
		if ls.proc != nil {
			// A server that exits during initialize: say how it ended.
			if x := c.exitOf(); x != nil && ctx.Err() == nil {
				err = x
			}
			ls.proc.Stop(0)
		}
		return nil, err
	}
	ls.cs = cs
	if ir := cs.InitializeResult(); ir != nil {
		c.mu.Lock()
		c.proto = ir.ProtocolVersion
		c.mu.Unlock()
	}
	return ls, nil
}

// isStateless reports whether the connector's downstream last negotiated a
// version without sessions.
func (c *connector) isStateless() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return stateless(c.proto)
}

// catalogSession is the connection a catalog refresh lists on. Under
// 2026-07-28 an HTTP connector's refresh starts from a fresh connection
// (its one server/discover learns the server's version and capabilities
// again, and the SDK's own list cache starts empty); that connection then
// serves every call until the next refresh, and the previous one closes
// once its calls end. A connection a call opened since the last refresh is
// used as it is: it has just discovered. Session protocols, stdio and the
// in-process server keep their one session.
func (c *connector) catalogSession(ctx context.Context) (*liveSession, error) {
	for {
		ls, err := c.session(ctx)
		if err != nil || c.kind != kindHTTP || !c.isStateless() || !ls.listed.Swap(true) {
			return ls, err
		}
		c.mu.Lock()
		if c.sess == ls {
			c.sess = nil
		}
		c.mu.Unlock()
		ls.retire(c.g)
	}
}

// watch ends when the session does (server exit, transport failure, close)
// and clears it so the next use reconnects.
func (c *connector) watch(ls *liveSession) {
	defer c.g.wg.Done()
	err := ls.cs.Wait()
	ls.dead.Store(true)
	// Closed, not only forgotten: a 2026-07-28 connection the SDK ended on
	// a transport failure may still hold its subscriptions/listen stream,
	// which only ClientSession.Close cancels.
	ls.close()
	c.mu.Lock()
	if c.sess == ls {
		c.sess = nil
	}
	closed := c.closed
	ls.useMu.Lock()
	retired := ls.retiring
	ls.useMu.Unlock()
	if retired { // replaced at a catalog refresh (catalogSession)
		c.mu.Unlock()
		return
	}
	if c.kind == kindStdio && !closed {
		c.crashes++
		c.lastExit = c.g.now()
	}
	c.mu.Unlock()
	if closed {
		return
	}
	attrs := []any{"kind", c.kind.String()}
	if err != nil {
		attrs = append(attrs, "err", c.boundText(err.Error())) // never the URL's query
	}
	if ls.proc != nil {
		if x := c.exitOf(); x != nil {
			attrs = append(attrs, "exit", x.how)
		}
	}
	if c.stderr != nil {
		if tail := c.stderr.String(); tail != "" {
			attrs = append(attrs, "stderrTail", tail)
		}
	}
	c.logger.Warn("downstream session ended", attrs...)
}

// drop abandons a session after a transport failure so the next call
// reconnects; closing runs on a goroutine the gateway waits for.
func (c *connector) drop(ls *liveSession) {
	if ls == nil || ls.dead.Swap(true) {
		return
	}
	c.mu.Lock()
	if c.sess == ls {
		c.sess = nil
	}
	if c.closed {
		c.mu.Unlock()
		ls.close()
		return
	}
	c.g.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.g.wg.Done()
		ls.close()
	}()
}

func (ls *liveSession) close() {
	if ls.cs != nil {
		_ = ls.cs.Close()
	}
	if ls.server != nil {
		_ = ls.server.Close()
	}
}

func (c *connector) close() {
	c.mu.Lock()
	c.closed = true
	ls := c.sess
	c.sess = nil
	children := c.callers
	c.callers = nil
	c.mu.Unlock()
	for _, ch := range children {
		ch.c.close()
	}
	if ls != nil {
		ls.dead.Store(true)
		ls.close()
	}
}

// recordSuccess / recordFailure are health accounting: a live downstream
// answer, or a downstream failure (never local refusals or cancellations).
// A per-caller child reports to its connector's health too, except one
// caller's auth_required: that caller has no grant or credential, which
// says nothing about the downstream (percaller.go).
func (c *connector) recordSuccess() {
	c.mu.Lock()
	c.health.lastSuccess = c.g.now()
	c.health.consecutive = 0
	c.crashes = 0
	c.mu.Unlock()
	if c.parent != nil {
		c.parent.recordSuccess()
	}
}

func (c *connector) recordFailure(code Code) {
	c.mu.Lock()
	c.health.lastFailure = c.g.now()
	c.health.lastCode = code
	c.health.consecutive++
	c.mu.Unlock()
	if c.parent != nil && code != CodeAuthRequired {
		c.parent.recordFailure(code)
	}
}

func (c *connector) healthSnapshot() ConnectorHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := ConnectorHealth{
		ID:                  c.spec.ID,
		Kind:                c.kind.String(),
		Connected:           c.sess != nil && !c.sess.dead.Load(),
		LastSuccess:         c.health.lastSuccess,
		LastFailure:         c.health.lastFailure,
		LastErrorCode:       string(c.health.lastCode),
		ConsecutiveFailures: c.health.consecutive,
		ProtocolVersion:     c.proto,
	}
	if c.starts > 1 {
		h.Restarts = c.starts - 1
	}
	h.CatalogPin = c.pin
	if e := c.cat.entry; e != nil {
		h.CatalogTools = len(e.tools)
		h.CatalogFetchedAt = e.fetchedAt
		h.CatalogQuarantined = e.quarantined
	}
	return h
}
