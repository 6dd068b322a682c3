package inbound_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/test/idptest"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

const audience = "http://127.0.0.1:1/mcp" // connecta's resource (publicUrl http://127.0.0.1:1)

var accounts = map[string]oidctest.Account{
	"alice": {Email: "alice@example.com", EmailVerified: true, Groups: []string{"connecta-operators"}},
	"bob":   {Email: "bob@example.com", EmailVerified: false},
	"carol": {Email: "carol@example.com", EmailVerified: true},
}

func newVerifier(t *testing.T, p oidctest.AuthServer, now func() time.Time) *inbound.Verifier {
	t.Helper()
	v, err := inbound.NewVerifier(inbound.VerifierOptions{
		Issuer: p.IssuerURL(), Audience: audience,
		Callers:   config.Rule{Emails: []string{"alice@example.com", "bob@example.com"}},
		Operators: &config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: "connecta-operators"}},
		Now:       now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func token(t *testing.T, ctx context.Context, p oidctest.AuthServer, resource, account string) string {
	t.Helper()
	tok, err := p.AccessToken(ctx, resource, account)
	if err != nil {
		t.Fatalf("access token for %s: %v", account, err)
	}
	return tok
}

func wantRefusal(t *testing.T, what string, rej *inbound.Rejection, status int, reason string, secrets ...string) {
	t.Helper()
	if rej == nil {
		t.Errorf("%s: admitted, want %d %s", what, status, reason)
		return
	}
	if rej.Status != status || rej.Reason != reason {
		t.Errorf("%s: %d %s (%s), want %d %s", what, rej.Status, rej.Reason, rej.Message, status, reason)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(rej.Message, s) {
			t.Errorf("%s: the message carries the token", what)
		}
	}
}

// sign makes a JWT with payload under key (kid) and header typ at+jwt.
func sign(t *testing.T, key *ecdsa.PrivateKey, kid string, payload []byte) string {
	t.Helper()
	return idptest.Sign(t, key, kid, "at+jwt", json.RawMessage(payload))
}

func b64(v any) string {
	raw, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Real JWT access tokens (RFC 9068) from the provider (the real one, or
// under -short its hermetic twin): a good one is
// admitted with actor oidc:<sub> and the operators rule applied; every kind
// of bad token is refused with its status and reason, and no message
// carries the token.
func TestVerifier_RealProviderTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{Accounts: accounts})
	other := oidctest.StartAuthServer(t, oidctest.Options{Accounts: accounts}) // a second provider: the wrong issuer

	var shift time.Duration
	v := newVerifier(t, p, func() time.Time { return time.Now().Add(shift) })
	alice := token(t, ctx, p, audience, "alice")
	c, rej := v.Verify(ctx, alice)
	if rej != nil || c.Actor != "oidc:alice" || !c.Operator {
		t.Fatalf("alice: %+v %v", c, rej)
	}
	if c.Claims["email"] != "alice@example.com" || inbound.Expiry(c.Claims).IsZero() {
		t.Errorf("claims %v", c.Claims)
	}

	parts := strings.Split(alice, ".")
	sig := []byte(parts[2])
	// Change one base64url character inside the signature (still valid
	// base64url, still 64 bytes: only the signature is wrong).
	if sig[10] == 'A' {
		sig[10] = 'B'
	} else {
		sig[10] = 'A'
	}
	tampered := parts[0] + "." + parts[1] + "." + string(sig)
	none := b64(map[string]string{"alg": "none", "typ": "at+jwt"}) + "." + parts[1] + "."
	hs := b64(map[string]string{"alg": "HS256", "typ": "at+jwt"}) + "." + parts[1] + "." + parts[2]
	var header struct {
		Kid string `json:"kid"`
	}
	rawHeader, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if err := json.Unmarshal(rawHeader, &header); err != nil || header.Kid == "" {
		t.Fatalf("alice's token header %s: %v", rawHeader, err)
	}
	idTokenLike := b64(map[string]string{"alg": "ES256", "typ": "JWT", "kid": header.Kid}) + "." + parts[1] + "." + parts[2]
	rogueKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(raw, &claims)
	payload, _ := json.Marshal(claims)
	unknownKid := sign(t, rogueKey, "rogue-kid", payload)
	knownKidWrongKey := sign(t, rogueKey, header.Kid, payload)

	for _, tc := range []struct {
		what, tok      string
		status         int
		reason, secret string
	}{
		{"opaque", "2YotnFZFEjr1zCsicMWpAA", 401, inbound.ReasonOpaqueToken, "2YotnFZFEjr1zCsicMWpAA"},
		{"wrong audience", token(t, ctx, p, "http://127.0.0.1:2/mcp", "alice"), 401, inbound.ReasonWrongAudience, ""},
		{"wrong issuer", token(t, ctx, other, audience, "alice"), 401, inbound.ReasonWrongIssuer, ""},
		{"tampered signature", tampered, 401, inbound.ReasonBadSignature, parts[2]},
		{"alg none", none, 401, inbound.ReasonBadAlgorithm, parts[1]},
		{"alg HS256", hs, 401, inbound.ReasonBadAlgorithm, parts[2]},
		{"typ JWT (an ID token)", idTokenLike, 401, inbound.ReasonNotAccessToken, parts[2]},
		{"unknown key id", unknownKid, 401, inbound.ReasonUnknownKey, ""},
		{"known key id, another key", knownKidWrongKey, 401, inbound.ReasonBadSignature, ""},
		{"email not verified", token(t, ctx, p, audience, "bob"), 403, inbound.ReasonCallerNotAllowed, ""},
		{"not among the callers", token(t, ctx, p, audience, "carol"), 403, inbound.ReasonCallerNotAllowed, ""},
	} {
		_, rej := v.Verify(ctx, tc.tok)
		wantRefusal(t, tc.what, rej, tc.status, tc.reason, tc.secret)
	}

	// The clock: expired beyond the skew; issued in the future beyond it.
	shift = 10 * time.Minute
	_, rej = v.Verify(ctx, alice)
	wantRefusal(t, "expired", rej, 401, inbound.ReasonExpired)
	shift = -10 * time.Minute
	_, rej = v.Verify(ctx, alice)
	wantRefusal(t, "not yet valid", rej, 401, inbound.ReasonNotYetValid)
	shift = 30 * time.Second // within the skew
	if _, rej = v.Verify(ctx, alice); rej != nil {
		t.Errorf("within the clock skew: %v", rej)
	}
	shift = 0

	// The provider goes down: cached keys keep working; a fresh verifier
	// with nothing cached answers 503.
	p.Stop()
	if _, rej := v.Verify(ctx, alice); rej != nil {
		t.Errorf("cached keys after the provider stopped: %v", rej)
	}
	fresh := newVerifier(t, p, nil)
	_, rej = fresh.Verify(ctx, alice)
	wantRefusal(t, "provider down, nothing cached", rej, http.StatusServiceUnavailable, inbound.ReasonProviderUnavailable)
}

// Issued tokens go through the same Authenticator: revoked and unknown ones
// are refused; a token is never an operator.
func TestAuthenticator_IssuedTokens(t *testing.T) {
	ctx := context.Background()
	m, _ := accesstoken.New(accesstoken.Options{Store: store.NewMemory()})
	a := inbound.New(inbound.Options{Tokens: m})
	secret, tok, err := m.Create(ctx, "laptop", "cli:test")
	if err != nil {
		t.Fatal(err)
	}
	c, rej := a.Authenticate(ctx, secret)
	if rej != nil || c.Actor != "token:"+tok.ID || c.Operator {
		t.Fatalf("%+v %v", c, rej)
	}
	_, rej = a.Authenticate(ctx, "cta_"+strings.Repeat("x", 43))
	wantRefusal(t, "unknown", rej, 401, inbound.ReasonUnknownToken)
	_, rej = a.Authenticate(ctx, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
	wantRefusal(t, "a JWT without auth.oidc", rej, 401, inbound.ReasonUnknownToken)
	if _, err := m.Revoke(ctx, tok.ID, "cli:test"); err != nil {
		t.Fatal(err)
	}
	_, rej = a.Authenticate(ctx, secret)
	wantRefusal(t, "revoked", rej, 401, inbound.ReasonRevokedToken, secret)
}

func TestMatchRule(t *testing.T) {
	verified := map[string]any{"email": "Alice@Example.com", "email_verified": true, "groups": []any{"a", "ops"}, "role": "admin"}
	for _, tc := range []struct {
		rule   config.Rule
		claims map[string]any
		want   bool
	}{
		{config.Rule{Any: true}, map[string]any{}, true},
		{config.Rule{Emails: []string{"alice@example.com"}}, verified, true},
		{config.Rule{Emails: []string{"alice@example.com"}}, map[string]any{"email": "alice@example.com", "email_verified": false}, false},
		{config.Rule{Emails: []string{"alice@example.com"}}, map[string]any{"email": "alice@example.com", "email_verified": "true"}, false},
		{config.Rule{Emails: []string{"alice@example.com"}}, map[string]any{"email": "alice@example.com"}, false},
		{config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: "ops"}}, verified, true},
		{config.Rule{Claim: &config.ClaimRule{Name: "role", Value: "admin"}}, verified, true},
		{config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: "op"}}, verified, false},
		{config.Rule{Claim: &config.ClaimRule{Name: "missing", Value: "x"}}, verified, false},
		{config.Rule{}, verified, false},
	} {
		if got := inbound.MatchRule(tc.rule, tc.claims); got != tc.want {
			t.Errorf("%+v on %v = %v", tc.rule, tc.claims, got)
		}
	}
}

// A provider that rotates its signing keys (restarted on the same issuer
// with new keys, under new key ids or the same ones): the verifier's
// cached keys no longer verify, and it refetches the JWKS — on the unknown
// key id, or on the failed signature under a known id — and admits the new
// tokens. A token signed by a key the provider dropped is refused.
func TestVerifier_KeyRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := oidctest.Start(t, oidctest.Options{Accounts: accounts})
	v, err := inbound.NewVerifier(inbound.VerifierOptions{Issuer: p.Issuer, Audience: audience,
		Callers: config.Rule{Any: true}, KeyRefreshInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	old := token(t, ctx, p, audience, "alice")
	if _, rej := v.Verify(ctx, old); rej != nil {
		t.Fatal(rej)
	}
	for _, prefix := range []string{"rotated", "rotated"} { // a new kid, then new keys under the same kid
		port := p.Port()
		p.Stop()
		p = oidctest.Start(t, oidctest.Options{Accounts: accounts, Port: port, KeyIDPrefix: prefix})
		time.Sleep(5 * time.Millisecond) // past KeyRefreshInterval
		fresh := token(t, ctx, p, audience, "alice")
		if _, rej := v.Verify(ctx, fresh); rej != nil {
			t.Fatalf("after rotating to %s keys: %v", prefix, rej)
		}
	}
	time.Sleep(5 * time.Millisecond) // past KeyRefreshInterval (a real provider: no fake clock)
	_, rej := v.Verify(ctx, old)
	wantRefusal(t, "a token of a dropped key", rej, 401, inbound.ReasonUnknownKey)
}
