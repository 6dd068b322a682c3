package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/secheader"
)

// Status is authorize_connector's answer for an OAuth connector.
type Status struct {
	Connector        string
	Status           string // StatusAuthorizationRequired, StatusPending, StatusAuthorized
	AuthorizationURL string
	ExpiresAt        time.Time
	Instructions     string
	Message          string
	// Reason says why authorization is required again: ReasonInsufficientScope
	// for a step-up; "" otherwise.
	Reason string
}

// ReasonInsufficientScope: the downstream refused the grant's scopes (403
// insufficient_scope) and asks for more.
const ReasonInsufficientScope = "insufficient_scope"

// Pinned statuses.
const (
	StatusAuthorizationRequired = "authorization_required"
	StatusPending               = "pending"
	StatusAuthorized            = "authorized"
)

// flow is one pending authorization, sealed under (connector, "flow"): one
// per connector, replaced by the next start, taken (deleted) by the first
// callback that presents its state.
type flow struct {
	StateHash     string           `json:"stateHash"` // hex SHA-256 of the state; the state itself is only in the URL
	Verifier      string           `json:"verifier"`
	URL           string           `json:"url"`
	ExpiresAt     time.Time        `json:"expiresAt"`
	Issuer        string           `json:"issuer"`
	IssParameter  bool             `json:"issParameter"`
	AuthEndpoint  string           `json:"authEndpoint"`
	TokenURL      string           `json:"tokenUrl"`
	RevocationURL string           `json:"revocationUrl,omitempty"`
	ClientID      string           `json:"clientId"`
	ClientSecret  string           `json:"clientSecret,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"authStyle"`
	Resource      string           `json:"resource"`
	Redirect      string           `json:"redirect"`
	Scopes        []string         `json:"scopes,omitempty"`
	StartedBy     string           `json:"startedBy,omitempty"`
}

func (f *flow) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID: f.ClientID, ClientSecret: f.ClientSecret, RedirectURL: f.Redirect, Scopes: f.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: f.AuthEndpoint, TokenURL: f.TokenURL, AuthStyle: f.AuthStyle},
	}
}

// Caller is who asks to start a flow.
type Caller struct {
	Actor    string   // recorded in the audit
	Who      actor.ID // whose grant, on a per-caller connector
	Operator bool     // may force over a healthy grant
}

// Authorize answers authorize_connector: authorized when a grant exists
// (forcing over it is for operators only), pending with the same URL while
// a started flow is unexpired, otherwise a new flow's authorization URL.
func (m *Manager) Authorize(ctx context.Context, id string, force bool, who Caller) (*Status, *Error) {
	st, err := m.authorize(ctx, id, force, who)
	return st, asError(err)
}

func (m *Manager) authorize(ctx context.Context, id string, force bool, who Caller) (*Status, error) {
	c := m.connector(id)
	o, err := m.owner(id, who.Who)
	if err != nil {
		return nil, err
	}
	g, err := m.stored(ctx, o)
	if err != nil {
		return nil, err
	}
	var extra []string // step-up: scopes beyond the grant's
	if g != nil {
		if extra = missingScopes(g); len(extra) > 0 {
			if !who.Operator && !c.PerCaller {
				// Replacing the team's working grant stays an operator's act
				// (a person's own grant is theirs to step up).
				return &Status{Connector: id, Status: StatusAuthorizationRequired, Reason: ReasonInsufficientScope,
					Message: fmt.Sprintf("Connector %q needs the scope %s, which the team's grant lacks: an operator must call authorize_connector({ connector: %q }) to sign in again with it.", id, strings.Join(extra, " "), id)}, nil
			}
			force = true
		}
	}
	if g != nil && !force && len(g.RequiredScopes) > 0 {
		// The downstream refused scopes the grant holds: signing in again
		// asks for the same, so it is not offered as the fix (nor, on a
		// person's own grant, a retry the downstream refuses again).
		other := "an operator can force a new authorization with another account"
		if c.PerCaller {
			other = "to connect another account, call authorize_connector with force: true"
		}
		return &Status{Connector: id, Status: StatusAuthorized,
			Message: fmt.Sprintf("Connector %q is authorized with the scope %s, and the downstream still refused it (403 insufficient_scope): signing in again asks for the same scopes. The account that signed in may lack the permission at the downstream; %s.", id, strings.Join(g.RequiredScopes, " "), other)}, nil
	}
	if g != nil && !force && c.PerCaller {
		return &Status{Connector: id, Status: StatusAuthorized,
			Message: fmt.Sprintf("Connector %q is connected to your own account; retry the call. To connect again, call authorize_connector with force: true.", id)}, nil
	}
	if g != nil && !force {
		return &Status{Connector: id, Status: StatusAuthorized,
			Message: fmt.Sprintf("Connector %q is already authorized; retry the call. If it still fails auth_required, an operator can force a new authorization.", id)}, nil
	}
	if g != nil && !who.Operator && !c.PerCaller { // a person may reconnect their own
		return &Status{Connector: id, Status: StatusAuthorized,
			Message: fmt.Sprintf("Connector %q is already authorized; only an operator may force a new authorization over a working grant.", id)}, nil
	}

	unlock, err := m.opts.Store.Lock(ctx, id, o.name(nameFlow))
	if err != nil {
		return nil, storeFailed("lock the flow", err)
	}
	defer unlock()
	if !force || len(extra) > 0 {
		var f flow
		ok, err := m.load(ctx, id, o.name(nameFlow), &f)
		if err != nil {
			return nil, err
		}
		// A step-up reuses a pending flow only when it asks for the scopes.
		if ok && m.now().Before(f.ExpiresAt) && len(union(f.Scopes, extra)) == len(f.Scopes) {
			st := m.pendingStatus(c, &f, StatusPending)
			if len(extra) > 0 {
				st.Reason = ReasonInsufficientScope
			}
			return st, nil
		}
	}
	var granted []string
	if g != nil && len(extra) > 0 {
		granted = union(g.Scopes, extra) // the union of granted and required
	}
	f, err := m.start(ctx, c, o, who, granted)
	if err != nil {
		return nil, err
	}
	st := m.pendingStatus(c, f, StatusAuthorizationRequired)
	if len(extra) > 0 {
		st.Reason = ReasonInsufficientScope
	}
	return st, nil
}

func (m *Manager) pendingStatus(c *Connector, f *flow, status string) *Status {
	if c.PerCaller {
		return &Status{
			Connector: c.ID, Status: status, AuthorizationURL: f.URL, ExpiresAt: f.ExpiresAt.UTC(),
			Instructions: fmt.Sprintf("This link connects your own %s account, and only in a browser signed in to connecta as you: sign in at %s/me first, then open authorizationUrl in that browser, sign in to %s and allow access before %s. "+
				"The link is yours alone; opened by anyone else it grants nothing. Then retry the call.",
				c.Title, m.opts.PublicURL, c.Title, f.ExpiresAt.UTC().Format(time.RFC3339)),
		}
	}
	return &Status{
		Connector: c.ID, Status: status, AuthorizationURL: f.URL, ExpiresAt: f.ExpiresAt.UTC(),
		Instructions: fmt.Sprintf("Give this link to a person who can sign in to %s: open authorizationUrl in a browser, sign in and allow access before %s. "+
			"The browser then lands on connecta's page %s, which says whether it worked. Then retry the call; connecta.search lists the connector's tools once it is authorized.",
			c.Title, f.ExpiresAt.UTC().Format(time.RFC3339), m.RedirectURL(c.ID)),
	}
}

// start discovers, identifies the client and seals a new flow (replacing
// any pending one).
// A step-up passes stepUp, the granted scopes with the required ones: the
// flow asks for those besides what it would ask for anyway.
func (m *Manager) start(ctx context.Context, c *Connector, o owner, who Caller, stepUp []string) (*flow, error) {
	d, err := m.discover(ctx, c)
	if err != nil {
		return nil, err
	}
	cl, err := m.identify(ctx, c, d.asm)
	if err != nil {
		return nil, err
	}
	scopes := c.Scopes
	if len(scopes) == 0 {
		scopes = slices.Clone(d.scopes)
	}
	scopes = union(scopes, stepUp)
	// SEP-2207: ask for offline_access when the server offers it, so that
	// a refresh token comes with the grant.
	if slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	state := rand.Text()
	f := &flow{
		StateHash: stateHash(state), Verifier: oauth2.GenerateVerifier(),
		ExpiresAt: m.now().Add(m.opts.FlowTTL).Truncate(time.Second),
		Issuer:    d.asm.Issuer, IssParameter: d.asm.AuthorizationResponseIssParameterSupported,
		AuthEndpoint: d.asm.AuthorizationEndpoint, TokenURL: d.asm.TokenEndpoint, RevocationURL: d.asm.RevocationEndpoint,
		ClientID: cl.ID, ClientSecret: cl.Secret, AuthStyle: cl.AuthStyle,
		Resource: d.resource, Redirect: cl.Redirect, Scopes: scopes, StartedBy: who.Actor,
	}
	f.URL = f.config().AuthCodeURL(state, oauth2.S256ChallengeOption(f.Verifier), oauth2.SetAuthURLParam("resource", f.Resource))
	if err := m.save(ctx, c.ID, o.name(nameFlow), f); err != nil {
		return nil, err
	}
	m.audit(ctx, AuditRecord{Connector: c.ID, Action: "flow_started", Actor: who.Actor, Owner: o.display(), Issuer: f.Issuer, Message: "client " + cl.Kind})
	return f, nil
}

// callbackResult is what the callback page says.
type callbackResult struct {
	status int
	title  string
	text   string
}

// Callback serves GET {publicUrl}/oauth/callback/{connector}: it takes the
// connector's flow if the state matches (single use, unexpired), exchanges
// the code with the verifier and resource, seals the grant and answers a
// plain page — never a token, never a redirect. A browser that leaves
// meanwhile is answered nothing; the sign-in it delivered completes.
func (m *Manager) Callback(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/oauth/callback/")
	if res, ok := m.callback(r.Context(), id, r); ok {
		writePage(w, res.status, res.title, res.text, m.opts.Stylesheet)
	}
}

// ClientMetadata serves {publicUrl}/oauth/client-metadata.json, the client
// ID metadata document: its URL is the client_id.
func (m *Manager) ClientMetadata(w http.ResponseWriter, _ *http.Request) {
	conns := *m.connectors.Load()
	redirects := make([]string, 0, len(conns))
	for id := range conns {
		redirects = append(redirects, m.RedirectURL(id))
	}
	slices.Sort(redirects)
	doc := map[string]any{
		"client_id":                  m.ClientMetadataURL(),
		"client_name":                ClientName,
		"client_uri":                 m.opts.PublicURL,
		"redirect_uris":              redirects,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(doc)
}

const couldNotComplete = "This authorization link is unknown, expired or already used. Nothing was changed. Ask your assistant to call authorize_connector again for a new link."

func callbackFailed(status int, text string) callbackResult {
	return callbackResult{status: status, title: "Authorization could not be completed", text: text}
}

// callback checks what needs only the request (method, connector, state,
// the browser's session), then completes the sign-in as a flight keyed by
// the owner and the state's hash (flight.go): from taking the flow on, the
// work is the Manager's, so that a browser leaving mid-exchange — its code
// spent at the authorization server — does not lose the grant. A browser
// retrying the callback meanwhile waits for the same flight; the flow is
// taken once either way. ok is false when the browser left first.
func (m *Manager) callback(ctx context.Context, id string, r *http.Request) (callbackResult, bool) {
	fail := func(status int, text string) (callbackResult, bool) { return callbackFailed(status, text), true }
	if r.Method != http.MethodGet {
		return fail(http.StatusMethodNotAllowed, "This page only answers the authorization server's redirect.")
	}
	c := m.connector(id)
	q := r.URL.Query()
	state := q.Get("state")
	if c == nil || state == "" {
		m.log.WarnContext(ctx, "oauth callback refused: unknown connector or no state", "connector", clip(id))
		return fail(http.StatusBadRequest, couldNotComplete)
	}
	// A per-caller flow is the signed-in person's own: the browser must have
	// a console session, and only that actor's flow is looked at, so a link
	// started by someone else (forwarded, or opened in a colleague's
	// browser) matches nothing and grants nothing.
	o := owner{id: id}
	if c.PerCaller {
		who, ok := actor.ID{}, false
		if m.opts.SessionActor != nil {
			who, ok = m.opts.SessionActor(r)
		}
		if !ok || who.Kind != actor.OIDC {
			m.log.WarnContext(ctx, "oauth callback refused: per-caller connector and no console session in this browser", "connector", id)
			return fail(http.StatusForbidden, fmt.Sprintf("Connector %q connects each person's own account, and this browser is not signed in to connecta. Nothing was granted. Sign in at %s/me as the person who asked for the link, then ask your assistant to call authorize_connector again and open the new link in this browser.", id, m.opts.PublicURL))
		}
		o.who = who
	}
	fl := fly(ctx, m, m.callbacks, o.key()+"\x00"+stateHash(state), func(ctx context.Context) (callbackResult, error) {
		return m.complete(ctx, c, o, state, q), nil
	})
	if fl == nil {
		return fail(http.StatusServiceUnavailable, "connecta is shutting down; nothing was changed and this link still holds. Reload this page in a moment.")
	}
	if !fl.wait(ctx) {
		m.log.InfoContext(ctx, "oauth callback: the browser left; the sign-in it delivered completes without it", "connector", id)
		return callbackResult{}, false
	}
	return fl.v, true
}

// complete is the callback's flight: it takes the flow state names, and
// with it exchanges the code in q and seals the grant.
func (m *Manager) complete(ctx context.Context, c *Connector, o owner, state string, q url.Values) callbackResult {
	id, fail := c.ID, callbackFailed
	f, ferr := m.takeFlow(ctx, o, state)
	if ferr != nil {
		m.log.ErrorContext(ctx, "oauth callback: store failed", "connector", id, "err", ferr.Error())
		return fail(http.StatusServiceUnavailable, "connecta could not reach its store; nothing was changed. Try the link again shortly.")
	}
	if f == nil && c.PerCaller {
		m.log.WarnContext(ctx, "oauth callback refused: the state is not a flow of the signed-in actor (someone else's, expired or replayed)", "connector", id)
		return fail(http.StatusBadRequest, "This authorization link was not started by the person signed in to connecta in this browser, or it is expired or already used. Nothing was granted: a link connects only the account of the person who asked for it. Ask your assistant to call authorize_connector for a link of your own.")
	}
	if f == nil {
		m.log.WarnContext(ctx, "oauth callback refused: unknown, expired or replayed state", "connector", id)
		return fail(http.StatusBadRequest, couldNotComplete)
	}
	if e := q.Get("error"); e != "" {
		m.audit(ctx, AuditRecord{Connector: id, Action: "flow_failed", Actor: f.StartedBy, Issuer: f.Issuer, Outcome: clip(e)})
		text := fmt.Sprintf("The authorization server answered %q", clip(e))
		if d := q.Get("error_description"); d != "" {
			text += " (" + clip(d) + ")"
		}
		return fail(http.StatusBadRequest, text+". Nothing was changed. To try again, ask your assistant to call authorize_connector for a new link.")
	}
	if iss := q.Get("iss"); (iss != "" && iss != f.Issuer) || (iss == "" && f.IssParameter) {
		m.log.WarnContext(ctx, "oauth callback refused: issuer mismatch (RFC 9207)", "connector", id)
		return fail(http.StatusBadRequest, "The response did not come from the authorization server this flow started with. Nothing was changed; ask for a new link.")
	}
	code := q.Get("code")
	if code == "" {
		return fail(http.StatusBadRequest, "The authorization server sent no code. Nothing was changed; ask for a new link.")
	}
	tok, err := f.config().Exchange(context.WithValue(ctx, oauth2.HTTPClient, m.tokenClient(ctx, id)), code,
		oauth2.VerifierOption(f.Verifier), oauth2.SetAuthURLParam("resource", f.Resource))
	if err == nil {
		err = checkToken(tok)
	}
	if err != nil {
		e := exchangeFailed(err, f.TokenURL)
		m.audit(ctx, AuditRecord{Connector: id, Action: "flow_failed", Actor: f.StartedBy, Issuer: f.Issuer, Outcome: string(e.Code), Message: e.Message})
		status := http.StatusBadGateway
		if e.Code == CodeAuthRequired {
			status = http.StatusBadRequest
		}
		return fail(status, "connecta could not obtain access: "+e.Message+". Nothing was stored; ask your assistant to call authorize_connector for a new link.")
	}
	g := &grant{
		Issuer: f.Issuer, TokenURL: f.TokenURL, RevocationURL: f.RevocationURL,
		ClientID: f.ClientID, ClientSecret: f.ClientSecret, AuthStyle: f.AuthStyle,
		Resource: f.Resource, Scopes: grantedScopes(tok, f.Scopes),
		AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Obtained: m.now(),
		GrantedAt: m.now().UTC(), GrantedBy: f.StartedBy,
	}
	if err := m.putGrant(ctx, o, g); err != nil {
		m.log.ErrorContext(ctx, "oauth callback: could not store the grant", "connector", id, "err", err.Error())
		return fail(http.StatusServiceUnavailable, "connecta could not store the grant; nothing was changed. Ask for a new link and try again.")
	}
	m.audit(ctx, AuditRecord{Connector: id, Action: "granted", Actor: f.StartedBy, Owner: o.display(), Issuer: f.Issuer, Outcome: "ok"})
	m.grantChanged(id)
	if c.PerCaller {
		return callbackResult{status: http.StatusOK, title: "Connected " + c.Title,
			text: fmt.Sprintf("connecta can now reach %s (connector %q) with your own account, for your calls only. Return to your assistant and retry the request. You can close this window.", c.Title, id)}
	}
	return callbackResult{status: http.StatusOK, title: "Connected " + c.Title,
		text: fmt.Sprintf("connecta can now reach %s (connector %q) on your team's behalf. Return to your assistant and retry the request. You can close this window.", c.Title, id)}
}

// grantedScopes are the scopes the token was issued with: the token
// response's scope when it names one (RFC 6749 §5.1: the server may grant
// fewer than asked, and says so there), else what the flow asked for.
func grantedScopes(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		return strings.Fields(s)
	}
	return asked
}

// takeFlow returns the connector's flow if state is its state and it has
// not expired, deleting it first so that it is used once, whichever replica
// asks; nil when there is none or it does not match.
func (m *Manager) takeFlow(ctx context.Context, o owner, state string) (*flow, error) {
	var f flow
	ok, err := m.load(ctx, o.id, o.name(nameFlow), &f)
	if err != nil || !ok {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(stateHash(state)), []byte(f.StateHash)) != 1 {
		return nil, nil
	}
	existed, derr := m.opts.Store.Delete(ctx, o.id, o.name(nameFlow))
	if derr != nil {
		return nil, storeFailed("delete the flow", derr)
	}
	if !existed || !m.now().Before(f.ExpiresAt) {
		return nil, nil
	}
	return &f, nil
}

// stateHash is what a flow keeps of its state: the hex SHA-256 (the state
// itself is only in the authorization URL).
func stateHash(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// checkToken refuses a token response connecta cannot use.
func checkToken(t *oauth2.Token) error {
	if t.AccessToken == "" {
		return errors.New("the token response has no access_token")
	}
	if tt := t.Type(); !strings.EqualFold(tt, "bearer") {
		return fmt.Errorf("the token type %q is not Bearer", clip(tt))
	}
	return nil
}

// exchangeFailed classifies a failed token request.
func exchangeFailed(err error, tokenURL string) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "the authorization server refused the token request"
		if re.ErrorCode != "" {
			msg += " (" + clip(re.ErrorCode) + ")"
		} else if re.Response != nil {
			msg += fmt.Sprintf(" (HTTP %d)", re.Response.StatusCode)
		}
		if re.Response != nil && re.Response.StatusCode >= 300 && re.Response.StatusCode <= 399 {
			msg += ": token requests follow no redirect"
		}
		if re.Response != nil && re.Response.StatusCode >= 500 {
			return &Error{Code: CodeUnavailable, Host: origin(tokenURL), Message: msg, err: err}
		}
		return &Error{Code: CodeAuthRequired, Message: msg, err: err}
	}
	if isTransport(err) {
		return reachFailed("the authorization server's token endpoint", tokenURL, err)
	}
	return &Error{Code: CodeAuthRequired, Message: "the authorization server's token response was not usable: " + clip(scrub(err.Error())), err: err}
}

// scrub keeps x/oauth2's parse errors from echoing a response body.
func scrub(s string) string {
	if i := strings.Index(s, ": "); i >= 0 && strings.HasPrefix(s, "oauth2: cannot parse json") {
		return s[:i]
	}
	return s
}

// writePage answers a minimal HTML page with the callback kind's headers
// (secheader.Callback: it loads nothing but the same-origin stylesheet, when
// given, and is not cached, framed, or given a referrer: its URL held a code).
func writePage(w http.ResponseWriter, status int, title, text, stylesheet string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	secheader.Set(h, secheader.Callback)
	w.WriteHeader(status)
	link := ""
	if stylesheet != "" {
		link = `<link rel="stylesheet" href="` + html.EscapeString(stylesheet) + `">`
	}
	fmt.Fprintf(w, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>%s</title>%s</head>"+
		"<body><header><span class=\"brand\">connecta</span></header><main><h1>%s</h1><p>%s</p></main></body></html>\n",
		html.EscapeString(title), link, html.EscapeString(title), html.EscapeString(text))
}
