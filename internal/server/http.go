package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/secheader"
)

// requestInfo travels with one HTTP request (or one stdio tool call).
type requestInfo struct {
	id    string
	actor string   // who.String(), as activity and logs write it
	who   actor.ID // the typed actor: everything kept per actor is keyed by it
	// view is what the caller reaches (access rules; nil = everything),
	// fixed when it authenticated: the request finishes under it.
	view *gateway.View
	// accessOn: access rules were in force when the caller authenticated.
	accessOn bool
	// operator: a static token with operator: true, or the local user of a
	// loopback-only server (no tokens).
	operator bool
	// ctx is the HTTP request's own context: the SDK may run tool handlers on
	// a context detached from it, so handlers merge it back in (docs/PITFALLS.md).
	ctx context.Context
	// extendWrite pushes the response write deadline out when a call asks
	// for a longer deadline than the server-wide write timeout allows.
	extendWrite func(d time.Duration)
	// rpcID is the JSON-RPC id of the request this POST carries, as
	// rpcIDKey writes it; "" when none (stdio cancels through its session).
	rpcID string
	// flush is an event-stream response's flush gate (nil for JSON replies).
	flush *flushGate
	// start is when the request arrived: its span, created once the caller
	// is authenticated, starts here. header is the HTTP request's (its
	// traceparent is honoured only after authentication); traceID is the
	// request's trace, once its span exists, for the access log line.
	start   time.Time
	header  http.Header
	traceID string
}

type requestInfoKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// Handler returns the HTTP handler: /mcp, /health, /metrics (unless
// MetricsElsewhere), /activity.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.serveHealth)
	if !s.opts.MetricsElsewhere {
		mux.Handle("GET /metrics", s.operatorsWithAccess(s.metricsEndpoint()))
	}
	mux.Handle("GET /activity", s.authenticated(http.HandlerFunc(s.serveActivity)))
	// Protected resource metadata (RFC 9728), open like any discovery
	// document; 404 while auth.oidc is not configured.
	mux.HandleFunc("GET "+inbound.MetadataPath, s.serveResourceMetadata)
	mux.HandleFunc("GET "+inbound.MetadataSuffixPath, s.serveResourceMetadata)
	mux.HandleFunc("OPTIONS "+inbound.MetadataPath, s.serveResourceMetadata)
	mux.HandleFunc("OPTIONS "+inbound.MetadataSuffixPath, s.serveResourceMetadata)
	mux.Handle("/mcp", s.refuseBatches(s.admitted(s.authenticated(s.bodyRead(s.originChecked(s.rpcRouted()))))))
	if s.opts.OAuth != nil {
		// A browser arrives here from the authorization server: no bearer.
		mux.Handle("GET /oauth/callback/{connector}", s.spanned("connecta.oauth.callback", http.HandlerFunc(s.opts.OAuth.Callback)))
		mux.HandleFunc("GET /oauth/client-metadata.json", s.opts.OAuth.ClientMetadata)
	}
	if s.opts.Operator != nil {
		// The console sets its own CSP and headers over securityHeaders'.
		console := s.spanned("connecta.console", s.opts.Operator)
		mux.Handle("/operator", console)
		mux.Handle("/operator/", console)
		mux.Handle("/me", console) // a person's own connections: the same console and sign-in
		mux.Handle("/me/", console)
	}
	return s.logged(securityHeaders(s.hostChecked(mux)))
}

func (s *Server) metricsEndpoint() http.Handler {
	// OpenMetrics when the scraper asks for it: the format that carries
	// exemplars (the trace id on the duration histograms).
	return promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{Registry: s.registerer, EnableOpenMetrics: true})
}

// MetricsHandler serves only GET /metrics, for a listener of its own.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metricsEndpoint())
	return securityHeaders(s.hostChecked(mux))
}

// HTTPServer returns an http.Server for the handler with timeouts sized so
// the write deadline exceeds the request admission wait, the executor's
// queue wait and the longest deadline a request may legitimately run to,
// plus grace (docs/PITFALLS.md).
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.opts.Requests.QueueTimeout + time.Minute,
		WriteTimeout:      s.writeTimeout(),
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

func (s *Server) writeTimeout() time.Duration {
	longest := s.opts.ExecutionTimeout
	set := s.settingsNow()
	if set.hostCallTimeout > longest {
		longest = set.hostCallTimeout
	}
	return set.requests.QueueTimeout + s.opts.ExecutorQueueTimeout + longest + writeGrace
}

// securityHeaders sets the API kind's headers on every answer; the console
// and the OAuth callback page set their own kind over them.
func securityHeaders(next http.Handler) http.Handler { return secheader.Handler(secheader.API, next) }

// admitted takes a request permit before anything else, including auth
// (docs/meta-tools.md §12), fairly between callers (admissionKey). The
// permit is held until the response body ends.
func (s *Server) admitted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := s.admission.acquire(r.Context(), admissionKey(r))
		if err != nil {
			switch {
			case errors.Is(err, errShuttingDown):
				writeRPCRefusal(w, rpcServerShuttingDown, "Server is shutting down; retry on another instance or later.", "server_shutting_down", s.requestLimits().RetryAfter)
			case errors.Is(err, errOverloaded):
				writeRPCRefusal(w, rpcServerOverloaded, "Server overloaded; retry later.", "server_overloaded", s.requestLimits().RetryAfter)
			default: // the client went away while queued: nobody is listening
			}
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// writeRPCRefusal writes the 503 JSON-RPC error of docs/meta-tools.md §12.
func writeRPCRefusal(w http.ResponseWriter, code int, message, dataCode string, retryAfter time.Duration) {
	ms := retryAfter.Milliseconds()
	w.Header().Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(float64(ms)/1000))), 10))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	body, _ := json.Marshal(rpcRefusal{
		JSONRPC: "2.0",
		Error: rpcRefusalError{Code: code, Message: message,
			Data: rpcRefusalData{Code: dataCode, Retryable: true, RetryAfterMs: ms}},
	})
	_, _ = w.Write(body)
}

// rpcRefusal is a JSON-RPC error response with a null id, in wire order.
type rpcRefusal struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *int            `json:"id"`
	Error   rpcRefusalError `json:"error"`
}

type rpcRefusalError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    rpcRefusalData `json:"data"`
}

type rpcRefusalData struct {
	Code         string `json:"code"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

func isLoopbackRemote(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// originChecked refuses cross-origin browser requests (CSRF and DNS
// rebinding from a page); non-browser clients send no Origin and pass. The
// SDK's own loopback Host check is disabled (server.go): hostChecked, over
// every route, replaces it, because it must also admit PublicURL's host.
func (s *Server) originChecked(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range s.opts.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			s.log.Warn("ignoring trusted origin", "origin", o, "err", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopbackOrigin(r) {
			next.ServeHTTP(w, r)
			return
		}
		if err := cop.Check(r); err != nil {
			writeJSONError(w, http.StatusForbidden, "cross_origin", "Cross-origin requests are refused.")
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin, r.Host) {
			writeJSONError(w, http.StatusForbidden, "cross_origin", "Cross-origin requests are refused.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rpcRouted reads the one JSON-RPC message a POST carries (the body is
// already bounded) and routes it: a notifications/cancelled is resolved here
// against the in-flight requests of the same actor, since in stateless HTTP
// no session could match it; a request that asks for progress or log
// messages goes to the event-stream front end; everything else to the JSON
// one, whose replies are unchanged byte for byte.
func (s *Server) rpcRouted() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context())
		held, ok := r.Body.(*heldBody) // bodyRead holds a POST's whole body
		if !ok || info == nil {
			s.mcpJSON.ServeHTTP(w, r)
			return
		}
		body := held.b // read in place (leading blanks already dropped): the SDK still gets every byte
		var msg rpcPeek
		if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &msg) == nil {
			if msg.Method == "notifications/cancelled" && len(msg.ID) == 0 {
				result := s.inflight.Cancel(info.who.Key(), rpcIDKey(msg.Params.RequestID))
				s.metrics.cancels.WithLabelValues(string(result)).Inc()
				s.log.DebugContext(r.Context(), "cancellation", "requestId", info.id, "actor", info.actor, "result", string(result))
				w.WriteHeader(http.StatusAccepted) // a notification has no reply
				return
			}
			if len(msg.ID) > 0 && msg.Method != "" && !servedMethod(msg.Method) && r.Header.Get("Mcp-Protocol-Version") < mcpStatelessVersion {
				// The SDK answers an unknown method with a text/plain 400
				// under the session protocols (under 2026-07-28 with a
				// JSON-RPC error already): a JSON-RPC client needs the error.
				writeMethodNotFound(w, msg.ID, msg.Method)
				return
			}
			info.rpcID = rpcIDKey(msg.ID)
			if token, level := streamWants(msg.Params.Meta); token != nil || level != "" {
				info.flush = &flushGate{ResponseWriter: w}
				s.mcpSSE.ServeHTTP(info.flush, r)
				return
			}
		}
		s.mcpJSON.ServeHTTP(w, r)
	})
}

// servedMethod reports whether the go-sdk server routes a request method
// (its serverMethodInfos, requests only; notifications need no answer).
// TestUnknownMethod_JSONRPCErrorInAJSONBody checks that the SDK routes each
// one; a method the SDK gains is answered -32601 here until it is added.
func servedMethod(m string) bool {
	switch m {
	case "initialize", "ping", "server/discover", "subscriptions/listen",
		"tools/list", "tools/call", "logging/setLevel", "completion/complete",
		"prompts/list", "prompts/get", "resources/list", "resources/templates/list",
		"resources/read", "resources/subscribe", "resources/unsubscribe":
		return true
	}
	return false
}

// writeMethodNotFound is JSON-RPC's -32601 for the request id, as JSON.
func writeMethodNotFound(w http.ResponseWriter, id json.RawMessage, method string) {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{rpcMethodNotFound, "Method not found: " + jstext.Clamp(method, maxMethodEchoBytes)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// rpcPeek is what rpcRouted reads of a JSON-RPC message.
type rpcPeek struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
		Meta      map[string]any  `json:"_meta"`
	} `json:"params"`
}

// hostChecked refuses a DNS-rebinding attempt on every route, before
// admission: a page whose name rebinds to 127.0.0.1 must read neither /mcp
// nor /activity, /health, /metrics or the console of a loopback listener.
func (s *Server) hostChecked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.rebinding(r) {
			writeJSONError(w, http.StatusForbidden, "invalid_host", "Requests to a loopback listener must name a loopback host.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rebinding reports a DNS-rebinding attempt: a request that arrived on a
// loopback address but names a foreign Host (other than PublicURL's).
func (s *Server) rebinding(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopbackRemote(local.String()) {
		return false
	}
	if s.publicHost != "" && strings.EqualFold(r.Host, s.publicHost) {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// loopbackOrigin reports a page served by this very listener under either
// loopback spelling: on a loopback listener, an Origin of localhost,
// 127.0.0.0/8 or ::1 on the listener's own port. http://localhost:8787 and
// http://127.0.0.1:8787 are different origins to a browser (and
// cross-site), but the same server; a page on another local port is not.
func loopbackOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil || !isLoopbackHost(lhost) {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() != lport {
		return false
	}
	return isLoopbackHost(u.Hostname())
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (s *Server) originAllowed(origin, host string) bool {
	for _, o := range s.opts.TrustedOrigins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	_, rest, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(rest, host)
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	_, _ = w.Write(body)
}

// logged wraps every request: request id, payload-free access log, metrics.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		rc := http.NewResponseController(sw)
		info := &requestInfo{id: newRequestID(), ctx: r.Context(), start: start, header: r.Header}
		info.extendWrite = func(d time.Duration) { _ = rc.SetWriteDeadline(time.Now().Add(d + writeGrace)) }
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		next.ServeHTTP(sw, r)
		route := routeOf(r.URL.Path)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("requestId", info.id), slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.String("actor", info.actor), slog.String("traceId", info.traceID),
			slog.Int64("durationMs", time.Since(start).Milliseconds()))
	})
}

func routeOf(path string) string {
	switch path {
	case "/mcp", "/health", "/metrics", "/activity":
		return path
	}
	return "other"
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusWriter remembers the status code; Unwrap keeps http.ResponseController
// (flush, write deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack is not used by MCP; provided so wrapping never hides it.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// serveHealth is open and payload-free (docs/meta-tools.md §14). With access
// rules the connector names and states are for operators: anyone else
// (load balancers) gets {status, version}.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	h := s.Health()
	status := http.StatusOK // ok and degraded: the server itself serves
	if h.Status == StatusShuttingDown {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if set := s.settingsNow(); set.access.Configured() && !s.presentsOperator(r, set) {
		_ = encodeJSON(w, healthBrief{Status: h.Status, Version: h.Version})
		return
	}
	_ = encodeJSON(w, h)
}

// healthBrief is /health for a caller without an operator credential while
// access rules are in force.
type healthBrief struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// presentsOperator reports whether r carries one valid bearer credential of
// an operator (a static token with operator: true, an OIDC operator). It
// refuses nothing itself: a surface decides what a non-operator gets.
func (s *Server) presentsOperator(r *http.Request, set *settings) bool {
	if checkAuthorizationShape(r.Header.Values("Authorization")) != nil {
		return false
	}
	token := strings.Fields(r.Header.Get("Authorization"))[1]
	caller, _, rej := s.verifyBearer(r.Context(), set, token)
	return rej == nil && caller.Operator
}

// operatorsWithAccess serves next to operators only while access rules are
// in force (the metrics name connectors); without them, to anyone.
func (s *Server) operatorsWithAccess(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := s.settingsNow()
		if set.access.Configured() && !s.presentsOperator(r, set) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="connecta"`)
			writeJSONError(w, http.StatusUnauthorized, "unauthorized", "With access rules configured, /metrics needs an operator's bearer token (or serve it on metricsListen).")
			return
		}
		next.ServeHTTP(w, r)
	})
}
