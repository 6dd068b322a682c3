package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/internal/store"
)

// A reload installs or removes issued tokens for the next request; static
// tokens keep working throughout; every rejection reason exists at zero.
func TestInbound_ReloadInstallsIssuedTokens(t *testing.T) {
	static := server.Token{Name: "laptop", Value: "static-token-0123456789abcdef"}
	h := newHarness(t, harnessOptions{tokens: []server.Token{static}})
	_, metrics := h.get(t, "/metrics")
	for _, r := range inbound.Reasons() {
		if !strings.Contains(string(metrics), `connecta_auth_rejections_total{reason="`+r+`"} 0`) {
			t.Errorf("connecta_auth_rejections_total{reason=%q} is not at zero on a fresh server", r)
		}
	}
	m, _ := accesstoken.New(accesstoken.Options{Store: store.NewMemory()})
	secret, _, err := m.Create(context.Background(), "ci", "test")
	if err != nil {
		t.Fatal(err)
	}
	if res := h.rawPost(t, strings.NewReader(`{}`), 2, secret); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("issued token before the reload: HTTP %d", res.StatusCode)
	}
	reload := func(in *inbound.Authenticator) {
		t.Helper()
		if err := h.srv.Reload(withConfigLimits(server.Reloadable{Tokens: []server.Token{static}, Inbound: in})); err != nil {
			t.Fatal(err)
		}
	}
	reload(inbound.New(inbound.Options{Tokens: m}))
	h.connect(t, secret).Close()
	h.connect(t, static.Value).Close()
	reload(nil)
	res := h.rawPost(t, strings.NewReader(`{}`), 2, secret)
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(res.Header.Get("WWW-Authenticate"), `realm="connecta", error="invalid_token"`) {
		t.Fatalf("after removing issued tokens: HTTP %d %q", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	h.connect(t, static.Value).Close()
}
