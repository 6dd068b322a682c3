// Package vault seals secret values (connector credentials, OAuth grants and
// client registrations, flow state) with AES-256-GCM before they reach the
// store, and opens them again. Keys come from the `vault` configuration
// (`keys: [{id, key}]`, `active`): values are sealed under the active key,
// and the key id is stored beside each value so older keys still open what
// they sealed until `connecta vault reseal` moves everything to the active
// one.
//
// The associated data of each seal is (kind, connector, name, key id), so a
// sealed value copied to another row — another connector, another name,
// another kind — fails to open instead of becoming someone else's secret.
//
// Nothing here logs, returns or formats a plaintext: errors name the value's
// owner (kind, connector, name) and the key id, never its bytes.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/store"
)

// CallerSeparator joins a stored name and the actor key of a per-caller
// value (connector `oauth.grants` / `credential.per: caller`): rows
// "grant#oidc:<sub>", "value#static:laptop". The name is part of the
// associated data, so a value sealed for one (connector, actor) does not
// open as another's. Names of connector-wide values never contain it.
const CallerSeparator = "#"

// CallerName is the stored name of who's own value called name; the zero
// actor is the connector's one value, name itself.
func CallerName(name string, who actor.ID) string {
	if who.IsZero() {
		return name
	}
	return name + CallerSeparator + who.Key()
}

// SplitCallerName reverses CallerName: the base name and the actor key
// ("" for a connector-wide value).
func SplitCallerName(stored string) (name, actorKey string) {
	name, actorKey, _ = strings.Cut(stored, CallerSeparator)
	return name, actorKey
}

// KeyBytes is the size of a vault key (AES-256).
const KeyBytes = 32

// MaxCredentialBytes bounds one connector credential value (the CLI and
// the console refuse longer ones).
const MaxCredentialBytes = 16 << 10

// Kinds of sealed value. A kind is part of the associated data.
const (
	KindCredential  = "credential"   // a connector's operator-provided credential
	KindOAuthGrant  = "oauth_grant"  // a connector's downstream OAuth grant (tokens)
	KindOAuthClient = "oauth_client" // a connector's OAuth client registration
	KindOAuthFlow   = "oauth_flow"   // pending flow data (SealFlow/OpenFlow)
)

// Sentinel errors; match with errors.Is.
var (
	// ErrNotConfigured: there is no `vault` in the configuration. Its text
	// names vault.keys, which is what the operator has to add.
	ErrNotConfigured = errors.New("the vault is not configured: add vault.keys (32-byte base64 keys) and vault.active to the configuration")
	// ErrNotFound: no value, or one that cannot be opened (unknown key id,
	// tampered or moved); the latter is also logged at ERROR.
	ErrNotFound = errors.New("no such sealed value")
)

// Key is one configured key.
type Key struct {
	ID  string
	Key []byte // KeyBytes
}

// Vault seals into and opens from a store. The zero of keys gives a vault
// that refuses every write with ErrNotConfigured.
type Vault struct {
	st     store.Secrets
	flows  store.OAuthFlows
	aeads  map[string]cipher.AEAD
	active string
	log    *slog.Logger
}

// New builds a vault over st. With no keys the vault is "not configured";
// otherwise active must name one of keys, and ids must be unique and
// non-empty.
func New(st store.Store, keys []Key, active string, log *slog.Logger) (*Vault, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &Vault{st: st, flows: st, aeads: make(map[string]cipher.AEAD, len(keys)), active: active, log: log}
	if len(keys) == 0 {
		v.active = ""
		return v, nil
	}
	for _, k := range keys {
		if k.ID == "" {
			return nil, errors.New("vault: a key has an empty id")
		}
		if _, dup := v.aeads[k.ID]; dup {
			return nil, fmt.Errorf("vault: key id %q appears twice", k.ID)
		}
		if len(k.Key) != KeyBytes {
			return nil, fmt.Errorf("vault: key %q is %d bytes, want %d", k.ID, len(k.Key), KeyBytes)
		}
		block, err := aes.NewCipher(k.Key)
		if err != nil {
			return nil, fmt.Errorf("vault: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("vault: key %q: %w", k.ID, err)
		}
		v.aeads[k.ID] = aead
	}
	if _, ok := v.aeads[active]; !ok {
		return nil, fmt.Errorf("vault: active key %q is not among vault.keys", active)
	}
	return v, nil
}

// Configured reports whether the vault has keys (writes can succeed).
func (v *Vault) Configured() bool { return v.active != "" }

// ActiveKeyID is the id new values are sealed under ("" when not configured).
func (v *Vault) ActiveKeyID() string { return v.active }

// aad is the associated data: a version tag and the four fields, each
// length-prefixed so no two tuples encode alike.
func aad(kind, connector, name, keyID string) []byte {
	b := []byte("connecta-vault-v1")
	for _, f := range []string{kind, connector, name, keyID} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// seal returns nonce‖ciphertext‖tag under the active key.
func (v *Vault) seal(kind, connector, name string, plaintext []byte) (keyID string, sealed []byte, err error) {
	if !v.Configured() {
		return "", nil, ErrNotConfigured
	}
	aead := v.aeads[v.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("vault: nonce: %w", err)
	}
	return v.active, aead.Seal(nonce, nonce, plaintext, aad(kind, connector, name, v.active)), nil
}

// open reverses seal; an unknown key id or a failed authentication is
// ErrNotFound, logged at ERROR with the owner and key id only.
func (v *Vault) open(kind, connector, name, keyID string, sealed []byte) ([]byte, error) {
	if !v.Configured() {
		return nil, ErrNotConfigured
	}
	aead, ok := v.aeads[keyID]
	if !ok {
		v.log.Error("vault: value sealed under an unknown key id reads as missing (add the key to vault.keys, or set the value again)",
			"kind", kind, "connector", connector, "name", name, "keyId", keyID)
		return nil, ErrNotFound
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		v.log.Error("vault: sealed value is truncated; it reads as missing", "kind", kind, "connector", connector, "name", name, "keyId", keyID)
		return nil, ErrNotFound
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], aad(kind, connector, name, keyID))
	if err != nil {
		v.log.Error("vault: sealed value does not authenticate (tampered, or moved from another owner); it reads as missing",
			"kind", kind, "connector", connector, "name", name, "keyId", keyID)
		return nil, ErrNotFound
	}
	return plain, nil
}

// Seal seals value under the active key and stores it as (kind, connector,
// name), replacing any previous value.
func (v *Vault) Seal(ctx context.Context, kind, connector, name string, value []byte) error {
	keyID, sealed, err := v.seal(kind, connector, name, value)
	if err != nil {
		return err
	}
	return v.st.PutSecret(ctx, store.SealedSecret{
		SecretKey: store.SecretKey{Kind: kind, Connector: connector, Name: name},
		KeyID:     keyID, Sealed: sealed,
	})
}

// Open returns the value stored as (kind, connector, name). ErrNotFound when
// there is none or it cannot be opened; a store failure matches
// store.ErrUnavailable.
func (v *Vault) Open(ctx context.Context, kind, connector, name string) ([]byte, error) {
	if !v.Configured() {
		return nil, ErrNotConfigured
	}
	s, err := v.st.GetSecret(ctx, store.SecretKey{Kind: kind, Connector: connector, Name: name})
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return v.open(kind, connector, name, s.KeyID, s.Sealed)
}

// Delete removes the value; it reports whether there was one. Deleting
// needs no key, so it works without a configured vault.
func (v *Vault) Delete(ctx context.Context, kind, connector, name string) (bool, error) {
	return v.st.DeleteSecret(ctx, store.SecretKey{Kind: kind, Connector: connector, Name: name})
}

// ResealReport counts what Reseal did.
type ResealReport struct {
	Resealed   int // moved to the active key
	Current    int // already under the active key
	Unreadable int // unknown key id or failed authentication: left as they are
	Raced      int // changed by someone else while resealing: left to them
}

// Reseal re-seals every value not under the active key. A value that cannot
// be opened is left in place (and logged); one changed concurrently is left
// to whoever changed it (compare-and-swap).
func (v *Vault) Reseal(ctx context.Context) (ResealReport, error) {
	var r ResealReport
	if !v.Configured() {
		return r, ErrNotConfigured
	}
	all, err := v.st.ListSecrets(ctx)
	if err != nil {
		return r, err
	}
	for _, s := range all {
		if s.KeyID == v.active {
			r.Current++
			continue
		}
		plain, err := v.open(s.Kind, s.Connector, s.Name, s.KeyID, s.Sealed)
		if err != nil {
			r.Unreadable++
			continue
		}
		keyID, sealed, err := v.seal(s.Kind, s.Connector, s.Name, plain)
		clear(plain)
		if err != nil {
			return r, err
		}
		ok, err := v.st.ReplaceSecret(ctx, s, store.SealedSecret{SecretKey: s.SecretKey, KeyID: keyID, Sealed: sealed})
		if err != nil {
			return r, err
		}
		if ok {
			r.Resealed++
		} else {
			r.Raced++
		}
	}
	return r, nil
}

// SealFlow stores a pending OAuth flow's data, sealed, under its state
// parameter (kind oauth_flow, the state as the name).
func (v *Vault) SealFlow(ctx context.Context, f store.OAuthFlow, data []byte) error {
	keyID, sealed, err := v.seal(KindOAuthFlow, f.Connector, f.State, data)
	if err != nil {
		return err
	}
	f.KeyID, f.Sealed = keyID, sealed
	return v.flows.PutOAuthFlow(ctx, f)
}

// TakeFlow consumes the flow for state (once, on any replica) and returns it
// with its opened data. store.ErrNotFound / store.ErrExpired pass through.
func (v *Vault) TakeFlow(ctx context.Context, state string) (store.OAuthFlow, []byte, error) {
	if !v.Configured() {
		return store.OAuthFlow{}, nil, ErrNotConfigured
	}
	f, err := v.flows.TakeOAuthFlow(ctx, state, time.Now())
	if err != nil {
		return store.OAuthFlow{}, nil, err
	}
	data, err := v.open(KindOAuthFlow, f.Connector, f.State, f.KeyID, f.Sealed)
	if err != nil {
		return store.OAuthFlow{}, nil, err
	}
	return f, data, nil
}
