package oauth

import (
	"net/http"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/vault"
)

// Per-caller grants (`oauth: {grants: caller}`): each signed-in person has
// a grant of their own, keyed by (connector, actor). The stored names carry
// the actor's key ("grant#oidc:<sub>", "flow#oidc:<sub>"), so the vault's
// associated data — kind, connector, name, key id — binds a sealed grant to
// that pair: a grant copied to another person's row does not open. Locks
// are per name, so one refresh happens per grant across replicas. The
// client registration stays the connector's.

// Stored names.
const (
	nameGrant  = "grant"
	nameFlow   = "flow"
	nameClient = "client"
)

// owner is whose grant: a connector's one (who zero) or an actor's own on a
// per-caller connector.
type owner struct {
	id  string
	who actor.ID
}

func (o owner) name(base string) string { return vault.CallerName(base, o.who) }

// key is the cache key.
func (o owner) key() string { return vault.CallerName(o.id, o.who) }

// display is the actor the grant belongs to, as activity writes it ("" for
// the connector's one grant).
func (o owner) display() string {
	if o.who.IsZero() {
		return ""
	}
	return o.who.String()
}

// owner resolves whose grant a request for connector id by who uses: on a
// per-caller connector, who's own — and only an OIDC caller (a person) may
// have one; elsewhere the connector's one grant, whoever asks.
func (m *Manager) owner(id string, who actor.ID) (owner, error) {
	c := m.connector(id)
	if c == nil {
		return owner{}, authRequired("connector %q does not use OAuth", id)
	}
	if !c.PerCaller {
		return owner{id: id}, nil
	}
	if who.Kind != actor.OIDC {
		return owner{}, &Error{Code: CodeAuthRequired, NoGrant: true, PersonNeeded: true,
			Message: personNeeded(id, who)}
	}
	return owner{id: id, who: who}, nil
}

func personNeeded(id string, who actor.ID) string {
	if who.IsZero() {
		return "Connector " + quote(id) + " connects each person's own account, and this request names no signed-in person"
	}
	return "Connector " + quote(id) + " connects each person's own account, so it needs a signed-in person (an OIDC caller); " + who.String() + " is a token, which cannot connect an account of its own"
}

func quote(s string) string { return `"` + s + `"` }

// SessionActor finds the connecta console session (the /me sign-in) of the
// browser a callback arrived from; ok is false when it has none.
type SessionActor func(r *http.Request) (who actor.ID, ok bool)
