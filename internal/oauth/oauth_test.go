package oauth_test

import (
	"context"
	"errors"
	"github.com/connecta-dev/connecta/internal/actor"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/oauth"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

// rig is a Manager for one connector "tracker" in front of a protected
// server, with its callback served on a loopback publicUrl.
type rig struct {
	p       oidctest.AuthServer
	rs      *oidctest.ProtectedServer
	m       *oauth.Manager
	store   oauth.Store
	public  string
	reg     *prometheus.Registry
	mu      sync.Mutex
	audits  []oauth.AuditRecord
	changed int
	// clk is the Manager's clock; replicas share one (a.clk = b.clk).
	clk *clock
	// callbackStarted and callbackEnded get a value each time the rig's
	// server starts and finishes handling a callback (a test that cares
	// reads them; when full, values are dropped).
	callbackStarted, callbackEnded chan struct{}
}

// clock is real time plus an offset a test moves forward: a token
// "expires" for the Manager without the test sleeping through its lifetime.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func newRig(t *testing.T, popts oidctest.Options, store oauth.Store) *rig {
	t.Helper()
	p := oidctest.StartAuthServer(t, popts)
	rs := oidctest.NewProtectedServer(t, p)
	return newRigFor(t, p, rs, store)
}

func newRigFor(t *testing.T, p oidctest.AuthServer, rs *oidctest.ProtectedServer, store oauth.Store) *rig {
	return newRigWithPublic(t, p, rs, store, "")
}

// newRigWithPublic: public "" is this rig's own callback address; another
// rig's address makes this one a replica behind the same public URL.
func newRigWithPublic(t *testing.T, p oidctest.AuthServer, rs *oidctest.ProtectedServer, store oauth.Store, public string) *rig {
	t.Helper()
	return newRigAt(t, p, rs, store, public, false)
}

// newRigAt: perCaller makes "tracker" a `grants: caller` connector whose
// callback finds the browser's session in the testSessionCookie.
func newRigAt(t *testing.T, p oidctest.AuthServer, rs *oidctest.ProtectedServer, store oauth.Store, public string, perCaller bool) *rig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if store == nil {
		store = oauth.NewMemoryStore()
	}
	if public == "" {
		public = "http://" + ln.Addr().String()
	}
	r := &rig{p: p, rs: rs, store: store, public: public, reg: prometheus.NewRegistry(), clk: &clock{},
		callbackStarted: make(chan struct{}, 8), callbackEnded: make(chan struct{}, 8)}
	r.m, err = oauth.New(oauth.Options{
		PublicURL: r.public, Store: store, Metrics: r.reg, SessionActor: testSession,
		Now:           func() time.Time { return r.clk.now() },
		OnGrantChange: func(string) { r.mu.Lock(); r.changed++; r.mu.Unlock() },
		Audit: func(_ context.Context, a oauth.AuditRecord) {
			r.mu.Lock()
			r.audits = append(r.audits, a)
			r.mu.Unlock()
		},
	}, []oauth.Connector{{ID: "tracker", Title: "Tracker", URL: rs.URL, PerCaller: perCaller}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth/callback/", func(w http.ResponseWriter, req *http.Request) {
		signal(r.callbackStarted)
		r.m.Callback(w, req)
		signal(r.callbackEnded)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// signal sends on ch unless it is full.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// authorize starts a flow and plays the human through it, returning the
// callback page's status and text.
func (r *rig) authorize(t *testing.T, ctx context.Context, allow bool) (int, string) {
	t.Helper()
	st, err := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "laptop"})
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	if st.Status != oauth.StatusAuthorizationRequired && st.Status != oauth.StatusPending {
		t.Fatalf("status %q, want a URL", st.Status)
	}
	return r.deliver(t, ctx, st.AuthorizationURL, allow)
}

func (r *rig) deliver(t *testing.T, ctx context.Context, authURL string, allow bool) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	back, err := r.p.Authorize(ctx, human, authURL, "alice", allow)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), r.public+"/oauth/callback/tracker?") {
		t.Fatalf("redirect %s is not the connector's callback", back)
	}
	return get(t, human, back.String())
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.Header.Get("Location") != "" {
		t.Fatalf("callback redirected to %s", res.Header.Get("Location"))
	}
	return res.StatusCode, string(body)
}

// whoami calls the protected server through the Manager's transport with
// the connector's shared grant.
func (r *rig) whoami(ctx context.Context) (string, error) { return r.whoamiAs(ctx, actor.ID{}) }

func (r *rig) refreshes(outcome string) float64 {
	mfs, _ := r.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "connecta_oauth_refreshes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var conn, out string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "connector":
					conn = l.GetValue()
				case "outcome":
					out = l.GetValue()
				}
			}
			if conn == "tracker" && out == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func TestAuthorizeFlowGrantsAndRefreshes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const ttl = 5 * time.Minute
	r := newRig(t, oidctest.Options{AccessTokenTTL: ttl}, nil)

	for _, o := range []string{"ok", "failed", "invalid_grant"} {
		if n := r.refreshes(o); n != 0 {
			t.Fatalf("refresh metric %s at start = %v, want a series at 0", o, n)
		}
	}
	// No grant: the transport refuses before sending anything.
	_, err := r.whoami(ctx)
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != oauth.CodeAuthRequired || !oe.NoGrant {
		t.Fatalf("call without grant: %v, want auth_required (no grant)", err)
	}
	if r.rs.Calls() != 0 {
		t.Fatal("the tool ran without a grant")
	}

	// Pending: the same URL while unexpired.
	st1, gerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "laptop"})
	if gerr != nil {
		t.Fatal(gerr)
	}
	st2, _ := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "laptop"})
	if st1.Status != oauth.StatusAuthorizationRequired || st2.Status != oauth.StatusPending || st2.AuthorizationURL != st1.AuthorizationURL {
		t.Fatalf("statuses %q then %q (same URL %v)", st1.Status, st2.Status, st1.AuthorizationURL == st2.AuthorizationURL)
	}
	for _, want := range []string{"code_challenge_method=S256", "resource=", "code_challenge="} {
		if !strings.Contains(st1.AuthorizationURL, want) {
			t.Fatalf("authorization URL lacks %s: %s", want, st1.AuthorizationURL)
		}
	}
	if st1.ExpiresAt.IsZero() || st1.Instructions == "" {
		t.Fatalf("no expiresAt or instructions: %+v", st1)
	}

	status, page := r.deliver(t, ctx, st1.AuthorizationURL, true)
	if status != http.StatusOK || !strings.Contains(page, "Connected Tracker") {
		t.Fatalf("callback %d %s", status, page)
	}
	got, err := r.whoami(ctx)
	if err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("whoami after authorization: %q %v", got, err)
	}
	st3, _ := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if st3.Status != oauth.StatusAuthorized {
		t.Fatalf("after the grant: %q", st3.Status)
	}
	st4, _ := r.m.Authorize(ctx, "tracker", true, oauth.Caller{Actor: "laptop"})
	if st4.Status != oauth.StatusAuthorized || !strings.Contains(st4.Message, "operator") {
		t.Fatalf("non-operator force: %+v", st4)
	}

	// Refresh before expiry: past the token's lifetime on the Manager's clock.
	r.clk.advance(ttl)
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("whoami after expiry: %q %v", got, err)
	}
	if r.refreshes("ok") < 1 {
		t.Fatal("no refresh counted")
	}

	// A 401 with a current token: refresh once, re-send once.
	before, calls, okBefore := r.rs.Unauthorized(), r.rs.Calls(), r.refreshes("ok")
	r.rs.RejectNext(1)
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("whoami after a 401: %q %v", got, err)
	}
	// Exactly one refresh for the 401: the clock does not move meanwhile.
	if d := r.refreshes("ok") - okBefore; r.rs.Unauthorized() != before+1 || r.rs.Calls() != calls+1 || d != 1 {
		t.Fatalf("401s %d→%d, tool runs %d→%d, refreshes %v→%v; want +1 each",
			before, r.rs.Unauthorized(), calls, r.rs.Calls(), okBefore, r.refreshes("ok"))
	}
}

func TestCallbackRefusesBadState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, oidctest.Options{}, nil)
	st, gerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar}
	back, err := r.p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	q := back.Query()
	for name, u := range map[string]string{
		"unknown state":     r.public + "/oauth/callback/tracker?code=" + q.Get("code") + "&state=forged",
		"no state":          r.public + "/oauth/callback/tracker?code=" + q.Get("code"),
		"unknown connector": r.public + "/oauth/callback/other?" + back.RawQuery,
	} {
		if status, page := get(t, human, u); status != http.StatusBadRequest || !strings.Contains(page, "unknown, expired or already used") {
			t.Errorf("%s: %d %s", name, status, page)
		}
	}
	if status, _ := get(t, human, back.String()); status != http.StatusOK {
		t.Fatalf("the real callback: %d", status)
	}
	// Replayed state and code.
	if status, page := get(t, human, back.String()); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Fatalf("replay: %d %s", status, page)
	}
}

func TestCallbackAccessDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, oidctest.Options{}, nil)
	status, page := r.authorize(t, ctx, false)
	if status != http.StatusBadRequest || !strings.Contains(page, "access_denied") || !strings.Contains(page, "Nothing was changed") {
		t.Fatalf("denied: %d %s", status, page)
	}
	if _, err := r.whoami(ctx); err == nil {
		t.Fatal("a denied flow left a usable grant")
	}
	st, _ := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if st.Status != oauth.StatusAuthorizationRequired {
		t.Fatalf("after a denial: %q, want a new flow", st.Status)
	}
}

func TestInvalidGrantDropsGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, oidctest.Options{}, nil)
	if status, page := r.authorize(t, ctx, true); status != http.StatusOK {
		t.Fatalf("callback %d %s", status, page)
	}
	// Revoke at the authorization server (RFC 7009), behind connecta's back
	// — then the downstream refuses the access token.
	if _, err := r.m.Revoke(ctx, "tracker", actor.ID{}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.whoami(ctx); err == nil {
		t.Fatal("call after revoke succeeded")
	}
	// A fresh grant, then the refresh token is refused: invalid_grant drops it.
	if status, _ := r.authorize(t, ctx, true); status != http.StatusOK {
		t.Fatal("second authorization failed")
	}
	if _, err := r.whoami(ctx); err != nil {
		t.Fatal(err)
	}
	r.revokeAtServer(t, ctx)
	r.rs.RejectNext(1)
	_, err := r.whoami(ctx)
	var oe *oauth.Error
	// (the SDK re-sends a failed initialize, so the error it returns may be
	// the second request's "not authorized"; the gateway reports the first)
	if !errors.As(err, &oe) || oe.Code != oauth.CodeAuthRequired {
		t.Fatalf("after invalid_grant: %v; audits %+v; refreshes %v %v", err, r.audits, r.refreshes("invalid_grant"), r.refreshes("failed"))
	}
	if r.refreshes("invalid_grant") != 1 {
		t.Fatalf("invalid_grant refreshes = %v", r.refreshes("invalid_grant"))
	}
	if _, err := r.whoami(ctx); !errors.As(err, &oe) || !oe.NoGrant {
		t.Fatalf("next call: %v, want no grant", err)
	}
}

// revokeAtServer revokes the stored refresh token directly at the provider
// (as a user would from the provider's own settings).
func (r *rig) revokeAtServer(t *testing.T, ctx context.Context) {
	t.Helper()
	r.revokeGrantAtServer(t, ctx, "grant")
}

// revokeGrantAtServer is revokeAtServer for the grant stored as name.
func (r *rig) revokeGrantAtServer(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ms, ok := r.store.(*oauth.MemoryStore)
	if !ok {
		t.Fatal("revokeAtServer needs the memory store")
	}
	raw, err := ms.Open(ctx, "tracker", name)
	if err != nil {
		t.Fatal(err)
	}
	rt := between(string(raw), `"refreshToken":"`, `"`)
	cid := between(string(raw), `"clientId":"`, `"`)
	res, err := http.Post(r.p.IssuerURL()+"/token/revocation", "application/x-www-form-urlencoded",
		strings.NewReader("token="+rt+"&client_id="+cid))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("revocation %d", res.StatusCode)
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}
