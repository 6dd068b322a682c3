package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/console"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/testkit"
)

const (
	consoleClient = "connecta-console"
	consoleSecret = "console-client-secret-for-tests"
	keyedSecret   = "sk-test-keyed-0123456789"
)

// harness is connecta (the one application constructor, over HTTP on a
// free port, its state in SQLite) with an authorization server as the
// operators' identity provider (the real oidc-provider, or under -short its
// hermetic twin: oidctest.StartAuthServer), a go-sdk MCP server that wants an API key ("keyed", a
// `credential` connector) and one protected by the provider ("tracker", an
// OAuth connector).
type harness struct {
	t     *testing.T
	base  string
	p     oidctest.AuthServer
	app   *app.App
	rs    *oidctest.ProtectedServer
	keyed atomic.Int64 // calls the keyed server ran
	// pinned is the go-sdk server behind "pinned", a connector under
	// catalog.pin: quarantine, whose tools a test changes.
	pinned *mcp.Server
	yaml   string // the configuration (its listen address is the first replica's)
	env    map[string]string
	logs   *testkit.Buffer // everything connecta logged, at debug level
}

func startHarness(t *testing.T) *harness { t.Helper(); return startHarnessWith(t, "") }

// startHarnessWith is startHarness with extra YAML after the connectors:
// top-level keys (e.g. access), or more connectors ("  - id: …"), where
// {{protected}} is the protected resource server's URL.
func startHarnessWith(t *testing.T, extra string) *harness {
	t.Helper()
	return startHarnessPairwise(t, extra, false)
}

// startHarnessPairwise: pairwise turns the provider's pairwise subjects on
// (oidctest.Options.PairwiseSubjects).
func startHarnessPairwise(t *testing.T, extra string, pairwise bool) *harness {
	t.Helper()
	return startHarnessOn(t, extra, pairwise, oidctest.StartAuthServer)
}

// startHarnessOn: start runs the identity provider (oidctest.StartTwin for
// a test of its fault switches).
func startHarnessOn(t *testing.T, extra string, pairwise bool, start func(testing.TB, oidctest.Options) oidctest.AuthServer) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, base: "http://" + ln.Addr().String()}
	h.p = start(t, oidctest.Options{
		Accounts: map[string]oidctest.Account{
			"alice": {Email: "alice@example.com", EmailVerified: true, Name: "Alice"},
			"bob":   {Email: "bob@example.com", EmailVerified: true, Name: "Bob"},
		},
		Clients: []oidctest.Client{{ID: consoleClient, Secret: consoleSecret,
			RedirectURIs: []string{h.base + console.CallbackPath}, GrantTypes: []string{"authorization_code"}}},
		PairwiseSubjects: pairwise,
	})
	h.rs = oidctest.NewProtectedServer(t, h.p)
	keyedURL := h.startKeyed(t)
	pinnedURL := h.startPinned(t)

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := map[string]string{"OIDC_SECRET": consoleSecret, "VAULT_KEY": base64.StdEncoding.EncodeToString(key)}
	yaml := fmt.Sprintf(`listen: %s
publicUrl: %s
store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:VAULT_KEY}"}], active: k1}
accessTokens: {}
auth:
  oidc:
    issuer: %s
    clientId: %s
    clientSecret: "${env:OIDC_SECRET}"
    callers: {any: true}
    operators: {emails: [alice@example.com]}
connectors:
  - id: keyed
    title: "Keyed <b>service</b>"
    url: %s
    credential: {label: API key}
  - id: tracker
    title: Tracker
    url: %s
    oauth: {}
  - id: pinned
    title: Pinned
    url: %s
    catalog: {pin: quarantine}
`, ln.Addr(), h.base, filepath.Join(t.TempDir(), "state.db"), h.p.IssuerURL(), consoleClient, keyedURL, h.rs.URL, pinnedURL) +
		strings.ReplaceAll(extra, "{{protected}}", h.rs.URL) // more connectors may follow, at the protected server
	h.yaml, h.env = yaml, env
	h.logs = &testkit.Buffer{}
	h.app = h.serve(t, ln)
	return h
}

// serve runs one replica of connecta on ln, until t ends.
func (h *harness) serve(t *testing.T, ln net.Listener) *app.App {
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "connecta.yaml"), []byte(h.yaml), config.Resolver{
		LookupEnv: func(k string) (string, bool) { v, ok := h.env[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(context.Background(), app.Options{Config: cfg, Version: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		a.Close()
	})
	return a
}

// replica starts a second connecta on the same configuration and store
// (publicUrl stays the first's, as behind a load balancer) and returns
// its base URL.
func (h *harness) replica(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.serve(t, ln)
	return "http://" + ln.Addr().String()
}

// startKeyed serves a go-sdk MCP server that answers only requests with
// Authorization: Bearer keyedSecret (401 otherwise).
func (h *harness) startKeyed(t *testing.T) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Says the key worked.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			h.keyed.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key accepted"}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+keyedSecret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// startPinned serves h.pinned (one read-only tool to begin with).
func (h *harness) startPinned(t *testing.T) string {
	h.pinned = mcp.NewServer(&mcp.Implementation{Name: "pinned", Version: "1.0.0"}, nil)
	h.putPinned("get_item", "Gets one item.")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.pinned }, nil)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func (h *harness) putPinned(name, description string) {
	h.pinned.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
		})
}

// bearer adds a token to every request of an MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// callTool calls one tool on /mcp with token, through a go-sdk client; a
// refused connection is returned as the error.
func (h *harness) callTool(ctx context.Context, token, name string, args map[string]any) (string, bool, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "console-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		return "", false, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

// operator is an HTTP client playing a signed-in operator without a
// browser: the provider's scripted login, then the console's cookie (a
// Secure cookie, which Go's jar would not send over http, so it is kept
// here).
type operator struct {
	h      *harness
	base   string // the replica it talks to
	c      *http.Client
	cookie string
}

var continueLink = regexp.MustCompile(`id="continue" href="([^"]+)"`)

func (h *harness) signIn(ctx context.Context, account string) (*operator, int, string) {
	h.t.Helper()
	return h.signInAt(ctx, account, h.base, true)
}

func (h *harness) signInVia(ctx context.Context, account, base string) (*operator, int, string) {
	h.t.Helper()
	return h.signInAt(ctx, account, base, true)
}

// signInVia starts the sign-in on the first replica and sends the
// provider's redirect to the callback at base (another replica behind the
// same publicUrl).
// (allow false: the person denies the consent.)
func (h *harness) signInAt(ctx context.Context, account, base string, allow bool) (*operator, int, string) {
	h.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(h.base + "/operator/signin")
	if err != nil {
		h.t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := continueLink.FindStringSubmatch(string(page))
	if m == nil {
		h.t.Fatalf("sign-in page has no link: %s", page)
	}
	signin := cookieValue(res, "__Host-connecta-signin")
	back, err := h.p.Authorize(ctx, c, html.UnescapeString(m[1]), account, allow)
	if err != nil {
		h.t.Fatal(err)
	}
	cb, _ := url.Parse(base)
	back.Host = cb.Host
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, back.String(), nil)
	req.Header.Set("Cookie", "__Host-connecta-signin="+signin)
	res, err = c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	page, _ = io.ReadAll(res.Body)
	res.Body.Close()
	return &operator{h: h, base: h.base, c: c, cookie: cookieValue(res, console.SessionCookie)}, res.StatusCode, string(page)
}

func cookieValue(res *http.Response, name string) string {
	for _, ck := range res.Cookies() {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get fetches a console page with the session cookie.
func (o *operator) get(path string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, o.base+path, nil)
	req.Header.Set("Cookie", console.SessionCookie+"="+o.cookie)
	res, err := o.c.Do(req)
	if err != nil {
		o.h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// csrf is the session's CSRF token, read from a page's form.
func (o *operator) csrf() string {
	_, page := o.get("/operator/tokens")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		o.h.t.Fatalf("no csrf field on %s", page)
	}
	return m[1]
}

// post sends a form as the console's page would (Origin: publicUrl), unless
// origin overrides it ("-" sends none).
func (o *operator) post(path string, form url.Values, origin string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, o.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", console.SessionCookie+"="+o.cookie)
	switch origin {
	case "":
		req.Header.Set("Origin", o.h.base)
	case "-":
	default:
		req.Header.Set("Origin", origin)
	}
	res, err := o.c.Do(req)
	if err != nil {
		o.h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// requireEnv is set by CI: a missing browser fails instead of skipping.
const requireChromium = "CONNECTA_REQUIRE_CHROMIUM"

func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("CONNECTA_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv(requireChromium) == "1" {
		t.Fatalf("chromium is not installed and %s=1 (apt-get install chromium)", requireChromium)
	}
	t.Skipf("chromium is not installed (apt-get install chromium); skipping the browser test")
	return ""
}

// noSecretLogged fails t if any of secrets appears in connecta's log.
func (h *harness) noSecretLogged(t *testing.T, secrets ...string) {
	t.Helper()
	logs := h.logs.String()
	for _, s := range secrets {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("the log carries a secret (%.8s…)", s)
		}
	}
}

var secretField = regexp.MustCompile(`id="secret" readonly value="([^"]+)"`)
