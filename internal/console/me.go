package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// MePath is the page of a signed-in person's own connections: open to any
// OIDC caller auth.oidc.callers admits (operators too), behind the same
// sign-in as /operator.
const MePath = "/me"

// meRow is one connector the person reaches.
type meRow struct {
	ID, Title string
	// OAuth: a `grants: caller` connector; Connected: the person has a grant.
	OAuth, Connected bool
	// Credential: a `credential.per: caller` connector; CredentialSet: theirs is set.
	Credential      bool
	CredentialLabel string
	CredentialSet   bool
	// Shared: the connector uses the team's one grant or credential (or none).
	Shared bool
	// Holders (operators only): the actors with a grant or credential here.
	Holders []string
	// Unknown: the state could not be read (store down).
	Unknown bool
}

type mePage struct {
	Rows     []meRow
	Operator bool
}

// meWho is the session's actor and the connectors its access rules reach,
// evaluated on the sign-in's access-token claims as /mcp evaluates them.
func (c *Console) meReach(s *session) (actor.ID, func(id string) bool) {
	who := s.op.Who()
	view := access.New(c.cfg().Access).View(access.Caller{Who: who, Claims: s.claims})
	return who, view.ConnectorVisible
}

func (c *Console) serveMe(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	who, visible := c.meReach(s)
	holders, herr := c.holders(r.Context())
	page := mePage{Operator: !s.op.CallerOnly}
	for _, cc := range c.cfg().Connectors {
		if !visible(cc.ID) {
			continue // what the rules hide does not exist for this person
		}
		row := meRow{ID: cc.ID, Title: cc.Title}
		switch {
		case cc.OAuth != nil && cc.OAuth.Grants == config.PerCaller && c.o.OAuth != nil:
			row.OAuth = true
			ok, err := c.o.OAuth.Granted(r.Context(), cc.ID, who)
			row.Connected, row.Unknown = ok, err != nil
		case cc.Credential != nil && cc.Credential.Per == config.PerCaller:
			row.Credential, row.CredentialLabel = true, cc.Credential.Label
			_, err := c.o.Store.GetSecret(r.Context(), store.SecretKey{Kind: vault.KindCredential, Connector: cc.ID, Name: vault.CallerName(CredentialName, who)})
			row.CredentialSet, row.Unknown = err == nil, err != nil && err != store.ErrNotFound
		default:
			row.Shared = true
		}
		if page.Operator && (row.OAuth || row.Credential) {
			row.Holders = holders[cc.ID]
			row.Unknown = row.Unknown || herr != nil
		}
		page.Rows = append(page.Rows, row)
	}
	c.render(w, r, http.StatusOK, "me", view{Title: "Your connections", Nav: "me", Flash: flash(r), Data: page})
}

// holders lists, per connector, the actors (display form) holding a
// per-caller grant or credential — names only, never values.
func (c *Console) holders(ctx context.Context) (map[string][]string, error) {
	all, err := c.o.Store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, sv := range all {
		if sv.Kind != vault.KindCredential && sv.Kind != vault.KindOAuthGrant {
			continue
		}
		_, key := vault.SplitCallerName(sv.Name)
		if who, ok := actor.FromKey(key); ok && !slices.Contains(out[sv.Connector], who.String()) {
			out[sv.Connector] = append(out[sv.Connector], who.String())
		}
	}
	for _, list := range out {
		slices.Sort(list)
	}
	return out, nil
}

// meConnector is the per-caller connector a /me form names, reachable by
// the session's person; anything else is refused as not there.
func (c *Console) meConnector(w http.ResponseWriter, r *http.Request, oauth bool) (*config.Connector, actor.ID, bool) {
	s := sessionFrom(r.Context())
	who, visible := c.meReach(s)
	cc := c.connector(r.PathValue("id"))
	ok := cc != nil && visible(cc.ID)
	if ok && oauth {
		ok = cc.OAuth != nil && cc.OAuth.Grants == config.PerCaller && c.o.OAuth != nil
	} else if ok {
		ok = cc.Credential != nil && cc.Credential.Per == config.PerCaller
	}
	if !ok {
		c.fail(w, r, http.StatusNotFound, "No such connection", "You reach no connector with that id that keeps each person's own account, so nothing was changed.")
		return nil, actor.ID{}, false
	}
	return cc, who, true
}

func meBack(w http.ResponseWriter, r *http.Request, msg string) {
	u := MePath
	if s := sessionFrom(r.Context()); s != nil && msg != "" {
		u += "?" + urlValues("flash", msg, "sig", flashSig(s.csrf, msg))
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// serveMeConnect starts (or restarts: Reconnect) the person's own flow and
// links to the authorization server; the callback grants it only in this
// browser, signed in as this person.
func (c *Console) serveMeConnect(w http.ResponseWriter, r *http.Request) {
	cc, who, ok := c.meConnector(w, r, true)
	if !ok {
		return
	}
	st, err := c.o.OAuth.Authorize(r.Context(), cc.ID, r.PostForm.Get("force") == "true", oauthCallerFor(sessionFrom(r.Context()).op, who))
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Connecting could not start", err.Message)
		return
	}
	if st.AuthorizationURL == "" {
		meBack(w, r, st.Message)
		return
	}
	c.render(w, r, http.StatusOK, "message", view{Title: "Connect " + cc.ID,
		Message: fmt.Sprintf("Sign in to %s with your own account and allow access; you come back to connecta, in this browser.", originOf(st.AuthorizationURL)),
		Link:    st.AuthorizationURL, LinkText: "Continue to " + originOf(st.AuthorizationURL)})
}

func (c *Console) serveMeDisconnect(w http.ResponseWriter, r *http.Request) {
	cc, who, ok := c.meConnector(w, r, true)
	if !ok {
		return
	}
	done, err := c.o.OAuth.Revoke(r.Context(), cc.ID, who, who.String())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Disconnecting failed", err.Message+" Your connection was kept.")
		return
	}
	meBack(w, r, "Disconnected "+cc.ID+": "+done+".")
}

func (c *Console) serveMeSetCredential(w http.ResponseWriter, r *http.Request) {
	cc, who, ok := c.meConnector(w, r, false)
	if !ok {
		return
	}
	value, ok := c.credentialValue(w, r)
	if !ok {
		return
	}
	if err := c.o.Vault.Seal(r.Context(), vault.KindCredential, cc.ID, vault.CallerName(CredentialName, who), []byte(value)); err != nil {
		c.storeFailed(w, r, err)
		return
	}
	c.audit(r.Context(), sessionFrom(r.Context()).op, "credential.set", "connector:"+cc.ID+" actor:"+who.String(), cc.Credential.Label)
	c.o.Gateway.InvalidateCatalog(cc.ID)
	meBack(w, r, "Saved your "+cc.Credential.Label+" of "+cc.ID+".")
}

func (c *Console) serveMeDeleteCredential(w http.ResponseWriter, r *http.Request) {
	cc, who, ok := c.meConnector(w, r, false)
	if !ok {
		return
	}
	c.deleteCallerCredential(w, r, cc, who)
}

func (c *Console) deleteCallerCredential(w http.ResponseWriter, r *http.Request, cc *config.Connector, who actor.ID) {
	done, err := c.o.Store.DeleteSecret(r.Context(), store.SecretKey{Kind: vault.KindCredential, Connector: cc.ID, Name: vault.CallerName(CredentialName, who)})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	if !done {
		meBack(w, r, "There was no "+cc.Credential.Label+" of "+who.String()+" for "+cc.ID+".")
		return
	}
	c.audit(r.Context(), sessionFrom(r.Context()).op, "credential.delete", "connector:"+cc.ID+" actor:"+who.String(), cc.Credential.Label)
	c.o.Gateway.InvalidateCatalog(cc.ID)
	meBack(w, r, "Removed the "+cc.Credential.Label+" of "+who.String()+" for "+cc.ID+".")
}

// serveMeRevoke (operators) ends any actor's per-caller grant or
// credential on a connector; the form names the actor as activity does.
func (c *Console) serveMeRevoke(w http.ResponseWriter, r *http.Request) {
	cc := c.connector(r.PathValue("id"))
	who, ok := actor.Parse(r.PostForm.Get("actor"))
	if cc == nil || !ok || !(&config.Connector{OAuth: cc.OAuth, Credential: cc.Credential}).PerCaller() {
		c.fail(w, r, http.StatusNotFound, "No such connection", "No connector with that id keeps that actor's own grant or credential, so nothing was changed.")
		return
	}
	if cc.Credential != nil && cc.Credential.Per == config.PerCaller {
		c.deleteCallerCredential(w, r, cc, who)
		return
	}
	if c.o.OAuth == nil {
		c.fail(w, r, http.StatusNotFound, "No such connection", "No connector with that id uses OAuth, so nothing was changed.")
		return
	}
	done, err := c.o.OAuth.Revoke(r.Context(), cc.ID, who, sessionFrom(r.Context()).op.Actor())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, "Revocation failed", err.Message+" The grant was kept.")
		return
	}
	meBack(w, r, "Revoked the grant of "+who.String()+" for "+cc.ID+": "+done+".")
}
