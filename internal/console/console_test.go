package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/console"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/store"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func tokenCount(t *testing.T, h *harness) int {
	t.Helper()
	list, err := h.app.Store().ListTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// TestConsole_SignInAndRefusals plays an operator over plain HTTP (the
// provider's scripted login): only an operator gets a session; every
// refusal — cross-origin post, missing CSRF token, markup in a token name
// (escaped, not refused), an over-long credential, a replayed cookie after
// sign-out, an expired session — is a clear page and changes nothing.
// toolsCell is the Tools cell of the keyed connector's row (the fourth td).
var toolsCell = regexp.MustCompile(`(?s)<span class="id">keyed</span>.*?<td>.*?</td>\s*<td>.*?</td>\s*<td>.*?</td>\s*<td>(.*?)</td>`)

func TestConsole_SignInAndRefusals(t *testing.T) {
	h := startHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Every console page carries the pinned CSP.
	res, err := http.Get(h.base + "/operator/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("Content-Security-Policy"); got != console.CSP {
		t.Fatalf("CSP %q", got)
	}
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("signed out: %d", res.StatusCode)
	}

	// bob signs in at the provider and is an admitted caller, not an
	// operator: a session for /me only; every operator page and mutation
	// refuses it.
	bob, status, _ := h.signIn(ctx, "bob")
	if status != http.StatusSeeOther || bob.cookie == "" {
		t.Fatalf("bob: %d cookie=%q", status, bob.cookie)
	}
	if status, page := bob.get("/operator/"); status != http.StatusForbidden || !strings.Contains(page, "Not an operator") || !strings.Contains(page, `href="/me"`) {
		t.Fatalf("bob on /operator/: %d %s", status, page)
	}
	if status, page := bob.post("/operator/tokens", url.Values{"csrf": {bob.csrf()}, "name": {"bobs"}}, ""); status != http.StatusForbidden || !strings.Contains(page, "Not an operator") {
		t.Fatalf("bob issuing a token: %d %s", status, page)
	}
	if status, page := bob.get("/me"); status != http.StatusOK || !strings.Contains(page, "Your connections") || strings.Contains(page, "/operator/tokens") {
		t.Fatalf("bob on /me: %d %s", status, page)
	}

	// alice denies the consent: a clear page, no session.
	denied, status, page := h.signInAt(ctx, "alice", h.base, false)
	if status != http.StatusForbidden || denied.cookie != "" || !strings.Contains(page, "refused the sign-in (access_denied)") {
		t.Fatalf("denied: %d cookie=%q %s", status, denied.cookie, page)
	}

	op, status, _ := h.signIn(ctx, "alice")
	if status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("alice: %d", status)
	}
	if status, page := op.get("/operator/"); status != http.StatusOK || !strings.Contains(page, "Keyed &lt;b&gt;service&lt;/b&gt;") || strings.Contains(page, "<b>service") {
		t.Fatalf("connections %d: %s", status, page)
	} else if m := toolsCell.FindStringSubmatch(page); m == nil || m[1] != "—" {
		// Never contacted: its tool count is unknown, not 0.
		t.Fatalf("keyed's Tools cell before any contact: %v\n%s", m, page)
	}
	csrf := op.csrf()
	// An outcome message in a crafted link is not shown (it is signed).
	if _, page := op.get("/operator/?flash=Call+support+at+evil.example"); strings.Contains(page, "evil.example") {
		t.Fatal("a crafted flash message was shown")
	}

	// A cross-origin post, with a valid cookie and token: refused, no token.
	before := tokenCount(t, h)
	if status, page := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"evil"}}, "https://evil.example"); status != http.StatusForbidden || !strings.Contains(page, "cross-origin") {
		t.Fatalf("cross-origin: %d %s", status, page)
	}
	// Without Origin and without Sec-Fetch-Site: refused too.
	if status, _ := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"evil"}}, "-"); status != http.StatusForbidden {
		t.Fatalf("no origin: %d", status)
	}
	// Same origin, wrong CSRF token: refused.
	if status, page := op.post("/operator/tokens", url.Values{"csrf": {"forged"}, "name": {"evil"}}, ""); status != http.StatusForbidden || !strings.Contains(page, "nothing was changed") {
		t.Fatalf("bad csrf: %d %s", status, page)
	}
	// Catalog approvals are mutations like any other.
	if status, _ := op.post("/operator/connections/pinned/approve", url.Values{"csrf": {"forged"}, "all": {"true"}}, ""); status != http.StatusForbidden {
		t.Fatalf("approve with a bad csrf: %d", status)
	}
	if status, _ := op.post("/operator/connections/pinned/approve", url.Values{"csrf": {csrf}, "all": {"true"}}, "https://evil.example"); status != http.StatusForbidden {
		t.Fatalf("cross-origin approve: %d", status)
	}
	if status, _ := op.post("/operator/connections/nope/approve", url.Values{"csrf": {csrf}, "all": {"true"}}, ""); status != http.StatusNotFound {
		t.Fatalf("approve on an unknown connector: %d", status)
	}
	if status, page := op.post("/operator/connections/pinned/approve", url.Values{"csrf": {csrf}}, ""); status != http.StatusBadRequest || !strings.Contains(page, "nothing was approved") {
		t.Fatalf("approve naming no tool: %d %s", status, page)
	}
	if n := tokenCount(t, h); n != before {
		t.Fatalf("refused posts created tokens: %d → %d", before, n)
	}

	// A token name with markup is refused, nothing created.
	status, page = op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {`<script>alert(1)</script>`}}, "")
	if status != http.StatusBadRequest || strings.Contains(page, "<script>") || !strings.Contains(page, "Nothing was changed") || strings.Contains(page, `id="secret"`) {
		t.Fatalf("markup name: %d %s", status, page)
	}
	if n := tokenCount(t, h); n != before {
		t.Fatal("a name with markup created a token")
	}
	// Other caller-authored text (quotes, ampersands) is escaped; the
	// secret is in the POST's answer only.
	status, page = op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {`ci "a&b" 'x'`}}, "")
	if status != http.StatusOK || !strings.Contains(page, "ci &#34;a&amp;b&#34; &#39;x&#39;") || !strings.Contains(page, `id="secret"`) {
		t.Fatalf("issue: %d %s", status, page)
	}
	if _, list := op.get("/operator/tokens"); strings.Contains(list, "cta_") {
		t.Fatal("the tokens page shows a secret after the issuing answer")
	}
	m := secretField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no secret on the issuing answer: %s", page)
	}
	token := m[1]

	// Without a credential, the keyed connector is auth_required and
	// authorize_connector names the console's Credentials page.
	if text, isErr, err := h.callTool(ctx, token, "call_tool", map[string]any{"address": "keyed.whoami"}); err != nil || !isErr || !strings.Contains(text, `"recovery":"operator_config"`) {
		t.Fatalf("keyed without credential: %v %s", err, text)
	}
	if text, _, err := h.callTool(ctx, token, "authorize_connector", map[string]any{"connector": "keyed"}); err != nil || !strings.Contains(text, `"operatorUrl":"`+h.base+`/operator/credentials"`) {
		t.Fatalf("authorize_connector: %v %s", err, text)
	}

	// A credential over the bound: refused, nothing stored.
	long := strings.Repeat("x", 16<<10+1)
	if status, page := op.post("/operator/credentials/keyed", url.Values{"csrf": {csrf}, "value": {long}}, ""); status != http.StatusRequestEntityTooLarge || !strings.Contains(page, "nothing was changed") {
		t.Fatalf("long credential: %d %s", status, page)
	}
	if _, err := h.app.Store().GetSecret(ctx, store.SecretKey{Kind: "credential", Connector: "keyed", Name: console.CredentialName}); err == nil {
		t.Fatal("an over-long credential was stored")
	}
	// A credential for a connector without a slot: 404.
	if status, _ := op.post("/operator/credentials/tracker", url.Values{"csrf": {csrf}, "value": {"x"}}, ""); status != http.StatusNotFound {
		t.Fatalf("no slot: %d", status)
	}
	// A good one is stored, and never shown back.
	if status, _ := op.post("/operator/credentials/keyed", url.Values{"csrf": {csrf}, "value": {keyedSecret}}, ""); status != http.StatusSeeOther {
		t.Fatalf("set credential: %d", status)
	}
	if _, page := op.get("/operator/credentials"); strings.Contains(page, keyedSecret) || !strings.Contains(page, "<strong>set</strong>") {
		t.Fatalf("credentials page: %s", page)
	}
	if text, isErr, err := h.callTool(ctx, token, "call_tool", map[string]any{"address": "keyed.whoami"}); err != nil || isErr || !strings.Contains(text, "key accepted") {
		t.Fatalf("keyed with credential: %v %s", err, text)
	}
	// Replacing the value applies to the next call, no restart.
	if status, _ := op.post("/operator/credentials/keyed", url.Values{"csrf": {csrf}, "value": {"wrong-key"}}, ""); status != http.StatusSeeOther {
		t.Fatalf("replace credential: %d", status)
	}
	if text, isErr, err := h.callTool(ctx, token, "call_tool", map[string]any{"address": "keyed.whoami"}); err != nil || !isErr || !strings.Contains(text, "auth_required") {
		t.Fatalf("keyed with a wrong credential: %v %s", err, text)
	}
	if status, _ := op.post("/operator/credentials/keyed/delete", url.Values{"csrf": {csrf}}, ""); status != http.StatusSeeOther {
		t.Fatalf("remove credential: %d", status)
	}
	if _, page := op.get("/operator/audit"); !strings.Contains(page, "credential.delete") || !strings.Contains(page, "credential.set") || !strings.Contains(page, "token.create") || strings.Contains(page, keyedSecret) {
		t.Fatalf("audit: %s", page)
	}

	// Sign out, then replay the cookie: refused, nothing changed.
	if status, page := op.post("/operator/signout", url.Values{"csrf": {csrf}}, ""); status != http.StatusOK || !strings.Contains(page, "signed out") {
		t.Fatalf("sign out: %d %s", status, page)
	}
	if status, page := op.get("/operator/tokens"); status != http.StatusUnauthorized || !strings.Contains(page, "session has ended") {
		t.Fatalf("replayed cookie, GET: %d %s", status, page)
	}
	before = tokenCount(t, h)
	if status, page := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"after"}}, ""); status != http.StatusUnauthorized || !strings.Contains(page, "Nothing was changed") {
		t.Fatalf("replayed cookie, POST: %d %s", status, page)
	}
	if n := tokenCount(t, h); n != before {
		t.Fatal("a replayed cookie created a token")
	}

	// An expired session is refused with its own message.
	secret := "expired-session-secret"
	if err := h.app.Store().PutSession(ctx, store.OperatorSession{Digest: sha(secret), Subject: "alice", CSRFDigest: "x",
		CreatedAt: time.Now().Add(-time.Hour), ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	expired := &operator{h: h, base: h.base, c: op.c, cookie: secret}
	if status, page := expired.get("/operator/"); status != http.StatusUnauthorized || !strings.Contains(page, "session expired") {
		t.Fatalf("expired session: %d %s", status, page)
	}
	h.noSecretLogged(t, token, op.cookie, csrf, keyedSecret, "wrong-key", consoleSecret)
}

// TestConsole_CallbackRateLimited: a burst of sign-in callbacks is cut off
// with 429 before any reaches the provider.
func TestConsole_CallbackRateLimited(t *testing.T) {
	h := startHarness(t)
	limited := 0
	for i := 0; i < 40; i++ {
		res, err := http.Get(h.base + console.CallbackPath + "?code=x&state=y")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("40 callbacks at once were never rate-limited")
	}
}

// from is an HTTP client whose connections come from the loopback address
// ip (all of 127.0.0.0/8 is local on Linux): another client address.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestConsole_JunkCallbacksDoNotLockOperatorsOut: junk sign-in callbacks
// and starts — from one address, far past its own limit, and from ten
// more addresses — are cut off per address and spend nothing of the global
// bucket without a state cookie, so an operator elsewhere still signs in.
// (Before, one junk callback every 2 s kept the global bucket empty.)
func TestConsole_JunkCallbacksDoNotLockOperatorsOut(t *testing.T) {
	h := startHarness(t)
	get := func(c *http.Client, path string) int {
		t.Helper()
		res, err := c.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	flood := from("127.0.0.2")
	limited := 0
	for range 60 {
		if get(flood, console.CallbackPath+"?code=x&state=y") == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 40 {
		t.Fatalf("one address's 60 junk callbacks: %d refused 429, want the address limited", limited)
	}
	for i := 3; i < 13; i++ {
		c := from(fmt.Sprintf("127.0.0.%d", i))
		for range 10 {
			if st := get(c, console.CallbackPath+"?code=x&state=y"); st != http.StatusBadRequest {
				t.Fatalf("a junk callback within its address's limit: %d, want 400", st)
			}
		}
	}
	for range 20 {
		get(flood, "/operator/signin")
	}
	if op, status, page := h.signIn(context.Background(), "alice"); status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("an operator's sign-in after the flood: %d %s", status, page)
	}
}

// TestConsole_WithoutOIDC: without auth.oidc every console page says how to
// enable it, and a mutation changes nothing.
func TestConsole_WithoutOIDC(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("connectors: []\n"), config.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), app.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Server.Handler())
	defer srv.Close()
	for _, path := range []string{"/operator/", "/operator/tokens", "/operator/signin", console.CallbackPath + "?state=x&code=y", console.MePath} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "auth.oidc") || res.Header.Get("Content-Security-Policy") != console.CSP {
			t.Fatalf("%s: %d %s", path, res.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/operator/tokens", strings.NewReader("name=x"))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("POST without OIDC: %d", res.StatusCode)
	}
}

var olderLink = regexp.MustCompile(`<a href="(/operator/activity\?[^"]+)">Older calls</a>`)

// TestConsole_ActivityPages: the history newest first, 50 a page with the
// store's cursor, filtered by connector; a bad cursor is said so; a token
// rename shows the new name, escaped.
func TestConsole_ActivityPages(t *testing.T) {
	h := startHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var batch []store.ActivityRecord
	for i := range 60 {
		conn := "alpha"
		if i%3 == 0 {
			conn = "beta"
		}
		e := activity.Event{ID: fmt.Sprintf("ev-%03d", i), OccurredAt: base.Add(time.Duration(i) * time.Second), Actor: "oidc:carol",
			ConnectorID: conn, ToolName: fmt.Sprintf("tool%03d", i), Address: fmt.Sprintf("%s.tool%03d", conn, i), Source: "call_tool", Outcome: "success", Attempts: 1}
		js, _ := json.Marshal(e)
		batch = append(batch, store.ActivityRecord{ID: e.ID, OccurredAt: e.OccurredAt, ConnectorID: conn, Outcome: e.Outcome, Actor: e.Actor, JSON: js})
	}
	if err := h.app.Store().AppendActivity(ctx, batch); err != nil {
		t.Fatal(err)
	}
	op, status, _ := h.signIn(ctx, "alice")
	if status != http.StatusSeeOther {
		t.Fatalf("sign-in %d", status)
	}
	_, page := op.get("/operator/activity")
	if n := strings.Count(page, "<tr>") - 1; n != 50 {
		t.Fatalf("first page has %d rows", n)
	}
	if strings.Index(page, "tool059") > strings.Index(page, "tool058") || strings.Contains(page, "tool009<") {
		t.Fatal("first page is not the newest 50, newest first")
	}
	m := olderLink.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no older link:\n%s", page)
	}
	_, page = op.get(html.UnescapeString(m[1]))
	if n := strings.Count(page, "<tr>") - 1; n != 10 || !strings.Contains(page, "alpha.tool001") || olderLink.MatchString(page) {
		t.Fatalf("second page has %d rows:\n%s", n, page)
	}
	_, page = op.get("/operator/activity?connector=beta")
	if n := strings.Count(page, "<tr>") - 1; n != 20 || strings.Contains(page, "alpha.") {
		t.Fatalf("filtered page has %d rows", n)
	}
	if _, page = op.get("/operator/activity?before=not-a-cursor"); !strings.Contains(page, "not valid") {
		t.Fatalf("bad cursor:\n%s", page)
	}

	// Rename a token: the new name is stored as text and escaped.
	csrf := op.csrf()
	if status, _ := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"ci"}}, ""); status != http.StatusOK {
		t.Fatalf("issue %d", status)
	}
	list, _ := h.app.Store().ListTokens(ctx)
	if status, page := op.post("/operator/tokens/"+list[0].ID+"/rename", url.Values{"csrf": {csrf}, "name": {`ci "<img src=x>"`}}, ""); status != http.StatusBadRequest || !strings.Contains(page, "Nothing was changed") {
		t.Fatalf("rename with markup %d", status)
	}
	if status, _ := op.post("/operator/tokens/"+list[0].ID+"/rename", url.Values{"csrf": {csrf}, "name": {`ci & "nightly"`}}, ""); status != http.StatusSeeOther {
		t.Fatalf("rename %d", status)
	}
	if _, page = op.get("/operator/tokens"); !strings.Contains(page, "ci &amp; &#34;nightly&#34;") {
		t.Fatalf("renamed token:\n%s", page)
	}
	if status, page := op.post("/operator/tokens/"+list[0].ID+"/rename", url.Values{"csrf": {csrf}, "name": {strings.Repeat("n", 81)}}, ""); status != http.StatusBadRequest || !strings.Contains(page, "Nothing was changed") {
		t.Fatalf("long name %d", status)
	}
}

// TestConsole_SessionsAcrossReplicas: two replicas on one store behind one
// publicUrl. A sign-in started on one finishes on the other; the session
// works on both; signing out on one ends it on the other.
func TestConsole_SessionsAcrossReplicas(t *testing.T) {
	h := startHarness(t)
	other := h.replica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op, status, _ := h.signInVia(ctx, "alice", other)
	if status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("sign-in finished on the other replica: %d", status)
	}
	for _, base := range []string{h.base, other} {
		op.base = base
		if status, page := op.get("/operator/tokens"); status != http.StatusOK || !strings.Contains(page, "alice@example.com") {
			t.Fatalf("%s: %d", base, status)
		}
	}
	csrf := op.csrf()
	op.base = other
	if status, _ := op.post("/operator/signout", url.Values{"csrf": {csrf}}, ""); status != http.StatusOK {
		t.Fatalf("sign-out: %d", status)
	}
	op.base = h.base
	if status, _ := op.get("/operator/tokens"); status != http.StatusUnauthorized {
		t.Fatalf("after sign-out on the other replica: %d", status)
	}
}

// The Access page shows the rules as configured and what a chosen caller
// reaches now; the token form narrows an issued token and the list shows it.
func TestConsole_AccessPageAndNarrowedTokens(t *testing.T) {
	h := startHarnessWith(t, `access:
  - callers: {oidc: {claim: {name: groups, value: finance}}}
    connectors: [keyed]
    tools: ["keyed.list_*"]
  - callers: {issuedTokens: true}
    connectors: [tracker, keyed]
    writes: true
`)
	ctx := context.Background()
	op, _, _ := h.signIn(ctx, "alice")
	status, page := op.get("/operator/access")
	mustContain(t, "access page", page, "OIDC claim groups = finance", "keyed.list_*", "every issued token", "tracker, keyed")
	if status != http.StatusOK {
		t.Fatalf("access page: %d", status)
	}
	_, page = op.get("/operator/access?" + url.Values{"kind": {"oidc"}, "claims": {`{"sub":"fin-1","groups":["finance"]}`}}.Encode())
	mustContain(t, "a finance identity", page, "oidc:fin-1 reaches", `scope="row">keyed<`)
	if strings.Contains(page, `scope="row">tracker<`) {
		t.Errorf("a finance identity is shown reaching tracker: %s", page)
	}
	_, page = op.get("/operator/access?" + url.Values{"kind": {"oidc"}, "claims": {`{"sub":"eng-1","groups":["eng"]}`}}.Encode())
	mustContain(t, "an identity no rule names", page, "Nothing: no rule gives this caller a connector.")

	csrf := op.csrf()
	if status, page := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"agent"}, "connectors": {"tracker, nope"}}, ""); status != http.StatusBadRequest || !strings.Contains(page, "Nothing was changed") {
		t.Fatalf("an unknown connector in the narrowing: %d %s", status, page)
	}
	if status, _ := op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {"agent"}, "connectors": {"tracker"}}, ""); status != http.StatusOK {
		t.Fatalf("issue a narrowed token: %d", status)
	}
	list, err := h.app.AccessTokens().List(ctx)
	if err != nil || len(list) != 1 || strings.Join(list[0].Connectors, ",") != "tracker" {
		t.Fatalf("stored narrowing: %+v, %v", list, err)
	}
	_, page = op.get("/operator/tokens")
	mustContain(t, "tokens list", page, "<td>tracker</td>")
	_, page = op.get("/operator/access?" + url.Values{"kind": {"issued"}, "name": {list[0].ID}}.Encode())
	mustContain(t, "the narrowed token", page, "token:"+list[0].ID+" reaches", `scope="row">tracker<`)
	if strings.Contains(page, `scope="row">keyed<`) {
		t.Errorf("the narrowed token is shown reaching keyed: %s", page)
	}
}
