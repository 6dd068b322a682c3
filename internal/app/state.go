package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/stash"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"

	"go.opentelemetry.io/otel/trace"
)

// State is what outlives a request: the store, the vault over it, the
// get_result stash in it, and the maintenance job that sweeps it.
type State struct {
	store store.Store
	vault *vault.Vault
	stash *stash.Stash
	// shared is the cross-replica in-flight registry (PostgreSQL); nil
	// leaves cancellation to this process.
	shared *store.Inflight
	// budgets are the downstream call budgets all replicas count against
	// (PostgreSQL); nil keeps them in this process.
	budgets *store.CallBudgets
	stop    context.CancelFunc
	done    chan struct{}
}

// OpenState opens store.url (retrying an unreachable PostgreSQL, migrating)
// and starts the one maintenance job; close stops it and closes the store.
func OpenState(ctx context.Context, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, tracer trace.TracerProvider) (*State, error) {
	if !cfg.Store.Given {
		log.Warn("no store configured: using memory:, so get_result handles, activity and vault values are lost on restart and not shared between replicas; set store.url to sqlite:PATH or postgres://…")
	}
	st, err := store.Open(ctx, cfg.Store.URL.Reveal(), store.Options{Logger: log.With("component", "store"), Registerer: reg, Tracer: tracer})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	v, err := NewVault(cfg, st, log)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	s := &State{
		store: st,
		vault: v,
		stash: stash.New(st, stash.Options{MaxBytes: cfg.Results.StashMaxBytes, TTL: cfg.Results.StashTTL}),
		done:  make(chan struct{}),
	}
	if sh, err := store.NewInflight(st, log.With("component", "inflight")); err == nil {
		s.shared = sh
	}
	if b, err := store.NewCallBudgets(st); err == nil {
		s.budgets = b
	}
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go func() {
		defer close(s.done)
		store.Maintain(mctx, st, store.MaintainOptions{
			MaxEvents: cfg.Activity.MaxEvents, MaxAge: cfg.Activity.MaxAge, Logger: log.With("component", "store"),
		})
	}()
	return s, nil
}

// NewVault is the vault over st with the configured keys (vault.keys,
// vault.active); serve and the vault commands share it.
func NewVault(cfg *config.Config, st store.Store, log *slog.Logger) (*vault.Vault, error) {
	keys := make([]vault.Key, 0, len(cfg.Vault.Keys))
	for _, k := range cfg.Vault.Keys {
		keys = append(keys, vault.Key{ID: k.ID, Key: []byte(k.Key.Reveal())})
	}
	v, err := vault.New(st, keys, cfg.Vault.Active, log.With("component", "vault"))
	if err != nil {
		return nil, err
	}
	return v, nil
}

// health is the store's /health entry, from state the store already has.
func (s *State) health() server.StoreState {
	h := s.store.Health()
	return server.StoreState{State: h.State, LastErrorCode: h.LastErrorCode}
}

// Close stops the maintenance job and closes the store. Nil-safe.
func (s *State) Close() {
	if s == nil {
		return
	}
	s.stop()
	<-s.done
	if s.shared != nil {
		_ = s.shared.Close()
	}
	_ = s.store.Close()
}

// inflight is the server's cancellation registry: across replicas on
// PostgreSQL, nil (the server's own, one process) otherwise.
func (s *State) inflight() server.Inflight {
	if s.shared == nil {
		return nil
	}
	return sharedInflight{s.shared}
}

type sharedInflight struct{ f *store.Inflight }

func (i sharedInflight) Register(actor, requestID string, cancel context.CancelFunc) func() {
	return i.f.Register(actor, requestID, cancel)
}

func (i sharedInflight) Cancel(actor, requestID string) server.CancelResult {
	return server.CancelResult(i.f.Cancel(actor, requestID))
}

// callBudgets is the gateway's SharedBudgets: nil (budgets in this
// process) unless the store is shared.
func (s *State) callBudgets() gateway.SharedBudgets {
	if s.budgets == nil {
		return nil
	}
	return s.budgets
}

// Store is the opened store.
func (s *State) Store() store.Store { return s.store }
