package idptest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Account is a person the scripted login accepts (by its map key, the
// subject). The JSON names are the claims' (and the real provider's
// configuration's).
type Account struct {
	Email         string   `json:"email,omitempty"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name,omitempty"`
	Groups        []string `json:"groups,omitempty"`
}

// Client is a statically registered client.
type Client struct {
	ID           string   `json:"client_id"`
	Secret       string   `json:"client_secret,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	GrantTypes   []string `json:"grant_types,omitempty"`
	// AuthMethod is token_endpoint_auth_method (default client_secret_basic;
	// "none" for a public client).
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
}

// DefaultScope is the scope a resource accepts unless ServerOptions say
// otherwise (the real provider's default too).
const DefaultScope = "mcp:tools"

// ServerOptions configure the authorization server. Zero values take the
// defaults named; they are the real provider's (test/oidc) defaults, so a
// test reads the same against either.
type ServerOptions struct {
	// AccessTokenTTL is every access and ID token's lifetime (default 5
	// minutes).
	AccessTokenTTL time.Duration
	// RefreshTokenTTL bounds refresh tokens (default 24 hours).
	RefreshTokenTTL time.Duration
	// Accounts the login accepts; default one, "alice" (alice@example.com,
	// verified, "Alice").
	Accounts map[string]Account
	// Clients registered statically; dynamic registration is always open.
	Clients []Client
	// Resources, when set, are the only resource indicators accepted
	// (others: invalid_target); otherwise any resource gets JWT access
	// tokens with it as audience.
	Resources []string
	// ResourceScopes are the scopes a resource accepts (default
	// [DefaultScope]).
	ResourceScopes []string
	// PairwiseSubjects: an ID token's sub is [PairwiseSubject] of the
	// account for the client, an access token's for the resource.
	PairwiseSubjects bool
	// Now is the server's clock (default time.Now): token lifetimes and
	// code and refresh token expiry read it.
	Now func() time.Time
}

// codeTTL is an authorization code's lifetime (the real provider's too).
const codeTTL = 60 * time.Second

// authRequest is one authorization request, from /authorize to its code.
type authRequest struct {
	client      *Client
	redirectURI string
	state       string
	scope       string
	challenge   string
	nonce       string
	resources   []string
	account     string // set by the login
}

type code struct {
	req     *authRequest
	expires time.Time
	used    bool
	family  *family // the tokens it was exchanged for (revoked on a replay)
}

// family is one grant's chain of rotated refresh tokens: reusing a spent
// one revokes the chain (OAuth 2.1 §4.3.1).
type family struct{ revoked bool }

type refresh struct {
	clientID  string
	account   string
	scope     string
	nonce     string
	resources []string
	expires   time.Time
	spent     bool
	family    *family
}

// StartServer runs an OAuth 2.1 authorization server and OpenID Connect
// provider until the test ends: authorization server metadata (RFC 8414)
// and OIDC discovery, an authorization endpoint requiring PKCE S256 with a
// scripted login and consent (the real provider's forms, see [PlayHuman]),
// a token endpoint (authorization_code, refresh_token with rotation; RFC
// 6749 errors such as invalid_grant), dynamic client registration (RFC
// 7591), revocation (RFC 7009), resource indicators (RFC 8707: JWT access
// tokens whose audience is the resource) and ID tokens with the request's
// nonce. Everything is signed ES256 with the key the JWKS publishes.
func StartServer(t testing.TB, opts ServerOptions) *Provider {
	t.Helper()
	if opts.Accounts == nil {
		opts.Accounts = map[string]Account{"alice": {Email: "alice@example.com", EmailVerified: true, Name: "Alice"}}
	}
	if opts.ResourceScopes == nil {
		opts.ResourceScopes = []string{DefaultScope}
	}
	if opts.AccessTokenTTL <= 0 {
		opts.AccessTokenTTL = 5 * time.Minute
	}
	if opts.RefreshTokenTTL <= 0 {
		opts.RefreshTokenTTL = 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Provider{opts: opts, clients: map[string]*Client{}, interactions: map[string]*authRequest{},
		codes: map[string]*code{}, refreshes: map[string]*refresh{}}
	for _, c := range opts.Clients {
		p.clients[c.ID] = &c
	}
	p.start(t)
	return p
}

// serverRoutes adds the authorization server's endpoints to mux.
func (p *Provider) serverRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.serveMetadata)
	mux.HandleFunc("GET /authorize", p.serveAuthorize)
	mux.HandleFunc("GET /interaction/{uid}", p.serveInteraction)
	mux.HandleFunc("POST /interaction/{uid}/{action}", p.serveInteractionAction)
	mux.HandleFunc("POST /token", p.serveToken)
	mux.HandleFunc("POST /token/revocation", p.serveRevocation)
	mux.HandleFunc("POST /register", p.serveRegister)
}

// metadata is the RFC 8414 / OIDC discovery document.
func (p *Provider) metadata() map[string]any {
	p.mu.Lock()
	iss := p.claimedIssuer
	p.mu.Unlock()
	if iss == "" {
		iss = p.Issuer
	}
	return map[string]any{
		"issuer":                                         iss,
		"jwks_uri":                                       p.Issuer + "/jwks",
		"authorization_endpoint":                         p.Issuer + "/authorize",
		"token_endpoint":                                 p.Issuer + "/token",
		"registration_endpoint":                          p.Issuer + "/register",
		"revocation_endpoint":                            p.Issuer + "/token/revocation",
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_basic", "client_secret_post"},
		"scopes_supported":                               append([]string{"openid", "offline_access", "email", "profile", "groups"}, p.opts.ResourceScopes...),
		"subject_types_supported":                        []string{"public", "pairwise"},
		"id_token_signing_alg_values_supported":          []string{"ES256"},
		"authorization_response_iss_parameter_supported": true,
	}
}

func (p *Provider) serveMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, p.metadata())
}

// SetIssuer makes the metadata and every token name iss instead of the
// server's own URL ("" restores it): the wrong-issuer fault.
func (p *Provider) SetIssuer(iss string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.claimedIssuer = iss
}

// Stop closes the server: every endpoint then refuses connections (an
// authorization server that is down). The test's cleanup also stops it.
func (p *Provider) Stop() { p.srv.Close() }

// IssuerURL is Issuer (for code that drives this server and the real
// provider alike).
func (p *Provider) IssuerURL() string { return p.Issuer }

func page(w http.ResponseWriter, status int, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><title>%s</title></head><body><h1>%s</h1>%s</body></html>`, title, title, body)
}

// redirectError sends the client's redirect URI an RFC 6749 §4.1.2.1 error.
func (p *Provider) redirectError(w http.ResponseWriter, r *http.Request, redirectURI, state, errCode, desc string) {
	q := url.Values{"error": {errCode}, "error_description": {desc}, "iss": {p.Issuer}}
	if state != "" {
		q.Set("state", state)
	}
	http.Redirect(w, r, withQuery(redirectURI, q), http.StatusSeeOther)
}

func withQuery(u string, q url.Values) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + q.Encode()
}

func (p *Provider) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	client := p.clients[q.Get("client_id")]
	p.mu.Unlock()
	if client == nil {
		page(w, http.StatusBadRequest, "Error", "<pre>invalid_client: unknown client_id</pre>")
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(client.RedirectURIs) == 1 {
		redirect = client.RedirectURIs[0]
	}
	if !slices.Contains(client.RedirectURIs, redirect) {
		page(w, http.StatusBadRequest, "Error", "<pre>invalid_redirect_uri: not registered for this client</pre>")
		return
	}
	state := q.Get("state")
	fail := func(errCode, desc string) { p.redirectError(w, r, redirect, state, errCode, desc) }
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "only response_type=code")
		return
	case q.Get("code_challenge") == "":
		fail("invalid_request", "PKCE is required: code_challenge missing")
		return
	case q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "code_challenge_method must be S256")
		return
	}
	for _, res := range q["resource"] {
		if !p.resourceAllowed(res) {
			fail("invalid_target", "resource indicator not accepted")
			return
		}
	}
	uid := randomString()
	p.mu.Lock()
	p.interactions[uid] = &authRequest{client: client, redirectURI: redirect, state: state, scope: q.Get("scope"),
		challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), resources: q["resource"]}
	p.mu.Unlock()
	http.Redirect(w, r, "/interaction/"+uid, http.StatusSeeOther)
}

func (p *Provider) resourceAllowed(res string) bool {
	if u, err := url.Parse(res); err != nil || !u.IsAbs() || u.Fragment != "" {
		return false
	}
	return p.opts.Resources == nil || slices.Contains(p.opts.Resources, res)
}

// serveInteraction shows the login form, then (signed in) the consent: the
// same forms as the real provider's (test/oidc/testdata/provider.mjs).
func (p *Provider) serveInteraction(w http.ResponseWriter, r *http.Request) {
	uid, req, account := p.interaction(w, r)
	if req == nil {
		return
	}
	e := html.EscapeString(uid)
	if account == "" {
		page(w, http.StatusOK, "Sign in", `<form method="post" action="/interaction/`+e+`/login"><input name="login"><button>Sign in</button></form>`)
		return
	}
	page(w, http.StatusOK, "Allow access", "<p>"+html.EscapeString(req.client.ID)+" asks for "+html.EscapeString(req.scope)+"</p>"+
		`<form method="post" action="/interaction/`+e+`/confirm"><button>Allow</button></form>`+
		`<form method="post" action="/interaction/`+e+`/abort"><button>Deny</button></form>`)
}

// interaction is the authorization request of the path's uid and the
// account signed in to it so far; nil when there is none (answered).
func (p *Provider) interaction(w http.ResponseWriter, r *http.Request) (string, *authRequest, string) {
	uid := r.PathValue("uid")
	p.mu.Lock()
	req := p.interactions[uid]
	var account string
	if req != nil {
		account = req.account
	}
	p.mu.Unlock()
	if req == nil {
		page(w, http.StatusBadRequest, "Interaction failed", "<pre>interaction session not found</pre>")
	}
	return uid, req, account
}

func (p *Provider) serveInteractionAction(w http.ResponseWriter, r *http.Request) {
	uid, req, _ := p.interaction(w, r)
	if req == nil {
		return
	}
	switch r.PathValue("action") {
	case "login":
		login := r.PostFormValue("login")
		if _, ok := p.opts.Accounts[login]; !ok {
			page(w, http.StatusBadRequest, "Unknown account", "<p>"+html.EscapeString(login)+"</p>")
			return
		}
		p.mu.Lock()
		req.account = login
		p.mu.Unlock()
		http.Redirect(w, r, "/interaction/"+uid, http.StatusSeeOther)
	case "abort":
		p.mu.Lock()
		delete(p.interactions, uid)
		p.mu.Unlock()
		p.redirectError(w, r, req.redirectURI, req.state, "access_denied", "the user denied access")
	case "confirm":
		c := randomString()
		p.mu.Lock()
		delete(p.interactions, uid)
		ok := req.account != ""
		if ok {
			p.codes[c] = &code{req: req, expires: p.opts.Now().Add(codeTTL)}
		}
		p.mu.Unlock()
		if !ok {
			page(w, http.StatusBadRequest, "Interaction failed", "<pre>not signed in</pre>")
			return
		}
		q := url.Values{"code": {c}, "iss": {p.Issuer}}
		if req.state != "" {
			q.Set("state", req.state)
		}
		http.Redirect(w, r, withQuery(req.redirectURI, q), http.StatusSeeOther)
	default:
		http.NotFound(w, r)
	}
}

// tokenError is an RFC 6749 §5.2 error answer.
func tokenError(w http.ResponseWriter, status int, errCode, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": errCode, "error_description": desc})
}

// authenticate finds the client of a token or revocation request by its
// registered method: client_secret_basic, client_secret_post or none.
func (p *Provider) authenticate(r *http.Request) (*Client, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	p.mu.Lock()
	c := p.clients[id]
	p.mu.Unlock()
	if c == nil {
		return nil, false
	}
	method := c.AuthMethod
	if method == "" {
		method = "client_secret_basic"
	}
	switch method {
	case "none":
		return c, secret == ""
	case "client_secret_basic":
		if !basic {
			return nil, false
		}
	case "client_secret_post":
		if basic {
			return nil, false
		}
	}
	return c, subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) == 1
}

// formClient reads a token or revocation request's form and authenticates
// its client; on failure it has answered with the RFC 6749 error.
func (p *Provider) formClient(w http.ResponseWriter, r *http.Request) (*Client, bool) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", "unreadable form")
		return nil, false
	}
	client, ok := p.authenticate(r)
	if !ok {
		tokenError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
	}
	return client, ok
}

func (p *Provider) serveToken(w http.ResponseWriter, r *http.Request) {
	client, ok := p.formClient(w, r)
	if !ok {
		return
	}
	// Held after the body is read: only then does the server watch the
	// connection, so a client giving up ends the request's context.
	p.mu.Lock()
	h := p.hold
	p.mu.Unlock()
	if h != nil {
		if !h.wait(r) {
			return
		}
		defer h.answered()
	}
	p.mu.Lock()
	failure := p.tokenFault
	if failure != nil && failure.n > 0 {
		failure.n--
	} else {
		failure = nil
	}
	p.mu.Unlock()
	if failure != nil {
		tokenError(w, failure.status, failure.code, "fault injected by the test")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		p.exchangeCode(w, r, client)
	case "refresh_token":
		p.exchangeRefresh(w, r, client)
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "authorization_code or refresh_token")
	}
}

func (p *Provider) exchangeCode(w http.ResponseWriter, r *http.Request, client *Client) {
	f := r.PostForm
	now := p.opts.Now()
	p.mu.Lock()
	c := p.codes[f.Get("code")]
	var problem string
	switch {
	case c == nil || c.req.client.ID != client.ID:
		problem = "unknown authorization code"
	case c.used:
		// A replayed code: refused, and the tokens it bought are revoked
		// (RFC 6749 §4.1.2).
		problem = "authorization code already used"
		if c.family != nil {
			c.family.revoked = true
		}
	case !now.Before(c.expires):
		problem = "authorization code expired"
	case f.Get("redirect_uri") != c.req.redirectURI:
		problem = "redirect_uri does not match the authorization request"
	case !pkceMatches(f.Get("code_verifier"), c.req.challenge):
		problem = "PKCE verification failed"
	}
	if problem != "" {
		p.mu.Unlock()
		tokenError(w, http.StatusBadRequest, "invalid_grant", problem)
		return
	}
	c.used = true
	c.family = &family{}
	req := c.req
	p.mu.Unlock()
	audience, ok := pickResource(f["resource"], req.resources)
	if !ok {
		tokenError(w, http.StatusBadRequest, "invalid_target", "resource was not part of the authorization request")
		return
	}
	g := &refresh{clientID: client.ID, account: req.account, scope: req.scope, nonce: req.nonce, resources: req.resources,
		expires: now.Add(p.opts.RefreshTokenTTL), family: c.family}
	p.issue(w, client, g, audience, true)
}

// pickResource is the access token's audience: the token request's
// resource, which must be one the authorization asked for; or the only one
// it asked for; or none (an opaque token).
func pickResource(asked, granted []string) (string, bool) {
	switch {
	case len(asked) > 1:
		return "", false
	case len(asked) == 1:
		return asked[0], slices.Contains(granted, asked[0])
	case len(granted) == 1:
		return granted[0], true
	}
	return "", true
}

func (p *Provider) exchangeRefresh(w http.ResponseWriter, r *http.Request, client *Client) {
	f := r.PostForm
	now := p.opts.Now()
	p.mu.Lock()
	g := p.refreshes[f.Get("refresh_token")]
	var problem string
	switch {
	case g == nil || g.clientID != client.ID:
		problem = "unknown refresh token"
	case g.family.revoked:
		problem = "refresh token revoked"
	case g.spent:
		// A rotated-out token used again: the whole chain is revoked.
		g.family.revoked = true
		problem = "refresh token already used"
	case !now.Before(g.expires):
		problem = "refresh token expired"
	}
	if problem != "" {
		p.mu.Unlock()
		tokenError(w, http.StatusBadRequest, "invalid_grant", problem)
		return
	}
	g.spent = true
	p.mu.Unlock()
	audience, ok := pickResource(f["resource"], g.resources)
	if !ok {
		tokenError(w, http.StatusBadRequest, "invalid_target", "resource was not part of the grant")
		return
	}
	next := *g
	next.spent = false
	p.issue(w, client, &next, audience, false)
}

func pkceMatches(verifier, challenge string) bool {
	if verifier == "" {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// issue answers a token request: an access token (a JWT for audience, or
// opaque without one), a rotated refresh token when the client may refresh,
// and an ID token when openid was asked for (withID: at the code exchange).
func (p *Provider) issue(w http.ResponseWriter, client *Client, g *refresh, audience string, withID bool) {
	now := p.opts.Now()
	scopes := strings.Fields(g.scope)
	out := map[string]any{"token_type": "Bearer", "expires_in": int(p.opts.AccessTokenTTL / time.Second)}
	if audience != "" {
		var granted []string
		for _, s := range scopes {
			if slices.Contains(p.opts.ResourceScopes, s) {
				granted = append(granted, s)
			}
		}
		claims := p.accessClaims(g.account, client.ID, audience, strings.Join(granted, " "), now)
		out["access_token"] = p.sign(claims, "at+jwt")
		out["scope"] = strings.Join(granted, " ")
	} else {
		out["access_token"] = randomString()
		out["scope"] = g.scope
	}
	if slices.Contains(client.GrantTypes, "refresh_token") {
		rt := randomString()
		p.mu.Lock()
		p.refreshes[rt] = g
		p.mu.Unlock()
		out["refresh_token"] = rt
	}
	if withID && slices.Contains(scopes, "openid") {
		out["id_token"] = p.sign(p.idClaims(g.account, client.ID, g.nonce, scopes, now), "")
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, out)
}

func (p *Provider) issuer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimedIssuer != "" {
		return p.claimedIssuer
	}
	return p.Issuer
}

// accessClaims are a JWT access token's (RFC 9068) claims, with the
// account's email and groups (the real provider adds them too).
func (p *Provider) accessClaims(account, clientID, audience, scope string, now time.Time) map[string]any {
	a := p.opts.Accounts[account]
	sub := account
	if p.opts.PairwiseSubjects {
		sub = PairwiseSubject(account, audience)
	}
	c := map[string]any{
		"iss": p.issuer(), "sub": sub, "aud": audience, "client_id": clientID, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(p.opts.AccessTokenTTL).Unix(), "jti": randomString(),
		"email": a.Email, "email_verified": a.EmailVerified,
	}
	if a.Groups != nil {
		c["groups"] = a.Groups
	}
	return c
}

// idClaims are an ID token's claims: the profile claims its scopes name.
func (p *Provider) idClaims(account, clientID, nonce string, scopes []string, now time.Time) map[string]any {
	a := p.opts.Accounts[account]
	sub := account
	if p.opts.PairwiseSubjects {
		sub = PairwiseSubject(account, clientID)
	}
	c := map[string]any{"iss": p.issuer(), "sub": sub, "aud": clientID, "iat": now.Unix(), "auth_time": now.Unix(),
		"exp": now.Add(p.opts.AccessTokenTTL).Unix()}
	if nonce != "" {
		c["nonce"] = nonce
	}
	if slices.Contains(scopes, "email") {
		c["email"], c["email_verified"] = a.Email, a.EmailVerified
	}
	if slices.Contains(scopes, "profile") && a.Name != "" {
		c["name"] = a.Name
	}
	if slices.Contains(scopes, "groups") && a.Groups != nil {
		c["groups"] = a.Groups
	}
	return c
}

// AccessToken is the JWT access token the token endpoint would issue to
// account for resource after a whole sign-in by a public client: the same
// claims, without playing the flow (the real provider's AccessToken plays
// it; both answer the same question).
func (p *Provider) AccessToken(_ context.Context, resource, account string) (string, error) {
	if _, ok := p.opts.Accounts[account]; !ok {
		return "", fmt.Errorf("unknown account %q", account)
	}
	if !p.resourceAllowed(resource) {
		return "", fmt.Errorf("invalid_target: %s", resource)
	}
	return p.sign(p.accessClaims(account, "connecta-test-caller", resource, strings.Join(p.opts.ResourceScopes, " "), p.opts.Now()), "at+jwt"), nil
}

func (p *Provider) serveRevocation(w http.ResponseWriter, r *http.Request) {
	client, ok := p.formClient(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	if g := p.refreshes[r.PostForm.Get("token")]; g != nil && g.clientID == client.ID {
		g.family.revoked = true
	}
	p.mu.Unlock()
	w.WriteHeader(http.StatusOK) // RFC 7009 §2.2: also for an unknown token
}

// serveRegister is dynamic client registration (RFC 7591).
func (p *Provider) serveRegister(w http.ResponseWriter, r *http.Request) {
	var m Client
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil || json.Unmarshal(body, &m) != nil {
		tokenError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object")
		return
	}
	if len(m.RedirectURIs) == 0 {
		tokenError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	for _, u := range m.RedirectURIs {
		if pu, err := url.Parse(u); err != nil || !pu.IsAbs() || pu.Fragment != "" {
			tokenError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect URIs are absolute, without a fragment")
			return
		}
	}
	if m.GrantTypes == nil {
		m.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			tokenError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported grant type "+g)
			return
		}
	}
	switch m.AuthMethod {
	case "":
		m.AuthMethod = "client_secret_basic"
	case "none", "client_secret_basic", "client_secret_post":
	default:
		tokenError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported token_endpoint_auth_method")
		return
	}
	m.ID, m.Secret = randomString(), ""
	if m.AuthMethod != "none" {
		m.Secret = randomString()
	}
	p.mu.Lock()
	p.clients[m.ID] = &m
	p.mu.Unlock()
	out := map[string]any{"client_id": m.ID, "client_id_issued_at": p.opts.Now().Unix(), "redirect_uris": m.RedirectURIs,
		"grant_types": m.GrantTypes, "response_types": []string{"code"}, "token_endpoint_auth_method": m.AuthMethod}
	if m.Secret != "" {
		out["client_secret"], out["client_secret_expires_at"] = m.Secret, 0
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(out)
}

// tokenFault makes the next n token requests fail (FailTokens).
type tokenFault struct {
	n      int
	status int
	code   string
}

// FailTokens makes the next n token requests answer status with OAuth
// error code (e.g. 503 "temporarily_unavailable", 400 "invalid_grant"),
// whatever they carry.
func (p *Provider) FailTokens(n, status int, code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenFault = &tokenFault{n: n, status: status, code: code}
}

// Held is the token endpoint made slow by [Provider.Hold] or
// [Provider.HoldServing].
type Held struct {
	// Arrived is closed when the first token request is waiting.
	Arrived <-chan struct{}
	// Abandoned is closed when a waiting request's client gave up (the
	// server saw its connection end) before the release.
	Abandoned <-chan struct{}
	// Served is closed when a held request has been answered, after the
	// release.
	Served <-chan struct{}

	arrived, abandoned, released, served chan struct{}
	arriveOnce, abandonOnce, serveOnce   sync.Once
	releaseOnce                          sync.Once
	// serveAbandoned: a request whose client gave up is still served at
	// the release (HoldServing).
	serveAbandoned bool
	p              *Provider
}

// Hold makes the token endpoint slow: every token request waits until
// Release (or until its client gives up, and then it is not served), so a
// test acts at the moment a request waits instead of sleeping. The test's
// cleanup releases them too.
func (p *Provider) Hold(t testing.TB) *Held { return p.hold1(t, false) }

// HoldServing is Hold on a server that does not watch the connection while
// it works: a waiting request is served at the release even when its client
// gave up meanwhile (Abandoned still says it did). That is the real
// server's side of a lost answer: it rotates the refresh token and writes
// the new one to a connection nobody reads.
func (p *Provider) HoldServing(t testing.TB) *Held { return p.hold1(t, true) }

func (p *Provider) hold1(t testing.TB, serveAbandoned bool) *Held {
	h := &Held{arrived: make(chan struct{}), abandoned: make(chan struct{}), released: make(chan struct{}), served: make(chan struct{}),
		serveAbandoned: serveAbandoned, p: p}
	h.Arrived, h.Abandoned, h.Served = h.arrived, h.abandoned, h.served
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
	t.Cleanup(h.Release)
	return h
}

// Release lets the waiting token requests, and the later ones, through.
func (h *Held) Release() {
	h.releaseOnce.Do(func() {
		h.p.mu.Lock()
		if h.p.hold == h {
			h.p.hold = nil
		}
		h.p.mu.Unlock()
		close(h.released)
	})
}

// wait holds one token request; false when its client gave up first (and
// the hold does not serve abandoned requests).
func (h *Held) wait(r *http.Request) bool {
	h.arriveOnce.Do(func() { close(h.arrived) })
	select {
	case <-h.released:
		return true
	case <-r.Context().Done():
		h.abandonOnce.Do(func() { close(h.abandoned) })
		if !h.serveAbandoned {
			return false
		}
		<-h.released
		return true
	}
}

// answered marks a held request served.
func (h *Held) answered() { h.serveOnce.Do(func() { close(h.served) }) }

// sign signs claims with the current key (typ "" for none).
func (p *Provider) sign(claims map[string]any, typ string) string {
	key, kid := p.Key()
	s, err := signJWT(key, kid, typ, claims)
	if err != nil {
		panic(err) // a fresh P-256 key and a JSON map always sign
	}
	return s
}

// PairwiseSubject is the sub of account for audience (a client id for ID
// tokens, a resource for access tokens) when PairwiseSubjects is on; the
// real provider uses the same formula.
func PairwiseSubject(account, audience string) string {
	sum := sha256.Sum256([]byte(account + "|" + audience))
	return "pw-" + hex.EncodeToString(sum[:8])
}

func randomString() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
