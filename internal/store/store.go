// Package store is connecta's state that outlives a request: the get_result
// stash, the activity history, sealed vault values and the rows the OAuth,
// token and console features keep. One interface, three backends chosen by
// `store.url`:
//
//   - memory: — in this process only; the embedded demo and tests.
//   - sqlite:PATH — one machine; pure Go (ncruces/go-sqlite3, wasm2go), so the
//     binary stays static.
//   - postgres://… — several replicas on one database (jackc/pgx/v5).
//
// The SQL backends share one implementation (sqlStore) and one set of
// embedded, versioned, additive migrations (migrations/*.sql), applied at
// Open. Every method takes a context; every failure of the database itself is
// an *Error that matches ErrUnavailable, so a caller can answer `unavailable`
// with details.component "store" without knowing the backend.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Store is the whole seam. Implementations are safe for concurrent use,
// including by several processes when the backend is shared.
type Store interface {
	Stash
	Activity
	Secrets
	OAuthFlows
	Audit
	Tokens
	Sessions
	Catalogs

	// Ping checks that the backend answers (a trivial query).
	Ping(ctx context.Context) error
	// Kind is "memory", "sqlite" or "postgres".
	Kind() string
	// Durable reports whether state survives the process (false for memory:).
	Durable() bool
	// SchemaVersion is the highest migration applied (0 for memory:).
	SchemaVersion(ctx context.Context) (int, error)
	// Health is the backend's state as last observed: "failed" after an
	// operation failed in the backend, "ok" again after one succeeded.
	Health() Health
	Close() error
}

// Health states.
const (
	StateOK     = "ok"
	StateFailed = "failed"
)

// Health is what /health shows under `store`.
type Health struct {
	State         string `json:"state"`
	LastErrorCode string `json:"lastErrorCode,omitempty"`
}

// Stash keeps get_result texts. The byte bound and the TTL are enforced here:
// PutResult evicts the oldest rows until the new one fits, and a row at or
// past its expiry reads as expired until SweepResults removes it.
type Stash interface {
	// PutResult stores data under id for owner (an actor key, package
	// actor) until expiresAt, keeping the total of all stored results at or
	// under maxTotalBytes (oldest evicted first). A single value larger than
	// maxTotalBytes is ErrTooLarge.
	PutResult(ctx context.Context, id, owner string, data []byte, expiresAt time.Time, maxTotalBytes int64) error
	// ResultWindow returns the bytes [from, to) of the stored text (clipped
	// to its length) and its total length. ErrNotFound when unknown or
	// owned by another actor than owner (indistinguishable, expired or
	// not), ErrExpired when at or past its expiry (now).
	ResultWindow(ctx context.Context, id, owner string, from, to int, now time.Time) (window []byte, total int, err error)
	// SweepResults deletes at most limit results expired at now and reports
	// how many it deleted.
	SweepResults(ctx context.Context, now time.Time, limit int) (int, error)
}

// ActivityRecord is one stored activity event: the indexed columns and the
// event's JSON (payload-free by construction in package activity).
type ActivityRecord struct {
	ID          string
	OccurredAt  time.Time // millisecond precision
	ConnectorID string
	Outcome     string
	Actor       string
	JSON        []byte
}

// ActivityQuery selects events newest first. Zero fields do not filter.
type ActivityQuery struct {
	Limit       int     // ≥ 1
	Before      *Cursor // strictly older than this position
	ConnectorID string
	Outcome     string
	Actor       string
	Since       time.Time // occurredAt ≥ Since
	Until       time.Time // occurredAt < Until
}

// Cursor is a position in newest-first order: (occurredAt, id) descending.
type Cursor struct {
	OccurredAtMs int64
	ID           string
}

// Activity keeps the history.
type Activity interface {
	// AppendActivity stores a batch in one transaction.
	AppendActivity(ctx context.Context, batch []ActivityRecord) error
	// ListActivity returns up to q.Limit events newest first (ties by id,
	// descending) and whether more match past the last one.
	ListActivity(ctx context.Context, q ActivityQuery) (events []ActivityRecord, more bool, err error)
	// PruneActivity deletes events older than olderThan (when non-zero) and
	// all but the newest maxEvents (when > 0); it reports how many it deleted.
	PruneActivity(ctx context.Context, maxEvents int, olderThan time.Time) (int, error)
}

// SecretKey names one sealed value: its kind (what it is, e.g. "credential",
// "oauth_grant"), the connector it belongs to and its name there.
type SecretKey struct {
	Kind      string
	Connector string
	Name      string
}

// SealedSecret is a stored, already sealed value and the key id it is
// sealed under. The store never sees plaintext.
type SealedSecret struct {
	SecretKey
	KeyID     string
	Sealed    []byte
	UpdatedAt time.Time
}

// Secrets keeps sealed values (package vault seals and opens them).
type Secrets interface {
	PutSecret(ctx context.Context, s SealedSecret) error
	// GetSecret is ErrNotFound when absent.
	GetSecret(ctx context.Context, k SecretKey) (SealedSecret, error)
	// DeleteSecret reports whether a value was deleted.
	DeleteSecret(ctx context.Context, k SecretKey) (bool, error)
	// ListSecrets returns every sealed value (for reseal), ordered by key.
	ListSecrets(ctx context.Context) ([]SealedSecret, error)
	// ReplaceSecret writes next only if the stored value is still sealed
	// under prevKeyID with the same bytes (compare-and-swap for reseal);
	// it reports whether it wrote.
	ReplaceSecret(ctx context.Context, prev SealedSecret, next SealedSecret) (bool, error)
}

// OAuthFlow is a pending downstream authorization: the state parameter, the
// connector and the sealed flow data (PKCE verifier, redirect), until
// ExpiresAt. A callback may land on any replica, so it lives in the store.
type OAuthFlow struct {
	State     string
	Connector string
	KeyID     string
	Sealed    []byte
	ExpiresAt time.Time
}

// OAuthFlows keeps pending flows; TakeOAuthFlow consumes one exactly once.
type OAuthFlows interface {
	PutOAuthFlow(ctx context.Context, f OAuthFlow) error
	// TakeOAuthFlow deletes and returns the flow for state; ErrNotFound when
	// absent or already taken, ErrExpired when past its expiry (and deletes it).
	TakeOAuthFlow(ctx context.Context, state string, now time.Time) (OAuthFlow, error)
}

// AuditRecord is one operator-visible change (a grant, a token, a
// credential): who did what to which target. Never a secret value.
type AuditRecord struct {
	ID         string
	OccurredAt time.Time
	Actor      string
	Action     string // e.g. "credential.set", "oauth.grant"
	Target     string // e.g. "connector:tracker"
	Detail     string // short free text, never a secret
}

// Audit is the append-only audit trail.
type Audit interface {
	AppendAudit(ctx context.Context, r AuditRecord) error
	// ListAudit returns up to limit records newest first.
	ListAudit(ctx context.Context, limit int) ([]AuditRecord, error)
}

// AccessToken is an issued token's record. The secret itself is never
// stored: Digest is what a presented token is looked up by.
type AccessToken struct {
	ID        string
	Digest    string
	Name      string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time // zero = does not expire
	RevokedAt time.Time // zero = not revoked
	RevokedBy string
	// Connectors narrows the token to these connector ids (intersected
	// with the access rules); nil = not narrowed.
	Connectors []string
}

// Tokens keeps issued access tokens.
type Tokens interface {
	// PutToken inserts a new token; a duplicate id or digest is ErrConflict.
	PutToken(ctx context.Context, t AccessToken) error
	// TokenByDigest is ErrNotFound when no token has that digest (revoked
	// and expired ones are returned: the caller decides).
	TokenByDigest(ctx context.Context, digest string) (AccessToken, error)
	// ListTokens returns every token, newest first.
	ListTokens(ctx context.Context) ([]AccessToken, error)
	// RevokeToken marks a token revoked; it reports whether one was (and
	// was not already revoked).
	RevokeToken(ctx context.Context, id, by string, at time.Time) (bool, error)
	// RenameToken sets a token's name (revoked ones too); it reports
	// whether a token with that id exists.
	RenameToken(ctx context.Context, id, name string) (bool, error)
}

// OperatorSession is a console session, found by the digest of its cookie.
type OperatorSession struct {
	Digest     string
	Subject    string
	Email      string
	CSRFDigest string
	// CallerOnly: an admitted caller who is not an operator, signed in for
	// /me (their own connections); operator pages refuse the session.
	CallerOnly bool
	// Claims is the sign-in access token's claims as JSON ("" when unknown).
	Claims    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Sessions keeps console sessions (a sign-in may land on any replica).
type Sessions interface {
	PutSession(ctx context.Context, s OperatorSession) error
	// GetSession is ErrNotFound when absent, ErrExpired at or past expiry.
	GetSession(ctx context.Context, digest string, now time.Time) (OperatorSession, error)
	DeleteSession(ctx context.Context, digest string) (bool, error)
}

// Sentinel errors; match with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExpired  = errors.New("expired")
	ErrTooLarge = errors.New("larger than the store's bound")
	// ErrConflict: a row with that key already exists.
	ErrConflict = errors.New("already exists")
	// ErrUnavailable matches every failure of the backend itself (down,
	// unreachable, timed out, refused): the caller answers `unavailable`.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSchemaTooNew refuses to run on a schema a newer binary migrated.
	ErrSchemaTooNew = errors.New("schema newer than this binary")
)

// Error is a backend failure of one operation. It matches ErrUnavailable and
// unwraps to the driver's error. Its text names the operation and the
// backend, never a value.
type Error struct {
	Op   string // e.g. "put_result"
	Kind string // backend
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("store %s (%s): %v", e.Op, e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrUnavailable.
func (e *Error) Is(target error) bool { return target == ErrUnavailable }

// Code is the short code /health shows as lastErrorCode: "timeout" for a
// deadline, else "unavailable".
func (e *Error) Code() string {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "unavailable"
}

// NewID returns a random 128-bit id in hex, for rows whose caller gave none.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
