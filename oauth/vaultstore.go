package oauth

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/connecta-dev/connecta/store"
	"github.com/connecta-dev/connecta/vault"
)

// ErrVaultNotConfigured: grants and flows cannot be kept because there is
// no vault; its text names the configuration to add.
var ErrVaultNotConfigured = errors.New("connecta cannot keep OAuth grants: the vault is not configured (add vault.keys and vault.active)")

// Locker holds a named lock, across replicas when the implementation says so.
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// VaultStore is the Store over connecta's store and vault: every value is
// sealed by the vault (kinds oauth_grant, oauth_client, oauth_flow, with
// the connector and name as associated data) into the store's secrets, and
// locks come from a Locker (PostgreSQL advisory locks for postgres://, a
// mutex in this process otherwise).
type VaultStore struct {
	v       *vault.Vault
	durable bool
	locks   Locker
}

// NewVaultStore builds the store; locks nil means in-process locks.
func NewVaultStore(v *vault.Vault, st store.Store, locks Locker) *VaultStore {
	if locks == nil {
		locks = newProcessLocks()
	}
	return &VaultStore{v: v, durable: st.Durable(), locks: locks}
}

func kindOf(name string) string {
	switch name {
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
		return ErrVaultNotConfigured
	case errors.Is(err, vault.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	}
	return err
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

// processLocks are named mutexes that honour ctx.
type processLocks struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func newProcessLocks() *processLocks { return &processLocks{locks: map[string]chan struct{}{}} }

func (p *processLocks) Lock(ctx context.Context, key string) (func(), error) {
	p.mu.Lock()
	ch := p.locks[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		p.locks[key] = ch
	}
	p.mu.Unlock()
	select {
	case ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// driverBad makes database/sql discard a connection instead of pooling it
// (one that may still hold an advisory lock).
var driverBad = driver.ErrBadConn

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
		_ = conn.Raw(func(any) error { return driverBad })
		conn.Close()
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
				_ = conn.Raw(func(any) error { return driverBad })
			}
			conn.Close()
		})
	}, nil
}
