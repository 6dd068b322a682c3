package oauth

import (
	"context"
	"github.com/connecta-dev/connecta/internal/actor"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Token requests follow no redirect (a 307 would re-POST the refresh token
// and client secret wherever it points) and reach a loopback or private
// address only for a connector that is itself on one.
func TestTokenRequests_NoRedirectsAndNoLocalAddressUnlessTheConnectorIsLocal(t *testing.T) {
	var followed, reached atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		case "/elsewhere":
			followed.Add(1)
		case "/token":
			reached.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"new-access","token_type":"Bearer","expires_in":3600}`))
		}
	}))
	defer as.Close()
	m, err := New(Options{PublicURL: "https://connecta.example.com", Store: NewMemoryStore()}, []Connector{
		{ID: "local", URL: as.URL + "/mcp"},
		{ID: "public", URL: "https://mcp.example.com/mcp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	grantAt := func(id, tokenURL string) {
		t.Helper()
		g := &grant{TokenURL: tokenURL, RevocationURL: tokenURL, ClientID: "c", ClientSecret: "client-secret", AccessToken: "old", RefreshToken: "refresh-secret",
			Expiry: time.Now().Add(-time.Minute)}
		if err := m.putGrant(ctx, owner{id: id}, g); err != nil {
			t.Fatal(err)
		}
	}

	// A public connector whose metadata names a loopback token endpoint:
	// refused at the dial, not retryable, nothing sent.
	grantAt("public", as.URL+"/token")
	_, gerr := m.refresh(ctx, owner{id: "public"}, "old")
	if gerr == nil || !strings.Contains(gerr.Error(), "private or reserved address") {
		t.Fatalf("refresh to loopback for a public connector: %v", gerr)
	}
	if _, gerr := m.Revoke(ctx, "public", actor.ID{}, "op"); gerr == nil || gerr.Code != CodeAuthRequired || !strings.Contains(gerr.Message, "private or reserved address") {
		t.Fatalf("revocation to loopback for a public connector: %v", gerr)
	}
	if reached.Load() != 0 {
		t.Fatalf("the loopback token endpoint was reached %d times", reached.Load())
	}

	// A connector on loopback may use a loopback token endpoint, but a
	// redirect is answered, not followed.
	grantAt("local", as.URL+"/redirect")
	if _, gerr := m.refresh(ctx, owner{id: "local"}, "old"); gerr == nil || !strings.Contains(gerr.Error(), "HTTP 307") {
		t.Fatalf("refresh through a 307: %v", gerr)
	}
	if followed.Load() != 0 {
		t.Fatal("the token request followed the redirect")
	}
	grantAt("local", as.URL+"/token")
	if g, gerr := m.refresh(ctx, owner{id: "local"}, "old"); gerr != nil || g.AccessToken != "new-access" {
		t.Fatalf("refresh for a loopback connector: %v", gerr)
	}
}

// localTarget: names and literals that are not on the public internet.
func TestLocalTarget(t *testing.T) {
	ctx := context.Background()
	for u, want := range map[string]bool{
		"http://127.0.0.1:8080/mcp": true, "http://localhost/mcp": true, "http://a.localhost/mcp": true,
		"http://[::1]/mcp": true, "https://10.1.2.3/mcp": true, "https://192.168.0.1/": true,
		"https://100.64.0.1/": true, "https://169.254.169.254/": true, "https://[fd00::1]/": true,
		"https://8.8.8.8/mcp": false, "https://[2001:4860::8888]/": false, "https://100.128.0.1/": false,
		"https://name.invalid/mcp": false, "::bad": false,
	} {
		if got := localTarget(ctx, u); got != want {
			t.Errorf("localTarget(%q) = %v, want %v", u, got, want)
		}
	}
}
