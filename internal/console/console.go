// Package console is the operator console at /operator: server-rendered
// pages (html/template, embedded) where an operator signed in through
// auth.oidc sees each connection's state, sets connectors' credentials into
// the vault, starts and revokes downstream OAuth grants, issues and revokes
// access tokens, and reads the activity history and the audit trail.
//
// Safety rules, in one place (see docs/console.md):
//   - every page carries the pinned CSP (no script at all; forms post only to
//     this origin), so an action that leads to another origin answers a
//     same-origin page whose link takes the operator there;
//   - a session is a random cookie (__Host-connecta-session) whose SHA-256
//     is the key of a row in the store; sign-out deletes the row, so a
//     replayed cookie finds nothing on any replica;
//   - every mutation is a POST that must come from this origin (Origin, or
//     Sec-Fetch-Site) and carry the session's CSRF token;
//   - no secret ever reaches a page, a URL or the log: a new token's secret
//     is the body of the POST's answer only; a credential value is written
//     and never read back.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/inbound"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/secheader"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// Paths and pinned header values.
const (
	Prefix       = "/operator"
	CallbackPath = Prefix + "/callback"
	// StylesheetPath is the console's stylesheet; the downstream OAuth
	// callback page links it too.
	StylesheetPath = Prefix + "/console.css"
	SessionCookie  = "__Host-connecta-session"
	signinCookie   = "__Host-connecta-signin"
	// CSP is the pinned policy of every console page (docs/DECISIONS.md).
	CSP = secheader.ConsoleCSP

	// CredentialName is the vault name of a connector's `credential` value.
	CredentialName = "value"

	signinTTL       = 10 * time.Minute
	activityPage    = 50
	auditPage       = 200
	maxFormBytes    = 64 << 10
	callbackBurst   = 20              // sign-in requests admitted at once, all addresses together
	callbackRefill  = 3 * time.Second // one more admitted per this long
	callbackReserve = 5               // of the burst, kept for callbacks carrying their state cookie
	addressBurst    = 10              // sign-in starts (and, apart, callbacks) of one client address at once
	addressRefill   = 3 * time.Second
	maxAddresses    = 4096 // addresses tracked; beyond, only the global bucket applies
	maxFilterBytes  = 256
	maxUserinfoBody = 1 << 20
)

// Options configure a Console. Config, Store and Gateway are required.
type Options struct {
	// Config is the running configuration (a reload may replace it).
	Config  func() *config.Config
	Store   store.Store
	Gateway *gateway.Gateway
	// Activity reads the history (nil: the page says it is not recorded).
	Activity *activity.Recorder
	// Tokens issues access tokens (nil: accessTokens is not configured).
	Tokens *accesstoken.Manager
	// Vault seals connector credentials (nil or unconfigured: refused with
	// a message naming vault.keys).
	Vault *vault.Vault
	// OAuth runs downstream flows (nil: no connector uses OAuth).
	OAuth *oauth.Manager
	// Verifier is the running auth.oidc access-token verifier (/mcp's):
	// the sign-in requests the connecta resource and takes the person's
	// actor and claims from the access token. nil: from the ID token.
	Verifier func() *inbound.Verifier
	// HTTPClient reaches the identity provider (nil: http.DefaultClient).
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
}

// Console serves /operator. Safe for concurrent use.
type Console struct {
	o     Options
	log   *slog.Logger
	now   func() time.Time
	pages *template.Template
	limit *limiter // every sign-in request, a reserve kept for real callbacks
	// starts and callbacks limit each client address apart, so one address
	// cannot spend the global bucket (a lockout of every operator).
	starts, callbacks *addrLimiter

	idpMu sync.Mutex
	idp   *identityProvider // discovered on first sign-in, per issuer
}

//go:embed templates/*.html static/console.css
var files embed.FS

// New builds a Console; templates are parsed here, once, not at init.
func New(o Options) (*Console, error) {
	if o.Config == nil || o.Store == nil || o.Gateway == nil {
		return nil, errors.New("console: Options.Config, Store and Gateway are required")
	}
	c := &Console{o: o, log: o.Logger, now: o.Now}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.now == nil {
		c.now = time.Now
	}
	t, err := template.New("console").Funcs(template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"seconds": func(ms *int64) string {
			if ms == nil {
				return ""
			}
			return fmt.Sprintf("%d s", *ms/1000)
		},
		"join": strings.Join,
	}).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c.pages = t
	c.limit = newLimiter(callbackBurst, callbackRefill, c.now)
	c.starts = newAddrLimiter(addressBurst, addressRefill, maxAddresses, c.now)
	c.callbacks = newAddrLimiter(addressBurst, addressRefill, maxAddresses, c.now)
	return c, nil
}

// Handler serves every path under /operator.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+StylesheetPath, c.serveCSS)
	mux.HandleFunc("GET "+Prefix+"/signin", c.serveSignin)
	mux.HandleFunc("GET "+CallbackPath, c.serveCallback)
	mux.Handle("POST "+Prefix+"/signout", c.mutationFor(c.serveSignout, false))

	mux.Handle("GET "+Prefix+"/{$}", c.page(c.serveConnections))
	mux.Handle("GET "+Prefix+"/credentials", c.page(c.serveCredentials))
	mux.Handle("GET "+Prefix+"/tokens", c.page(c.serveTokens))
	mux.Handle("GET "+Prefix+"/activity", c.page(c.serveActivity))
	mux.Handle("GET "+Prefix+"/overview", c.page(c.serveOverview))
	mux.Handle("GET "+Prefix+"/audit", c.page(c.serveAudit))
	mux.Handle("GET "+Prefix+"/access", c.page(c.serveAccess))

	mux.Handle("POST "+Prefix+"/connections/{id}/authorize", c.mutation(c.serveAuthorize))
	mux.Handle("POST "+Prefix+"/connections/{id}/revoke", c.mutation(c.serveRevokeGrant))
	mux.Handle("POST "+Prefix+"/connections/{id}/approve", c.mutation(c.serveApprove))
	mux.Handle("POST "+Prefix+"/credentials/{id}", c.mutation(c.serveSetCredential))
	mux.Handle("POST "+Prefix+"/credentials/{id}/delete", c.mutation(c.serveDeleteCredential))
	mux.Handle("POST "+Prefix+"/credentials/{id}/test", c.mutation(c.serveTestCredential))
	mux.Handle("POST "+Prefix+"/tokens", c.mutation(c.serveIssueToken))
	mux.Handle("POST "+Prefix+"/tokens/{id}/rename", c.mutation(c.serveRenameToken))
	mux.Handle("POST "+Prefix+"/tokens/{id}/revoke", c.mutation(c.serveRevokeToken))

	mux.Handle("GET "+MePath, c.pageFor(c.serveMe, false))
	mux.Handle("POST "+MePath+"/connect/{id}", c.mutationFor(c.serveMeConnect, false))
	mux.Handle("POST "+MePath+"/disconnect/{id}", c.mutationFor(c.serveMeDisconnect, false))
	mux.Handle("POST "+MePath+"/credential/{id}", c.mutationFor(c.serveMeSetCredential, false))
	mux.Handle("POST "+MePath+"/credential/{id}/delete", c.mutationFor(c.serveMeDeleteCredential, false))
	mux.Handle("POST "+MePath+"/revoke/{id}", c.mutation(c.serveMeRevoke))

	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Message: "There is no console page at this address."})
	})
	return headers(mux)
}

// headers sets the console's security headers on every answer.
func headers(next http.Handler) http.Handler { return secheader.Handler(secheader.Console, next) }

func (c *Console) cfg() *config.Config { return c.o.Config() }

// publicOrigin is scheme://host of publicUrl ("" when unset).
func (c *Console) publicOrigin() string {
	u, err := url.Parse(c.cfg().PublicURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// view is what every template gets.
type view struct {
	Title    string
	Nav      string // the current page's nav key
	Operator *Operator
	CSRF     string
	Flash    string // a one-line outcome of the last action
	Error    string
	Message  string
	Link     string // a next step's URL (same-origin pages linking out)
	LinkText string
	Data     any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	if v.Operator == nil {
		if s := sessionFrom(r.Context()); s != nil {
			v.Operator, v.CSRF = &s.op, s.csrf
		}
	}
	var b strings.Builder
	if err := c.pages.ExecuteTemplate(&b, name, v); err != nil {
		c.log.ErrorContext(r.Context(), "console: render", "page", name, "err", err)
		http.Error(w, "the console could not render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// fail answers a refused request with a clear page; nothing was changed.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	c.render(w, r, status, "message", view{Title: title, Error: msg})
}

func (c *Console) serveCSS(w http.ResponseWriter, _ *http.Request) {
	b, _ := files.ReadFile("static/console.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

// back redirects (303) to a console page with a one-line outcome in the
// query. The message is fixed text naming ids, never a secret, and it is
// signed with the session's CSRF token, so a crafted link cannot make the
// console display words of someone else's choosing.
func back(w http.ResponseWriter, r *http.Request, page, flash string) {
	u := Prefix + page
	if s := sessionFrom(r.Context()); s != nil && flash != "" {
		u += "?" + url.Values{"flash": {flash}, "sig": {flashSig(s.csrf, flash)}}.Encode()
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// flash reads the outcome back when its signature matches this session.
func flash(r *http.Request) string {
	q := r.URL.Query()
	f, sig := q.Get("flash"), q.Get("sig")
	s := sessionFrom(r.Context())
	if s == nil || f == "" || len(f) > 1024 || !hmac.Equal([]byte(sig), []byte(flashSig(s.csrf, f))) {
		return ""
	}
	return f
}

func flashSig(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("flash\x00" + msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// bucket is a token bucket's state: burst tokens, one more every refill.
type bucket struct {
	tokens float64
	last   time.Time
}

// take spends one token if that leaves at least floor, after refilling.
func (b *bucket) take(now time.Time, burst float64, refill time.Duration, floor float64) bool {
	b.tokens = min(burst, b.tokens+float64(now.Sub(b.last))/float64(refill))
	b.last = now
	if b.tokens-1 < floor {
		return false
	}
	b.tokens--
	return true
}

// full reports whether the bucket has refilled (it then equals a new one).
func (b *bucket) full(now time.Time, burst float64, refill time.Duration) bool {
	return b.tokens+float64(now.Sub(b.last))/float64(refill) >= burst
}

// limiter is one token bucket.
type limiter struct {
	mu     sync.Mutex
	b      bucket
	burst  float64
	refill time.Duration
	now    func() time.Time
}

func newLimiter(burst int, refill time.Duration, now func() time.Time) *limiter {
	return &limiter{b: bucket{tokens: float64(burst), last: now()}, burst: float64(burst), refill: refill, now: now}
}

// allow spends a token, leaving at least reserve for allow(0).
func (l *limiter) allow(reserve int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.take(l.now(), l.burst, l.refill, float64(reserve))
}

// addrLimiter is a token bucket per client address: the connection's
// RemoteAddr (no forwarded-for header is trusted), an IPv6 address by its
// /64, which one host usually holds whole. At most max addresses are
// tracked; refilled buckets are dropped to make room, and an address that
// finds no room is let through (the global bucket still applies).
type addrLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	burst   float64
	refill  time.Duration
	max     int
	now     func() time.Time
}

func newAddrLimiter(burst int, refill time.Duration, maxAddrs int, now func() time.Time) *addrLimiter {
	return &addrLimiter{buckets: map[string]*bucket{}, burst: float64(burst), refill: refill, max: maxAddrs, now: now}
}

func (l *addrLimiter) allow(remoteAddr string) bool {
	key := clientKey(remoteAddr)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.max {
			for k, o := range l.buckets {
				if o.full(now, l.burst, l.refill) {
					delete(l.buckets, k)
				}
			}
			if len(l.buckets) >= l.max {
				return true
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	return b.take(now, l.burst, l.refill, 0)
}

// clientKey is the address a client is limited by.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// ctxKey carries the request's session.
type ctxKey struct{}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(ctxKey{}).(*session)
	return s
}
