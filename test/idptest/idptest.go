// Package idptest is a hermetic identity provider and OAuth 2.1
// authorization server for unit tests: an httptest server on 127.0.0.1 that
// publishes OpenID Connect discovery, authorization server metadata and a
// JWKS, runs the authorization code flow with PKCE, a scripted login and
// consent, refresh token rotation, dynamic client registration and
// revocation ([StartServer]), and signs the JWTs a test asks for with its
// ES256 keys. It needs no node and no network, so the auth packages' tests
// run under -short on any machine; the real oidc-provider (test/oidc) stays
// the integration layer in CI, and test/oidc's StartAuthServer picks this
// twin under -short. The go-sdk's internal/oauthtest is the model.
//
// It signs whatever claims and header a test names, so a test can make
// every kind of bad token, and has fault switches (SetDown, SetIssuer,
// FailTokens, Hold, HoldServing, Stop) for the answers a real server gives on a bad day.
package idptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Provider is a running identity provider (and, see [StartServer], an
// authorization server). Safe for concurrent use.
type Provider struct {
	// Issuer is the provider's issuer URL (its httptest server's URL).
	Issuer string

	srv  *httptest.Server
	opts ServerOptions
	mu   sync.Mutex
	key  *ecdsa.PrivateKey
	kid  string
	gen  int
	// published are the keys the JWKS lists; down makes it answer 503.
	published []jose.JSONWebKey
	down      bool
	fetches   int
	// claimedIssuer replaces Issuer in the metadata and tokens (SetIssuer).
	claimedIssuer string
	clients       map[string]*Client
	interactions  map[string]*authRequest
	codes         map[string]*code
	refreshes     map[string]*refresh
	tokenFault    *tokenFault
	hold          *Held
}

// Start runs a provider until the test ends: the authorization server of
// [StartServer] with its defaults.
func Start(t testing.TB) *Provider {
	t.Helper()
	return StartServer(t, ServerOptions{})
}

func (p *Provider) start(t testing.TB) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.serveMetadata)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.fetches++
		if p.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, jose.JSONWebKeySet{Keys: p.published})
	})
	p.serverRoutes(mux)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	p.Rotate(t, false)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Rotate replaces the signing key with a new one, under a new key id or
// (sameKID) the old one; the JWKS publishes only the new key.
func (p *Provider) Rotate(t testing.TB, sameKID bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !sameKID || p.kid == "" {
		p.gen++
		p.kid = fmt.Sprintf("key-%d", p.gen)
	}
	p.key = key
	p.published = []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: p.kid, Algorithm: string(jose.ES256), Use: "sig"}}
}

// SetDown makes the JWKS answer 503 (true) or the keys again (false).
func (p *Provider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Fetches is how many times the JWKS was asked for.
func (p *Provider) Fetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetches
}

// Key is the current signing key and its id, for a test that keeps it
// past a rotation.
func (p *Provider) Key() (*ecdsa.PrivateKey, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key, p.kid
}

// Claims are a JWT access token's claims (RFC 9068) for sub, audience aud,
// from this issuer, valid for an hour from now; a test edits the map.
func (p *Provider) Claims(sub, aud string, now time.Time) map[string]any {
	return map[string]any{
		"iss": p.Issuer, "sub": sub, "aud": aud, "client_id": "test-client",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprintf("jti-%d", now.UnixNano()),
	}
}

// Token signs claims with the current key, header typ at+jwt.
func (p *Provider) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	key, kid := p.Key()
	return Sign(t, key, kid, "at+jwt", claims)
}

// Sign signs claims (JSON-encoded) with key under kid and header typ
// (none when empty), ES256.
func Sign(t testing.TB, key *ecdsa.PrivateKey, kid, typ string, claims any) string {
	t.Helper()
	s, err := signJWT(key, kid, typ, claims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signJWT(key *ecdsa.PrivateKey, kid, typ string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
