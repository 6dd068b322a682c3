package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/actor"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

// Operator is who is signed in.
type Operator struct {
	Subject string
	Email   string
	// CallerOnly: an admitted caller who is not an operator (auth.oidc.
	// operators does not name them); the session opens /me only.
	CallerOnly bool
}

// Who is the signed-in person's actor.
func (o Operator) Who() actor.ID { return actor.OIDCSubject(o.Subject) }

// Actor is the audit actor of the operator: "oidc:<sub>", as on /mcp.
func (o Operator) Actor() string { return "oidc:" + o.Subject }

// session is a request's verified session.
type session struct {
	op     Operator
	claims map[string]any // the sign-in's access-token claims (nil: unknown)
	digest string
	csrf   string // the token every mutation must carry
}

// identityProvider is auth.oidc's discovered provider and the console's
// client at it.
type identityProvider struct {
	issuer, clientID, secret string
	provider                 *oidc.Provider
	verifier                 *oidc.IDTokenVerifier
}

func (c *Console) oidcConfig() *config.OIDC {
	o := c.cfg().Auth.OIDC
	if o == nil || o.ClientID == "" {
		return nil
	}
	return o
}

// enabledOIDC is oidcConfig; without it (no auth.oidc or no clientId) it
// answers the page saying how to enable the console, with status.
func (c *Console) enabledOIDC(w http.ResponseWriter, r *http.Request, status int) *config.OIDC {
	o := c.oidcConfig()
	if o == nil {
		c.render(w, r, status, "disabled", view{Title: "Console not enabled"})
	}
	return o
}

// provider discovers the issuer on first use (and again after a reload
// changed it); a failed discovery is retried on the next sign-in.
func (c *Console) provider(ctx context.Context, o *config.OIDC) (*identityProvider, error) {
	c.idpMu.Lock()
	defer c.idpMu.Unlock()
	if p := c.idp; p != nil && p.issuer == o.Issuer && p.clientID == o.ClientID && p.secret == o.ClientSecret.Reveal() {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(c.clientContext(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", o.Issuer, err)
	}
	c.idp = &identityProvider{issuer: o.Issuer, clientID: o.ClientID, secret: o.ClientSecret.Reveal(), provider: p,
		verifier: p.Verifier(&oidc.Config{ClientID: o.ClientID, Now: c.now})}
	return c.idp, nil
}

func (c *Console) clientContext(ctx context.Context) context.Context {
	if c.o.HTTPClient != nil {
		return oidc.ClientContext(ctx, c.o.HTTPClient)
	}
	return ctx
}

func (c *Console) oauth2Config(p *identityProvider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.clientID, ClientSecret: p.secret,
		Endpoint:    p.provider.Endpoint(),
		RedirectURL: strings.TrimRight(c.cfg().PublicURL, "/") + CallbackPath,
		Scopes:      []string{oidc.ScopeOpenID, "email", "profile", "groups"},
	}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// csrfFor derives a session's CSRF token from its cookie secret, so the
// store keeps only digests and any replica can render forms.
func csrfFor(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("connecta console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// serveSignin starts a sign-in: the PKCE verifier, state and nonce go into
// a short-lived cookie (the callback may land on any replica), and the
// answer is a same-origin page linking to the provider, since the pinned
// form-action 'self' blocks a cross-origin redirect from a form.
func (c *Console) serveSignin(w http.ResponseWriter, r *http.Request) {
	if !c.starts.allow(r.RemoteAddr) || !c.limit.allow(callbackReserve) {
		c.tooMany(w, r)
		return
	}
	o := c.enabledOIDC(w, r, http.StatusOK)
	if o == nil {
		return
	}
	p, err := c.provider(r.Context(), o)
	if err != nil {
		c.log.WarnContext(r.Context(), "console: identity provider unreachable", "issuer", o.Issuer, "err", err)
		c.fail(w, r, http.StatusBadGateway, "Sign-in unavailable", "The identity provider could not be reached. Try again shortly.")
		return
	}
	state, verifier, nonce := randomToken(), oauth2.GenerateVerifier(), randomToken()
	setCookie(w, signinCookie, state+"."+verifier+"."+nonce, signinTTL)
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)}
	if c.verifier() != nil { // the access token is for connecta itself, as on /mcp (RFC 8707)
		opts = append(opts, oauth2.SetAuthURLParam("resource", o.Audience))
	}
	authURL := c.oauth2Config(p).AuthCodeURL(state, opts...)
	c.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Link: authURL, LinkText: "Continue to " + originOf(o.Issuer)})
}

// serveCallback finishes a sign-in: state from the cookie, code exchange
// with the verifier, ID token (signature, issuer, audience, expiry, nonce),
// claims from the userinfo endpoint, then the operators rule. Callbacks are
// rate-limited per client address first; a callback spends a token of the
// global bucket only once its state cookie checks pass (a junk callback costs
// nothing but its address's budget), and may use the reserve sign-in starts
// leave. Each refusal is a clear page and creates nothing.
func (c *Console) serveCallback(w http.ResponseWriter, r *http.Request) {
	if !c.callbacks.allow(r.RemoteAddr) {
		c.tooMany(w, r)
		return
	}
	o := c.enabledOIDC(w, r, http.StatusOK)
	if o == nil {
		return
	}
	q := r.URL.Query()
	ck, err := r.Cookie(signinCookie)
	clearCookie(w, signinCookie) // one callback per sign-in
	if e := q.Get("error"); e != "" {
		// Only an RFC 6749 error code is echoed, never free text from the URL.
		if !isErrorCode(e) {
			e = "unknown error"
		}
		c.fail(w, r, http.StatusForbidden, "Sign-in refused", "The identity provider refused the sign-in ("+e+").")
		return
	}
	parts := []string{}
	if err == nil {
		parts = strings.Split(ck.Value, ".")
	}
	if len(parts) != 3 || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(q.Get("state"))) != 1 || q.Get("code") == "" {
		c.fail(w, r, http.StatusBadRequest, "Sign-in could not be completed", "This sign-in link is stale or was not started in this browser. Sign in again.")
		return
	}
	if !c.limit.allow(0) {
		c.tooMany(w, r)
		return
	}
	p, err := c.provider(r.Context(), o)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Sign-in unavailable", "The identity provider could not be reached. Try again shortly.")
		return
	}
	ctx, cancel := context.WithTimeout(c.clientContext(r.Context()), 15*time.Second)
	defer cancel()
	exchange := []oauth2.AuthCodeOption{oauth2.VerifierOption(parts[1])}
	av := c.verifier()
	if av != nil {
		exchange = append(exchange, oauth2.SetAuthURLParam("resource", o.Audience))
	}
	tok, err := c.oauth2Config(p).Exchange(ctx, q.Get("code"), exchange...)
	if err != nil {
		c.log.WarnContext(ctx, "console: code exchange failed", "err", errText(err))
		c.fail(w, r, http.StatusBadGateway, "Sign-in could not be completed", "The identity provider did not accept the sign-in. Sign in again.")
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := p.verifier.Verify(ctx, rawID)
	if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(parts[2])) != 1 {
		c.log.WarnContext(ctx, "console: ID token refused", "err", errText(err))
		c.fail(w, r, http.StatusBadRequest, "Sign-in could not be completed", "The identity provider's answer could not be verified. Sign in again.")
		return
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Sign-in could not be completed", "The identity provider's answer could not be read. Sign in again.")
		return
	}
	// Code-flow ID tokens may carry only `sub`: the profile claims the rule
	// needs come from the userinfo endpoint, for the same subject.
	if ui, err := p.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
		extra := map[string]any{}
		if ui.Claims(&extra) == nil {
			for k, v := range extra {
				if _, ok := claims[k]; !ok {
					claims[k] = v
				}
			}
		}
	}
	op := Operator{Subject: idt.Subject}
	operator := o.Operators != nil && inbound.MatchRule(*o.Operators, claims)
	caller := inbound.MatchRule(o.Callers, claims)
	if av != nil {
		// One actor, one name: the person is who the access token for
		// connecta names — its sub and claims, exactly as /mcp reads them —
		// so pairwise subjects (a different sub per client in ID tokens)
		// cannot make the console's Alice another actor than /mcp's.
		who, rej := av.Verify(ctx, tok.AccessToken)
		if rej != nil && rej.Reason != inbound.ReasonCallerNotAllowed {
			c.log.WarnContext(ctx, "console: access token refused", "reason", rej.Reason)
			c.fail(w, r, http.StatusBadRequest, "Sign-in could not be completed", "The identity provider's access token for connecta was refused ("+rej.Reason+"). Sign in again.")
			return
		}
		caller = rej == nil
		if caller {
			op.Subject, operator, claims = who.Who.ID, who.Operator, who.Claims
		}
	}
	op.Email, _ = claims["email"].(string)
	if !operator && !caller {
		c.log.InfoContext(ctx, "console: sign-in refused: neither an operator nor an admitted caller", "actor", op.Actor())
		c.fail(w, r, http.StatusForbidden, "Not admitted", "You signed in, but neither auth.oidc.operators nor auth.oidc.callers admits this account, so the console is closed to it.")
		return
	}
	op.CallerOnly = !operator
	secret := randomToken()
	now := c.now()
	ttl := o.SessionTTL
	err = c.o.Store.PutSession(r.Context(), store.OperatorSession{
		Digest: digest(secret), Subject: op.Subject, Email: op.Email, CSRFDigest: digest(csrfFor(secret)),
		CallerOnly: op.CallerOnly, Claims: claimsJSON(claims), CreatedAt: now, ExpiresAt: now.Add(ttl),
	})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.audit(r.Context(), op, "session.signin", "operator:"+op.Subject, op.Email)
	setCookie(w, SessionCookie, secret, ttl)
	if op.CallerOnly {
		http.Redirect(w, r, MePath, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// tooMany is the rate limit's answer.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "3")
	c.fail(w, r, http.StatusTooManyRequests, "Too many sign-in attempts", "Too many sign-in attempts arrived at once. Wait a few seconds and sign in again.")
}

// serveSignout ends the session in the store, so the cookie is refused on
// every replica from now on, even if replayed.
func (c *Console) serveSignout(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	if _, err := c.o.Store.DeleteSession(r.Context(), s.digest); err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.audit(r.Context(), s.op, "session.signout", "operator:"+s.op.Subject, "")
	clearCookie(w, SessionCookie)
	c.render(w, r, http.StatusOK, "message", view{Title: "Signed out", Operator: &Operator{}, Message: "You are signed out. The session has ended on every replica.",
		Link: Prefix + "/", LinkText: "Sign in again"})
}

// authenticate finds the request's session: nil and a reason when none.
func (c *Console) authenticate(r *http.Request) (*session, string) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil, ""
	}
	v, err := c.o.Store.GetSession(r.Context(), digest(ck.Value), c.now())
	switch {
	case errors.Is(err, store.ErrExpired):
		return nil, "Your session expired. Sign in again."
	case errors.Is(err, store.ErrNotFound):
		return nil, "Your session has ended (signed out, or expired). Sign in again."
	case err != nil:
		return nil, "The console's store is unavailable, so your session cannot be checked. Try again shortly."
	}
	csrf := csrfFor(ck.Value)
	if subtle.ConstantTimeCompare([]byte(digest(csrf)), []byte(v.CSRFDigest)) != 1 {
		return nil, "Your session is not valid. Sign in again."
	}
	var claims map[string]any
	if v.Claims != "" {
		_ = json.Unmarshal([]byte(v.Claims), &claims)
	}
	return &session{op: Operator{Subject: v.Subject, Email: v.Email, CallerOnly: v.CallerOnly}, claims: claims, digest: v.Digest, csrf: csrf}, ""
}

// page admits a GET from a signed-in operator; anyone else gets the
// sign-in page (or, without auth.oidc, the page saying how to enable it).
func (c *Console) page(h http.HandlerFunc) http.Handler { return c.pageFor(h, true) }

// pageFor is page; operatorOnly false admits any signed-in caller (/me).
func (c *Console) pageFor(h http.HandlerFunc, operatorOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.enabledOIDC(w, r, http.StatusOK) == nil {
			return
		}
		s, why := c.authenticate(r)
		if s == nil {
			if why != "" {
				clearCookie(w, SessionCookie)
			}
			c.render(w, r, http.StatusUnauthorized, "welcome", view{Title: "Sign in", Error: why})
			return
		}
		if operatorOnly && s.op.CallerOnly {
			c.notOperator(w, r, s)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)))
	})
}

// mutation admits a POST only from this origin, from a signed-in operator,
// carrying the session's CSRF token; any refusal changes nothing.
func (c *Console) mutation(h http.HandlerFunc) http.Handler { return c.mutationFor(h, true) }

// mutationFor is mutation; operatorOnly false admits any signed-in caller
// (their own connections on /me).
func (c *Console) mutationFor(h http.HandlerFunc, operatorOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.sameOrigin(r) {
			c.fail(w, r, http.StatusForbidden, "Refused: cross-origin request", "This form was not sent from the console's own pages, so nothing was changed. Open the console and try again.")
			return
		}
		if c.enabledOIDC(w, r, http.StatusForbidden) == nil {
			return
		}
		s, why := c.authenticate(r)
		if s == nil {
			if why == "" {
				why = "You are not signed in."
			}
			clearCookie(w, SessionCookie)
			c.render(w, r, http.StatusUnauthorized, "welcome", view{Title: "Sign in", Error: why + " Nothing was changed."})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusRequestEntityTooLarge, "Refused: form too large", fmt.Sprintf("The form is over %d bytes, so nothing was changed.", maxFormBytes))
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
			c.fail(w, r, http.StatusForbidden, "Refused: stale form", "This form's security token does not match your session (it is from another session, or was forged), so nothing was changed. Reload the page and try again.")
			return
		}
		if operatorOnly && s.op.CallerOnly {
			c.notOperator(w, r, s)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)))
	})
}

// sameOrigin is the standard library's cross-origin check
// (http.CrossOriginProtection, as internal/server/http.go applies to /mcp:
// Sec-Fetch-Site, else Origin against Host) with publicUrl's origin trusted,
// since a proxy may rewrite Host. Two narrowings, because a console form is
// only ever posted by a browser: a request with neither header is refused,
// and an Origin, when sent, must be publicUrl's origin.
func (c *Console) sameOrigin(r *http.Request) bool {
	want := c.publicOrigin()
	o := r.Header.Get("Origin")
	if o == "null" {
		o = ""
	}
	if o == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return false
	}
	cop := http.NewCrossOriginProtection() // per request: publicUrl reloads
	if want != "" && cop.AddTrustedOrigin(want) != nil {
		return false
	}
	if cop.Check(r) != nil {
		return false
	}
	return o == "" || o == want
}

func (c *Console) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "console: store failed", "err", err)
	c.fail(w, r, http.StatusServiceUnavailable, "Store unavailable", "The console's store did not answer, so nothing was changed. Try again shortly.")
}

// audit appends an audit record; a failed write is logged, never shown.
func (c *Console) audit(ctx context.Context, op Operator, action, target, detail string) {
	if err := c.o.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditRecord{
		OccurredAt: c.now(), Actor: op.Actor(), Action: action, Target: target, Detail: detail,
	}); err != nil {
		c.log.ErrorContext(ctx, "console: audit write failed", "action", action, "target", target, "err", err)
	}
}

// errText is an error's text for the log, bounded.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return clipText(err.Error())
}

// clipText bounds text shown on a page (an error, an operator's input).
func clipText(s string) string { return jstext.Clamp(s, 200) }

func originOf(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	return raw[:i+3] + rest
}

// isErrorCode: the shape of an OAuth error code (RFC 6749 §4.1.2.1), as far
// as the page echoes one.
func isErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return true
}

// SessionActor is the actor of the browser's console session (the sign-in
// /operator and /me share), for the downstream OAuth callback of a
// per-caller connector: a flow completes only in a browser signed in as
// the actor that started it. ok is false without a valid session.
func SessionActor(st store.Store, r *http.Request) (actor.ID, bool) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return actor.ID{}, false
	}
	v, err := st.GetSession(r.Context(), digest(ck.Value), time.Now())
	if err != nil || subtle.ConstantTimeCompare([]byte(digest(csrfFor(ck.Value))), []byte(v.CSRFDigest)) != 1 {
		return actor.ID{}, false
	}
	return actor.OIDCSubject(v.Subject), true
}

// notOperator answers an operator page for a caller's session: it stays
// signed in, and /me is where its own connections are.
func (c *Console) notOperator(w http.ResponseWriter, r *http.Request, s *session) {
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, s))
	c.render(w, r, http.StatusForbidden, "message", view{Title: "Not an operator",
		Error: "auth.oidc.operators does not name this account, so the operator pages are closed to it. Your own connections are on your page.",
		Link:  MePath, LinkText: "Your connections"})
}

// verifier is the running auth.oidc access-token verifier (nil: the
// console reads the ID token's subject, as before /me existed).
func (c *Console) verifier() *inbound.Verifier {
	if c.o.Verifier == nil {
		return nil
	}
	return c.o.Verifier()
}

// claimsJSON keeps the claims access rules read, bounded; "" when they do
// not fit (the rules then see none).
func claimsJSON(claims map[string]any) string {
	b, err := json.Marshal(claims)
	if err != nil || len(b) > 16<<10 {
		return ""
	}
	return string(b)
}
