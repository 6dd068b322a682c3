package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/actor"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/oauth"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

// badServer is a deliberately broken downstream + authorization server on
// one origin: each field replaces one answer with a fault.
type badServer struct {
	srv *httptest.Server
	// prm replaces the protected resource metadata body ("" = a good one).
	prm string
	// asm edits the authorization server metadata (nil = a good one).
	asm func(map[string]any)
	// token replaces the token endpoint's answer ("" = a good token).
	token string
	// legacy serves a 2025-03-26 downstream: a bare challenge and no
	// protected resource metadata.
	legacy bool
	// noASM: no authorization server metadata (404) either.
	noASM bool
	mu    sync.Mutex
	forms []url.Values // every token request's form
	// asmGets counts requests for the authorization server metadata.
	asmGets int
	// stepUp, when set, is the scope the downstream demands of any token:
	// a 403 insufficient_scope challenge naming it (guarded by mu).
	stepUp string
}

func (b *badServer) setToken(answer string) {
	b.mu.Lock()
	b.token = answer
	b.mu.Unlock()
}

func (b *badServer) setStepUp(scope string) {
	b.mu.Lock()
	b.stepUp = scope
	b.mu.Unlock()
}

func newBadServer(t *testing.T) *badServer {
	b := &badServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		need := b.stepUp
		b.mu.Unlock()
		if r.Header.Get("Authorization") != "" && need != "" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, need, b.srv.URL+"/.well-known/oauth-protected-resource/mcp"))
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if b.legacy {
			w.Header().Set("WWW-Authenticate", `Bearer`)
		} else {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, b.srv.URL+"/.well-known/oauth-protected-resource/mcp"))
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/", func(w http.ResponseWriter, r *http.Request) {
		if b.legacy || r.URL.Path != "/.well-known/oauth-protected-resource/mcp" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if b.prm != "" {
			fmt.Fprint(w, b.prm)
			return
		}
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, b.srv.URL+"/mcp", b.srv.URL)
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.asmGets++
		b.mu.Unlock()
		if b.noASM {
			http.NotFound(w, r)
			return
		}
		m := map[string]any{
			"issuer": b.srv.URL, "authorization_endpoint": b.srv.URL + "/authorize", "token_endpoint": b.srv.URL + "/token",
			"registration_endpoint": b.srv.URL + "/register", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"},
		}
		if b.asm != nil {
			b.asm(m)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"client_id":"bad-client","token_endpoint_auth_method":"none"}`)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		b.mu.Lock()
		b.forms = append(b.forms, r.PostForm)
		token := b.token
		b.mu.Unlock()
		if token != "" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, token)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"good-access-token-123","token_type":"Bearer","expires_in":300,"refresh_token":"good-refresh-123"}`)
	})
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	return b
}

func faultManager(t *testing.T, downstream string) (*oauth.Manager, *oauth.MemoryStore, string) {
	t.Helper()
	return faultManagerFor(t, oauth.Connector{ID: "tracker", URL: downstream}, nil)
}

// faultManagerFor is faultManager for connector c, with session as the
// console's session lookup (per-caller flows).
func faultManagerFor(t *testing.T, c oauth.Connector, session oauth.SessionActor) (*oauth.Manager, *oauth.MemoryStore, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	st := oauth.NewMemoryStore()
	m, err := oauth.New(oauth.Options{PublicURL: public, Store: st, HTTPClient: &http.Client{Timeout: 5 * time.Second}, SessionActor: session},
		[]oauth.Connector{c})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth/callback/", m.Callback)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m, st, public
}

func noGrant(t *testing.T, st *oauth.MemoryStore) {
	t.Helper()
	if _, err := st.Open(context.Background(), "tracker", "grant"); err == nil {
		t.Fatal("a grant was written")
	}
}

// TestDiscoveryFaultsAreTyped: each broken answer during discovery is a
// clear typed failure that writes nothing.
func TestDiscoveryFaultsAreTyped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	huge := `{"resource":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name string
		set  func(b *badServer)
		code oauth.Code
		want string
	}{
		{"malformed resource metadata", func(b *badServer) { b.prm = `{"resource": [` }, oauth.CodeAuthRequired, "protected resource metadata"},
		{"huge resource metadata", func(b *badServer) { b.prm = huge }, oauth.CodeAuthRequired, "protected resource metadata"},
		{"metadata for another resource", func(b *badServer) {
			b.prm = `{"resource":"https://elsewhere.example/mcp","authorization_servers":["https://elsewhere.example"]}`
		}, oauth.CodeAuthRequired, "protected resource metadata"},
		{"authorization server off-origin issuer", func(b *badServer) {
			b.asm = func(m map[string]any) { m["issuer"] = "https://impostor.example" }
		}, oauth.CodeAuthRequired, "refused"},
		{"no PKCE S256", func(b *badServer) {
			b.asm = func(m map[string]any) { m["code_challenge_methods_supported"] = []string{"plain"} }
		}, oauth.CodeAuthRequired, "S256"},
		{"no way to identify the client", func(b *badServer) {
			b.asm = func(m map[string]any) { delete(m, "registration_endpoint") }
		}, oauth.CodeAuthRequired, "clientId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBadServer(t)
			tc.set(b)
			m, st, _ := faultManager(t, b.srv.URL+"/mcp")
			_, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
			if err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.want) {
				t.Fatalf("got %v (%v), want %s mentioning %q", err, errCode(err), tc.code, tc.want)
			}
			if len(err.Message) > 1200 {
				t.Fatalf("message is %d bytes", len(err.Message))
			}
			noGrant(t, st)
			if _, oerr := st.Open(ctx, "tracker", "flow"); oerr == nil {
				t.Fatal("a flow was written")
			}
		})
	}
}

func errCode(e *oauth.Error) oauth.Code {
	if e == nil {
		return ""
	}
	return e.Code
}

// TestServersDownAreUnavailable: a downstream or authorization server that
// does not answer is unavailable, naming its origin.
func TestServersDownAreUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	m, _, _ := faultManager(t, dead+"/mcp")
	_, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if err == nil || err.Code != oauth.CodeUnavailable || err.Host != dead {
		t.Fatalf("downstream down: %+v", err)
	}

	// The provider, stopped after the protected server started.
	p := oidctest.StartAuthServer(t, oidctest.Options{})
	rs := oidctest.NewProtectedServer(t, p)
	p.Stop()
	m2, st, _ := faultManager(t, rs.URL)
	_, err = m2.Authorize(ctx, "tracker", false, oauth.Caller{})
	if err == nil || err.Code != oauth.CodeUnavailable || err.Host != p.IssuerURL() {
		t.Fatalf("authorization server down: %+v", err)
	}
	noGrant(t, st)
}

// TestTokenEndpointFaults: garbage or a dead token endpoint at the callback
// is a plain page saying so, and no grant.
func TestTokenEndpointFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		token  string
		status int
		want   string
	}{
		{"not JSON", `<html>oops</html>`, http.StatusBadRequest, "not usable"},
		{"no access token", `{"token_type":"Bearer"}`, http.StatusBadRequest, "not usable"},
		{"not a bearer token", `{"access_token":"abcdefgh","token_type":"DPoP"}`, http.StatusBadRequest, "not Bearer"},
		{"an OAuth error", `{"error":"invalid_grant"}`, http.StatusBadRequest, "invalid_grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBadServer(t)
			b.token = tc.token
			m, st, public := faultManager(t, b.srv.URL+"/mcp")
			s, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(s.AuthorizationURL)
			cb := public + "/oauth/callback/tracker?code=some-code&state=" + url.QueryEscape(u.Query().Get("state"))
			status, page := get(t, http.DefaultClient, cb)
			if status != tc.status || !strings.Contains(page, tc.want) || !strings.Contains(page, "Nothing was stored") {
				t.Fatalf("%d %s", status, page)
			}
			noGrant(t, st)
		})
	}
	t.Run("down", func(t *testing.T) {
		b := newBadServer(t)
		m, st, public := faultManager(t, b.srv.URL+"/mcp")
		s, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
		if err != nil {
			t.Fatal(err)
		}
		b.srv.Close()
		u, _ := url.Parse(s.AuthorizationURL)
		status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(u.Query().Get("state")))
		if status != http.StatusBadGateway || !strings.Contains(page, "could not be reached") {
			t.Fatalf("%d %s", status, page)
		}
		noGrant(t, st)
	})
}

// TestReplayedCodeRefused: a code already exchanged, delivered with a new
// flow's state, is refused by the authorization server; the new flow
// writes no grant and the old grant is untouched.
func TestReplayedCodeRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, oidctest.Options{}, nil)
	st, _ := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	jar := newJar()
	human := &http.Client{Jar: jar}
	back, err := r.p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, human, back.String()); status != http.StatusOK {
		t.Fatal("first callback failed")
	}
	before, _ := r.store.Open(ctx, "tracker", "grant")
	// A forced second flow (operator), then the old code with its state.
	st2, gerr := r.m.Authorize(ctx, "tracker", true, oauth.Caller{Operator: true})
	if gerr != nil || st2.Status != oauth.StatusAuthorizationRequired {
		t.Fatalf("force: %+v %v", st2, gerr)
	}
	u, _ := url.Parse(st2.AuthorizationURL)
	replay := r.public + "/oauth/callback/tracker?code=" + url.QueryEscape(back.Query().Get("code")) + "&state=" + url.QueryEscape(u.Query().Get("state")) +
		"&iss=" + url.QueryEscape(r.p.IssuerURL())
	status, page := get(t, human, replay)
	if status != http.StatusBadRequest || !strings.Contains(page, "invalid_grant") {
		t.Fatalf("replayed code: %d %s", status, page)
	}
	after, _ := r.store.Open(ctx, "tracker", "grant")
	if string(before) != string(after) {
		t.Fatal("the replayed code changed the grant")
	}
}

func newJar() http.CookieJar {
	jar, _ := cookiejar.New(nil)
	return jar
}

// TestClientIdentityOrder: the configured client first, then a client ID
// metadata document (supported by the server and an https publicUrl), then
// dynamic registration.
func TestClientIdentityOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.asm = func(m map[string]any) { m["client_id_metadata_document_supported"] = true }
	clientOf := func(public string, c oauth.Connector) string {
		t.Helper()
		c.ID, c.URL = "tracker", b.srv.URL+"/mcp"
		m, err := oauth.New(oauth.Options{PublicURL: public, Store: oauth.NewMemoryStore()}, []oauth.Connector{c})
		if err != nil {
			t.Fatal(err)
		}
		st, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		u, _ := url.Parse(st.AuthorizationURL)
		if u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("resource") != b.srv.URL+"/mcp" ||
			u.Query().Get("redirect_uri") != public+"/oauth/callback/tracker" {
			t.Fatalf("authorization URL %s", u)
		}
		return u.Query().Get("client_id")
	}
	if got := clientOf("https://connecta.example.com", oauth.Connector{ClientID: "operator-client"}); got != "operator-client" {
		t.Errorf("configured client: %q", got)
	}
	if got := clientOf("https://connecta.example.com", oauth.Connector{}); got != "https://connecta.example.com/oauth/client-metadata.json" {
		t.Errorf("metadata document: %q", got)
	}
	if got := clientOf("http://127.0.0.1:9", oauth.Connector{}); got != "bad-client" {
		t.Errorf("dynamic registration with an http publicUrl: %q", got)
	}

	// The document itself.
	m, _ := oauth.New(oauth.Options{PublicURL: "https://connecta.example.com", Store: oauth.NewMemoryStore()},
		[]oauth.Connector{{ID: "tracker", URL: b.srv.URL + "/mcp"}})
	rec := httptest.NewRecorder()
	m.ClientMetadata(rec, httptest.NewRequest("GET", "/oauth/client-metadata.json", nil))
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.ClientID != "https://connecta.example.com/oauth/client-metadata.json" ||
		len(doc.RedirectURIs) != 1 || doc.RedirectURIs[0] != "https://connecta.example.com/oauth/callback/tracker" || doc.AuthMethod != "none" {
		t.Fatalf("client metadata document: %s", rec.Body)
	}
}

// TestConfiguredClient: an operator-registered confidential client at the
// provider completes the flow with its secret.
func TestConfiguredClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	p := oidctest.StartAuthServer(t, oidctest.Options{Clients: []oidctest.Client{{
		ID: "connecta-ops", Secret: "ops-secret-0123456789", RedirectURIs: []string{public + "/oauth/callback/tracker"},
		GrantTypes: []string{"authorization_code", "refresh_token"}, AuthMethod: "client_secret_post",
	}}})
	rs := oidctest.NewProtectedServer(t, p)
	st := oauth.NewMemoryStore()
	m, err := oauth.New(oauth.Options{PublicURL: public, Store: st},
		[]oauth.Connector{{ID: "tracker", URL: rs.URL, ClientID: "connecta-ops", ClientSecret: "ops-secret-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth/callback/", m.Callback)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	human := &http.Client{Jar: newJar()}
	back, err := p.Authorize(ctx, human, s.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if status, page := get(t, human, back.String()); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	if _, err := st.Open(ctx, "tracker", "client"); err == nil {
		t.Fatal("a configured client was registered dynamically")
	}
}

// downStore is a Store whose backend stopped answering.
type downStore struct {
	oauth.Store
	down bool
}

var errStoreDown = errors.New("store unavailable: connection refused")

func (s *downStore) Open(ctx context.Context, c, n string) ([]byte, error) {
	if s.down {
		return nil, errStoreDown
	}
	return s.Store.Open(ctx, c, n)
}

func (s *downStore) Seal(ctx context.Context, c, n string, v []byte) error {
	if s.down {
		return errStoreDown
	}
	return s.Store.Seal(ctx, c, n, v)
}

// TestStoreDownIsUnavailable: with the store down, a call and a flow start
// fail unavailable naming the store (component "store"), and the callback
// says so without writing anything.
func TestStoreDownIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ds := &downStore{Store: oauth.NewMemoryStore()}
	r := newRig(t, oidctest.Options{}, ds)
	st, gerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	human := &http.Client{Jar: newJar()}
	back, err := r.p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	ds.down = true
	if status, page := get(t, human, back.String()); status != http.StatusServiceUnavailable || !strings.Contains(page, "store") {
		t.Fatalf("callback with the store down: %d %s", status, page)
	}
	_, err = r.whoami(ctx)
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != oauth.CodeUnavailable || oe.Component != "store" {
		t.Fatalf("call with the store down: %v", err)
	}
	if _, gerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{}); gerr == nil || gerr.Code != oauth.CodeUnavailable || gerr.Component != "store" {
		t.Fatalf("authorize with the store down: %+v", gerr)
	}
}

// TestRefreshSendsResource: the refresh after a 401 is a refresh_token
// grant carrying the resource indicator (RFC 8707 §2.2), and a downstream
// that refuses the fresh token too gets no third request.
func TestRefreshSendsResource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	m, _, public := faultManager(t, b.srv.URL+"/mcp")
	s, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	u, _ := url.Parse(s.AuthorizationURL)
	if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(u.Query().Get("state"))); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/mcp", strings.NewReader(`{}`))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{}`)), nil }
	res, err := m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want the second 401 passed through", res.StatusCode)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.forms) != 2 {
		t.Fatalf("%d token requests, want the exchange and one refresh", len(b.forms))
	}
	for i, want := range []string{"authorization_code", "refresh_token"} {
		f := b.forms[i]
		if f.Get("grant_type") != want || f.Get("resource") != b.srv.URL+"/mcp" || f.Get("client_id") != "bad-client" {
			t.Errorf("token request %d: %v", i, f)
		}
	}
	if b.forms[1].Get("refresh_token") != "good-refresh-123" {
		t.Errorf("refresh used %q", b.forms[1].Get("refresh_token"))
	}
}

// A 2025-03-26 downstream's metadata document sits at its origin, and the
// revision names no issuer: the document's own is taken when it is on that
// origin, even under a path (the conformance suite's
// auth/2025-03-26-oauth-metadata-backcompat mounts it at /oauth), and one on
// another origin is refused.
func TestDiscovery_2025_03_26TakesTheDocumentsIssuerOnTheOriginOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.legacy = true
	b.asm = func(m map[string]any) { m["issuer"] = b.srv.URL + "/oauth" }
	m, _, _ := faultManager(t, b.srv.URL+"/mcp")
	st, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if err != nil {
		t.Fatalf("authorize: %v", err)
	}
	if st.Status != oauth.StatusAuthorizationRequired || !strings.HasPrefix(st.AuthorizationURL, b.srv.URL+"/authorize?") {
		t.Fatalf("status %+v, want a flow at %s/authorize", st, b.srv.URL)
	}

	b.asm = func(m map[string]any) { m["issuer"] = "https://elsewhere.example" }
	_, err = m.Authorize(ctx, "tracker", true, oauth.Caller{Operator: true})
	if err == nil || err.Code != oauth.CodeAuthRequired || !strings.Contains(err.Message, "not on the MCP server's origin") {
		t.Fatalf("an issuer on another origin: %v", err)
	}
}

// A 2025-03-26 downstream publishes no protected resource metadata and its
// challenge names none: the authorization server is the one at the MCP
// server's origin, as that revision specified. Its metadata document is
// fetched once: connecta reads its issuer and the SDK validates that same
// copy, so a document the SDK would refuse (no PKCE, a script URL for an
// endpoint) is still refused, with no second request.
func TestDiscovery_2025_03_26UsesTheOriginsMetadataFetchedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.legacy = true
	m, _, _ := faultManager(t, b.srv.URL+"/mcp")
	gets := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := b.asmGets
		b.asmGets = 0
		return n
	}
	for _, tc := range []struct {
		what   string
		asm    func(map[string]any)
		refuse string // "" when the flow starts
	}{
		{"issuer at the origin", nil, ""},
		{"issuer under a path", func(m map[string]any) { m["issuer"] = b.srv.URL + "/oauth" }, ""},
		{"no PKCE", func(m map[string]any) { delete(m, "code_challenge_methods_supported") }, "PKCE"},
		{"a script URL", func(m map[string]any) { m["authorization_endpoint"] = "javascript:alert(1)" }, "authorization_endpoint"},
	} {
		b.asm = tc.asm
		st, err := m.Authorize(ctx, "tracker", true, oauth.Caller{Operator: true})
		switch {
		case tc.refuse == "" && (err != nil || st.Status != oauth.StatusAuthorizationRequired || !strings.HasPrefix(st.AuthorizationURL, b.srv.URL+"/authorize?")):
			t.Errorf("%s: %+v %v, want a flow at %s/authorize", tc.what, st, err, b.srv.URL)
		case tc.refuse != "" && (err == nil || err.Code != oauth.CodeAuthRequired || !strings.Contains(err.Message, tc.refuse)):
			t.Errorf("%s: %+v %v, want auth_required naming %s", tc.what, st, err, tc.refuse)
		}
		if n := gets(); n != 1 {
			t.Errorf("%s: the metadata document was requested %d times, want once", tc.what, n)
		}
	}
}

// A 2025-03-26 downstream without any metadata: that revision's default
// endpoints at its origin (/authorize, /token, /register) with PKCE S256,
// and the flow completes (auth/2025-03-26-oauth-endpoint-fallback).
func TestDiscovery_2025_03_26DefaultEndpointsWithoutMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.legacy, b.noASM = true, true
	m, st, public := faultManager(t, b.srv.URL+"/mcp")
	s, err := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if err != nil {
		t.Fatalf("authorize: %v", err)
	}
	u, _ := url.Parse(s.AuthorizationURL)
	if !strings.HasPrefix(s.AuthorizationURL, b.srv.URL+"/authorize?") || u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("client_id") != "bad-client" {
		t.Fatalf("authorization URL %s, want %s/authorize with S256 and the registered client", s.AuthorizationURL, b.srv.URL)
	}
	if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(u.Query().Get("state"))); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	if _, err := st.Open(ctx, "tracker", "grant"); err != nil {
		t.Fatalf("no grant after the callback: %v", err)
	}
}

// Step-up: a 403 insufficient_scope naming a scope the grant lacks makes
// authorize_connector ask for the union of granted and required scopes
// (authorization_required, reason insufficient_scope) — for an operator: a
// caller who is not one is told that replacing the team's grant is an
// operator's act. Once the new grant holds the scope, it is authorized.
func TestStepUp_InsufficientScopeAsksForTheUnion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	m, _, public := faultManager(t, b.srv.URL+"/mcp")
	callback := func(s *oauth.Status) {
		t.Helper()
		u, _ := url.Parse(s.AuthorizationURL)
		if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(u.Query().Get("state"))); status != http.StatusOK {
			t.Fatalf("callback: %d %s", status, page)
		}
	}
	first, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	callback(first)

	res := throughTransport(t, ctx, m, b, "files:write")
	if res.StatusCode != http.StatusForbidden || strings.Join(oauth.InsufficientScope(res.Header), " ") != "files:write" {
		t.Fatalf("HTTP %d %v", res.StatusCode, res.Header.Values("WWW-Authenticate"))
	}

	caller, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "bob"})
	if gerr != nil || caller.Status != oauth.StatusAuthorizationRequired || caller.Reason != oauth.ReasonInsufficientScope ||
		caller.AuthorizationURL != "" || !strings.Contains(caller.Message, "files:write") || !strings.Contains(caller.Message, "operator") {
		t.Fatalf("a caller's step-up: %+v %v", caller, gerr)
	}
	op, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true})
	if gerr != nil || op.Status != oauth.StatusAuthorizationRequired || op.Reason != oauth.ReasonInsufficientScope {
		t.Fatalf("an operator's step-up: %+v %v", op, gerr)
	}
	u, _ := url.Parse(op.AuthorizationURL)
	if got := u.Query().Get("scope"); !strings.Contains(" "+got+" ", " files:write ") {
		t.Fatalf("the step-up flow asks for scope %q, want files:write among them", got)
	}
	again, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true})
	if gerr != nil || again.Status != oauth.StatusPending || again.AuthorizationURL != op.AuthorizationURL || again.Reason != oauth.ReasonInsufficientScope {
		t.Fatalf("asking again: %+v %v, want the same pending flow", again, gerr)
	}
	callback(op)
	b.setStepUp("")
	done, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "bob"})
	if gerr != nil || done.Status != oauth.StatusAuthorized || done.Reason != "" {
		t.Fatalf("after the step-up: %+v %v", done, gerr)
	}
}

// The scopes a step-up challenge named are kept with the grant in the
// store: another replica — or this one after a restart — that never saw the
// 403 still asks for them, and the next grant starts without them.
func TestStepUp_RequiredScopesOutliveTheReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	m, st, public := faultManager(t, b.srv.URL+"/mcp")
	first, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	u, _ := url.Parse(first.AuthorizationURL)
	if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(u.Query().Get("state"))); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	b.setStepUp("files:write")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/mcp", strings.NewReader(`{}`))
	res, err := m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	other, err := oauth.New(oauth.Options{PublicURL: public, Store: st, HTTPClient: &http.Client{Timeout: 5 * time.Second}},
		[]oauth.Connector{{ID: "tracker", URL: b.srv.URL + "/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	op, gerr := other.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true})
	if gerr != nil || op.Status != oauth.StatusAuthorizationRequired || op.Reason != oauth.ReasonInsufficientScope {
		t.Fatalf("the other replica: %+v %v; want a step-up flow", op, gerr)
	}
	if got := mustParse(t, op.AuthorizationURL).Query().Get("scope"); !strings.Contains(" "+got+" ", " files:write ") {
		t.Fatalf("the other replica's flow asks for %q, want files:write among them", got)
	}
	state := mustParse(t, op.AuthorizationURL).Query().Get("state")
	if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(state)); status != http.StatusOK {
		t.Fatalf("step-up callback: %d %s", status, page)
	}
	b.setStepUp("")
	if done, gerr := other.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "bob"}); gerr != nil || done.Status != oauth.StatusAuthorized || done.Reason != "" {
		t.Fatalf("after the step-up: %+v %v", done, gerr)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// signedIn completes a first flow on the fault rig.
func signedIn(t *testing.T, ctx context.Context, m *oauth.Manager, public string) {
	t.Helper()
	st, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	state := mustParse(t, st.AuthorizationURL).Query().Get("state")
	if status, page := get(t, http.DefaultClient, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(state)); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
}

// refusedFor makes one request through the connector's transport while the
// downstream demands scope (a 403 insufficient_scope).
func refusedFor(t *testing.T, ctx context.Context, m *oauth.Manager, b *badServer, scope string) {
	t.Helper()
	if res := throughTransport(t, ctx, m, b, scope); res.StatusCode != http.StatusForbidden {
		t.Fatalf("HTTP %d, want the 403", res.StatusCode)
	}
}

// throughTransport makes one request through the connector's transport
// while the downstream demands stepUp (a 403 insufficient_scope; "" answers
// 401, which refreshes the grant once) and returns the answer, body closed.
func throughTransport(t *testing.T, ctx context.Context, m *oauth.Manager, b *badServer, stepUp string) *http.Response {
	t.Helper()
	b.setStepUp(stepUp)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/mcp", strings.NewReader(`{}`))
	res, err := m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// The grant's scopes are the ones the token was issued with (the token
// response's scope, RFC 6749 §5.1), not the ones asked for: an
// authorization server that grants fewer leaves a step-up to ask for.
func TestGrant_ScopesAreTheTokenResponses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.prm = fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["files:read","files:write"]}`, b.srv.URL+"/mcp", b.srv.URL)
	b.token = `{"access_token":"narrow-token","token_type":"Bearer","expires_in":300,"scope":"files:read"}`
	m, _, public := faultManager(t, b.srv.URL+"/mcp")
	signedIn(t, ctx, m, public)
	refusedFor(t, ctx, m, b, "files:write")
	wantStepUp(t, ctx, m, "after a narrower grant")
}

// wantStepUp: an operator's authorize_connector answers with a step-up
// flow (authorization_required, reason insufficient_scope).
func wantStepUp(t *testing.T, ctx context.Context, m *oauth.Manager, when string) {
	t.Helper()
	st, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true})
	if gerr != nil || st.Status != oauth.StatusAuthorizationRequired || st.Reason != oauth.ReasonInsufficientScope {
		t.Fatalf("%s: %+v %v; want a step-up flow", when, st, gerr)
	}
}

// A refresh answer's scope replaces the grant's (RFC 6749 §6: omitted, it
// is the original's): an authorization server that narrows a grant at
// refresh leaves a step-up to ask for, not a "signing in again will not
// help".
func TestGrant_RefreshNarrowsTheScopes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.prm = fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["files:read","files:write"]}`, b.srv.URL+"/mcp", b.srv.URL)
	b.token = `{"access_token":"wide-token","token_type":"Bearer","expires_in":300,"refresh_token":"r1","scope":"files:read files:write"}`
	m, _, public := faultManager(t, b.srv.URL+"/mcp")
	signedIn(t, ctx, m, public)
	// A refresh that omits the scope keeps the grant's.
	b.setToken(`{"access_token":"same-token","token_type":"Bearer","expires_in":300}`)
	throughTransport(t, ctx, m, b, "") // the 401 refreshes once
	refusedFor(t, ctx, m, b, "files:write")
	if st, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true}); gerr != nil || st.Status != oauth.StatusAuthorized {
		t.Fatalf("a refresh without a scope: %+v %v; want the grant's scopes kept", st, gerr)
	}
	// A refresh that names fewer narrows it.
	b.setToken(`{"access_token":"narrow-token","token_type":"Bearer","expires_in":300,"scope":"files:read"}`)
	throughTransport(t, ctx, m, b, "")
	refusedFor(t, ctx, m, b, "files:write")
	wantStepUp(t, ctx, m, "after a narrowing refresh")
}

// A downstream that refuses a scope the grant holds is not answered with
// another sign-in that would ask for the same: authorize_connector says
// authorized and why signing in again will not help.
func TestStepUp_RefusedHeldScopeIsNotAnotherSignIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.prm = fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["files:write"]}`, b.srv.URL+"/mcp", b.srv.URL)
	m, _, public := faultManager(t, b.srv.URL+"/mcp")
	signedIn(t, ctx, m, public)
	refusedFor(t, ctx, m, b, "files:write")
	st, gerr := m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "ops", Operator: true})
	if gerr != nil || st.Status != oauth.StatusAuthorized || st.AuthorizationURL != "" || !strings.Contains(st.Message, "still refused") {
		t.Fatalf("a refused held scope: %+v %v", st, gerr)
	}
}

// The same on a per-caller connector: a person whose own grant holds the
// refused scope is told why signing in again will not help, not to retry
// the call (which the downstream refuses again) — the answer the call's
// auth_required message promises.
func TestStepUp_RefusedHeldScopeOnAPersonsOwnGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := newBadServer(t)
	b.prm = fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q],"scopes_supported":["files:write"]}`, b.srv.URL+"/mcp", b.srv.URL)
	m, _, public := faultManagerFor(t, oauth.Connector{ID: "tracker", URL: b.srv.URL + "/mcp", PerCaller: true}, testSession)
	alices := oauth.Caller{Actor: alice.String(), Who: alice}
	st, gerr := m.Authorize(ctx, "tracker", false, alices)
	if gerr != nil {
		t.Fatal(gerr)
	}
	state := mustParse(t, st.AuthorizationURL).Query().Get("state")
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(mustParse(t, public), []*http.Cookie{{Name: testSessionCookie, Value: alice.String(), Path: "/"}})
	if status, page := get(t, &http.Client{Jar: jar}, public+"/oauth/callback/tracker?code=c&state="+url.QueryEscape(state)); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}
	b.setStepUp("files:write")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/mcp", strings.NewReader(`{}`))
	res, err := m.Transport("tracker", alice, http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("HTTP %d, want the 403", res.StatusCode)
	}
	st, gerr = m.Authorize(ctx, "tracker", false, alices)
	if gerr != nil || st.Status != oauth.StatusAuthorized || st.AuthorizationURL != "" || !strings.Contains(st.Message, "still refused") || strings.Contains(st.Message, "retry the call") {
		t.Fatalf("a refused held scope on a person's own grant: %+v %v", st, gerr)
	}
}
