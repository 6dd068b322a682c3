package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// testTimeout bounds a credential test (one catalog listing).
const testTimeout = 20 * time.Second

type connectionRow struct {
	ID, Title, Kind  string
	State, LastError string
	LastContact      time.Time
	ToolCount        *int // nil: never contacted (shown as —, like its last error)
	OAuth            bool
	OAuthState       string // "connected", "not connected", "unknown"
	// PerCaller: each person's own grant or credential (oauth.grants or
	// credential.per: caller), managed on /me, not here.
	PerCaller         bool
	Credential        bool
	CredentialLabel   string
	CredentialSet     bool
	CredentialUpdated time.Time

	// The catalog: its state and age, pinning mode, drift (nil: not
	// observed), tools hidden until approved, and what approval would
	// change (under quarantine, when anything is pending).
	CatalogState string
	CatalogAgeMs *int64
	Pin          string
	Drift        *gateway.Drift
	Quarantined  int
	Pending      []gateway.ToolDiff
	MorePending  int // pending tools past maxPendingShown
}

// maxPendingShown bounds the diff a Connections page renders per connector;
// `connecta catalog diff` shows the rest.
const maxPendingShown = 50

func (c *Console) connector(id string) *config.Connector {
	for i := range c.cfg().Connectors {
		if cc := &c.cfg().Connectors[i]; cc.ID == id {
			return cc
		}
	}
	return nil
}

// rows is every connector with its health (from the last contact: no
// probe), its OAuth and its credential state.
func (c *Console) rows(ctx context.Context) []connectionRow {
	states := c.o.Gateway.ConnectorStates()
	drift := c.o.Gateway.CatalogDrift()
	var out []connectionRow
	for _, h := range c.o.Gateway.Health() {
		r := connectionRow{ID: h.ID, Kind: h.Kind, Pin: h.CatalogPin, Quarantined: h.CatalogQuarantined}
		if h.CatalogTools > 0 {
			n := h.CatalogTools
			r.ToolCount = &n
		}
		st := states[h.ID]
		r.State, r.LastError = st.State, st.LastErrorCode
		r.CatalogState, r.CatalogAgeMs = st.Catalog.State, st.Catalog.AgeMs
		if d, ok := drift[h.ID]; ok {
			r.Drift = &d
		}
		if h.CatalogPin == gateway.PinQuarantine {
			if d, err := c.o.Gateway.DiffCatalog(ctx, h.ID); err == nil {
				r.Pending = d.Pending
				if len(r.Pending) > maxPendingShown {
					r.Pending, r.MorePending = r.Pending[:maxPendingShown], len(r.Pending)-maxPendingShown
				}
			}
		}
		if st.LastContactAt != nil {
			r.LastContact = *st.LastContactAt
		}
		if st.ToolCount != nil {
			n := *st.ToolCount
			r.ToolCount = &n
		}
		for _, info := range c.o.Gateway.Connectors() {
			if info.ID == h.ID {
				r.Title = info.Title
			}
		}
		if cc := c.connector(h.ID); cc != nil {
			r.PerCaller = cc.PerCaller()
			if r.PerCaller {
				r.OAuth, r.Credential = cc.OAuth != nil, cc.Credential != nil
				out = append(out, r)
				continue
			}
			if cc.OAuth != nil && c.o.OAuth != nil {
				r.OAuth, r.OAuthState = true, "unknown"
				if ok, err := c.o.OAuth.Granted(ctx, h.ID, actor.ID{}); err == nil {
					r.OAuthState = map[bool]string{true: "connected", false: "not connected"}[ok]
				}
			}
			if cc.Credential != nil {
				r.Credential, r.CredentialLabel = true, cc.Credential.Label
				if s, err := c.o.Store.GetSecret(ctx, store.SecretKey{Kind: vault.KindCredential, Connector: h.ID, Name: CredentialName}); err == nil {
					r.CredentialSet, r.CredentialUpdated = true, s.UpdatedAt
				}
			}
		}
		out = append(out, r)
	}
	return out
}

func (c *Console) serveConnections(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "connections", view{Title: "Connections", Nav: "connections", Flash: flash(r), Data: c.rows(r.Context())})
}

// serveApprove approves pending tools of a connector's catalog: the form's
// tool fields, or every pending tool with all=true. Each approval is an
// audit record under the operator's name.
func (c *Console) serveApprove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if c.connector(id) == nil {
		c.fail(w, r, http.StatusNotFound, "No such connector", "No configured connector has that id, so nothing was approved.")
		return
	}
	tools := r.PostForm["tool"]
	if r.PostForm.Get("all") != "true" && len(tools) == 0 {
		c.fail(w, r, http.StatusBadRequest, "Nothing to approve", "The form named no tool, so nothing was approved.")
		return
	}
	if r.PostForm.Get("all") == "true" {
		tools = nil
	}
	s := sessionFrom(r.Context())
	done, err := c.o.Gateway.ApproveTools(r.Context(), id, tools, s.op.Actor())
	if err != nil {
		c.fail(w, r, http.StatusConflict, "Approval failed", err.Error()+". Nothing was approved.")
		return
	}
	if len(done) == 0 {
		back(w, r, "/", "Connector "+id+": nothing to approve (already approved as listed).")
		return
	}
	back(w, r, "/", "Connector "+id+": approved "+strings.Join(done, ", ")+".")
}

// oauthConnector is the connector {id} when it uses OAuth; else a page.
func (c *Console) oauthConnector(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	cc := c.connector(id)
	if cc == nil || cc.OAuth == nil || c.o.OAuth == nil {
		c.fail(w, r, http.StatusNotFound, "No such OAuth connector", "No configured connector with that id uses OAuth, so nothing was changed.")
		return "", false
	}
	return id, true
}

// serveAuthorize starts (or, with force, restarts) the downstream flow and
// answers a same-origin page linking to the authorization server.
func (c *Console) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	id, ok := c.oauthConnector(w, r)
	if !ok {
		return
	}
	s := sessionFrom(r.Context())
	force := r.PostForm.Get("force") == "true"
	st, err := c.o.OAuth.Authorize(r.Context(), id, force, oauthCaller(s.op))
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Authorization could not start", err.Message)
		return
	}
	if st.AuthorizationURL == "" {
		back(w, r, "/", st.Message)
		return
	}
	c.render(w, r, http.StatusOK, "message", view{Title: "Authorize " + id,
		Message: fmt.Sprintf("Connector %q needs a person to grant it access at %s. The link opens the authorization server; when you have allowed access, you come back to connecta.", id, originOf(st.AuthorizationURL)),
		Link:    st.AuthorizationURL, LinkText: "Continue to " + originOf(st.AuthorizationURL)})
}

func (c *Console) serveRevokeGrant(w http.ResponseWriter, r *http.Request) {
	id, ok := c.oauthConnector(w, r)
	if !ok {
		return
	}
	s := sessionFrom(r.Context())
	done, err := c.o.OAuth.Revoke(r.Context(), id, actor.ID{}, s.op.Actor())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Revocation failed", err.Message+" The grant was kept.")
		return
	}
	c.o.Gateway.InvalidateCatalog(id)
	back(w, r, "/", "Connector "+id+": "+done+".")
}

// credentialConnector is the connector {id} when it has a credential slot.
func (c *Console) credentialConnector(w http.ResponseWriter, r *http.Request) (*config.Connector, bool) {
	cc := c.connector(r.PathValue("id"))
	if cc == nil || cc.Credential == nil {
		c.fail(w, r, http.StatusNotFound, "No such credential", "No configured connector with that id has a credential slot (connectors[].credential), so nothing was changed.")
		return nil, false
	}
	return cc, true
}

func (c *Console) serveCredentials(w http.ResponseWriter, r *http.Request) {
	var rows []connectionRow
	for _, row := range c.rows(r.Context()) {
		if row.Credential {
			rows = append(rows, row)
		}
	}
	v := view{Title: "Credentials", Nav: "credentials", Flash: flash(r), Data: rows}
	if c.o.Vault == nil || !c.o.Vault.Configured() {
		v.Error = "The vault is not configured (vault.keys), so credentials cannot be stored."
	}
	c.render(w, r, http.StatusOK, "credentials", v)
}

// serveSetCredential seals the value into the vault. The value is never
// echoed, logged or shown back; the audit names only the connector.
func (c *Console) serveSetCredential(w http.ResponseWriter, r *http.Request) {
	cc, ok := c.credentialConnector(w, r)
	if !ok {
		return
	}
	value, ok := c.credentialValue(w, r)
	if !ok {
		return
	}
	if err := c.o.Vault.Seal(r.Context(), vault.KindCredential, cc.ID, CredentialName, []byte(value)); err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.credentialChanged(w, r, cc, "credential.set", "Saved")
}

func (c *Console) serveDeleteCredential(w http.ResponseWriter, r *http.Request) {
	cc, ok := c.credentialConnector(w, r)
	if !ok {
		return
	}
	done, err := c.o.Store.DeleteSecret(r.Context(), store.SecretKey{Kind: vault.KindCredential, Connector: cc.ID, Name: CredentialName})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	if !done {
		back(w, r, "/credentials", "Connector "+cc.ID+" had no credential to remove.")
		return
	}
	c.credentialChanged(w, r, cc, "credential.delete", "Removed")
}

// credentialChanged follows a stored or removed credential: the audit
// names the operator and the connector (never the value), the connector's
// catalog is fetched afresh with it, and the page says what was done.
func (c *Console) credentialChanged(w http.ResponseWriter, r *http.Request, cc *config.Connector, action, done string) {
	s := sessionFrom(r.Context())
	c.audit(r.Context(), s.op, action, "connector:"+cc.ID, cc.Credential.Label)
	c.o.Gateway.InvalidateCatalog(cc.ID)
	back(w, r, "/credentials", done+" the "+cc.Credential.Label+" of "+cc.ID+".")
}

// serveTestCredential lists the connector's catalog afresh: it never calls
// a tool.
func (c *Console) serveTestCredential(w http.ResponseWriter, r *http.Request) {
	cc, ok := c.credentialConnector(w, r)
	if !ok {
		return
	}
	c.o.Gateway.InvalidateCatalog(cc.ID)
	ctx, cancel := context.WithTimeout(r.Context(), testTimeout)
	defer cancel()
	tools, err := c.o.Gateway.Tools(ctx, cc.ID)
	if err != nil {
		msg := err.Error()
		var ge *gateway.Error
		if errors.As(err, &ge) {
			msg = string(ge.Code) + ": " + ge.Message
		}
		back(w, r, "/credentials", "Test of "+cc.ID+" failed: "+clipText(msg))
		return
	}
	back(w, r, "/credentials", fmt.Sprintf("Test of %s: the downstream served %d tool(s).", cc.ID, len(tools)))
}

type tokensData struct {
	Enabled   bool
	Tokens    []accesstoken.Token
	NewSecret string
	NewName   string
	MaxActive int
}

func (c *Console) serveTokens(w http.ResponseWriter, r *http.Request) {
	c.tokensPage(w, r, http.StatusOK, flash(r), "", tokensData{})
}

func (c *Console) tokensPage(w http.ResponseWriter, r *http.Request, status int, fl, errMsg string, d tokensData) {
	if c.o.Tokens != nil {
		d.Enabled, d.MaxActive = true, c.o.Tokens.MaxActive()
		list, err := c.o.Tokens.List(r.Context())
		if err != nil {
			c.storeFailed(w, r, err)
			return
		}
		d.Tokens = list
	}
	c.render(w, r, status, "tokens", view{Title: "Access tokens", Nav: "tokens", Flash: fl, Error: errMsg, Data: d})
}

func (c *Console) tokensEnabled(w http.ResponseWriter, r *http.Request) bool {
	if c.o.Tokens == nil {
		c.fail(w, r, http.StatusNotFound, "Access tokens not enabled", "Issued access tokens need `accessTokens: {}` in the configuration, so nothing was changed.")
		return false
	}
	return true
}

// tokenError is the refusal page of a manager error; nothing was changed.
func (c *Console) tokenError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, accesstoken.ErrInvalidName):
		c.tokensPage(w, r, http.StatusBadRequest, "", "Refused: "+err.Error()+". Nothing was changed.", tokensData{})
	case errors.Is(err, accesstoken.ErrLimit):
		c.tokensPage(w, r, http.StatusConflict, "", "Refused: "+err.Error()+"; revoke one first. Nothing was changed.", tokensData{})
	case errors.Is(err, accesstoken.ErrNotFound):
		c.tokensPage(w, r, http.StatusNotFound, "", "Refused: no access token has that id. Nothing was changed.", tokensData{})
	default:
		c.storeFailed(w, r, err)
	}
}

// serveIssueToken answers the POST itself with the secret, shown once: it
// is in no URL, no redirect and no log, and the page is not cached.
func (c *Console) serveIssueToken(w http.ResponseWriter, r *http.Request) {
	if !c.tokensEnabled(w, r) {
		return
	}
	s := sessionFrom(r.Context())
	narrow, msg := c.narrowing(r.PostForm.Get("connectors"))
	if msg != "" {
		c.tokensPage(w, r, http.StatusBadRequest, "", "Refused: "+msg+". Nothing was changed.", tokensData{})
		return
	}
	secret, t, err := c.o.Tokens.CreateNarrowed(r.Context(), r.PostForm.Get("name"), s.op.Actor(), narrow)
	if err != nil {
		c.tokenError(w, r, err)
		return
	}
	c.tokensPage(w, r, http.StatusOK, "Issued "+t.Name+". Copy the secret now: it is shown only once.", "", tokensData{NewSecret: secret, NewName: t.Name})
}

// narrowing reads the issue form's connector list (comma-separated ids;
// empty: not narrowed), refusing ids the configuration does not have.
func (c *Console) narrowing(field string) ([]string, string) {
	if strings.TrimSpace(field) == "" {
		return nil, ""
	}
	var ids []string
	for _, id := range strings.Split(field, ",") {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
			continue
		case c.cfg().Connector(id) == nil:
			return nil, fmt.Sprintf("%q is not a configured connector", clipText(id))
		case slices.Contains(ids, id):
			return nil, fmt.Sprintf("%q is named twice", clipText(id))
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, "the connector list names no connector"
	}
	return ids, ""
}

func (c *Console) serveRenameToken(w http.ResponseWriter, r *http.Request) {
	if !c.tokensEnabled(w, r) {
		return
	}
	s := sessionFrom(r.Context())
	t, err := c.o.Tokens.Rename(r.Context(), r.PathValue("id"), r.PostForm.Get("name"), s.op.Actor())
	if err != nil {
		c.tokenError(w, r, err)
		return
	}
	back(w, r, "/tokens", "Renamed the token to "+t.Name+".")
}

func (c *Console) serveRevokeToken(w http.ResponseWriter, r *http.Request) {
	if !c.tokensEnabled(w, r) {
		return
	}
	s := sessionFrom(r.Context())
	t, err := c.o.Tokens.Revoke(r.Context(), r.PathValue("id"), s.op.Actor())
	if err != nil {
		c.tokenError(w, r, err)
		return
	}
	back(w, r, "/tokens", "Revoked "+t.Name+": calls with it now fail.")
}

type activityData struct {
	Enabled                   bool
	Events                    []activity.Event
	Connector, Outcome, Actor string
	Next                      string
	Outcomes                  []string
	Names                     map[string]string // token:<id> → name
}

func (c *Console) serveActivity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := activityData{Enabled: c.o.Activity != nil, Connector: bounded(q.Get("connector")), Outcome: bounded(q.Get("outcome")),
		Actor: bounded(q.Get("actor")), Outcomes: []string{"success", "error", "timeout", "cancelled"}}
	v := view{Title: "Activity", Nav: "activity", Data: &d}
	if !d.Enabled {
		c.render(w, r, http.StatusOK, "activity", v)
		return
	}
	page, err := c.o.Activity.List(r.Context(), activity.Query{Limit: activityPage, Before: q.Get("before"),
		ConnectorID: d.Connector, Outcome: d.Outcome, Actor: d.Actor})
	switch {
	case errors.Is(err, activity.ErrBadCursor):
		v.Error = "That page link is not valid (a bad cursor); showing the newest events."
		page, err = c.o.Activity.List(r.Context(), activity.Query{Limit: activityPage, ConnectorID: d.Connector, Outcome: d.Outcome, Actor: d.Actor})
	}
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	d.Events = page.Events
	if page.NextCursor != "" {
		d.Next = Prefix + "/activity?" + urlValues("connector", d.Connector, "outcome", d.Outcome, "actor", d.Actor, "before", page.NextCursor)
	}
	if c.o.Tokens != nil {
		d.Names, _ = c.o.Tokens.Names(r.Context())
	}
	c.render(w, r, http.StatusOK, "activity", v)
}

func (c *Console) serveAudit(w http.ResponseWriter, r *http.Request) {
	recs, err := c.o.Store.ListAudit(r.Context(), auditPage)
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "audit", view{Title: "Audit", Nav: "audit", Data: recs})
}

func bounded(s string) string {
	if len(s) > maxFilterBytes {
		return s[:maxFilterBytes]
	}
	return s
}

func oauthCaller(op Operator) oauth.Caller { return oauthCallerFor(op, op.Who()) }

// oauthCallerFor is the signed-in person starting a flow for who's grant.
func oauthCallerFor(op Operator, who actor.ID) oauth.Caller {
	return oauth.Caller{Actor: op.Actor(), Who: who, Operator: !op.CallerOnly}
}

// urlValues encodes key/value pairs, leaving out empty values.
func urlValues(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return v.Encode()
}

// accessRuleRow is one configured access rule as the Access page shows it.
type accessRuleRow struct {
	Callers, Connectors, Tools string
	Writes                     bool
}

// accessReach is one connector a chosen caller reaches and its tools now.
type accessReach struct {
	ID, Title    string
	Tools        []string
	CatalogError string
}

type accessData struct {
	Configured bool
	Rules      []accessRuleRow
	// The chosen caller (the form), and what it reaches right now.
	Kind, Name, Claims string
	Chosen             bool
	Caller             string
	Reach              []accessReach
}

// serveAccess is the Access page: the rules as configured and, for a chosen
// caller (a static token, an issued token, or an OIDC identity typed in with
// its claims), the connectors and tools it reaches now — computed by the
// same package access the server enforces with.
func (c *Console) serveAccess(w http.ResponseWriter, r *http.Request) {
	cfg := c.cfg()
	d := accessData{Configured: cfg.Access != nil, Kind: bounded(r.URL.Query().Get("kind")),
		Name: bounded(r.URL.Query().Get("name")), Claims: r.URL.Query().Get("claims")}
	if cfg.Access != nil {
		for _, rule := range cfg.Access.Rules {
			d.Rules = append(d.Rules, ruleRow(rule))
		}
	}
	if d.Kind != "" {
		caller, msg := c.chosenCaller(r.Context(), d)
		if msg != "" {
			c.render(w, r, http.StatusBadRequest, "access", view{Title: "Access", Nav: "access", Error: msg, Data: d})
			return
		}
		d.Chosen, d.Caller = true, caller.Who.String()
		v := access.New(cfg.Access).View(caller)
		for _, info := range v.VisibleConnectors(c.o.Gateway.Connectors()) {
			row := accessReach{ID: info.ID, Title: info.Title}
			tools, err := c.o.Gateway.Tools(r.Context(), info.ID)
			var ge *gateway.Error
			switch {
			case errors.As(err, &ge):
				row.CatalogError = string(ge.Code) + ": " + ge.Message
			case err != nil:
				row.CatalogError = err.Error()
			}
			for _, t := range v.VisibleTools(info.ID, tools, c.o.Gateway.ReadOnly) {
				row.Tools = append(row.Tools, t.Address())
			}
			d.Reach = append(d.Reach, row)
		}
	}
	c.render(w, r, http.StatusOK, "access", view{Title: "Access", Nav: "access", Data: d})
}

// chosenCaller is the Access page form's caller, or why not.
func (c *Console) chosenCaller(ctx context.Context, d accessData) (access.Caller, string) {
	switch d.Kind {
	case "token":
		for _, t := range c.cfg().Auth.Tokens {
			if t.Name == d.Name {
				return access.Caller{Who: actor.StaticToken(t.Name)}, ""
			}
		}
		return access.Caller{}, "No auth.tokens entry has that name."
	case "issued":
		if c.o.Tokens == nil {
			return access.Caller{}, "Issued access tokens are not enabled (accessTokens)."
		}
		t, err := c.o.Tokens.Get(ctx, strings.TrimPrefix(d.Name, accesstoken.ActorPrefix))
		if err != nil {
			return access.Caller{}, "No issued token has that id."
		}
		return access.Caller{Who: t.Who(), Connectors: t.Connectors}, ""
	case "oidc":
		claims := map[string]any{}
		if len(d.Claims) > maxFormBytes || json.Unmarshal([]byte(d.Claims), &claims) != nil {
			return access.Caller{}, `The claims must be one JSON object, e.g. {"sub":"alice","groups":["finance"]}.`
		}
		sub, _ := claims["sub"].(string)
		if sub == "" {
			sub = "(typed in)"
		}
		return access.Caller{Who: actor.OIDCSubject(sub), Claims: claims}, ""
	}
	return access.Caller{}, "Choose a kind of caller: token, issued or oidc."
}

func ruleRow(r config.AccessRule) accessRuleRow {
	row := accessRuleRow{Writes: r.Writes, Tools: "every tool"}
	switch {
	case r.Tokens != nil:
		row.Callers = "tokens: " + strings.Join(r.Tokens, ", ")
	case r.IssuedTokens:
		row.Callers = "every issued token"
	case r.OIDC != nil:
		switch {
		case r.OIDC.Any:
			row.Callers = "every OIDC caller"
		case r.OIDC.Claim != nil:
			row.Callers = fmt.Sprintf("OIDC claim %s = %s", r.OIDC.Claim.Name, r.OIDC.Claim.Value)
		default:
			row.Callers = "OIDC emails: " + strings.Join(r.OIDC.Emails, ", ")
		}
	}
	conns := slices.Clone(r.Connectors)
	if r.AllConnectors {
		conns = append([]string{"*"}, conns...)
	}
	row.Connectors = strings.Join(conns, ", ")
	if r.Tools != nil {
		row.Tools = strings.Join(r.Tools, ", ")
	}
	return row
}

// credentialValue is the posted credential value, refused (with a page
// saying nothing changed) when empty, too long, holding control characters
// or without a vault to seal it in.
func (c *Console) credentialValue(w http.ResponseWriter, r *http.Request) (string, bool) {
	value := strings.TrimSpace(r.PostForm.Get("value"))
	switch {
	case value == "":
		c.fail(w, r, http.StatusBadRequest, "Refused: empty credential", "The value was empty, so nothing was changed.")
	case len(value) > vault.MaxCredentialBytes:
		c.fail(w, r, http.StatusRequestEntityTooLarge, "Refused: credential too long", fmt.Sprintf("The value is over %d bytes, so nothing was changed.", vault.MaxCredentialBytes))
	case strings.ContainsFunc(value, unicode.IsControl):
		c.fail(w, r, http.StatusBadRequest, "Refused: control characters", "The value contains control characters, which cannot be sent in an HTTP header, so nothing was changed.")
	case c.o.Vault == nil || !c.o.Vault.Configured():
		c.fail(w, r, http.StatusConflict, "Vault not configured", "Storing a credential needs vault.keys in the configuration, so nothing was changed.")
	default:
		return value, true
	}
	return "", false
}
