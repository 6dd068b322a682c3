package oidctest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// AccessToken plays a whole MCP client sign-in against the provider and
// returns the JWT access token (RFC 9068) it issues to account for
// resource (the resource indicator, RFC 8707, which becomes the token's
// audience): dynamic registration of a public client, an authorization
// code request with PKCE, the scripted login and consent, the code
// exchange.
func (p *Provider) AccessToken(ctx context.Context, resource, account string) (string, error) {
	asm, err := auth.GetAuthServerMetadata(ctx, p.Issuer, nil)
	if err != nil || asm == nil {
		return "", fmt.Errorf("authorization server metadata: %v", err)
	}
	const redirect = "http://127.0.0.1:9/callback"
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code"},
		ResponseTypes:           []string{"code"},
		ClientName:              "connecta-test-caller",
	}, nil)
	if err != nil {
		return "", err
	}
	cfg := &oauth2.Config{
		ClientID:    reg.ClientID,
		Endpoint:    oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: redirect,
		Scopes:      []string{DefaultScope},
	}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	jar, _ := cookiejar.New(nil)
	back, err := p.Authorize(ctx, &http.Client{Jar: jar, Timeout: 10 * time.Second}, authURL, account, true)
	if err != nil {
		return "", err
	}
	code := back.Query().Get("code")
	if code == "" {
		return "", fmt.Errorf("no code in %s", back)
	}
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}
