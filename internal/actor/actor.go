// Package actor is who a request acts as: the typed pair (kind, id) pinned in
// docs/DECISIONS.md ("Actors"). Everything kept per actor — stash entries,
// access views, vault entries, budgets, per-caller catalogs — is keyed by
// Key, never by the display form; people read String, as activity writes it.
// It imports nothing of ours, so every layer may use it.
package actor

import "strings"

// Kind is how a caller authenticated.
type Kind string

// The kinds of actor.
const (
	Static Kind = "static" // an auth.tokens entry; ID is its name
	Issued Kind = "issued" // an operator-issued access token; ID is the token id
	OIDC   Kind = "oidc"   // an auth.oidc access token; ID is its sub
	Local  Kind = "local"  // the one user of a loopback-only server; ID is ""
	Stdio  Kind = "stdio"  // the one client of --stdio; ID is ""
)

// Display prefixes of issued and OIDC actors (activity's actor field).
const (
	IssuedPrefix = "token:"
	OIDCPrefix   = "oidc:"
)

// ID is one actor. The zero value is no actor.
type ID struct {
	Kind Kind
	ID   string
}

// Constructors, so call sites read as the kind they mean.
func StaticToken(name string) ID { return ID{Kind: Static, ID: name} }
func IssuedToken(id string) ID   { return ID{Kind: Issued, ID: id} }
func OIDCSubject(sub string) ID  { return ID{Kind: OIDC, ID: sub} }

var (
	LocalUser   = ID{Kind: Local}
	StdioClient = ID{Kind: Stdio}
)

// IsZero reports no actor.
func (a ID) IsZero() bool { return a.Kind == "" }

// String is the form people read (activity's actor, --actor): a static
// token's name, "token:<id>", "oidc:<sub>", "local", "stdio".
func (a ID) String() string {
	switch a.Kind {
	case Static:
		return a.ID
	case Issued:
		return IssuedPrefix + a.ID
	case OIDC:
		return OIDCPrefix + a.ID
	case Local, Stdio:
		return string(a.Kind)
	}
	return ""
}

// Key is the storage key: "<kind>:<id>". Kinds never contain ':', so two
// different pairs never share a key whatever the id holds.
func (a ID) Key() string {
	if a.IsZero() {
		return ""
	}
	return string(a.Kind) + ":" + a.ID
}

// FromKey reads a storage key back (Key's inverse); ok is false for a
// key of no known kind.
func FromKey(key string) (ID, bool) {
	kind, id, found := strings.Cut(key, ":")
	switch k := Kind(kind); {
	case !found:
		return ID{}, false
	case k == Static || k == Issued || k == OIDC:
		if id == "" {
			return ID{}, false
		}
		return ID{Kind: k, ID: id}, true
	case (k == Local || k == Stdio) && id == "":
		return ID{Kind: k}, true
	}
	return ID{}, false
}

// Parse reads the display form back (String's inverse for every valid
// actor): "token:…" and "oidc:…" by prefix, "local" and "stdio" by name,
// a valid static token name otherwise. ok is false for anything else.
func Parse(s string) (ID, bool) {
	switch {
	case strings.HasPrefix(s, IssuedPrefix) && len(s) > len(IssuedPrefix):
		return IssuedToken(s[len(IssuedPrefix):]), true
	case strings.HasPrefix(s, OIDCPrefix) && len(s) > len(OIDCPrefix):
		return OIDCSubject(s[len(OIDCPrefix):]), true
	case s == string(Local):
		return LocalUser, true
	case s == string(Stdio):
		return StdioClient, true
	case ValidStaticName(s) == nil:
		return StaticToken(s), true
	}
	return ID{}, false
}

// staticNameShape is the pinned shape of a static token name,
// ^[A-Za-z0-9._-]{1,64}$ (checked by hand: no package state, as the child's
// init budget asks); it has no ':' so a name can never read as "token:…" or
// "oidc:…".
func staticNameShape(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NameError says why a static token name is refused.
type NameError struct{ Reason string }

func (e *NameError) Error() string { return e.Reason }

// ValidStaticName checks a static token name: ^[A-Za-z0-9._-]{1,64}$ and
// not "local" or "stdio" (the names of the two built-in actors).
func ValidStaticName(name string) error {
	if !staticNameShape(name) {
		return &NameError{Reason: `must match ^[A-Za-z0-9._-]{1,64}$ (letters, digits, ".", "_", "-"; at most 64)`}
	}
	if name == string(Local) || name == string(Stdio) {
		return &NameError{Reason: "is reserved (the actor of a loopback-only or --stdio server)"}
	}
	return nil
}
