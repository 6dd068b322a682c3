package oidctest_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

// TestProviderProtectsMCPServer walks the whole MCP authorization flow by
// hand against the real provider (under -short its hermetic twin: the same
// test holds both to one behaviour): the protected server's 401 challenge,
// its resource metadata, the server's metadata, dynamic registration, a
// PKCE authorization with a resource indicator, the scripted login and
// consent, the code exchange, an authorized MCP call, a refresh, and
// revocation of the refresh token.
func TestProviderProtectsMCPServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{})
	rs := oidctest.NewProtectedServer(t, p)

	// 401 with a challenge naming the metadata.
	res, err := http.Post(rs.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated POST: HTTP %d, want 401", res.StatusCode)
	}
	challenges, err := oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
	if err != nil || len(challenges) == 0 || challenges[0].Params["resource_metadata"] != rs.MetadataURL {
		t.Fatalf("challenge %v (%v), want resource_metadata %s", challenges, err, rs.MetadataURL)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, rs.MetadataURL, rs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], nil)
	if err != nil || asm == nil {
		t.Fatalf("authorization server metadata: %v %v", asm, err)
	}
	for _, want := range []string{asm.RegistrationEndpoint, asm.RevocationEndpoint} {
		if want == "" {
			t.Fatalf("metadata lacks registration or revocation: %+v", asm)
		}
	}
	if !strings.Contains(strings.Join(asm.CodeChallengeMethodsSupported, " "), "S256") {
		t.Fatalf("no S256 in %v", asm.CodeChallengeMethodsSupported)
	}

	const redirect = "http://127.0.0.1:9/oauth/callback/x"
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              "connecta-test",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{
		ClientID:    reg.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: redirect,
		Scopes:      prm.ScopesSupported,
	}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", rs.URL))

	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	back, err := p.Authorize(ctx, human, authURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), redirect) || back.Query().Get("state") != "st4te" || back.Query().Get("code") == "" {
		t.Fatalf("redirect %s, want %s with code and state", back, redirect)
	}
	tok, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", rs.URL))
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}

	call := func(tok *oauth2.Token) string {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		transport := &mcp.StreamableClientTransport{Endpoint: rs.URL, HTTPClient: oauth2.NewClient(ctx, oauth2.StaticTokenSource(tok))}
		session, err := client.Connect(ctx, transport, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer session.Close()
		out, err := session.CallTool(ctx, &mcp.CallToolParams{Name: oidctest.ToolWhoAmI})
		if err != nil {
			t.Fatal(err)
		}
		return out.Content[0].(*mcp.TextContent).Text
	}
	if got := call(tok); !strings.Contains(got, "subject=alice") {
		t.Fatalf("whoami = %q", got)
	}

	// Refresh: the client holds the token as expired.
	stale := *tok
	stale.Expiry = time.Now().Add(-time.Minute)
	fresh, err := cfg.TokenSource(ctx, &stale).Token()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.AccessToken == tok.AccessToken {
		t.Fatal("refresh returned the same access token")
	}
	if got := call(fresh); !strings.Contains(got, "subject=alice") {
		t.Fatalf("whoami after refresh = %q", got)
	}

	// Revoke the (possibly rotated) refresh token; a refresh then fails.
	rt := fresh.RefreshToken
	form := strings.NewReader("token=" + rt + "&token_type_hint=refresh_token&client_id=" + reg.ClientID)
	rres, err := http.Post(asm.RevocationEndpoint, "application/x-www-form-urlencoded", form)
	if err != nil {
		t.Fatal(err)
	}
	rres.Body.Close()
	if rres.StatusCode != http.StatusOK {
		t.Fatalf("revocation: HTTP %d", rres.StatusCode)
	}
	_, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	var re *oauth2.RetrieveError
	if err == nil || !asRetrieve(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("refresh after revocation: %v, want invalid_grant", err)
	}
}

// TestProviderDenied: denying consent redirects with error=access_denied.
func TestProviderDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{})
	asm, err := auth.GetAuthServerMetadata(ctx, p.IssuerURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:9/cb"
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{ClientID: reg.ClientID, Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint}, RedirectURL: redirect}
	authURL := cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", "http://127.0.0.1:9/mcp"))
	jar, _ := cookiejar.New(nil)
	back, err := p.Authorize(ctx, &http.Client{Jar: jar}, authURL, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("error") != "access_denied" || back.Query().Get("code") != "" {
		t.Fatalf("denied redirect %s, want error=access_denied", back)
	}
}

func asRetrieve(err error, re **oauth2.RetrieveError) bool {
	for err != nil {
		if r, ok := err.(*oauth2.RetrieveError); ok {
			*re = r
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}
