package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
)

// oidcServer is connecta with auth.oidc over loopback HTTP; the provider
// is never contacted (no token is presented).
func oidcServer(t *testing.T, scopes string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	y := "listen: 127.0.0.1:0\npublicUrl: " + base + "\nauth:\n  oidc:\n    issuer: http://127.0.0.1:9/issuer\n    callers: {any: true}\n" + scopes
	cfg, err := config.Parse("oidc.yaml", []byte(y), config.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), app.Options{Config: cfg, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	hs := a.Server.HTTPServer(ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return base
}

// auth.oidc.scopes is what a client should ask the provider for: the
// protected resource metadata's scopes_supported and the 401 challenge's
// scope=; with none configured (the default) neither appears.
func TestOIDCScopes_MetadataAndChallenge(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, scope string
	}{
		{"configured", "    scopes: [mcp, offline_access]\n", "mcp offline_access"},
		{"default", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := oidcServer(t, tc.yaml)
			res, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			ch, err := oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
			if res.StatusCode != http.StatusUnauthorized || err != nil || len(ch) != 1 {
				t.Fatalf("HTTP %d, challenge %v (%v)", res.StatusCode, res.Header.Values("WWW-Authenticate"), err)
			}
			if got, has := ch[0].Params["scope"]; got != tc.scope || has != (tc.scope != "") {
				t.Fatalf("challenge scope %q (present %v), want %q", got, has, tc.scope)
			}
			mres, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(mres.Body)
			_ = mres.Body.Close()
			want := `"scopes_supported":["mcp","offline_access"]`
			if tc.scope == "" {
				if strings.Contains(string(body), "scopes_supported") {
					t.Fatalf("metadata without scopes: %s", body)
				}
			} else if !strings.Contains(string(body), want) {
				t.Fatalf("metadata %s, want %s", body, want)
			}
		})
	}
}
