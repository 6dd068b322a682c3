package console_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/console"
	"github.com/connecta-dev/connecta/internal/vault"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/testkit"
)

var buttonLink = regexp.MustCompile(`class="button" href="([^"]+)"`)

// connect presses Connect on /me and plays the person through the
// provider in their own client; it returns the callback page.
func (o *operator) connect(t *testing.T, ctx context.Context, id, account string) (int, string) {
	t.Helper()
	status, page := o.post(console.MePath+"/connect/"+id, url.Values{"csrf": {o.meCSRF(t)}}, "")
	m := buttonLink.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		t.Fatalf("connect %s: %d %s", id, status, page)
	}
	return o.complete(t, ctx, html.UnescapeString(m[1]), account)
}

// complete signs account in at the provider in o's client and opens the
// callback with o's console session (the browser's cookie).
func (o *operator) complete(t *testing.T, ctx context.Context, authURL, account string) (int, string) {
	t.Helper()
	back, err := o.h.p.Authorize(ctx, o.c, authURL, account, true)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, back.String(), nil)
	if o.cookie != "" {
		req.Header.Set("Cookie", console.SessionCookie+"="+o.cookie)
	}
	res, err := o.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (o *operator) meCSRF(t *testing.T) string {
	t.Helper()
	_, page := o.get(console.MePath)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf on /me: %s", page)
	}
	return m[1]
}

// TestMe_EachPersonConnectsTheirOwnAccount: on a `grants: caller`
// connector two people of the real oidc-provider — an operator and a
// caller, signed in to the console — connect their own accounts on /me;
// through /mcp each one's call_tool reaches the protected server as
// themselves; an issued token is told a signed-in person is needed; a link
// Alice's agent asked for, completed in Bob's browser, grants nothing; Bob's
// Disconnect ends his grant only; per-caller credentials are set and
// removed on /me; operators see who holds one (never the value) and revoke
// any; each change is in the audit with the actor it belongs to.
func TestMe_EachPersonConnectsTheirOwnAccount(t *testing.T) {
	h := startHarnessWith(t, `  - id: mine
    title: Mine
    url: {{protected}}
    oauth: {grants: caller}
  - id: mykey
    url: http://127.0.0.1:9/mcp
    credential: {label: Personal key, header: X-Key, per: caller}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	alice, status, _ := h.signIn(ctx, "alice") // an operator
	if status != http.StatusSeeOther {
		t.Fatalf("alice: %d", status)
	}
	bob, status, _ := h.signIn(ctx, "bob") // a caller
	if status != http.StatusSeeOther {
		t.Fatalf("bob: %d", status)
	}
	if status, page := bob.get(console.MePath); status != http.StatusOK || !strings.Contains(page, `id="me-mine"`) || !strings.Contains(page, "<strong>not connected</strong>") || strings.Contains(page, "Everyone") {
		t.Fatalf("bob's /me: %d %s", status, page)
	}
	for _, p := range []struct {
		o       *operator
		account string
	}{{alice, "alice"}, {bob, "bob"}} {
		if status, page := p.o.connect(t, ctx, "mine", p.account); status != http.StatusOK || !strings.Contains(page, "your own account") {
			t.Fatalf("%s's callback: %d %s", p.account, status, page)
		}
	}
	tokens := map[string]string{}
	for _, account := range []string{"alice", "bob"} {
		tok, err := h.p.AccessToken(ctx, h.base+"/mcp", account)
		if err != nil {
			t.Fatal(err)
		}
		tokens[account] = tok
	}
	whoami := func(token string) string {
		t.Helper()
		text, _, err := h.callTool(ctx, token, "call_tool", map[string]any{"address": "mine.whoami"})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	for account, tok := range tokens {
		if got := whoami(tok); !strings.Contains(got, "subject="+account) {
			t.Fatalf("%s through /mcp: %s", account, got)
		}
	}
	issued, _, err := h.app.AccessTokens().Create(ctx, "robot", "test")
	if err != nil {
		t.Fatal(err)
	}
	if got := whoami(issued); !strings.Contains(got, `"auth_required"`) || !strings.Contains(got, "signed-in person") {
		t.Fatalf("an issued token: %s", got)
	}

	grantTokens := h.grantTokens(t, ctx, "mine", "oidc:alice", "oidc:bob")

	// Alice's agent asks for a new link; Bob opens it in his browser.
	text, _, err := h.callTool(ctx, tokens["alice"], "authorize_connector", map[string]any{"connector": "mine", "force": true})
	var st struct{ AuthorizationURL string }
	if err != nil || json.Unmarshal([]byte(text), &st) != nil || st.AuthorizationURL == "" {
		t.Fatalf("authorize_connector for alice: %v %s", err, text)
	}
	if status, page := bob.complete(t, ctx, st.AuthorizationURL, "bob"); status != http.StatusBadRequest || !strings.Contains(page, "Nothing was granted") {
		t.Fatalf("alice's link in bob's browser: %d %s", status, page)
	}
	if got := whoami(tokens["alice"]); !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice after bob opened her link: %s", got)
	}

	// The Connections and Credentials pages send operators to /me for
	// per-caller connectors instead of offering the team's one value.
	if _, page := alice.get("/operator/"); !strings.Contains(page, "each person's own") || !strings.Contains(page, `href="/me#me-mine"`) {
		t.Fatalf("connections page for a per-caller connector: %s", page)
	}
	if _, page := alice.get("/operator/credentials"); !strings.Contains(page, "--actor ACTOR") || strings.Contains(page, `action="/operator/credentials/mykey"`) {
		t.Fatalf("credentials page for a per-caller credential: %s", page)
	}
	// Operators see who holds a grant, never a value.
	if _, page := alice.get(console.MePath); !strings.Contains(page, "<code>oidc:alice</code>") || !strings.Contains(page, "<code>oidc:bob</code>") {
		t.Fatalf("alice's operator view: %s", page)
	}
	// Bob disconnects: his calls stop, Alice's go on.
	if status, _ := bob.post(console.MePath+"/disconnect/mine", url.Values{"csrf": {bob.meCSRF(t)}}, ""); status != http.StatusSeeOther {
		t.Fatalf("disconnect: %d", status)
	}
	if got := whoami(tokens["bob"]); !strings.Contains(got, `"recovery":"oauth"`) {
		t.Fatalf("bob after disconnect: %s", got)
	}
	if got := whoami(tokens["alice"]); !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice after bob's disconnect: %s", got)
	}

	// Per-caller credentials: Bob sets his; Alice (operator) sees and removes it.
	const bobsKey = "bobs-personal-key-7d3f"
	if status, _ := bob.post(console.MePath+"/credential/mykey", url.Values{"csrf": {bob.meCSRF(t)}, "value": {bobsKey}}, ""); status != http.StatusSeeOther {
		t.Fatalf("set: %d", status)
	}
	if _, page := bob.get(console.MePath); !strings.Contains(page, "Your Personal key: <strong>set</strong>") {
		t.Fatalf("bob's key not shown as set: %s", page)
	}
	_, page := alice.get(console.MePath)
	if !strings.Contains(page, "Your Personal key: <strong>not set</strong>") || strings.Count(page, "<code>oidc:bob</code>") != 1 || strings.Contains(page, bobsKey) {
		t.Fatalf("alice's view of mykey: %s", page)
	}
	if status, _ := alice.post(console.MePath+"/revoke/mykey", url.Values{"csrf": {alice.meCSRF(t)}, "actor": {"oidc:bob"}}, ""); status != http.StatusSeeOther {
		t.Fatalf("operator revoke: %d", status)
	}
	if _, page := bob.get(console.MePath); !strings.Contains(page, "Your Personal key: <strong>not set</strong>") {
		t.Fatalf("bob's key survived the operator's revoke: %s", page)
	}
	// A caller cannot revoke someone else's.
	if status, _ := bob.post(console.MePath+"/revoke/mine", url.Values{"csrf": {bob.meCSRF(t)}, "actor": {"oidc:alice"}}, ""); status != http.StatusForbidden {
		t.Fatalf("bob revoking alice's: %d", status)
	}
	if got := whoami(tokens["alice"]); !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice after bob's attempt: %s", got)
	}

	// Every change names whose it was.
	recs, err := h.app.Store().ListAudit(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, r := range recs {
		trail = append(trail, r.Action+" "+r.Target+" "+r.Detail)
	}
	all := strings.Join(trail, "\n")
	for _, want := range []string{"owner oidc:alice", "owner oidc:bob", "credential.set connector:mykey actor:oidc:bob", "credential.delete connector:mykey actor:oidc:bob"} {
		if !strings.Contains(all, want) {
			t.Fatalf("audit lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, bobsKey) {
		t.Fatal("the audit holds a credential")
	}

	// No output holds a token or credential byte: pages, the log, /health,
	// /metrics, the activity, the store's rows outside the vault.
	var outputs []string
	for _, o := range []*operator{alice, bob} {
		for _, p := range []string{console.MePath, "/operator/", "/operator/activity", "/operator/audit"} {
			_, page := o.get(p)
			outputs = append(outputs, page)
		}
	}
	for _, p := range []string{"/health", "/metrics"} {
		res, err := http.Get(h.base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		outputs = append(outputs, string(b))
	}
	outputs = append(outputs, h.logs.String(), all, h.rowsOutsideVault(t, ctx))
	for _, secret := range append(grantTokens, bobsKey) {
		for i, out := range outputs {
			if strings.Contains(out, secret) {
				t.Fatalf("output %d holds a token or credential: %.300s", i, out)
			}
		}
	}
}

// grantTokens opens the per-caller grants of connector for the actors
// (display forms) with the harness's vault key and returns their tokens.
func (h *harness) grantTokens(t *testing.T, ctx context.Context, connector string, actors ...string) []string {
	t.Helper()
	key, _ := base64.StdEncoding.DecodeString(h.env["VAULT_KEY"])
	v, err := vault.New(h.app.Store(), []vault.Key{{ID: "k1", Key: key}}, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range actors {
		who, _ := actor.Parse(a)
		raw, err := v.Open(ctx, vault.KindOAuthGrant, connector, vault.CallerName("grant", who))
		if err != nil {
			t.Fatalf("%s's grant: %v", a, err)
		}
		var g struct{ AccessToken, RefreshToken string }
		if err := json.Unmarshal(raw, &g); err != nil || len(g.AccessToken) < 16 {
			t.Fatalf("%s's grant does not decode: %v", a, err)
		}
		out = append(out, g.AccessToken)
		if g.RefreshToken != "" {
			out = append(out, g.RefreshToken)
		}
	}
	return out
}

// rowsOutsideVault is every stored row but the sealed secrets, as text.
func (h *harness) rowsOutsideVault(t *testing.T, ctx context.Context) string {
	t.Helper()
	m := regexp.MustCompile(`sqlite:([^"]+)`).FindStringSubmatch(h.yaml)
	db, err := sql.Open("sqlite3", "file:"+m[1]+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dump := testkit.RowsOutsideVault(t, ctx, db)
	if !strings.Contains(dump, "oauth.granted") {
		t.Fatalf("the row dump missed the audit: %.300s", dump)
	}
	return dump
}

// TestMe_OneActorOneNameUnderPairwiseSubjects: with the provider's pairwise
// subjects on, the console's ID token names Alice differently from every
// access token for connecta; the console takes her actor from the access
// token it requests for the connecta resource, so the person who connects
// on /me is the actor whose /mcp calls use that grant — and the operators
// rule is read from the access token's claims.
func TestMe_OneActorOneNameUnderPairwiseSubjects(t *testing.T) {
	h := startHarnessPairwise(t, `  - id: mine
    url: {{protected}}
    oauth: {grants: caller}
`, true)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	want := oidctest.PairwiseSubject("alice", h.base+"/mcp")
	if idSub := oidctest.PairwiseSubject("alice", consoleClient); idSub == want {
		t.Fatal("the provider's ID-token and access-token subjects coincide; the test proves nothing")
	}
	alice, status, page := h.signIn(ctx, "alice")
	if status != http.StatusSeeOther || alice.cookie == "" {
		t.Fatalf("alice: %d %s", status, page)
	}
	// An operator (the rule matched the access token's email claim).
	if status, _ := alice.get("/operator/"); status != http.StatusOK {
		t.Fatalf("alice on /operator/: %d", status)
	}
	if status, page := alice.connect(t, ctx, "mine", "alice"); status != http.StatusOK {
		t.Fatalf("connect: %d %s", status, page)
	}
	tok, err := h.p.AccessToken(ctx, h.base+"/mcp", "alice") // another client: /mcp's
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := h.callTool(ctx, tok, "call_tool", map[string]any{"address": "mine.whoami"})
	if err != nil || !strings.Contains(text, "subject=") {
		t.Fatalf("alice through /mcp with the grant she connected on /me: %v %s", err, text)
	}
	recs, err := h.app.Store().ListAudit(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.Action == "session.signin" {
			found = r.Target == "operator:"+want
		}
	}
	if !found {
		t.Fatalf("the console's actor is not the access token's subject %s: %+v", want, recs)
	}
}
