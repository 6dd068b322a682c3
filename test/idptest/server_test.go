package idptest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/connecta-dev/connecta/test/idptest"
)

const redirect = "http://127.0.0.1:9/callback"

// flow is one client of the server: registration, then authorization
// requests played through the scripted login and consent.
type flow struct {
	t   *testing.T
	p   *idptest.Provider
	cfg *oauth2.Config
}

func register(t *testing.T, p *idptest.Provider, meta map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(meta)
	res, err := http.Post(p.Issuer+"/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(res.Body).Decode(&out)
	out["status"] = res.StatusCode
	return out
}

func newFlow(t *testing.T, p *idptest.Provider, scopes ...string) *flow {
	t.Helper()
	reg := register(t, p, map[string]any{"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}})
	if reg["status"] != http.StatusCreated || reg["client_id"] == "" || reg["client_secret"] != nil {
		t.Fatalf("registration: %v", reg)
	}
	return &flow{t: t, p: p, cfg: &oauth2.Config{
		ClientID:    reg["client_id"].(string),
		Endpoint:    oauth2.Endpoint{AuthURL: p.Issuer + "/authorize", TokenURL: p.Issuer + "/token", AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: redirect, Scopes: scopes,
	}}
}

// code plays the person through an authorization request with opts and
// returns the redirect back.
func (f *flow) back(ctx context.Context, opts ...oauth2.AuthCodeOption) *url.URL {
	f.t.Helper()
	jar, _ := cookiejar.New(nil)
	back, err := f.p.Authorize(ctx, &http.Client{Jar: jar}, f.cfg.AuthCodeURL("st", opts...), "alice", true)
	if err != nil {
		f.t.Fatal(err)
	}
	return back
}

func errorCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func claims(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	c := map[string]any{}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// PKCE S256 is required: a request without a challenge, or with the plain
// method, comes back with invalid_request and no code; a wrong verifier
// is invalid_grant.
func TestServer_PKCERequired(t *testing.T) {
	ctx := context.Background()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	f := newFlow(t, p)
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"no challenge": nil,
		"plain":        {oauth2.SetAuthURLParam("code_challenge", "abc"), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
	} {
		if back := f.back(ctx, opts...); back.Query().Get("error") != "invalid_request" || back.Query().Get("code") != "" || back.Query().Get("state") != "st" {
			t.Errorf("%s: %s", name, back)
		}
	}
	back := f.back(ctx, oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
	if _, err := f.cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier())); errorCode(err) != "invalid_grant" {
		t.Fatalf("wrong verifier: %v", err)
	}
}

// A code is single-use: exchanged again it is invalid_grant, and the
// refresh token the first exchange bought is revoked with it.
func TestServer_ReplayedCodeRevokesItsTokens(t *testing.T) {
	ctx := context.Background()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	f := newFlow(t, p)
	v := oauth2.GenerateVerifier()
	code := f.back(ctx, oauth2.S256ChallengeOption(v)).Query().Get("code")
	tok, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v))
	if err != nil || tok.RefreshToken == "" {
		t.Fatalf("exchange: %v %+v", err, tok)
	}
	if _, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v)); errorCode(err) != "invalid_grant" {
		t.Fatalf("replayed code: %v", err)
	}
	if _, err := f.cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); errorCode(err) != "invalid_grant" {
		t.Fatalf("refresh after the replay: %v, want invalid_grant", err)
	}
}

// Refresh tokens rotate; a spent one used again is invalid_grant and
// revokes its successor too. An expired code or refresh token (on the
// server's clock) is invalid_grant.
func TestServer_RefreshRotationAndExpiry(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	p := idptest.StartServer(t, idptest.ServerOptions{Now: clock, RefreshTokenTTL: time.Hour})
	f := newFlow(t, p)
	v := oauth2.GenerateVerifier()
	tok, err := f.cfg.Exchange(ctx, f.back(ctx, oauth2.S256ChallengeOption(v)).Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	refresh := func(rt string) (*oauth2.Token, error) {
		return f.cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	}
	next, err := refresh(tok.RefreshToken)
	if err != nil || next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v, rotated %v", err, next != nil && next.RefreshToken != tok.RefreshToken)
	}
	if _, err := refresh(tok.RefreshToken); errorCode(err) != "invalid_grant" {
		t.Fatalf("spent refresh token: %v", err)
	}
	if _, err := refresh(next.RefreshToken); errorCode(err) != "invalid_grant" {
		t.Fatalf("successor after the reuse: %v, want revoked", err)
	}

	v = oauth2.GenerateVerifier()
	code := f.back(ctx, oauth2.S256ChallengeOption(v)).Query().Get("code")
	advance(2 * time.Minute)
	if _, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v)); errorCode(err) != "invalid_grant" {
		t.Fatalf("expired code: %v", err)
	}
	v = oauth2.GenerateVerifier()
	tok, err = f.cfg.Exchange(ctx, f.back(ctx, oauth2.S256ChallengeOption(v)).Query().Get("code"), oauth2.VerifierOption(v))
	if err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if _, err := refresh(tok.RefreshToken); errorCode(err) != "invalid_grant" {
		t.Fatalf("expired refresh token: %v", err)
	}
}

// The console's sign-in: a confidential client (client_secret_basic) asks
// for openid email profile with a nonce and a resource; the ID token
// carries the nonce, the client as audience and the profile claims; the
// access token has the resource as audience. Pairwise subjects differ per
// audience.
func TestServer_IDTokenWithNonceAndPairwiseSubjects(t *testing.T) {
	ctx := context.Background()
	const resource = "http://127.0.0.1:9/mcp"
	p := idptest.StartServer(t, idptest.ServerOptions{PairwiseSubjects: true, Clients: []idptest.Client{{
		ID: "console", Secret: "s3cret", RedirectURIs: []string{redirect}}}})
	f := &flow{t: t, p: p, cfg: &oauth2.Config{ClientID: "console", ClientSecret: "s3cret",
		Endpoint:    oauth2.Endpoint{AuthURL: p.Issuer + "/authorize", TokenURL: p.Issuer + "/token", AuthStyle: oauth2.AuthStyleInHeader},
		RedirectURL: redirect, Scopes: []string{"openid", "email", "profile"}}}
	v := oauth2.GenerateVerifier()
	back := f.back(ctx, oauth2.S256ChallengeOption(v), oauth2.SetAuthURLParam("nonce", "n0nce"), oauth2.SetAuthURLParam("resource", resource))
	if back.Query().Get("iss") != p.Issuer {
		t.Fatalf("no iss in the authorization response (RFC 9207): %s", back)
	}
	code := back.Query().Get("code")
	wrong := *f.cfg
	wrong.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	if _, err := wrong.Exchange(ctx, code, oauth2.VerifierOption(v)); errorCode(err) != "invalid_client" {
		t.Fatalf("client_secret_post for a client_secret_basic client: %v", err)
	}
	tok, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken != "" {
		t.Error("a refresh token for a client without the refresh_token grant")
	}
	raw, _ := tok.Extra("id_token").(string)
	id, at := claims(t, raw), claims(t, tok.AccessToken)
	if id["nonce"] != "n0nce" || id["aud"] != "console" || id["email"] != "alice@example.com" || id["name"] != "Alice" || id["iss"] != p.Issuer {
		t.Errorf("ID token claims %v", id)
	}
	if id["sub"] != idptest.PairwiseSubject("alice", "console") || at["sub"] != idptest.PairwiseSubject("alice", resource) || at["aud"] != resource {
		t.Errorf("subjects: ID %v, access %v (aud %v)", id["sub"], at["sub"], at["aud"])
	}
	direct, err := p.AccessToken(ctx, resource, "alice")
	if err != nil || claims(t, direct)["sub"] != at["sub"] {
		t.Errorf("AccessToken: %v, sub %v", err, claims(t, direct)["sub"])
	}
}

// Registration (RFC 7591) refuses what it cannot serve; an unknown client
// or redirect URI gets an error page, never a redirect.
func TestServer_RegistrationAndAuthorizeRefusals(t *testing.T) {
	p := idptest.StartServer(t, idptest.ServerOptions{})
	for name, meta := range map[string]map[string]any{
		"no redirect URIs":      {"token_endpoint_auth_method": "none"},
		"relative redirect URI": {"redirect_uris": []string{"/cb"}},
		"unknown grant type":    {"redirect_uris": []string{redirect}, "grant_types": []string{"password"}},
		"unknown auth method":   {"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "private_key_jwt"},
	} {
		if out := register(t, p, meta); out["status"] != http.StatusBadRequest || out["error"] == nil {
			t.Errorf("%s: %v", name, out)
		}
	}
	if out := register(t, p, map[string]any{"redirect_uris": []string{redirect}}); out["status"] != http.StatusCreated || out["client_secret"] == nil {
		t.Errorf("a confidential client gets a secret: %v", out)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f := newFlow(t, p)
	for name, q := range map[string]url.Values{
		"unknown client":        {"client_id": {"nobody"}, "redirect_uri": {redirect}},
		"unregistered redirect": {"client_id": {f.cfg.ClientID}, "redirect_uri": {"http://127.0.0.1:9/elsewhere"}},
	} {
		res, err := noFollow.Get(p.Issuer + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
			t.Errorf("%s: HTTP %d to %q", name, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

// The fault switches: SetIssuer changes the metadata's issuer and the
// tokens'; FailTokens answers the next token requests with an error; Stop
// takes the server down.
func TestServer_FaultSwitches(t *testing.T) {
	ctx := context.Background()
	p := idptest.StartServer(t, idptest.ServerOptions{})
	metaIssuer := func() string {
		res, err := http.Get(p.Issuer + "/.well-known/oauth-authorization-server")
		if err != nil {
			return err.Error()
		}
		defer res.Body.Close()
		var m struct{ Issuer string }
		_ = json.NewDecoder(res.Body).Decode(&m)
		return m.Issuer
	}
	p.SetIssuer("https://impostor.example")
	tok, _ := p.AccessToken(ctx, "http://127.0.0.1:9/mcp", "alice")
	if metaIssuer() != "https://impostor.example" || claims(t, tok)["iss"] != "https://impostor.example" {
		t.Fatalf("SetIssuer: metadata %s, token %v", metaIssuer(), claims(t, tok)["iss"])
	}
	p.SetIssuer("")

	f := newFlow(t, p)
	p.FailTokens(1, http.StatusServiceUnavailable, "temporarily_unavailable")
	v := oauth2.GenerateVerifier()
	code := f.back(ctx, oauth2.S256ChallengeOption(v)).Query().Get("code")
	if _, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v)); errorCode(err) != "temporarily_unavailable" {
		t.Fatalf("FailTokens: %v", err)
	}
	if _, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(v)); err != nil {
		t.Fatalf("after the fault: %v", err)
	}
	p.Stop()
	if _, err := http.Get(p.Issuer + "/jwks"); err == nil {
		t.Fatal("Stop: the server still answers")
	}
}
