// Package oauthstore keeps downstream OAuth state (package oauth) in
// connecta's store, sealed by its vault: grants, client registrations and
// pending flows as vault values of kinds oauth_grant, oauth_client and
// oauth_flow, with PostgreSQL advisory locks so that one replica at a time
// refreshes a grant. It is a separate package so that the gateway, which
// every sandbox child links, does not link the store's drivers.
package oauthstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// VaultStore is the Store over connecta's store and vault: every value is
// sealed by the vault (kinds oauth_grant, oauth_client, oauth_flow, with
// the connector and name as associated data) into the store's secrets, and
// locks come from a Locker (PostgreSQL advisory locks for postgres://, a
// mutex in this process otherwise).
type VaultStore struct {
	v       *vault.Vault
	durable bool
	locks   oauth.Locker
}

// NewVaultStore builds the store; locks nil means in-process locks.
func NewVaultStore(v *vault.Vault, st store.Store, locks oauth.Locker) *VaultStore {
	if locks == nil {
		locks = oauth.NewProcessLocks()
	}
	return &VaultStore{v: v, durable: st.Durable(), locks: locks}
}

func (s *VaultStore) Seal(ctx context.Context, connector, name string, value []byte) error {
	return vaultErr(s.v.Seal(ctx, kindOf(name), connector, name, value))
}

func (s *VaultStore) Open(ctx context.Context, connector, name string) ([]byte, error) {
	b, err := s.v.Open(ctx, kindOf(name), connector, name)
	return b, vaultErr(err)
}

func (s *VaultStore) Delete(ctx context.Context, connector, name string) (bool, error) {
	ok, err := s.v.Delete(ctx, kindOf(name), connector, name)
	return ok, vaultErr(err)
}

func (s *VaultStore) Lock(ctx context.Context, connector, name string) (func(), error) {
	return s.locks.Lock(ctx, "connecta/oauth/"+connector+"/"+name)
}

func (s *VaultStore) Durable() bool { return s.durable }

// kindOf is the vault kind of a stored name; a per-caller value's name
// carries its actor ("grant#oidc:<sub>") and has its base name's kind.
func kindOf(name string) string {
	base, _ := vault.SplitCallerName(name)
	switch base {
	case "grant":
		return vault.KindOAuthGrant
	case "client":
		return vault.KindOAuthClient
	default:
		return vault.KindOAuthFlow
	}
}

func vaultErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, vault.ErrNotConfigured):
		return oauth.ErrVaultNotConfigured
	case errors.Is(err, vault.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return oauth.ErrNotFound
	}
	return err
}

// driverBad makes database/sql discard a connection instead of pooling it
// (one that may still hold an advisory lock).
func driverBad(any) error { return driver.ErrBadConn }

// PostgresLocks are session advisory locks on one database, so that one
// replica at a time refreshes a grant. Each held lock pins a connection.
type PostgresLocks struct {
	db *sql.DB
}

// NewPostgresLocks uses db (a pgx database/sql handle on the store's
// database) for advisory locks.
func NewPostgresLocks(db *sql.DB) *PostgresLocks { return &PostgresLocks{db: db} }

func (p *PostgresLocks) Lock(ctx context.Context, key string) (func(), error) {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
		// The connection may still hold a half-acquired lock: discard it.
		_ = conn.Raw(driverBad)
		conn.Close()
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
				_ = conn.Raw(driverBad)
			}
			conn.Close()
		})
	}, nil
}
