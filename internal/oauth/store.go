package oauth

import (
	"context"
	"errors"
	"sync"
)

// Store is all this package needs from durable state: values sealed by
// (connector, name), a delete that says whether the value existed (so a
// flow's state is single use across replicas), and a lock per (connector,
// name) that holds across replicas (so one refresh happens at a time).
//
// Names used: "grant" (the tokens), "flow" (the one pending authorization:
// state hash, PKCE verifier, endpoints), "client" (a dynamic registration,
// reused by later flows). Values are JSON; they carry tokens, so an
// implementation must seal them (AES-GCM in the vault) and never log them.
type Store interface {
	Seal(ctx context.Context, connector, name string, value []byte) error
	// Open returns ErrNotFound when there is no value.
	Open(ctx context.Context, connector, name string) ([]byte, error)
	Delete(ctx context.Context, connector, name string) (existed bool, err error)
	// Lock blocks until the lock is held or ctx ends.
	Lock(ctx context.Context, connector, name string) (unlock func(), err error)
	// Durable reports whether values outlive the process (false for
	// memory:, where `connecta oauth revoke` has nothing to act on).
	Durable() bool
}

// ErrNotFound is Store.Open's answer for a value that is not there.
var ErrNotFound = errors.New("oauth: no such value")

// MemoryStore is a Store held in this process (the memory: store): flows and
// grants last until it exits, and locks are in-process.
type MemoryStore struct {
	mu     sync.Mutex
	values map[[2]string][]byte
	locks  *processLocks
}

// NewMemoryStore returns an empty in-process store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{values: map[[2]string][]byte{}, locks: newProcessLocks()}
}

func (s *MemoryStore) Seal(_ context.Context, connector, name string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[[2]string{connector, name}] = append([]byte(nil), value...)
	return nil
}

func (s *MemoryStore) Open(_ context.Context, connector, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[[2]string{connector, name}]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

func (s *MemoryStore) Delete(_ context.Context, connector, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{connector, name}
	_, ok := s.values[k]
	delete(s.values, k)
	return ok, nil
}

func (s *MemoryStore) Lock(ctx context.Context, connector, name string) (func(), error) {
	return s.locks.Lock(ctx, connector+"/"+name)
}

func (s *MemoryStore) Durable() bool { return false }
