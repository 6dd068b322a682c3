package oauth_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/vault"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/pgtest"
)

// testSessionCookie stands in for the console's session in these tests:
// its value is the signed-in actor's display form (the console's own
// lookup, console.SessionActor, is tested with the console).
const testSessionCookie = "test_session"

func testSession(r *http.Request) (actor.ID, bool) {
	ck, err := r.Cookie(testSessionCookie)
	if err != nil {
		return actor.ID{}, false
	}
	return actor.Parse(ck.Value)
}

var (
	alice = actor.OIDCSubject("alice")
	bob   = actor.OIDCSubject("bob")
)

func twoPeople() oidctest.Options {
	return oidctest.Options{Accounts: map[string]oidctest.Account{
		"alice": {Email: "alice@example.com", EmailVerified: true},
		"bob":   {Email: "bob@example.com", EmailVerified: true},
	}}
}

// browser is a person's browser: signed in to connecta as who (zero: not
// signed in), with its own cookies at the provider.
func (r *rig) browser(t *testing.T, who actor.ID) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	if !who.IsZero() {
		u, _ := url.Parse(r.public)
		jar.SetCookies(u, []*http.Cookie{{Name: testSessionCookie, Value: who.String(), Path: "/"}})
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// complete signs account in at the provider in browser and follows the
// redirect to connecta's callback, returning the callback page.
func (r *rig) complete(t *testing.T, ctx context.Context, browser *http.Client, authURL, account string) (int, string, string) {
	t.Helper()
	back, err := r.p.Authorize(ctx, browser, authURL, account, true)
	if err != nil {
		t.Fatal(err)
	}
	status, page := get(t, browser, back.String())
	return status, page, back.String()
}

func (r *rig) start(t *testing.T, ctx context.Context, who actor.ID) *oauth.Status {
	t.Helper()
	st, err := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: who.String(), Who: who})
	if err != nil {
		t.Fatalf("Authorize(%s): %v", who, err)
	}
	return st
}

// whoamiAs calls the protected server with who's own grant.
func (r *rig) whoamiAs(ctx context.Context, who actor.ID) (string, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	hc := &http.Client{Transport: r.m.Transport("tracker", who, http.DefaultTransport)}
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.rs.URL, HTTPClient: hc}, nil)
	if err != nil {
		return "", err
	}
	defer session.Close()
	out, err := session.CallTool(ctx, &mcp.CallToolParams{Name: oidctest.ToolWhoAmI})
	if err != nil {
		return "", err
	}
	return out.Content[0].(*mcp.TextContent).Text, nil
}

func wantAuthRequired(t *testing.T, err error, what string) *oauth.Error {
	t.Helper()
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != oauth.CodeAuthRequired {
		t.Fatalf("%s: %v, want auth_required", what, err)
	}
	return oe
}

// TestPerCaller_EachPersonUsesTheirOwnGrant: on a `grants: caller`
// connector Alice and Bob each connect their own account; the protected
// server sees Alice's subject on Alice's calls and Bob's on Bob's; a person
// who has not connected gets auth_required for themselves alone while the
// others keep working; a token caller is told a signed-in person is needed;
// the connector-wide grant is never used or made.
func TestPerCaller_EachPersonUsesTheirOwnGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, twoPeople())
	r := newRigAt(t, p, oidctest.NewProtectedServer(t, p), nil, "", true)

	// Pending is the starter's own: Bob does not get Alice's link.
	stA := r.start(t, ctx, alice)
	if again := r.start(t, ctx, alice); again.Status != oauth.StatusPending || again.AuthorizationURL != stA.AuthorizationURL {
		t.Fatalf("alice again: %+v, want her pending link", again)
	}
	stB := r.start(t, ctx, bob)
	if stB.Status != oauth.StatusAuthorizationRequired || stB.AuthorizationURL == stA.AuthorizationURL {
		t.Fatalf("bob: %+v, want a flow of his own", stB)
	}
	if !strings.Contains(stA.Instructions, "/me") {
		t.Fatalf("instructions do not name the /me sign-in: %s", stA.Instructions)
	}
	for _, c := range []struct {
		who     actor.ID
		st      *oauth.Status
		account string
	}{{alice, stA, "alice"}, {bob, stB, "bob"}} {
		if status, page, _ := r.complete(t, ctx, r.browser(t, c.who), c.st.AuthorizationURL, c.account); status != http.StatusOK || !strings.Contains(page, "your own account") {
			t.Fatalf("%s's callback: %d %s", c.who, status, page)
		}
	}
	for who, want := range map[actor.ID]string{alice: "subject=alice", bob: "subject=bob"} {
		got, err := r.whoamiAs(ctx, who)
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("%s's call: %q %v, want %s", who, got, err, want)
		}
	}
	// Carol has no grant: auth_required naming her, nothing sent.
	calls := r.rs.Calls()
	_, err := r.whoamiAs(ctx, actor.OIDCSubject("carol"))
	if oe := wantAuthRequired(t, err, "carol"); !oe.NoGrant || !strings.Contains(oe.Message, "oidc:carol") {
		t.Fatalf("carol: %+v", oe)
	}
	// A static token, and a request with no actor, are told a person is needed.
	for _, who := range []actor.ID{actor.StaticToken("laptop"), {}} {
		_, err := r.whoamiAs(ctx, who)
		if oe := wantAuthRequired(t, err, "token "+who.String()); !oe.PersonNeeded || !strings.Contains(oe.Message, "signed-in person") && !strings.Contains(oe.Message, "no signed-in person") {
			t.Fatalf("%q: %+v", who, oe)
		}
		if _, aerr := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Who: who}); aerr == nil || !aerr.PersonNeeded {
			t.Fatalf("Authorize by %q: %v, want person needed", who, aerr)
		}
	}
	if r.rs.Calls() != calls {
		t.Fatal("a call without its own grant reached the downstream")
	}
	// Alice's keeps working; revoking Alice's leaves Bob's.
	if _, err := r.m.Revoke(ctx, "tracker", alice, "oidc:alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.whoamiAs(ctx, alice); !wantAuthRequired(t, err, "alice after revoke").NoGrant {
		t.Fatal("alice's grant survived")
	}
	if got, err := r.whoamiAs(ctx, bob); err != nil || !strings.Contains(got, "subject=bob") {
		t.Fatalf("bob after alice's revoke: %q %v", got, err)
	}
	if ok, _ := r.m.Granted(ctx, "tracker", bob); !ok {
		t.Fatal("bob's grant is gone")
	}
	// Audits name whose grant.
	r.mu.Lock()
	defer r.mu.Unlock()
	owners := map[string]bool{}
	for _, a := range r.audits {
		if a.Action == "granted" || a.Action == "revoked" {
			owners[a.Action+" "+a.Owner] = true
		}
	}
	for _, want := range []string{"granted oidc:alice", "granted oidc:bob", "revoked oidc:alice"} {
		if !owners[want] {
			t.Fatalf("no audit %q in %v", want, owners)
		}
	}
}

// TestPerCaller_FlowCompletesOnlyInTheStartersBrowser: a link Alice asked
// for, completed in Bob's browser (signed in as Bob) or in a browser not
// signed in, grants nothing to anyone and says why; Alice's own browser
// then completes it; the same state again is refused.
func TestPerCaller_FlowCompletesOnlyInTheStartersBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, twoPeople())
	r := newRigAt(t, p, oidctest.NewProtectedServer(t, p), nil, "", true)
	st := r.start(t, ctx, alice)

	status, page, _ := r.complete(t, ctx, r.browser(t, bob), st.AuthorizationURL, "bob")
	if status != http.StatusBadRequest || !strings.Contains(page, "not started by the person signed in") || !strings.Contains(page, "Nothing was granted") {
		t.Fatalf("in bob's browser: %d %s", status, page)
	}
	status, page, _ = r.complete(t, ctx, r.browser(t, actor.ID{}), st.AuthorizationURL, "bob")
	if status != http.StatusForbidden || !strings.Contains(page, "not signed in to connecta") {
		t.Fatalf("not signed in: %d %s", status, page)
	}
	for _, who := range []actor.ID{alice, bob} {
		if ok, _ := r.m.Granted(ctx, "tracker", who); ok {
			t.Fatalf("%s has a grant from a link completed elsewhere", who)
		}
	}
	// Alice's flow is still hers: her browser completes it.
	status, page, callback := r.complete(t, ctx, r.browser(t, alice), st.AuthorizationURL, "alice")
	if status != http.StatusOK {
		t.Fatalf("alice's own browser: %d %s", status, page)
	}
	if got, err := r.whoamiAs(ctx, alice); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("alice: %q %v", got, err)
	}
	// Replayed state: refused, the grant unchanged.
	if status, page := get(t, r.browser(t, alice), callback); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Fatalf("replay: %d %s", status, page)
	}
	if ok, _ := r.m.Granted(ctx, "tracker", bob); ok {
		t.Fatal("bob got a grant")
	}
}

// TestPerCaller_ReplicasShareOnePersonsFlowAndRefreshOnce: two replicas on
// one PostgreSQL; Alice's flow started on A completes on B; after her
// access token expires, eight concurrent calls of hers (on both replicas)
// cause exactly one refresh, and Bob's grant is untouched.
func TestPerCaller_ReplicasShareOnePersonsFlowAndRefreshOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cluster := pgtest.Start(t)
	dbURL := cluster.Database(t)
	key := make([]byte, vault.KeyBytes)
	_, _ = rand.Read(key)
	opts := twoPeople()
	p := oidctest.StartAuthServer(t, opts)
	rs := oidctest.NewProtectedServer(t, p)
	b := newRigAt(t, p, rs, replicaStore(t, dbURL, key), "", true)
	a := newRigAt(t, p, rs, replicaStore(t, dbURL, key), b.public, true)
	a.clk = b.clk

	st := a.start(t, ctx, alice)
	if again := b.start(t, ctx, alice); again.Status != oauth.StatusPending || again.AuthorizationURL != st.AuthorizationURL {
		t.Fatalf("replica B for alice: %+v, want her pending link", again)
	}
	if status, page, _ := b.complete(t, ctx, b.browser(t, alice), st.AuthorizationURL, "alice"); status != http.StatusOK {
		t.Fatalf("callback on B: %d %s", status, page)
	}
	stB := b.start(t, ctx, bob)
	if status, page, _ := a.complete(t, ctx, a.browser(t, bob), stB.AuthorizationURL, "bob"); status != http.StatusOK {
		t.Fatalf("bob's callback on A: %d %s", status, page)
	}
	for name, r := range map[string]*rig{"A": a, "B": b} {
		if got, err := r.whoamiAs(ctx, alice); err != nil || !strings.Contains(got, "subject=alice") {
			t.Fatalf("replica %s: %q %v", name, got, err)
		}
	}
	okBefore := a.refreshes("ok") + b.refreshes("ok")
	b.clk.advance(5 * time.Minute) // past the access token's default lifetime
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		r := a
		if i%2 == 1 {
			r = b
		}
		wg.Go(func() {
			if got, err := r.whoamiAs(ctx, alice); err != nil || !strings.Contains(got, "subject=alice") {
				errs <- errors.Join(err, errors.New(got))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := a.refreshes("ok") + b.refreshes("ok") - okBefore; n != 1 {
		t.Fatalf("refreshes of alice's grant across replicas = %v, want exactly 1", n)
	}
	if got, err := a.whoamiAs(ctx, bob); err != nil || !strings.Contains(got, "subject=bob") {
		t.Fatalf("bob: %q %v", got, err)
	}
}

// TestPerCaller_InvalidGrantDropsThatPersonsGrantOnly: Alice's refresh
// token revoked at the authorization server: her next refresh answers
// invalid_grant, which drops her grant (audited as hers) and leaves Bob's.
func TestPerCaller_InvalidGrantDropsThatPersonsGrantOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, twoPeople())
	r := newRigAt(t, p, oidctest.NewProtectedServer(t, p), nil, "", true)
	for who, account := range map[actor.ID]string{alice: "alice", bob: "bob"} {
		if status, page, _ := r.complete(t, ctx, r.browser(t, who), r.start(t, ctx, who).AuthorizationURL, account); status != http.StatusOK {
			t.Fatalf("%s: %d %s", who, status, page)
		}
	}
	r.revokeGrantAtServer(t, ctx, vault.CallerName("grant", alice))
	r.rs.RejectNext(1)
	if _, err := r.whoamiAs(ctx, alice); err == nil {
		t.Fatal("alice's call worked after invalid_grant")
	}
	if r.refreshes("invalid_grant") != 1 {
		t.Fatalf("invalid_grant refreshes = %v", r.refreshes("invalid_grant"))
	}
	if _, err := r.whoamiAs(ctx, alice); !wantAuthRequired(t, err, "alice's next call").NoGrant {
		t.Fatal("alice's grant was kept")
	}
	if got, err := r.whoamiAs(ctx, bob); err != nil || !strings.Contains(got, "subject=bob") {
		t.Fatalf("bob after alice's invalid_grant: %q %v", got, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.audits {
		if a.Action == "dropped" {
			if a.Owner != "oidc:alice" || a.Outcome != "invalid_grant" {
				t.Fatalf("drop audit: %+v", a)
			}
			return
		}
	}
	t.Fatalf("no drop audit in %+v", r.audits)
}
