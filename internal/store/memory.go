package store

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// memStore is memory:, the in-process backend: the same semantics as the SQL
// backends, lost on exit. One mutex; every operation is short.
type memStore struct {
	now func() time.Time
	m   *metrics

	mu        sync.Mutex
	results   map[string]*memResult
	order     []string // result ids, oldest first (insertion order)
	total     int64
	activity  []ActivityRecord // sorted oldest first: new events append at (or near) the end
	secrets   map[SecretKey]SealedSecret
	flows     map[string]OAuthFlow
	audit     []AuditRecord // oldest first
	tokens    []AccessToken
	sessions  map[string]OperatorSession
	catalogs  map[CatalogKey]StoredCatalog
	approvals map[approvalKey]ToolApproval
}

type memResult struct {
	owner     string
	data      []byte
	expiresAt time.Time
}

func newMemory(now func() time.Time, m *metrics) *memStore {
	return &memStore{
		now:       now,
		m:         m,
		results:   make(map[string]*memResult),
		secrets:   make(map[SecretKey]SealedSecret),
		flows:     make(map[string]OAuthFlow),
		sessions:  make(map[string]OperatorSession),
		catalogs:  make(map[CatalogKey]StoredCatalog),
		approvals: make(map[approvalKey]ToolApproval),
	}
}

// NewMemory returns a fresh memory: store (tests and the embedded demo).
func NewMemory() Store { return newMemory(time.Now, newMetrics(nil)) }

func (s *memStore) Kind() string                               { return "memory" }
func (s *memStore) Durable() bool                              { return false }
func (s *memStore) Ping(context.Context) error                 { return nil }
func (s *memStore) SchemaVersion(context.Context) (int, error) { return 0, nil }
func (s *memStore) Health() Health                             { return Health{State: StateOK} }
func (s *memStore) Close() error                               { return nil }
func (s *memStore) copyBytes(b []byte) []byte                  { return append([]byte(nil), b...) }

func (s *memStore) PutResult(ctx context.Context, id, owner string, data []byte, expiresAt time.Time, maxTotal int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	size := int64(len(data))
	if size > maxTotal {
		return ErrTooLarge
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.total+size > maxTotal && len(s.order) > 0 {
		s.dropResultLocked(s.order[0])
	}
	if old, ok := s.results[id]; ok {
		s.total -= int64(len(old.data))
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	}
	s.results[id] = &memResult{owner: owner, data: s.copyBytes(data), expiresAt: expiresAt}
	s.order = append(s.order, id)
	s.total += size
	return nil
}

func (s *memStore) dropResultLocked(id string) {
	r, ok := s.results[id]
	if !ok {
		return
	}
	delete(s.results, id)
	s.total -= int64(len(r.data))
	if i := slices.Index(s.order, id); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

func (s *memStore) ResultWindow(ctx context.Context, id, owner string, from, to int, now time.Time) ([]byte, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.results[id]
	if !ok || r.owner != owner {
		return nil, 0, ErrNotFound
	}
	if !now.Before(r.expiresAt) {
		return nil, 0, ErrExpired
	}
	total := len(r.data)
	from, to = clipRange(from, to, total)
	return s.copyBytes(r.data[from:to]), total, nil
}

// clipRange clips [from, to) to [0, total].
func clipRange(from, to, total int) (int, int) {
	from = max(0, min(from, total))
	to = max(from, min(to, total))
	return from, to
}

func (s *memStore) SweepResults(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var expired []string
	for _, id := range s.order {
		if len(expired) >= limit {
			break
		}
		if !now.Before(s.results[id].expiresAt) {
			expired = append(expired, id)
		}
	}
	for _, id := range expired {
		s.dropResultLocked(id)
	}
	return len(expired), nil
}

// newerFirst orders activity newest first, ties by id descending.
func newerFirst(a, b ActivityRecord) int {
	am, bm := a.OccurredAt.UnixMilli(), b.OccurredAt.UnixMilli()
	switch {
	case am > bm:
		return -1
	case am < bm:
		return 1
	case a.ID > b.ID:
		return -1
	case a.ID < b.ID:
		return 1
	}
	return 0
}

func (s *memStore) AppendActivity(ctx context.Context, batch []ActivityRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		r.OccurredAt = r.OccurredAt.UTC().Truncate(time.Millisecond)
		r.JSON = s.copyBytes(r.JSON)
		i, _ := slices.BinarySearchFunc(s.activity, r, olderFirst)
		s.activity = slices.Insert(s.activity, i, r)
	}
	return nil
}

func olderFirst(a, b ActivityRecord) int { return -newerFirst(a, b) }

func (s *memStore) ListActivity(ctx context.Context, q ActivityQuery) ([]ActivityRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := len(s.activity) // walk back from the newest below end
	if q.Before != nil {
		pos := ActivityRecord{ID: q.Before.ID, OccurredAt: time.UnixMilli(q.Before.OccurredAtMs)}
		end, _ = slices.BinarySearchFunc(s.activity, pos, olderFirst)
	}
	out := make([]ActivityRecord, 0, min(q.Limit, 64))
	for i := end - 1; i >= 0; i-- {
		r := s.activity[i]
		if !q.matches(r) {
			continue
		}
		if len(out) == q.Limit {
			return out, true, nil
		}
		r.JSON = s.copyBytes(r.JSON)
		out = append(out, r)
	}
	return out, false, nil
}

func (q ActivityQuery) matches(r ActivityRecord) bool {
	return (q.ConnectorID == "" || r.ConnectorID == q.ConnectorID) &&
		(q.Outcome == "" || r.Outcome == q.Outcome) &&
		(q.Actor == "" || r.Actor == q.Actor) &&
		(q.Since.IsZero() || r.OccurredAt.UnixMilli() >= q.Since.UnixMilli()) &&
		(q.Until.IsZero() || r.OccurredAt.UnixMilli() < q.Until.UnixMilli())
}

func (s *memStore) PruneActivity(ctx context.Context, maxEvents int, olderThan time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.activity)
	drop := 0
	if maxEvents > 0 && n > maxEvents {
		drop = n - maxEvents
	}
	if !olderThan.IsZero() {
		cut := olderThan.UnixMilli()
		drop = max(drop, sort.Search(n, func(i int) bool { return s.activity[i].OccurredAt.UnixMilli() >= cut }))
	}
	if drop > 0 {
		s.activity = append([]ActivityRecord(nil), s.activity[drop:]...)
	}
	return drop, nil
}

func (s *memStore) PutSecret(ctx context.Context, v SealedSecret) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Sealed = s.copyBytes(v.Sealed)
	if v.UpdatedAt.IsZero() {
		v.UpdatedAt = s.now().UTC()
	}
	s.secrets[v.SecretKey] = v
	return nil
}

func (s *memStore) GetSecret(ctx context.Context, k SecretKey) (SealedSecret, error) {
	if err := ctx.Err(); err != nil {
		return SealedSecret{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.secrets[k]
	if !ok {
		return SealedSecret{}, ErrNotFound
	}
	v.Sealed = s.copyBytes(v.Sealed)
	return v, nil
}

func (s *memStore) DeleteSecret(ctx context.Context, k SecretKey) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.secrets[k]
	delete(s.secrets, k)
	return ok, nil
}

func (s *memStore) ListSecrets(ctx context.Context) ([]SealedSecret, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SealedSecret, 0, len(s.secrets))
	for _, v := range s.secrets {
		v.Sealed = s.copyBytes(v.Sealed)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b SealedSecret) int { return compareKeys(a.SecretKey, b.SecretKey) })
	return out, nil
}

func compareKeys(a, b SecretKey) int {
	for _, c := range [][2]string{{a.Kind, b.Kind}, {a.Connector, b.Connector}, {a.Name, b.Name}} {
		if c[0] < c[1] {
			return -1
		}
		if c[0] > c[1] {
			return 1
		}
	}
	return 0
}

func (s *memStore) ReplaceSecret(ctx context.Context, prev, next SealedSecret) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.secrets[prev.SecretKey]
	if !ok || cur.KeyID != prev.KeyID || string(cur.Sealed) != string(prev.Sealed) {
		return false, nil
	}
	next.SecretKey = prev.SecretKey
	next.Sealed = s.copyBytes(next.Sealed)
	if next.UpdatedAt.IsZero() {
		next.UpdatedAt = s.now().UTC()
	}
	s.secrets[prev.SecretKey] = next
	return true, nil
}

func (s *memStore) PutOAuthFlow(ctx context.Context, f OAuthFlow) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Bounded like a sweep: drop expired flows as new ones arrive.
	now := s.now()
	for k, v := range s.flows {
		if !now.Before(v.ExpiresAt) {
			delete(s.flows, k)
		}
	}
	f.Sealed = s.copyBytes(f.Sealed)
	s.flows[f.State] = f
	return nil
}

func (s *memStore) TakeOAuthFlow(ctx context.Context, state string, now time.Time) (OAuthFlow, error) {
	if err := ctx.Err(); err != nil {
		return OAuthFlow{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flows[state]
	if !ok {
		return OAuthFlow{}, ErrNotFound
	}
	delete(s.flows, state)
	if !now.Before(f.ExpiresAt) {
		return OAuthFlow{}, ErrExpired
	}
	return f, nil
}

func (s *memStore) AppendAudit(ctx context.Context, r AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.OccurredAt.IsZero() {
		r.OccurredAt = s.now()
	}
	if r.ID == "" {
		r.ID = NewID()
	}
	r.OccurredAt = r.OccurredAt.UTC().Truncate(time.Millisecond)
	s.audit = append(s.audit, r)
	return nil
}

func (s *memStore) ListAudit(ctx context.Context, limit int) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AuditRecord, 0, min(limit, len(s.audit)))
	for i := len(s.audit) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, s.audit[i])
	}
	return out, nil
}
