package inbound_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/test/idptest"
)

// hermeticVerifier verifies tokens of p for audience on the clock now; the
// callers rule admits team connecta, operators are the "ops" group.
func hermeticVerifier(t *testing.T, p *idptest.Provider, now func() time.Time) *inbound.Verifier {
	t.Helper()
	v, err := inbound.NewVerifier(inbound.VerifierOptions{
		Issuer: p.Issuer, Audience: audience,
		Callers:   config.Rule{Claim: &config.ClaimRule{Name: "team", Value: "connecta"}},
		Operators: &config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: "ops"}},
		Now:       now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Every verdict on a token is the verifier's own, from the token's shape and
// signed claims (no error text of a library is read): each kind of bad token
// gets its status and reason, against a hermetic provider.
func TestVerifier_OwnVerdicts(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	p := idptest.Start(t)
	v := hermeticVerifier(t, p, func() time.Time { return now })
	good := func() map[string]any {
		c := p.Claims("alice", audience, now)
		c["team"] = "connecta"
		return c
	}
	with := func(edit func(map[string]any)) string {
		c := good()
		edit(c)
		return p.Token(t, c)
	}
	key, kid := p.Key()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	goodTok := p.Token(t, good())
	parts := strings.Split(goodTok, ".")

	c, rej := v.Verify(ctx, goodTok)
	if rej != nil {
		t.Fatalf("a good token: %v", rej)
	}
	if c.Actor != "oidc:alice" || c.Operator {
		t.Errorf("a good token: actor %q operator %v, want oidc:alice, not an operator", c.Actor, c.Operator)
	}
	if c, rej := v.Verify(ctx, with(func(c map[string]any) { c["groups"] = []string{"ops"} })); rej != nil || !c.Operator {
		t.Errorf("an operator's token: %v, operator %v", rej, c.Operator)
	}
	if _, rej := v.Verify(ctx, with(func(c map[string]any) { c["aud"] = []string{"https://other/mcp", audience} })); rej != nil {
		t.Errorf("aud as an array naming this resource: %v", rej)
	}

	// The token's own text echoed in a refusal is clipped on a character
	// boundary (jstext), never inside one.
	longAlg := strings.Repeat("a", 79) + strings.Repeat("é", 40)
	_, rej = v.Verify(ctx, b64([]byte(`{"alg":"`+longAlg+`","typ":"at+jwt"}`))+"."+parts[1]+"."+parts[2])
	if rej == nil || !utf8.ValidString(rej.Message) || strings.Contains(rej.Message, longAlg) {
		t.Errorf("a long alg: %v, want a refusal whose message is valid UTF-8 and clipped", rej)
	}

	for _, tc := range []struct {
		name, token string
		status      int
		reason      string
	}{
		{"an opaque token", "opaque-access-token", 401, inbound.ReasonOpaqueToken},
		{"a header that does not decode", "!!." + parts[1] + "." + parts[2], 401, inbound.ReasonOpaqueToken},
		{"alg none", b64([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + parts[1] + ".", 401, inbound.ReasonBadAlgorithm},
		{"alg HS256", b64([]byte(`{"alg":"HS256","typ":"at+jwt"}`)) + "." + parts[1] + "." + parts[2], 401, inbound.ReasonBadAlgorithm},
		{"an ID token (typ JWT)", idptest.Sign(t, key, kid, "JWT", good()), 401, inbound.ReasonNotAccessToken},
		{"no typ", idptest.Sign(t, key, kid, "", good()), 401, inbound.ReasonNotAccessToken},
		{"a signature that is not base64url", parts[0] + "." + parts[1] + ".!!", 401, inbound.ReasonBadAlgorithm},
		{"claims that do not decode", parts[0] + "." + b64([]byte("not json")) + "." + parts[2], 401, inbound.ReasonInvalidToken},
		{"another issuer", with(func(c map[string]any) { c["iss"] = "https://elsewhere.example" }), 401, inbound.ReasonWrongIssuer},
		{"another audience", with(func(c map[string]any) { c["aud"] = "https://other/mcp" }), 401, inbound.ReasonWrongAudience},
		{"no audience", with(func(c map[string]any) { delete(c, "aud") }), 401, inbound.ReasonWrongAudience},
		{"an audience array without this resource", with(func(c map[string]any) { c["aud"] = []string{"a", "b"} }), 401, inbound.ReasonWrongAudience},
		{"an audience that is a number", with(func(c map[string]any) { c["aud"] = 7 }), 401, inbound.ReasonInvalidToken},
		{"claims swapped under a valid signature", parts[0] + "." + b64([]byte(`{"iss":"`+p.Issuer+`","sub":"mallory","aud":"`+audience+`","exp":1900000000,"team":"connecta"}`)) + "." + parts[2], 401, inbound.ReasonBadSignature},
		{"a key the provider does not publish", idptest.Sign(t, other, "unknown-kid", "at+jwt", good()), 401, inbound.ReasonUnknownKey},
		{"a forged signature under a known key id", idptest.Sign(t, other, kid, "at+jwt", good()), 401, inbound.ReasonBadSignature},
		{"expired", with(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }), 401, inbound.ReasonExpired},
		{"not valid yet", with(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() }), 401, inbound.ReasonNotYetValid},
		{"no subject", with(func(c map[string]any) { delete(c, "sub") }), 401, inbound.ReasonInvalidToken},
		{"a caller the rule refuses", with(func(c map[string]any) { c["team"] = "other" }), 403, inbound.ReasonCallerNotAllowed},
	} {
		_, rej := v.Verify(ctx, tc.token)
		wantRefusal(t, tc.name, rej, tc.status, tc.reason, tc.token)
	}
}

// The key set's verdicts: a provider whose JWKS cannot be fetched and of
// which no key is cached is a 503 provider_unavailable (not the caller's
// fault); once keys are cached they keep working while it is down; a
// rotation (new key id, or new key under the same id) is followed by a
// refetch, and a token of the dropped key is then refused.
func TestVerifier_KeySetVerdicts(t *testing.T) {
	ctx := context.Background()
	at := time.Unix(1_800_000_000, 0)
	p := idptest.Start(t)
	v := hermeticVerifier(t, p, func() time.Time { return at })
	past := func() { at = at.Add(inbound.DefaultKeyRefreshInterval + time.Second) } // past the refetch throttle
	token := func() string {
		c := p.Claims("alice", audience, at)
		c["team"] = "connecta"
		return p.Token(t, c)
	}

	p.SetDown(true)
	_, rej := v.Verify(ctx, token())
	wantRefusal(t, "no keys cached, provider down", rej, 503, inbound.ReasonProviderUnavailable)
	_, rej = v.Verify(ctx, token())
	wantRefusal(t, "again at once (not asked again)", rej, 503, inbound.ReasonProviderUnavailable)
	if n := p.Fetches(); n != 1 {
		t.Errorf("the JWKS was asked %d times within the throttle, want 1", n)
	}

	p.SetDown(false)
	past()
	old := token()
	if _, rej := v.Verify(ctx, old); rej != nil {
		t.Fatalf("the provider is back: %v", rej)
	}
	p.SetDown(true)
	past()
	if _, rej := v.Verify(ctx, old); rej != nil {
		t.Fatalf("cached keys while the provider is down: %v", rej)
	}
	p.SetDown(false)
	for _, sameKID := range []bool{false, true} {
		p.Rotate(t, sameKID)
		past()
		if _, rej := v.Verify(ctx, token()); rej != nil {
			t.Fatalf("after a rotation (same kid %v): %v", sameKID, rej)
		}
	}
	past()
	_, rej = v.Verify(ctx, old)
	wantRefusal(t, "a token of a dropped key", rej, 401, inbound.ReasonUnknownKey)
}
