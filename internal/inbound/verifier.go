package inbound

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// Verifier defaults.
const (
	DefaultClockSkew = 60 * time.Second
	// DefaultKeyRefreshInterval bounds refetches of the JWKS prompted by an
	// unknown key id, so a stream of forged kids cannot make connecta
	// hammer the provider.
	DefaultKeyRefreshInterval = 10 * time.Second
	// DefaultKeyMaxAge: cached keys older than this are refetched at the
	// next verification (a removed key stops working); if the refetch
	// fails the cached keys keep working.
	DefaultKeyMaxAge = time.Hour
	fetchTimeout     = 10 * time.Second
	maxDocumentBytes = 1 << 20
)

// signingAlgs are the asymmetric algorithms accepted; never none or HMAC.
var signingAlgs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// VerifierOptions configure a Verifier. Issuer, Audience and Callers are
// required.
type VerifierOptions struct {
	Issuer    string
	Audience  string // {publicUrl}/mcp
	Callers   config.Rule
	Operators *config.Rule
	// Scopes are advertised (scopes_supported, the challenge's scope=);
	// tokens are not checked against them.
	Scopes []string
	// HTTPClient fetches discovery and keys (nil: a client with a 10 s timeout).
	HTTPClient         *http.Client
	ClockSkew          time.Duration // 0: DefaultClockSkew
	KeyRefreshInterval time.Duration // 0: DefaultKeyRefreshInterval
	KeyMaxAge          time.Duration // 0: DefaultKeyMaxAge
	Now                func() time.Time
	Logger             *slog.Logger
}

// Verifier checks JWT access tokens (RFC 9068) of one provider for one
// resource: the signature against the provider's JWKS (found
// by discovery when first needed, cached, refreshed on an unknown key id
// and when older than KeyMaxAge), then issuer, audience, typ at+jwt,
// expiry and not-before with a small clock skew, then the callers and
// operators rules. Safe for concurrent use.
type Verifier struct {
	issuer, audience string
	callers          config.Rule
	operators        *config.Rule
	scopes           []string
	skew             time.Duration
	now              func() time.Time
	log              *slog.Logger
	keys             *keySet
}

// NewVerifier builds a Verifier. It contacts nobody: discovery and keys are
// fetched at the first verification (a provider down at boot is a 503 for
// OIDC callers until it answers, never a refusal to start).
func NewVerifier(o VerifierOptions) (*Verifier, error) {
	if o.Issuer == "" || o.Audience == "" {
		return nil, errors.New("inbound: Issuer and Audience are required")
	}
	if !o.Callers.Any && len(o.Callers.Emails) == 0 && o.Callers.Claim == nil {
		return nil, errors.New("inbound: a callers rule is required")
	}
	v := &Verifier{issuer: o.Issuer, audience: o.Audience, callers: o.Callers, operators: o.Operators, scopes: o.Scopes,
		skew: o.ClockSkew, now: o.Now, log: o.Logger}
	if v.skew <= 0 {
		v.skew = DefaultClockSkew
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.log == nil {
		v.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: fetchTimeout}
	}
	v.keys = &keySet{issuer: o.Issuer, client: client, now: v.now, log: v.log,
		refreshEvery: o.KeyRefreshInterval, maxAge: o.KeyMaxAge}
	if v.keys.refreshEvery <= 0 {
		v.keys.refreshEvery = DefaultKeyRefreshInterval
	}
	if v.keys.maxAge <= 0 {
		v.keys.maxAge = DefaultKeyMaxAge
	}
	return v, nil
}

// Issuer is the provider's issuer URL.
func (v *Verifier) Issuer() string { return v.issuer }

// Audience is the resource, {publicUrl}/mcp.
func (v *Verifier) Audience() string { return v.audience }

// header is the part of a JWT's protected header read before verification.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
}

// claims are the registered claims read after verification.
type claims struct {
	Issuer    string   `json:"iss"`
	Audience  audience `json:"aud"`
	Subject   string   `json:"sub"`
	Expiry    *float64 `json:"exp"`
	NotBefore *float64 `json:"nbf"`
	IssuedAt  *float64 `json:"iat"`
}

// audience is the aud claim: one string or an array of them (RFC 7519
// 4.1.3). Anything else does not decode, and the token is refused.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = many
	return nil
}

// Verify checks a bearer token and the callers rule: its shape (three
// base64url parts, a JSON header with an accepted alg and typ at+jwt, one
// signature), the issuer before any key is tried, the signature against
// the provider's keys, then the signed claims (iss, aud, exp/nbf/iat, sub)
// and the rules. go-oidc only discovers the provider; every verdict is
// this package's own.
func (v *Verifier) Verify(ctx context.Context, raw string) (Caller, *Rejection) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Caller{}, unauthorized(ReasonOpaqueToken, "The bearer token is not a JWT access token; connecta accepts only JWT access tokens (RFC 9068) from "+v.issuer+".")
	}
	var h header
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &h) != nil {
		return Caller{}, unauthorized(ReasonOpaqueToken, "The bearer token is not a JWT access token (its header does not decode).")
	}
	if !slices.Contains(signingAlgs, h.Alg) {
		return Caller{}, unauthorized(ReasonBadAlgorithm, fmt.Sprintf("The access token's algorithm %q is not accepted (asymmetric signatures only).", clip(h.Alg)))
	}
	if t := strings.ToLower(h.Typ); t != "at+jwt" && t != "application/at+jwt" {
		return Caller{}, unauthorized(ReasonNotAccessToken, "The JWT is not an access token (typ must be at+jwt); send the access token, not the ID token.")
	}
	// A token of another issuer is refused before its signature is tried
	// against this issuer's keys (which could only fail).
	var pre claims
	if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err != nil || json.Unmarshal(b, &pre) != nil {
		return Caller{}, unauthorized(ReasonInvalidToken, "The access token's claims do not decode.")
	}
	if pre.Issuer != v.issuer {
		return Caller{}, unauthorized(ReasonWrongIssuer, fmt.Sprintf("The access token was issued by %q; this server accepts tokens from %s only.", clip(pre.Issuer), v.issuer))
	}

	jws, err := jose.ParseSigned(raw, joseAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return Caller{}, unauthorized(ReasonBadAlgorithm, "The access token is malformed or uses an algorithm that is not accepted.")
	}
	payload, err := v.keys.verify(ctx, jws)
	if err != nil {
		var kerr *keyError
		if !errors.As(err, &kerr) {
			return Caller{}, unauthorized(ReasonInvalidToken, "The access token is not valid.")
		}
		switch kerr.reason {
		case ReasonProviderUnavailable:
			return Caller{}, reject(http.StatusServiceUnavailable, ReasonProviderUnavailable,
				"The identity provider's signing keys cannot be fetched and none are cached; retry shortly.")
		case ReasonUnknownKey:
			return Caller{}, unauthorized(ReasonUnknownKey, "The access token is signed with a key the identity provider does not publish.")
		default:
			return Caller{}, unauthorized(ReasonBadSignature, "The access token's signature does not verify.")
		}
	}
	// The claims read from here on are the signed ones.
	var c claims
	all := map[string]any{}
	if json.Unmarshal(payload, &c) != nil || json.Unmarshal(payload, &all) != nil {
		return Caller{}, unauthorized(ReasonInvalidToken, "The access token's claims do not decode.")
	}
	if c.Issuer != v.issuer {
		return Caller{}, unauthorized(ReasonWrongIssuer, fmt.Sprintf("The access token was issued by %q; this server accepts tokens from %s only.", clip(c.Issuer), v.issuer))
	}
	if !slices.Contains(c.Audience, v.audience) {
		return Caller{}, unauthorized(ReasonWrongAudience, "The access token is not for this resource; request it with resource="+v.audience+".")
	}
	if rej := c.checkTimes(v.now(), v.skew); rej != nil {
		return Caller{}, rej
	}
	if c.Subject == "" {
		return Caller{}, unauthorized(ReasonInvalidToken, "The access token names no subject (sub).")
	}
	if !MatchRule(v.callers, all) {
		return Caller{}, reject(http.StatusForbidden, ReasonCallerNotAllowed, "This account may not use this connecta server (auth.oidc.callers).")
	}
	who := actor.OIDCSubject(c.Subject)
	caller := Caller{Actor: who.String(), Who: who, Claims: all}
	if v.operators != nil && MatchRule(*v.operators, all) {
		caller.Operator = true
	}
	return caller, nil
}

// Expiry is the token's exp as a time (zero when absent): for the SDK's
// TokenInfo.
func Expiry(claims map[string]any) time.Time {
	if f, ok := claims["exp"].(float64); ok {
		return unix(f)
	}
	return time.Time{}
}

// checkTimes applies exp, nbf and iat at now, with skew either way. A time
// outside years 1–9999 is refused, not converted: int64(1e300) is undefined
// and came out as the far past, so an nbf of 1e300 passed.
func (c claims) checkTimes(now time.Time, skew time.Duration) *Rejection {
	for _, f := range []*float64{c.Expiry, c.NotBefore, c.IssuedAt} {
		if f != nil && !(*f >= -maxUnixSeconds && *f <= maxUnixSeconds) {
			return unauthorized(ReasonInvalidToken, "The access token's exp, nbf or iat is out of range.")
		}
	}
	switch {
	case c.Expiry == nil:
		return unauthorized(ReasonInvalidToken, "The access token has no expiry (exp).")
	case now.After(unix(*c.Expiry).Add(skew)):
		return unauthorized(ReasonExpired, "The access token expired; get a new one from the identity provider.")
	case c.NotBefore != nil && unix(*c.NotBefore).After(now.Add(skew)),
		c.IssuedAt != nil && unix(*c.IssuedAt).After(now.Add(skew)):
		return unauthorized(ReasonNotYetValid, "The access token is not valid yet (nbf or iat is in the future); check the clocks.")
	}
	return nil
}

// maxUnixSeconds is 9999-12-31T23:59:59Z, past any real token's times.
const maxUnixSeconds = 253402300799

// unix is f seconds as a time, f within ±maxUnixSeconds (checkTimes).
func unix(f float64) time.Time {
	return time.Unix(int64(max(-maxUnixSeconds, min(f, maxUnixSeconds))), 0)
}

// MatchRule reports whether claims satisfy a callers/operators rule: any;
// emails (the email claim, case-insensitive, only with email_verified
// true); or a claim equal to the value (a string) or containing it (an
// array of strings). The console applies the same rule to its users.
func MatchRule(r config.Rule, claims map[string]any) bool {
	switch {
	case r.Any:
		return true
	case len(r.Emails) > 0:
		verified, _ := claims["email_verified"].(bool)
		email, _ := claims["email"].(string)
		return verified && email != "" && slices.Contains(r.Emails, strings.ToLower(email))
	case r.Claim != nil:
		switch v := claims[r.Claim.Name].(type) {
		case string:
			return v == r.Claim.Value
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok && s == r.Claim.Value {
					return true
				}
			}
		}
	}
	return false
}

// clip bounds a token's own text (alg, iss) echoed in a refusal.
func clip(s string) string { return jstext.Clamp(s, 80) }

// keyError is the key set's verdict on a signature: reason is
// ReasonProviderUnavailable, ReasonUnknownKey or ReasonBadSignature.
type keyError struct {
	reason string
	err    error
}

func (e *keyError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// joseAlgs are signingAlgs as go-jose names them.
var joseAlgs = func() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(signingAlgs))
	for i, a := range signingAlgs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}()

// keySet is the provider's JWKS: found by discovery, cached,
// refetched when a token names a key id it does not hold or its signature
// fails under a known one (at most once per refreshEvery) and when older
// than maxAge; a fetch that fails leaves the cached keys in use.
type keySet struct {
	issuer       string
	client       *http.Client
	now          func() time.Time
	log          *slog.Logger
	refreshEvery time.Duration
	maxAge       time.Duration

	group     singleflight.Group
	mu        sync.Mutex
	jwksURL   string
	keys      []jose.JSONWebKey
	fetchedAt time.Time // last successful fetch
	triedAt   time.Time // last attempt
}

// verify checks jws's one signature against the provider's keys and
// returns its payload, or a *keyError.
func (k *keySet) verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	kid := jws.Signatures[0].Header.KeyID

	keys, stale, recent := k.cached()
	cands := matching(keys, kid)
	fetched := false
	if (len(keys) == 0 || stale || len(cands) == 0) && !recent {
		got, err := k.refresh(ctx)
		switch {
		case err == nil:
			keys, cands, fetched = got, matching(got, kid), true
		case len(cands) == 0:
			// Nothing cached, or a key id we may not know only because the
			// provider cannot be asked (a rotation): not the caller's fault.
			return nil, &keyError{ReasonProviderUnavailable, err}
		}
	} else if len(keys) == 0 {
		return nil, &keyError{ReasonProviderUnavailable, errFetch} // the last attempt just failed
	}
	if payload, ok := verifyWith(jws, cands); ok {
		return payload, nil
	}
	// A known key id whose signature fails: a forgery, or a provider that
	// rotated the key under the same id. One refetch tells (throttled like
	// the others); while the provider is down, it stays a bad signature.
	if !fetched && len(cands) > 0 && !recent {
		if got, err := k.refresh(ctx); err == nil {
			cands = matching(got, kid)
			if payload, ok := verifyWith(jws, cands); ok {
				return payload, nil
			}
		}
	}
	if len(cands) == 0 {
		return nil, &keyError{ReasonUnknownKey, errors.New("no key with that id")}
	}
	return nil, &keyError{ReasonBadSignature, errors.New("signature does not verify")}
}

func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, bool) {
	for i := range keys {
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// matching are the keys usable for kid (all of them when kid is empty).
func matching(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range keys {
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if kid == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// cached returns the keys, whether they are past maxAge, and whether the
// last fetch attempt was within refreshEvery (then no other is made: an
// unknown key id or a provider that is down is not asked again at once).
func (k *keySet) cached() (keys []jose.JSONWebKey, stale, recent bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	return k.keys, len(k.keys) > 0 && now.Sub(k.fetchedAt) > k.maxAge,
		!k.triedAt.IsZero() && now.Sub(k.triedAt) < k.refreshEvery
}

var errFetch = errors.New("identity provider unreachable")

// refresh fetches the JWKS (after discovery, the first time) once for all
// concurrent callers.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	ch := k.group.DoChan("jwks", func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		k.mu.Lock()
		k.triedAt = k.now()
		jwksURL := k.jwksURL
		k.mu.Unlock()
		if jwksURL == "" {
			p, err := oidc.NewProvider(oidc.ClientContext(fctx, k.client), k.issuer)
			if err != nil {
				k.log.Warn("identity provider discovery failed", "issuer", k.issuer, "error", err.Error())
				return nil, fmt.Errorf("%w: discovery: %v", errFetch, err)
			}
			var doc struct {
				JWKSURI string `json:"jwks_uri"`
			}
			if err := p.Claims(&doc); err != nil || doc.JWKSURI == "" {
				return nil, fmt.Errorf("%w: discovery names no jwks_uri", errFetch)
			}
			jwksURL = doc.JWKSURI
		}
		keys, err := k.fetch(fctx, jwksURL)
		if err != nil {
			k.log.Warn("identity provider keys not fetched; cached keys stay in use", "issuer", k.issuer, "error", err.Error())
			return nil, err
		}
		k.mu.Lock()
		k.jwksURL, k.keys, k.fetchedAt = jwksURL, keys, k.now()
		k.mu.Unlock()
		return keys, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]jose.JSONWebKey), nil
	}
}

func (k *keySet) fetch(ctx context.Context, jwksURL string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFetch, err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFetch, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxDocumentBytes))
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: jwks: HTTP %d", errFetch, res.StatusCode)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%w: jwks does not decode", errFetch)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || !key.Valid() || !key.IsPublic() {
			continue // an unsupported or private key is skipped, not fatal
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Check fetches the provider's discovery document and JWKS now (for
// `connecta doctor`) and reports how many usable signing keys it publishes.
func (v *Verifier) Check(ctx context.Context) (int, error) {
	keys, err := v.keys.refresh(ctx)
	if err != nil {
		return 0, err
	}
	return len(matching(keys, "")), nil
}
