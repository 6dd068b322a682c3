package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/connecta-dev/connecta/internal/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// grant is the team's connection to one connector, sealed under
// (connector, "grant"). One per connector.
type grant struct {
	Issuer        string           `json:"issuer"`
	TokenURL      string           `json:"tokenUrl"`
	RevocationURL string           `json:"revocationUrl,omitempty"`
	ClientID      string           `json:"clientId"`
	ClientSecret  string           `json:"clientSecret,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"authStyle"`
	Resource      string           `json:"resource"`
	Scopes        []string         `json:"scopes,omitempty"`
	// RequiredScopes are what the downstream's 403 insufficient_scope
	// challenges named (step-up), kept with the grant they refused so that
	// every replica, and a restarted one, asks for them; the next grant
	// starts without.
	RequiredScopes []string  `json:"requiredScopes,omitempty"`
	AccessToken    string    `json:"accessToken"`
	RefreshToken   string    `json:"refreshToken,omitempty"`
	Expiry         time.Time `json:"expiry,omitzero"`
	Obtained       time.Time `json:"obtained"` // when the access token was issued to us
	GrantedAt      time.Time `json:"grantedAt"`
	GrantedBy      string    `json:"grantedBy,omitempty"`
}

// stored reads the grant from the store (and refreshes the cache).
func (m *Manager) stored(ctx context.Context, o owner) (*grant, error) {
	var g grant
	ok, err := m.load(ctx, o.id, o.name(nameGrant), &g)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok || g.AccessToken == "" {
		delete(m.cache, o.key())
		return nil, nil
	}
	m.cache[o.key()] = &g
	return &g, nil
}

func (m *Manager) putGrant(ctx context.Context, o owner, g *grant) error {
	if err := m.save(ctx, o.id, o.name(nameGrant), g); err != nil {
		return err
	}
	m.mu.Lock()
	m.cache[o.key()] = g
	m.mu.Unlock()
	return nil
}

// dropGrant deletes the grant (invalid_grant, revoke).
func (m *Manager) dropGrant(ctx context.Context, o owner) error {
	m.mu.Lock()
	delete(m.cache, o.key())
	m.mu.Unlock()
	if _, err := m.opts.Store.Delete(ctx, o.id, o.name(nameGrant)); err != nil {
		return storeFailed("delete the grant", err)
	}
	m.grantChanged(o.id)
	return nil
}

func (m *Manager) noGrant(o owner) *Error {
	if !o.who.IsZero() {
		return &Error{Code: CodeAuthRequired, NoGrant: true,
			Message: fmt.Sprintf("Connector %q connects each person's own account, and %s has not connected one yet", o.id, o.who)}
	}
	return &Error{Code: CodeAuthRequired, NoGrant: true,
		Message: fmt.Sprintf("Connector %q is not authorized yet: a person must sign in to it once for the team", o.id)}
}

// fresh reports whether an access token can be sent without refreshing:
// it is refreshed RefreshBefore ahead of its expiry, or a quarter of its
// lifetime ahead when that is shorter (short-lived tokens).
func (m *Manager) fresh(g *grant) bool {
	if g.Expiry.IsZero() {
		return true
	}
	margin := m.opts.RefreshBefore
	if life := g.Expiry.Sub(g.Obtained); !g.Obtained.IsZero() && life > 0 && life/4 < margin {
		margin = life / 4
	}
	return m.now().Add(margin).Before(g.Expiry)
}

// accessToken returns a grant whose access token is current: the cached
// one while fresh, else the store's, refreshed (once, under the store's
// lock) when it is about to expire.
func (m *Manager) accessToken(ctx context.Context, o owner) (*grant, error) {
	m.mu.Lock()
	g := m.cache[o.key()]
	m.mu.Unlock()
	if g != nil && m.fresh(g) {
		return g, nil
	}
	g, err := m.stored(ctx, o)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, m.noGrant(o)
	}
	if m.fresh(g) {
		return g, nil
	}
	return m.refresh(ctx, o, g.AccessToken)
}

// refresh replaces the access token that stale names, as a flight
// (flight.go): once the token request is sent the authorization server may
// rotate the refresh token, and a caller giving up must not leave the new
// one unstored — the spent one, sent again, is reuse (invalid_grant) and
// costs the grant. Callers in this process refreshing the same token share
// one flight; across replicas the store's lock makes one refresh happen. A
// caller whose ctx ends first returns its context's error; the flight goes
// on.
func (m *Manager) refresh(ctx context.Context, o owner, stale string) (*grant, error) {
	f := fly(ctx, m, m.refreshes, o.key()+"\x00"+stale, func(ctx context.Context) (*grant, error) {
		return m.refreshOnce(ctx, o, stale)
	})
	if f == nil {
		return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("connector %q's access token needs a refresh and connecta is shutting down", o.id)}
	}
	if !f.wait(ctx) {
		return nil, fmt.Errorf("oauth: connector %q: stopped waiting for the access token's refresh, which goes on: %w", o.id, ctx.Err())
	}
	return f.v, f.err
}

// refreshOnce is one refresh under the store's lock: whoever holds the
// lock first refreshes; the others find the grant already changed and use
// it.
func (m *Manager) refreshOnce(ctx context.Context, o owner, stale string) (g *grant, err error) {
	id := o.id
	ctx, span := m.tracer.Start(ctx, "connecta.oauth.refresh", trace.WithAttributes(attribute.String("connecta.connector", id)))
	defer func() {
		if e := asError(err); e != nil {
			span.SetAttributes(attribute.String("connecta.outcome", string(e.Code)))
			span.SetStatus(codes.Error, string(e.Code))
		}
		span.End()
	}()
	unlock, err := m.opts.Store.Lock(ctx, id, o.name(nameGrant))
	if err != nil {
		return nil, storeFailed("lock the grant", err)
	}
	defer unlock()
	g, err = m.stored(ctx, o)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, m.noGrant(o)
	}
	if g.AccessToken != stale && m.fresh(g) {
		return g, nil // another request or replica refreshed it
	}
	if g.RefreshToken == "" {
		m.metrics.refreshed(id, "invalid_grant")
		m.audit(ctx, AuditRecord{Connector: id, Action: "dropped", Owner: o.display(), Issuer: g.Issuer, Outcome: "no_refresh_token"})
		if err := m.dropGrant(ctx, o); err != nil {
			return nil, err
		}
		return nil, authRequired("Connector %q's access expired and the authorization server gave no refresh token: a person must sign in again", id)
	}
	tok, err := m.refreshGrant(ctx, id, g)
	if err == nil {
		err = checkToken(tok)
	}
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			m.metrics.refreshed(id, "invalid_grant")
			m.audit(ctx, AuditRecord{Connector: id, Action: "dropped", Owner: o.display(), Issuer: g.Issuer, Outcome: "invalid_grant"})
			if err := m.dropGrant(ctx, o); err != nil {
				return nil, err
			}
			return nil, authRequired("Connector %q's grant was revoked or expired at the authorization server (invalid_grant): a person must sign in again", id)
		}
		m.metrics.refreshed(id, "failed")
		e := exchangeFailed(err, g.TokenURL)
		m.log.WarnContext(ctx, "oauth: refresh failed; the grant is kept", "connector", id, "code", string(e.Code), "message", e.Message)
		if e.Code == CodeAuthRequired {
			// The server answered, but not with a token; the grant may
			// still be good, so it is kept and the call is not retried.
			e = &Error{Code: CodeUnavailable, Host: origin(g.TokenURL), Message: "refreshing the access token failed: " + e.Message, err: err}
		}
		return nil, e
	}
	next := *g
	next.AccessToken, next.Expiry, next.Obtained = tok.AccessToken, tok.Expiry, m.now()
	next.Scopes = grantedScopes(tok, g.Scopes) // §6: omitted, the original's
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken // rotated
	}
	if err := m.putGrant(ctx, o, &next); err != nil {
		m.metrics.refreshed(id, "failed")
		return nil, err
	}
	m.metrics.refreshed(id, "ok")
	return &next, nil
}

// refreshGrant is the refresh_token grant with the resource indicator
// (RFC 8707 §2.2; the MCP authorization spec requires it on every token
// request). x/oauth2's TokenSource cannot add parameters to a refresh, so
// the request is built here; failures have x/oauth2's shapes
// (*oauth2.RetrieveError) so that one classification serves both.
func (m *Manager) refreshGrant(ctx context.Context, id string, g *grant) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}}
	if g.Resource != "" {
		form.Set("resource", g.Resource)
	}
	basic := g.ClientSecret != "" && g.AuthStyle == oauth2.AuthStyleInHeader
	if !basic {
		form.Set("client_id", g.ClientID)
		if g.ClientSecret != "" {
			form.Set("client_secret", g.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	res, err := m.tokenClient(ctx, id).Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var out struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		RefreshToken string          `json:"refresh_token"`
		Scope        string          `json:"scope"`
		ExpiresIn    json.RawMessage `json:"expires_in"`
		Error        string          `json:"error"`
		Description  string          `json:"error_description"`
	}
	jerr := json.Unmarshal(body, &out)
	if res.StatusCode < 200 || res.StatusCode > 299 || out.Error != "" {
		return nil, &oauth2.RetrieveError{Response: res, ErrorCode: out.Error, ErrorDescription: out.Description}
	}
	if jerr != nil {
		return nil, errors.New("oauth2: cannot parse json")
	}
	tok := &oauth2.Token{AccessToken: out.AccessToken, TokenType: out.TokenType, RefreshToken: out.RefreshToken}
	if out.Scope != "" {
		tok = tok.WithExtra(map[string]any{"scope": out.Scope}) // read by grantedScopes
	}
	// expires_in is a number, or (some servers) a string holding one.
	secs, _ := strconv.ParseInt(strings.Trim(string(out.ExpiresIn), `"`), 10, 64)
	if secs > 0 {
		tok.Expiry = m.now().Add(time.Duration(secs) * time.Second)
	}
	return tok, nil
}

// Transport returns a RoundTripper for connector id: every request carries
// the grant's access token (refreshed before expiry); after a 401 the token
// is refreshed once and the request sent once more. That is transport
// authentication, not a retry: the downstream refused the first request
// before running anything. Failures are *Error, but for a request whose
// context ends while it waits for a refresh: that fails with its context's
// error (wrapped), and the refresh goes on.
//
// who is the actor whose own grant a per-caller connector's requests carry
// (the gateway builds one transport per actor); the zero ID is the
// connector's one grant.
func (m *Manager) Transport(id string, who actor.ID, base http.RoundTripper) http.RoundTripper {
	return &transport{m: m, o: owner{id: id, who: who}, base: base}
}

type transport struct {
	m    *Manager
	o    owner
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	o, err := t.m.owner(t.o.id, t.o.who)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	g, err := t.m.accessToken(ctx, o)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	first := withToken(req, g.AccessToken)
	res, err := t.base.RoundTrip(first)
	if err == nil && res.StatusCode == http.StatusForbidden {
		if sc := InsufficientScope(res.Header); len(sc) > 0 {
			t.m.needScopes(ctx, o, g.AccessToken, sc)
		}
	}
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		return res, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return res, nil // cannot be re-sent: the 401 stands
	}
	g2, err := t.m.refresh(ctx, o, g.AccessToken)
	if err != nil {
		drain(res)
		return nil, err
	}
	again := withToken(req, g2.AccessToken)
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return res, nil
		}
		again.Body = body
	}
	drain(res)
	return t.base.RoundTrip(again)
}

func withToken(req *http.Request, token string) *http.Request {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

func drain(res *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Revoke deletes the connector's grant, first asking the authorization
// server to revoke it (RFC 7009) when it advertised a revocation endpoint.
// It returns what was done; an unreachable server leaves the grant in place.
//
// who names whose grant on a per-caller connector (the zero ID: the
// connector's one grant); by is who asked, for the audit.
func (m *Manager) Revoke(ctx context.Context, id string, who actor.ID, by string) (string, *Error) {
	done, err := m.revoke(ctx, id, who, by)
	return done, asError(err)
}

func (m *Manager) revoke(ctx context.Context, id string, who actor.ID, by string) (string, error) {
	o, err := m.owner(id, who)
	if err != nil {
		return "", err
	}
	g, err := m.stored(ctx, o)
	if err != nil {
		return "", err
	}
	if g == nil {
		if !who.IsZero() {
			return fmt.Sprintf("connector %q has no grant of %s; nothing to revoke", id, who), nil
		}
		return fmt.Sprintf("connector %q has no grant; nothing to revoke", id), nil
	}
	done := "deleted the stored grant"
	if g.RevocationURL != "" {
		for _, tok := range []struct{ value, hint string }{{g.RefreshToken, "refresh_token"}, {g.AccessToken, "access_token"}} {
			if tok.value == "" {
				continue
			}
			if err := m.revokeToken(ctx, id, g, tok.value, tok.hint); err != nil {
				return "", err
			}
		}
		done = "revoked the grant at " + origin(g.RevocationURL) + " and deleted it"
	}
	if err := m.dropGrant(ctx, o); err != nil {
		return "", err
	}
	m.audit(ctx, AuditRecord{Connector: id, Action: "revoked", Actor: by, Owner: o.display(), Issuer: g.Issuer, Outcome: "ok"})
	return done, nil
}

func (m *Manager) revokeToken(ctx context.Context, id string, g *grant, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if g.AuthStyle != oauth2.AuthStyleInHeader || g.ClientSecret == "" {
		form.Set("client_id", g.ClientID)
		if g.ClientSecret != "" {
			form.Set("client_secret", g.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return authRequired("the revocation endpoint is not usable: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if g.AuthStyle == oauth2.AuthStyleInHeader && g.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	res, err := m.tokenClient(ctx, id).Do(req)
	if err != nil {
		return reachFailed("the revocation endpoint", g.RevocationURL, err)
	}
	drain(res)
	// RFC 7009 §2.2: 200 whether or not the token was valid; 503 asks to
	// try later; unsupported_token_type (400) for access tokens is fine.
	switch {
	case res.StatusCode == http.StatusOK, res.StatusCode == http.StatusBadRequest && hint == "access_token":
		return nil
	case res.StatusCode >= 500:
		return &Error{Code: CodeUnavailable, Host: origin(g.RevocationURL), Message: fmt.Sprintf("the revocation endpoint answered HTTP %d; the grant is kept, try again later", res.StatusCode)}
	default:
		return authRequired("the revocation endpoint answered HTTP %d; the grant is kept", res.StatusCode)
	}
}

// Durable reports whether grants outlive this process.
func (m *Manager) Durable() bool { return m.opts.Store.Durable() }

// Granted reports whether the connector has a stored grant (the console's
// OAuth state); it never contacts the authorization server.
func (m *Manager) Granted(ctx context.Context, id string, who actor.ID) (bool, error) {
	o, err := m.owner(id, who)
	if err != nil {
		return false, err
	}
	g, err := m.stored(ctx, o)
	if err != nil {
		return false, err
	}
	return g != nil, nil
}

// InsufficientScope returns the scopes of a Bearer error="insufficient_scope"
// challenge (RFC 6750 §3.1: the step-up a 403 asks for), nil for any other.
func InsufficientScope(h http.Header) []string {
	chs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return nil
	}
	for _, ch := range chs {
		if ch.Scheme == "bearer" && ch.Params["error"] == "insufficient_scope" {
			return strings.Fields(ch.Params["scope"])
		}
	}
	return nil
}

// needScopes records on the grant the scopes a downstream's step-up
// challenge named, under the grant's lock; token is the access token the
// downstream refused: a grant replaced since (a new sign-in) is not marked.
// A store failure is logged: the call fails auth_required either way, and
// the next refusal says it again.
func (m *Manager) needScopes(ctx context.Context, o owner, token string, scopes []string) {
	if err := m.markRequired(ctx, o, token, scopes); err != nil {
		m.log.WarnContext(ctx, "oauth: could not record the scopes a step-up asks for", "connector", o.id, "err", err.Error())
	}
}

func (m *Manager) markRequired(ctx context.Context, o owner, token string, scopes []string) error {
	unlock, err := m.opts.Store.Lock(ctx, o.id, o.name(nameGrant))
	if err != nil {
		return storeFailed("lock the grant", err)
	}
	defer unlock()
	g, err := m.stored(ctx, o)
	if err != nil || g == nil || g.AccessToken != token {
		return err
	}
	next := union(g.RequiredScopes, scopes)
	if len(next) == len(g.RequiredScopes) {
		return nil
	}
	marked := *g
	marked.RequiredScopes = next
	return m.putGrant(ctx, o, &marked)
}

// missingScopes is what the grant's step-up challenges asked for that it
// lacks.
func missingScopes(g *grant) []string {
	var missing []string
	for _, s := range g.RequiredScopes {
		if !slices.Contains(g.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// union is a followed by b's scopes not in a, in order.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
