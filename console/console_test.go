package console_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/console"
	"github.com/connecta-dev/connecta/store"
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

	// bob signs in at the provider but is not an operator: no session.
	bob, status, page := h.signIn(ctx, "bob")
	if status != http.StatusForbidden || bob.cookie != "" || !strings.Contains(page, "Not an operator") {
		t.Fatalf("bob: %d cookie=%q %s", status, bob.cookie, page)
	}

	op, status, _ := h.signIn(ctx, "alice")
	if status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("alice: %d", status)
	}
	if status, page := op.get("/operator/"); status != http.StatusOK || !strings.Contains(page, "Keyed &lt;b&gt;service&lt;/b&gt;") || strings.Contains(page, "<b>service") {
		t.Fatalf("connections %d: %s", status, page)
	}
	csrf := op.csrf()

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
	if n := tokenCount(t, h); n != before {
		t.Fatalf("refused posts created tokens: %d → %d", before, n)
	}

	// A token name with markup is stored as text and escaped on the page;
	// the secret is in the POST's answer only.
	status, page = op.post("/operator/tokens", url.Values{"csrf": {csrf}, "name": {`<script>alert(1)</script>`}}, "")
	if status != http.StatusOK || strings.Contains(page, "<script>") || !strings.Contains(page, "&lt;script&gt;") || !strings.Contains(page, `id="secret"`) {
		t.Fatalf("issue: %d %s", status, page)
	}
	if _, list := op.get("/operator/tokens"); strings.Contains(list, "cta_") {
		t.Fatal("the tokens page shows a secret after the issuing answer")
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
	if _, page := op.get("/operator/audit"); !strings.Contains(page, "credential.set") || !strings.Contains(page, "token.create") || strings.Contains(page, keyedSecret) {
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
	expired := &operator{h: h, c: op.c, cookie: secret}
	if status, page := expired.get("/operator/"); status != http.StatusUnauthorized || !strings.Contains(page, "session expired") {
		t.Fatalf("expired session: %d %s", status, page)
	}
}

// TestConsole_WithoutOIDC: the console says how to enable it.
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
