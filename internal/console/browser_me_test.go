package console_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowser_MeTwoPeopleTheirOwnAccounts: Alice (an operator) and Bob (a
// caller) sign in through the console in two real Chromium browsers and
// connect their own accounts to a `grants: caller` connector on /me; each
// one's /mcp call reaches the protected server as themselves; the link
// Alice's agent gets, opened in Bob's browser, grants nothing and says why;
// Bob's Disconnect ends only his grant. The page is labelled and readable.
func TestBrowser_MeTwoPeopleTheirOwnAccounts(t *testing.T) {
	h := startHarnessWith(t, `  - id: mine
    title: Mine
    url: {{protected}}
    oauth: {grants: caller}
`)
	signIn := func(account, landing string) *browser {
		b := newBrowser(t, h)
		b.open("/me")
		mustContain(t, "welcome", b.html(), "Sign in", "/me")
		b.submit(`main a.button`)
		b.click(`#continue`)
		b.provider(account)
		b.do(chromedp.WaitVisible(chromedp.CSS("main h1")))
		if loc := b.location(); loc != h.base+landing {
			t.Fatalf("%s after sign-in at %s", account, loc)
		}
		return b
	}
	connect := func(b *browser, account string) {
		b.open("/me")
		b.labelled()
		b.readable()
		b.submit(`form[action="/me/connect/mine"] button`)
		b.click(`main a.button`)
		b.provider(account)
		b.do(chromedp.WaitVisible(chromedp.CSS("body")))
		mustContain(t, account+"'s callback", b.html(), "Connected", "your own account")
		b.open("/me")
		mustContain(t, account+"'s /me", b.html(), "<strong>connected</strong>", `/me/disconnect/mine`)
	}
	alice := signIn("alice", "/operator/")
	bob := signIn("bob", "/me")
	connect(alice, "alice")
	connect(bob, "bob")
	alice.open("/me")
	mustContain(t, "operator's /me", alice.html(), "<code>oidc:alice</code>", "<code>oidc:bob</code>")
	alice.screenshot("me")

	ctx := alice.ctx
	whoami := func(account string) string {
		tok, err := h.p.AccessToken(ctx, h.base+"/mcp", account)
		if err != nil {
			t.Fatal(err)
		}
		text, _, err := h.callTool(ctx, tok, "call_tool", map[string]any{"address": "mine.whoami"})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	for _, account := range []string{"alice", "bob"} {
		if got := whoami(account); !strings.Contains(got, "subject="+account) {
			t.Fatalf("%s through /mcp: %s", account, got)
		}
	}

	// Alice's agent asks for a link; it is opened in Bob's browser.
	tok, err := h.p.AccessToken(ctx, h.base+"/mcp", "alice")
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := h.callTool(ctx, tok, "authorize_connector", map[string]any{"connector": "mine", "force": true})
	var st struct{ AuthorizationURL string }
	if err != nil || json.Unmarshal([]byte(text), &st) != nil || st.AuthorizationURL == "" {
		t.Fatalf("authorize_connector: %v %s", err, text)
	}
	bob.do(chromedp.Navigate(st.AuthorizationURL))
	bob.provider("bob")
	bob.do(chromedp.WaitVisible(chromedp.CSS("body")))
	mustContain(t, "alice's link in bob's browser", bob.html(), "Nothing was granted", "not started by the person signed in")
	if got := whoami("alice"); !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice after bob opened her link: %s", got)
	}

	// Bob disconnects in his browser: his grant ends, Alice's stays.
	bob.open("/me")
	bob.submit(`form[action="/me/disconnect/mine"] button`)
	mustContain(t, "bob disconnected", bob.html(), "Disconnected mine", "<strong>not connected</strong>")
	if got := whoami("bob"); !strings.Contains(got, `"auth_required"`) {
		t.Fatalf("bob after disconnect: %s", got)
	}
	if got := whoami("alice"); !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice after bob's disconnect: %s", got)
	}
}
