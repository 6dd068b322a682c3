// Package accesstoken manages operator-issued access tokens: named bearer
// tokens an operator creates, renames and revokes without editing the
// configuration. The secret (`cta_` + 32 random bytes, unpadded base64url)
// is returned once by Create; the store keeps only its SHA-256 digest and
// non-secret metadata, so a lookup by digest is the whole check and a
// revocation is seen by every replica sharing the store at its next request.
//
// The same Manager serves the `connecta token` CLI, the console and /mcp
// authentication. Every create, rename and revoke appends an audit record.
// Issued tokens are never operators.
package accesstoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/store"
)

// Format of a secret and bounds of a name.
const (
	SecretPrefix     = "cta_"
	secretBytes      = 32
	MaxNameRunes     = 80
	ActorPrefix      = actor.IssuedPrefix // the activity actor of an issued token is "token:<id>"
	DefaultMaxActive = 100
)

// Errors a caller branches on (match with errors.Is). A store outage is an
// error matching store.ErrUnavailable.
var (
	// ErrNotFound: no token has that id.
	ErrNotFound = errors.New("no access token has that id")
	// ErrInvalidName: the name is empty, too long or has control characters.
	// A refusal for markup wraps it and says so.
	ErrInvalidName = errors.New("an access token name must be 1 to 80 characters without control characters") // 80 = MaxNameRunes
	// ErrLimit: accessTokens.maxActive unrevoked tokens exist already.
	ErrLimit = errors.New("the maximum number of active access tokens is reached")
	// ErrUnknown: the presented secret is malformed or matches no token.
	ErrUnknown = errors.New("unknown access token")
	// ErrRevoked: the presented secret belongs to a revoked token.
	ErrRevoked = errors.New("the access token was revoked")
)

// Token is an issued token's non-secret metadata.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
	// Connectors narrows the token at creation: it reaches only these
	// connectors, intersected with the access rules. nil = not narrowed.
	Connectors []string `json:"connectors,omitempty"`
}

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// Actor is the activity actor of a caller using this token.
func (t Token) Actor() string { return t.Who().String() }

// Who is the typed actor of a caller using this token.
func (t Token) Who() actor.ID { return actor.IssuedToken(t.ID) }

// Options configure a Manager. Store is required.
type Options struct {
	Store store.Store
	// MaxActive bounds the unrevoked tokens (accessTokens.maxActive);
	// 0 takes DefaultMaxActive.
	MaxActive int
	Logger    *slog.Logger
	Now       func() time.Time // nil: time.Now
}

// Manager creates, lists, renames, revokes and authenticates issued tokens.
// Safe for concurrent use.
type Manager struct {
	st        store.Store
	maxActive int
	log       *slog.Logger
	now       func() time.Time
}

// New builds a Manager.
func New(o Options) (*Manager, error) {
	if o.Store == nil {
		return nil, errors.New("accesstoken: Options.Store is required")
	}
	m := &Manager{st: o.Store, maxActive: o.MaxActive, log: o.Logger, now: o.Now}
	if m.maxActive <= 0 {
		m.maxActive = DefaultMaxActive
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// MaxActive is the bound on unrevoked tokens.
func (m *Manager) MaxActive() int { return m.maxActive }

// Create issues a token named name on behalf of by (an actor, e.g.
// "oidc:<sub>" or "cli:<user>"). It returns the secret — shown once, never
// stored — and the token's metadata. The active bound is checked against
// the store's list; two replicas creating at the same instant may together
// exceed it by one each.
func (m *Manager) Create(ctx context.Context, name, by string) (secret string, t Token, err error) {
	return m.CreateNarrowed(ctx, name, by, nil)
}

// ErrInvalidConnectors: a narrowing list is empty or repeats an id.
var ErrInvalidConnectors = errors.New("a token's connector list must name at least one connector, each once")

// CreateNarrowed is Create for a token that reaches only connectors
// (intersected with the access rules); nil is Create. The caller checks the
// ids against the configuration; the list is stored with the token.
func (m *Manager) CreateNarrowed(ctx context.Context, name, by string, connectors []string) (secret string, t Token, err error) {
	name, err = NormalizeName(name)
	if err != nil {
		return "", Token{}, err
	}
	if connectors != nil {
		seen := map[string]bool{}
		for _, id := range connectors {
			if id == "" || seen[id] {
				return "", Token{}, ErrInvalidConnectors
			}
			seen[id] = true
		}
		if len(connectors) == 0 {
			return "", Token{}, ErrInvalidConnectors
		}
		connectors = slices.Clone(connectors)
	}
	all, err := m.st.ListTokens(ctx)
	if err != nil {
		return "", Token{}, fmt.Errorf("list access tokens: %w", err)
	}
	active := 0
	for _, x := range all {
		if x.RevokedAt.IsZero() {
			active++
		}
	}
	if active >= m.maxActive {
		return "", Token{}, fmt.Errorf("%w (%d, accessTokens.maxActive): revoke one first", ErrLimit, m.maxActive)
	}
	var raw [secretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, err
	}
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	rec := store.AccessToken{ID: newID(), Digest: Digest(secret), Name: name, CreatedBy: by, CreatedAt: m.now().UTC().Truncate(time.Millisecond), Connectors: connectors}
	if err := m.st.PutToken(ctx, rec); err != nil {
		return "", Token{}, fmt.Errorf("store access token: %w", err)
	}
	t = fromRecord(rec)
	detail := fmt.Sprintf("name %q", name)
	if connectors != nil {
		detail += fmt.Sprintf(", connectors %s", strings.Join(connectors, ","))
	}
	m.audit(ctx, by, "token.create", t.ID, detail)
	return secret, t, nil
}

// List returns every token (revoked ones too), newest first.
func (m *Manager) List(ctx context.Context) ([]Token, error) {
	all, err := m.st.ListTokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("list access tokens: %w", err)
	}
	out := make([]Token, 0, len(all))
	for _, r := range all {
		out = append(out, fromRecord(r))
	}
	return out, nil
}

// Get returns one token by id (ErrNotFound when unknown).
func (m *Manager) Get(ctx context.Context, id string) (Token, error) {
	all, err := m.List(ctx)
	if err != nil {
		return Token{}, err
	}
	for _, t := range all {
		if t.ID == id {
			return t, nil
		}
	}
	return Token{}, ErrNotFound
}

// Rename changes a token's name (revoked tokens too: activity shows the
// current name). The id, and so the recorded actor, never changes.
func (m *Manager) Rename(ctx context.Context, id, name, by string) (Token, error) {
	name, err := NormalizeName(name)
	if err != nil {
		return Token{}, err
	}
	ok, err := m.st.RenameToken(ctx, id, name)
	if err != nil {
		return Token{}, fmt.Errorf("rename access token: %w", err)
	}
	if !ok {
		return Token{}, ErrNotFound
	}
	m.audit(ctx, by, "token.rename", id, fmt.Sprintf("name %q", name))
	return m.Get(ctx, id)
}

// Revoke revokes a token; revoking a revoked token changes nothing and is
// not an error. The next request presenting it, on any replica, is refused.
func (m *Manager) Revoke(ctx context.Context, id, by string) (Token, error) {
	t, err := m.Get(ctx, id)
	if err != nil {
		return Token{}, err
	}
	if t.Revoked() {
		return t, nil
	}
	if _, err := m.st.RevokeToken(ctx, id, by, m.now()); err != nil {
		return Token{}, fmt.Errorf("revoke access token: %w", err)
	}
	m.audit(ctx, by, "token.revoke", id, fmt.Sprintf("name %q", t.Name))
	return m.Get(ctx, id)
}

// Authenticate finds the token a presented secret belongs to: ErrUnknown
// for a malformed or unknown secret (no store read for a malformed one),
// ErrRevoked for a revoked token, a store.ErrUnavailable error when the
// store is down.
func (m *Manager) Authenticate(ctx context.Context, secret string) (Token, error) {
	if !LooksLikeSecret(secret) {
		return Token{}, ErrUnknown
	}
	rec, err := m.st.TokenByDigest(ctx, Digest(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Token{}, ErrUnknown
	case err != nil:
		return Token{}, err
	case !rec.RevokedAt.IsZero():
		return Token{}, ErrRevoked
	case !rec.ExpiresAt.IsZero() && !m.now().Before(rec.ExpiresAt):
		return Token{}, ErrRevoked
	}
	return fromRecord(rec), nil
}

// Names maps each token's actor ("token:<id>") to its current name, for
// showing activity.
func (m *Manager) Names(ctx context.Context) (map[string]string, error) {
	all, err := m.st.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(all))
	for _, r := range all {
		out[ActorPrefix+r.ID] = r.Name
	}
	return out, nil
}

// secretLen is len("cta_") + the unpadded base64url length of 32 bytes.
const secretLen = len(SecretPrefix) + 43

// LooksLikeSecret reports whether s has the shape of an issued secret
// (^cta_[A-Za-z0-9_-]{43}$); anything else is refused without a store read.
func LooksLikeSecret(s string) bool {
	if len(s) != secretLen || !strings.HasPrefix(s, SecretPrefix) {
		return false
	}
	for _, c := range []byte(s[len(SecretPrefix):]) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Digest is the stored form of a secret: hex SHA-256 of the whole string.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NormalizeName collapses runs of whitespace, trims, and checks the bounds.
// Markup (< or >) is refused: a name is shown in the console and in logs,
// and although every page escapes it, a name that looks like markup is a
// mistake or a probe.
func NormalizeName(name string) (string, error) {
	name = strings.Join(strings.Fields(name), " ")
	if name == "" || utf8.RuneCountInString(name) > MaxNameRunes || !utf8.ValidString(name) ||
		strings.ContainsFunc(name, unicode.IsControl) {
		return "", ErrInvalidName
	}
	if strings.ContainsAny(name, "<>") {
		// Built here, not at package init: the sandbox child links this
		// package and must do no init work (TestChildInitBudget).
		return "", fmt.Errorf("%w: this one contains < or >, which are refused as markup", ErrInvalidName)
	}
	return name, nil
}

func (m *Manager) audit(ctx context.Context, by, action, id, detail string) {
	r := store.AuditRecord{Actor: by, Action: action, Target: ActorPrefix + id, Detail: detail, OccurredAt: m.now()}
	// The change is made; a failed audit write is logged, never hidden.
	if err := m.st.AppendAudit(context.WithoutCancel(ctx), r); err != nil {
		m.log.ErrorContext(ctx, "audit record not written", "action", action, "target", r.Target, "actor", by, "error", err.Error())
	}
}

func fromRecord(r store.AccessToken) Token {
	return Token{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, RevokedAt: r.RevokedAt, RevokedBy: r.RevokedBy, Connectors: r.Connectors}
}

// newID is a random UUID (version 4): the token's immutable id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
