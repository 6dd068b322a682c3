package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/actor"
	"github.com/connecta-dev/connecta/oauth"
	"github.com/connecta-dev/connecta/test/idptest"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
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

// A refresh its caller gives up on while the token endpoint is slow (and
// that the server therefore never served) fails that call only: the grant
// is kept, not dropped, and once the server answers again the next call
// refreshes and works.
func TestRefresh_CutShortKeepsTheGrant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, p := hermeticRig(t, ctx)
	r.clk.advance(10 * time.Minute)
	held := p.Hold(t)
	callCtx, giveUp := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(callCtx, http.MethodPost, r.rs.URL, strings.NewReader(`{}`))
		res, err := r.m.Transport("tracker", actor.ID{}, http.DefaultTransport).RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-held.Arrived // the refresh is waiting at the token endpoint
	giveUp()
	var oe *oauth.Error
	if err := <-done; !errors.As(err, &oe) || oe.Code != oauth.CodeUnavailable {
		t.Fatalf("a call whose refresh was cut short: %v, want unavailable", err)
	}
	<-held.Abandoned // the server saw it go: the refresh token was not spent
	held.Release()
	if ok, err := r.m.Granted(ctx, "tracker", actor.ID{}); !ok || err != nil {
		t.Fatalf("the grant after a cut-short refresh: %v %v", ok, err)
	}
	if r.refreshes("invalid_grant") != 0 {
		t.Fatal("a cut-short refresh was counted as invalid_grant")
	}
	if got, err := r.whoami(ctx); err != nil || !strings.Contains(got, "subject=alice") {
		t.Fatalf("the next call: %q %v", got, err)
	}
}
