package oauth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/test/idptest"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/testkit"
)

// These tests need the hermetic server's fault switches, so they run on it
// alone, in -short and in the long run alike.

// hermeticRig is a rig on the hermetic authorization server, with a grant
// already made.
func hermeticRig(t *testing.T, ctx context.Context) (*rig, *idptest.Provider) {
	t.Helper()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	r := newRigFor(t, p, oidctest.NewProtectedServer(t, p), nil)
	if status, page := r.authorize(t, ctx, true); status != http.StatusOK {
		t.Fatalf("callback %d %s", status, page)
	}
	return r, p
}

// A refresh the authorization server answers with a temporary error
// (503 temporarily_unavailable) fails the call as unavailable, naming the
// server, and keeps the grant: the next call refreshes and works.
func TestRefresh_TemporaryFailureKeepsTheGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, p := hermeticRig(t, ctx)
	r.clk.advance(10 * time.Minute) // past the access token's lifetime
	p.FailTokens(1, http.StatusServiceUnavailable, "temporarily_unavailable")
	// One request through the transport (an MCP client would re-send a
	// failed initialize, and the second refresh would succeed).
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.rs.URL, strings.NewReader(`{}`))
	_, err := r.m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != oauth.CodeUnavailable || oe.Host != p.Issuer {
		t.Fatalf("call while the token endpoint fails: %v, want unavailable at %s", err, p.Issuer)
	}
	if r.refreshes("failed") != 1 || r.refreshes("invalid_grant") != 0 {
		t.Fatalf("refreshes failed %v, invalid_grant %v; want 1, 0", r.refreshes("failed"), r.refreshes("invalid_grant"))
	}
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("the next call: %q %v", got, err)
	}
	if r.refreshes("ok") != 1 {
		t.Fatalf("ok refreshes = %v, want 1", r.refreshes("ok"))
	}
}

// Refresh tokens rotate: each refresh stores the new refresh token, so the
// next refresh is accepted (the server refuses a spent one as
// invalid_grant and revokes its chain).
func TestRefresh_RotatedRefreshTokenIsKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _ := hermeticRig(t, ctx)
	for i := range 3 {
		r.clk.advance(10 * time.Minute)
		if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
			t.Fatalf("call after expiry %d: %q %v", i+1, got, err)
		}
	}
	if r.refreshes("ok") != 3 || r.refreshes("invalid_grant") != 0 {
		t.Fatalf("refreshes ok %v, invalid_grant %v; want 3, 0", r.refreshes("ok"), r.refreshes("invalid_grant"))
	}
}

// An authorization server whose metadata names another issuer (RFC 8414
// §3.3) is refused before any flow starts.
func TestDiscovery_MetadataForAnotherIssuerRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	r := newRigFor(t, p, oidctest.NewProtectedServer(t, p), nil)
	p.SetIssuer("http://127.0.0.1:1")
	_, err := r.m.Authorize(ctx, "tracker", false, oauth.Caller{})
	if err == nil || err.Code != oauth.CodeAuthRequired || !strings.Contains(err.Message, "refused") {
		t.Fatalf("Authorize: %v, want auth_required (refused)", err)
	}
	if _, oerr := r.store.Open(ctx, "tracker", "flow"); oerr == nil {
		t.Fatal("a flow was written")
	}
}

// callTracker sends one request through the transport on ctx; its error
// arrives on the channel.
func callTracker(r *rig, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.rs.URL, strings.NewReader(`{}`))
		res, err := r.m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	return done
}

// waitFor fails the test when ch is not closed before ctx ends.
func waitFor(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("%s: %v", what, ctx.Err())
	}
}

// heldRefresh is a hermetic rig whose access token has expired, on a token
// endpoint held (HoldServing): the next call's refresh waits there.
func heldRefresh(t *testing.T, ctx context.Context) (*rig, *idptest.Held) {
	t.Helper()
	r, p := hermeticRig(t, ctx)
	r.clk.advance(10 * time.Minute) // past the access token's lifetime
	return r, p.HoldServing(t)
}

// abandonedRefresh is heldRefresh with a call whose caller gave up while
// its refresh waited at the token endpoint; err is what that call got.
func abandonedRefresh(t *testing.T, ctx context.Context) (r *rig, held *idptest.Held, err error) {
	t.Helper()
	r, held = heldRefresh(t, ctx)
	callCtx, giveUp := context.WithCancel(ctx)
	done := callTracker(r, callCtx)
	waitFor(t, ctx, held.Arrived, "the refresh at the token endpoint")
	giveUp()
	return r, held, <-done
}

// A refresh whose caller gives up while the authorization server works on
// it is not lost. The server rotates the refresh token (and would take the
// spent one, sent again, as reuse: invalid_grant, the chain revoked); the
// refresh runs detached from its caller, so connecta stores the rotated
// token though nobody waits for it, and the next call works without a new
// sign-in. The caller itself returns at once with its context's error.
func TestRefresh_CallerGivingUpStillStoresTheRotatedToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held, err := abandonedRefresh(t, ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up: %v, want its context's error", err)
	}
	held.Release()
	waitFor(t, ctx, held.Served, "the held refresh answered") // the refresh token is rotated
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("the next call: %q %v", got, err)
	}
	if ok, err := r.m.Granted(ctx, "tracker", actor.ID{}); !ok || err != nil {
		t.Fatalf("the grant after a refresh its caller left: %v %v", ok, err)
	}
	if r.refreshes("ok") != 1 || r.refreshes("invalid_grant") != 0 {
		t.Fatalf("refreshes ok %v, invalid_grant %v; want 1, 0", r.refreshes("ok"), r.refreshes("invalid_grant"))
	}
}

// Concurrent refreshes of one grant are one token request: callers that
// find a refresh in flight wait for it (here while the token endpoint is
// held), and all use its token.
func TestRefresh_ConcurrentCallersShareOneRefresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held := heldRefresh(t, ctx)
	first := callTracker(r, ctx)
	waitFor(t, ctx, held.Arrived, "the first refresh at the token endpoint")
	var others []<-chan error
	for range 3 {
		others = append(others, callTracker(r, ctx))
	}
	held.Release()
	for i, done := range append(others, first) {
		if err := <-done; err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if r.refreshes("ok") != 1 || r.refreshes("failed") != 0 || r.refreshes("invalid_grant") != 0 {
		t.Fatalf("refreshes ok %v, failed %v, invalid_grant %v; want 1, 0, 0", r.refreshes("ok"), r.refreshes("failed"), r.refreshes("invalid_grant"))
	}
}

// A refresh the authorization server does not answer within the refresh's
// own bound (TokenRequestTimeout, shortened here) fails unavailable and keeps
// the grant: the server never served it, so its refresh token is unspent,
// and the next call refreshes and works.
func TestRefresh_UnansweredWithinItsBoundKeepsTheGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, p := hermeticRig(t, ctx)
	oauth.SetTokenRequestTimeout(r.m, 200*time.Millisecond)
	r.clk.advance(10 * time.Minute)
	held := p.Hold(t)
	var oe *oauth.Error
	if err := <-callTracker(r, ctx); !errors.As(err, &oe) || oe.Code != oauth.CodeUnavailable {
		t.Fatalf("a call whose refresh timed out: %v, want unavailable", err)
	}
	waitFor(t, ctx, held.Abandoned, "the server seeing the refresh go") // its refresh token was not spent
	held.Release()
	if ok, err := r.m.Granted(ctx, "tracker", actor.ID{}); !ok || err != nil {
		t.Fatalf("the grant after a timed-out refresh: %v %v", ok, err)
	}
	if r.refreshes("failed") != 1 || r.refreshes("invalid_grant") != 0 {
		t.Fatalf("refreshes failed %v, invalid_grant %v; want 1, 0", r.refreshes("failed"), r.refreshes("invalid_grant"))
	}
	// The next refresh must succeed: a bound a loaded machine cannot
	// spend on an answered token request (the short one is proven above).
	oauth.SetTokenRequestTimeout(r.m, 20*time.Second)
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("the next call: %q %v", got, err)
	}
}

// Close waits for a refresh in flight, so a token the server rotated is
// stored before the store goes; a refresh asked for afterwards fails
// unavailable.
func TestClose_WaitsForTheRefreshInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held, _ := abandonedRefresh(t, ctx)
	closed := make(chan struct{})
	go func() { r.m.Close(); close(closed) }()
	held.Release()
	waitFor(t, ctx, closed, "Close")
	if r.refreshes("ok") != 1 {
		t.Fatalf("ok refreshes when Close returned = %v, want 1 (it waits for the refresh)", r.refreshes("ok"))
	}
	r.clk.advance(10 * time.Minute)
	var oe *oauth.Error
	if err := <-callTracker(r, ctx); !errors.As(err, &oe) || oe.Code != oauth.CodeUnavailable || !strings.Contains(oe.Message, "shutting down") {
		t.Fatalf("a refresh after Close: %v, want unavailable (shutting down)", err)
	}
}

// audited counts the rig's audit records of the action.
func (r *rig) audited(action string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.audits {
		if a.Action == action {
			n++
		}
	}
	return n
}

// page is what a browser got for a callback: its status and text, or the
// error of a request that did not finish.
type page struct {
	status int
	text   string
	err    error
}

// openCallback is the browser loading the callback URL u on ctx; the page
// arrives on the channel.
func openCallback(ctx context.Context, browser *http.Client, u string) <-chan page {
	done := make(chan page, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		res, err := browser.Do(req)
		if err != nil {
			done <- page{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		done <- page{status: res.StatusCode, text: string(body), err: err}
	}()
	return done
}

// heldCallback is a hermetic rig with no grant whose flow a person has
// approved at the authorization server, on a token endpoint held
// (HoldServing): the callback's code exchange waits there. back is the
// callback URL the browser was sent to.
func heldCallback(t *testing.T, ctx context.Context) (r *rig, held *idptest.Held, browser *http.Client, back string) {
	t.Helper()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	r = newRigFor(t, p, oidctest.NewProtectedServer(t, p), nil)
	st, err := r.m.Authorize(ctx, "tracker", false, oauth.Caller{Actor: "laptop"})
	if err != nil {
		t.Fatalf("Authorize: %v", err)
	}
	jar, _ := cookiejar.New(nil)
	browser = &http.Client{Jar: jar}
	u, aerr := p.Authorize(ctx, browser, st.AuthorizationURL, "alice", true)
	if aerr != nil {
		t.Fatal(aerr)
	}
	return r, p.HoldServing(t), browser, u.String()
}

// leftCallback is heldCallback with a browser that left (a closed tab, a
// dropped network) while its code exchange waited at the token endpoint;
// it returns once connecta's handler has ended, so the request's
// cancellation has reached connecta before the test releases the server.
func leftCallback(t *testing.T, ctx context.Context) (r *rig, held *idptest.Held, browser *http.Client, back string) {
	t.Helper()
	r, held, browser, back = heldCallback(t, ctx)
	browserCtx, leave := context.WithCancel(ctx)
	done := openCallback(browserCtx, browser, back)
	waitFor(t, ctx, held.Arrived, "the code exchange at the token endpoint")
	leave()
	if pg := <-done; !errors.Is(pg.err, context.Canceled) {
		t.Fatalf("the browser that left: %d %q %v, want its context's error", pg.status, pg.text, pg.err)
	}
	waitFor(t, ctx, r.callbackStarted, "connecta's callback handler")
	waitFor(t, ctx, r.callbackEnded, "connecta's callback handler ending after the browser left")
	return r, held, browser, back
}

// signedInOnce fails the test unless a call works on the grant without a
// new sign-in and the audit shows one: one grant, no failed exchange.
func signedInOnce(t *testing.T, ctx context.Context, r *rig, when string) {
	t.Helper()
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("a call %s: %q %v", when, got, err)
	}
	if r.audited("granted") != 1 || r.audited("flow_failed") != 0 {
		t.Fatalf("audits %s: granted %d, flow_failed %d; want 1, 0 (one exchange)", when, r.audited("granted"), r.audited("flow_failed"))
	}
}

// A callback whose browser leaves while the code is being exchanged is not
// lost. The authorization server has spent the code (one use only) and
// issues the tokens to a connection nobody reads; the exchange and sealing
// the grant run detached from the browser's request, so the grant is
// stored anyway and a call works without a new sign-in.
func TestCallback_BrowserLeavingMidExchangeStillStoresTheGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held, _, _ := leftCallback(t, ctx)
	held.Release()
	waitFor(t, ctx, held.Served, "the held code exchange answered") // the code is spent
	select {
	case <-held.Abandoned:
		t.Fatal("connecta gave up its token request when the browser left")
	default:
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		ok, err := r.m.Granted(ctx, "tracker", actor.ID{})
		return ok && err == nil
	}, "no grant stored after the exchange its browser left")
	signedInOnce(t, ctx, r, "after the sign-in its browser left")
}

// The flow stays single use when a browser retries its callback. A reload
// while the code exchange runs (the first request cancelled, the same URL
// asked again) waits for that exchange and gets its page, or, arriving
// after it, the already-used page; a retry once it is done gets the
// already-used page. Either way the state is taken and the code (with the
// PKCE verifier) sent once: one grant, no second exchange — which the
// server would refuse, revoking the tokens the code bought.
func TestCallback_RetriedTakesTheFlowOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held, browser, back := leftCallback(t, ctx)
	reload := openCallback(ctx, browser, back)
	waitFor(t, ctx, r.callbackStarted, "the reload at connecta")
	held.Release()
	pg := <-reload
	joined := pg.status == http.StatusOK && strings.Contains(pg.text, "Connected Tracker")
	if !joined && (pg.status != http.StatusBadRequest || !strings.Contains(pg.text, "already used")) {
		t.Fatalf("the reload during the exchange: %d %q %v, want the exchange's page or already used", pg.status, pg.text, pg.err)
	}
	t.Logf("the reload during the exchange waited for it: %v", joined)
	testkit.Eventually(t, 10*time.Second, func() bool { return r.audited("granted") == 1 }, "no grant audited")
	if status, text := get(t, browser, back); status != http.StatusBadRequest || !strings.Contains(text, "already used") {
		t.Fatalf("a retry after the exchange: %d %s", status, text)
	}
	signedInOnce(t, ctx, r, "after the retries")
}

// Close waits for a callback's exchange in flight, so the grant for a
// spent code is stored before the store goes. A callback arriving after
// Close takes nothing: it answers 503 and leaves the flow for the link to
// be opened again on a running replica.
func TestClose_WaitsForTheCallbackInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, held, _, _ := leftCallback(t, ctx)
	closed := make(chan struct{})
	go func() { r.m.Close(); close(closed) }()
	held.Release()
	waitFor(t, ctx, closed, "Close")
	if ok, err := r.m.Granted(ctx, "tracker", actor.ID{}); !ok || err != nil {
		t.Fatalf("the grant when Close returned: %v %v, want stored (Close waits for the callback)", ok, err)
	}
	st, err := r.m.Authorize(ctx, "tracker", true, oauth.Caller{Actor: "op", Operator: true})
	if err != nil {
		t.Fatalf("a flow after Close: %v", err)
	}
	if status, text := r.deliver(t, ctx, st.AuthorizationURL, true); status != http.StatusServiceUnavailable || !strings.Contains(text, "shutting down") {
		t.Fatalf("a callback after Close: %d %s", status, text)
	}
	if _, oerr := r.store.Open(ctx, "tracker", "flow"); oerr != nil {
		t.Fatalf("the flow after a callback refused at Close: %v, want it kept", oerr)
	}
	if r.audited("granted") != 1 {
		t.Fatalf("granted audits %d, want 1", r.audited("granted"))
	}
}
