package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/console"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/testkit"
)

var (
	pcContinue = regexp.MustCompile(`id="continue" href="([^"]+)"`)
	pcButton   = regexp.MustCompile(`class="button" href="([^"]+)"`)
	pcCSRF     = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// person is one person's browser, played over HTTP: the provider's cookies
// in a jar, connecta's Secure session cookie kept by hand (Go's jar does
// not send it over http).
type person struct {
	t       *testing.T
	base    string
	c       *http.Client
	session string
}

func (p *person) do(ctx context.Context, method, u string, form url.Values, cookie string) (int, string) {
	p.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.base)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	} else if p.session != "" {
		req.Header.Set("Cookie", console.SessionCookie+"="+p.session)
	}
	res, err := p.c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, ck := range res.Cookies() {
		if ck.Name == console.SessionCookie && ck.Value != "" {
			p.session = ck.Value
		}
	}
	return res.StatusCode, string(b)
}

// signIn signs account in through the console (the /me sign-in).
func signIn(t *testing.T, ctx context.Context, prov oidctest.AuthServer, base, account string) *person {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &person{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/operator/signin", nil)
	res, err := p.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var signin string
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-connecta-signin" {
			signin = ck.Value
		}
	}
	m := pcContinue.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("sign-in page: %s", page)
	}
	back, err := prov.Authorize(ctx, p.c, html.UnescapeString(m[1]), account, true)
	if err != nil {
		t.Fatal(err)
	}
	if status, page := p.do(ctx, http.MethodGet, back.String(), nil, "__Host-connecta-signin="+signin); status != http.StatusSeeOther || p.session == "" {
		t.Fatalf("%s's sign-in: %d %s", account, status, page)
	}
	return p
}

// connect presses Connect on /me and completes the flow in this browser.
func (p *person) connect(ctx context.Context, prov oidctest.AuthServer, id, account string) (int, string) {
	p.t.Helper()
	_, me := p.do(ctx, http.MethodGet, p.base+"/me", nil, "")
	m := pcCSRF.FindStringSubmatch(me)
	if m == nil {
		p.t.Fatalf("/me: %s", me)
	}
	_, page := p.do(ctx, http.MethodPost, p.base+"/me/connect/"+id, url.Values{"csrf": {m[1]}}, "")
	l := pcButton.FindStringSubmatch(page)
	if l == nil {
		p.t.Fatalf("connect page: %s", page)
	}
	back, err := prov.Authorize(ctx, p.c, html.UnescapeString(l[1]), account, true)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.do(ctx, http.MethodGet, back.String(), nil, "")
}

// TestPerCallerOAuth_EndToEnd: a real `connecta serve` with a `grants:
// caller` connector in front of a protected server that answers with the
// token's subject. Two people of the authorization server (the hermetic
// twin under -short, the real oidc-provider otherwise) sign in through the
// console and connect on /me; Bob's calls fail auth_required (recovery
// oauth) until he connects while Alice's work; then each one's call_tool
// and program reach the downstream as themselves; a static token is told
// the connector needs a signed-in person.
func TestPerCallerOAuth_EndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	prov := oidctest.StartAuthServer(t, oidctest.Options{
		Accounts: map[string]oidctest.Account{
			"alice": {Email: "alice@example.com", EmailVerified: true},
			"bob":   {Email: "bob@example.com", EmailVerified: true},
		},
		Clients: []oidctest.Client{{ID: "console", Secret: "console-secret-0123456789", RedirectURIs: []string{base + console.CallbackPath}, GrantTypes: []string{"authorization_code"}}},
	})
	rs := oidctest.NewProtectedServer(t, prov)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*5 + 1)
	}
	t.Setenv("PCO_VAULT_KEY", base64.StdEncoding.EncodeToString(key))
	t.Setenv("PCO_LAPTOP", "laptop-inbound-token-fedcba9876543210")
	t.Setenv("PCO_SECRET", "console-secret-0123456789")
	serveConfig(t, ctx, addr, fmt.Sprintf(`listen: %s
publicUrl: %s
store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:PCO_VAULT_KEY}"}], active: k1}
auth:
  tokens: [{name: laptop, token: "${env:PCO_LAPTOP}"}]
  oidc:
    issuer: %s
    clientId: console
    clientSecret: "${env:PCO_SECRET}"
    callers: {any: true}
    operators: {emails: [alice@example.com]}
connectors:
  - id: mine
    url: %s
    oauth: {grants: caller}
`, addr, base, filepath.Join(t.TempDir(), "state.db"), prov.IssuerURL(), rs.URL))

	const program = `async () => { try { return await connecta.call("mine.whoami", {}) } catch (e) { return {code: e.code, recovery: e.details && e.details.recovery, message: e.message} } }`
	both := func(token string) (string, string) {
		t.Helper()
		cs := bearerSession(t, ctx, base+"/mcp", token)
		text, _ := callJSON(t, ctx, cs, "call_tool", map[string]any{"address": "mine.whoami"})
		prog, _ := callJSON(t, ctx, cs, "execute_code", map[string]any{"code": program})
		return text, prog
	}
	tokens := map[string]string{}
	for _, a := range []string{"alice", "bob"} {
		tok, err := prov.AccessToken(ctx, base+"/mcp", a)
		if err != nil {
			t.Fatal(err)
		}
		tokens[a] = tok
	}

	alice := signIn(t, ctx, prov, base, "alice")
	if status, page := alice.connect(ctx, prov, "mine", "alice"); status != http.StatusOK || !strings.Contains(page, "your own account") {
		t.Fatalf("alice connects: %d %s", status, page)
	}
	// Bob has not connected: his calls alone fail.
	if text, prog := both(tokens["bob"]); !strings.Contains(text, `"recovery":"oauth"`) || !strings.Contains(prog, `"recovery":"oauth"`) || !strings.Contains(text, "oidc:bob") {
		t.Fatalf("bob before connecting: %s / %s", text, prog)
	}
	if text, prog := both(tokens["alice"]); !strings.Contains(text, "subject=alice") || !strings.Contains(prog, "subject=alice") {
		t.Fatalf("alice: %s / %s", text, prog)
	}
	// Bob's search does not show the connector's tools before he connects
	// (his own catalog cannot load); Alice's does.
	search := func(token string) string {
		text, _ := callJSON(t, ctx, bearerSession(t, ctx, base+"/mcp", token), "search_tools", map[string]any{"query": "whoami"})
		return text
	}
	if got := search(tokens["bob"]); strings.Contains(got, "mine.whoami") {
		t.Fatalf("bob's search before connecting lists the tool: %s", got)
	}
	if got := search(tokens["alice"]); !strings.Contains(got, "mine.whoami") {
		t.Fatalf("alice's search: %s", got)
	}
	bob := signIn(t, ctx, prov, base, "bob")
	if status, page := bob.connect(ctx, prov, "mine", "bob"); status != http.StatusOK {
		t.Fatalf("bob connects: %d %s", status, page)
	}
	for _, a := range []string{"alice", "bob"} {
		if text, prog := both(tokens[a]); !strings.Contains(text, "subject="+a) || !strings.Contains(prog, "subject="+a) {
			t.Fatalf("%s: %s / %s", a, text, prog)
		}
	}
	if got := search(tokens["bob"]); !strings.Contains(got, "mine.whoami") {
		t.Fatalf("bob's search after connecting: %s", got)
	}
	// The static token: the connector needs a signed-in person.
	if text, prog := both("laptop-inbound-token-fedcba9876543210"); !strings.Contains(text, `"auth_required"`) || !strings.Contains(text, "signed-in person") || !strings.Contains(prog, "auth_required") {
		t.Fatalf("laptop: %s / %s", text, prog)
	}
	if rs.Calls() != 6 {
		t.Fatalf("the protected server ran %d calls, want 6 (alice 2, then alice 2 and bob 2)", rs.Calls())
	}
}
