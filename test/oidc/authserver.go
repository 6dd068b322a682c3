package oidctest

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/connecta-dev/connecta/test/idptest"
)

// AuthServer is the authorization server a test drives: the real
// oidc-provider ([Provider]) or its hermetic twin ([idptest.Provider]).
type AuthServer interface {
	// IssuerURL is the issuer (http://127.0.0.1:PORT).
	IssuerURL() string
	// Authorize plays the person through authURL's login and consent and
	// returns the redirect back to the client (see [Provider.Authorize]).
	Authorize(ctx context.Context, c *http.Client, authURL, account string, allow bool) (*url.URL, error)
	// AccessToken is a JWT access token for account with resource as its
	// audience, as an MCP client's sign-in would get it.
	AccessToken(ctx context.Context, resource, account string) (string, error)
	// Stop takes the server down (its port then refuses connections).
	Stop()
}

// StartAuthServer runs an authorization server for the duration of t:
// under -short the hermetic twin (test/idptest: no node, nothing skips),
// otherwise the real oidc-provider ([Start]: skips without node unless
// RequireEnv, so CI's long run keeps it as the integration layer). The
// options the twin has no counterpart for (Port, KeyIDPrefix,
// ClientIDMetadataDocument) fail a -short test that sets them.
func StartAuthServer(t testing.TB, opts Options) AuthServer {
	t.Helper()
	if !testing.Short() {
		return Start(t, opts)
	}
	return StartTwin(t, opts)
}

// StartTwin runs the hermetic twin with opts whatever -short says, for a
// test that needs its fault switches.
func StartTwin(t testing.TB, opts Options) *idptest.Provider {
	t.Helper()
	if opts.Port != 0 || opts.KeyIDPrefix != "" || opts.ClientIDMetadataDocument {
		t.Fatal("the hermetic twin has no Port, KeyIDPrefix or ClientIDMetadataDocument: they are the real provider's only (use Start)")
	}
	return idptest.StartServer(t, idptest.ServerOptions{
		AccessTokenTTL: opts.AccessTokenTTL, RefreshTokenTTL: opts.RefreshTokenTTL,
		Accounts: opts.Accounts, Clients: opts.Clients,
		Resources: opts.Resources, ResourceScopes: opts.ResourceScopes,
		PairwiseSubjects: opts.PairwiseSubjects,
	})
}
