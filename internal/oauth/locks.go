package oauth

import (
	"context"
	"errors"
	"sync"
)

// ErrVaultNotConfigured: grants and flows cannot be kept because there is
// no vault; its text names the configuration to add.
var ErrVaultNotConfigured = errors.New("connecta cannot keep OAuth grants: the vault is not configured (add vault.keys and vault.active)")

// Locker holds a named lock, across replicas when the implementation says so.
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// NewProcessLocks returns named locks held within this process.
func NewProcessLocks() Locker { return newProcessLocks() }

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
