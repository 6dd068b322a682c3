// Package storetest is the conformance suite every store backend passes:
// memory:, sqlite: (a real file) and postgres:// (a real server). It proves
// the semantics callers rely on — stash paging, expiry and byte bound,
// activity order, filters, cursors and retention, vault seal/open/rotate,
// OAuth flows taken once, concurrent writers — independent of the backend.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
)

// Backend opens fresh stores for the suite.
type Backend struct {
	// Open returns a fresh, empty store, closed by the test's cleanup.
	Open func(t *testing.T) store.Store
	// Twin opens a second handle on the same data as s (another process's
	// view), closed by the cleanup; nil when the backend cannot (memory:).
	Twin func(t *testing.T, s store.Store) store.Store
}

// Run runs the whole suite.
func Run(t *testing.T, b Backend) {
	t.Run("StashPagesWindows", func(t *testing.T) { stashWindows(t, b) })
	t.Run("StashExpiryAndSweep", func(t *testing.T) { stashExpiry(t, b) })
	t.Run("StashByteBoundEvictsOldest", func(t *testing.T) { stashBound(t, b) })
	t.Run("StashEntryBelongsToItsActor", func(t *testing.T) { stashOwner(t, b) })
	t.Run("TokenNarrowingIsKept", func(t *testing.T) { tokenNarrowing(t, b) })
	t.Run("CatalogCompareAndSwap", func(t *testing.T) { catalogs(t, b) })
	t.Run("CatalogApprovalsOverwriteOrKeep", func(t *testing.T) { approvals(t, b) })
	t.Run("CatalogTenThousandTools", func(t *testing.T) { bigCatalog(t, b) })
	t.Run("ActivityNewestFirstWithCursor", func(t *testing.T) { activityPaging(t, b) })
	t.Run("ActivityFilters", func(t *testing.T) { activityFilters(t, b) })
	t.Run("ActivityRetention", func(t *testing.T) { activityRetention(t, b) })
	t.Run("VaultSealOpenRotate", func(t *testing.T) { vaultRotate(t, b) })
	t.Run("VaultValueCannotMoveOwner", func(t *testing.T) { vaultMoved(t, b) })
	t.Run("OAuthFlowTakenOnce", func(t *testing.T) { oauthFlows(t, b) })
	t.Run("AuditNewestFirst", func(t *testing.T) { audit(t, b) })
	t.Run("TokensByDigestAndRevoked", func(t *testing.T) { tokens(t, b) })
	t.Run("SessionsExpire", func(t *testing.T) { sessions(t, b) })
	t.Run("ConcurrentWriters", func(t *testing.T) { concurrent(t, b) })
}

// owner is the actor key the stash cases write and read as.
const owner = "static:laptop"

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func stashWindows(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	now := time.Now()
	data := []byte(strings.Repeat("héllo wörld ", 1000))
	if err := s.PutResult(c, "r1", owner, data, now.Add(time.Minute), 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, w := range [][2]int{{0, 10}, {5, 5000}, {len(data) - 3, len(data) + 100}, {len(data) + 5, len(data) + 10}} {
		got, total, err := s.ResultWindow(c, "r1", owner, w[0], w[1], now)
		if err != nil {
			t.Fatalf("window %v: %v", w, err)
		}
		if total != len(data) {
			t.Fatalf("total %d, want %d", total, len(data))
		}
		from, to := min(w[0], len(data)), min(w[1], len(data))
		if !bytes.Equal(got, data[from:to]) {
			t.Fatalf("window %v: got %d bytes, want %d", w, len(got), to-from)
		}
	}
	if _, _, err := s.ResultWindow(c, "nope", owner, 0, 10, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown id: %v, want ErrNotFound", err)
	}
	if err := s.PutResult(c, "big", owner, make([]byte, 101), now.Add(time.Minute), 100); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("oversized put: %v, want ErrTooLarge", err)
	}
}

func stashExpiry(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	now := time.Now()
	for i := range 10 {
		if err := s.PutResult(c, fmt.Sprint("e", i), owner, []byte("x"), now.Add(time.Second), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutResult(c, "live", owner, []byte("y"), now.Add(time.Hour), 1<<20); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Second)
	if _, _, err := s.ResultWindow(c, "e0", owner, 0, 1, later); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("expired read: %v, want ErrExpired", err)
	}
	n, err := s.SweepResults(c, later, 3)
	if err != nil || n != 3 {
		t.Fatalf("bounded sweep: %d, %v; want 3", n, err)
	}
	n, err = s.SweepResults(c, later, 100)
	if err != nil || n != 7 {
		t.Fatalf("second sweep: %d, %v; want 7", n, err)
	}
	for i := range 10 {
		if _, _, err := s.ResultWindow(c, fmt.Sprint("e", i), owner, 0, 1, later); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("swept e%d: %v, want ErrNotFound", i, err)
		}
	}
	if got, _, err := s.ResultWindow(c, "live", owner, 0, 1, later); err != nil || string(got) != "y" {
		t.Fatalf("live survived the sweep: %q, %v", got, err)
	}
}

func stashBound(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	now := time.Now()
	for i := range 3 {
		if err := s.PutResult(c, fmt.Sprint("b", i), owner, bytes.Repeat([]byte{'a' + byte(i)}, 40), now.Add(time.Hour), 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	if _, _, err := s.ResultWindow(c, "b0", owner, 0, 1, now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("oldest should be evicted: %v", err)
	}
	for _, id := range []string{"b1", "b2"} {
		if _, _, err := s.ResultWindow(c, id, owner, 0, 1, now); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func rec(i int, at time.Time, connector, outcome, actor string) store.ActivityRecord {
	id := fmt.Sprintf("%016x", i)
	return store.ActivityRecord{ID: id, OccurredAt: at, ConnectorID: connector, Outcome: outcome, Actor: actor,
		JSON: fmt.Appendf(nil, `{"id":%q}`, id)}
}

func activityPaging(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	var batch []store.ActivityRecord
	for i := range 25 {
		// pairs share a millisecond: ties are ordered by id
		batch = append(batch, rec(i, base.Add(time.Duration(i/2)*time.Millisecond), "demo", "success", "a"))
	}
	if err := s.AppendActivity(c, batch[:10]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendActivity(c, batch[10:]); err != nil {
		t.Fatal(err)
	}
	var got []string
	q := store.ActivityQuery{Limit: 7}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		evs, more, err := s.ListActivity(c, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			got = append(got, e.ID)
			if string(e.JSON) != fmt.Sprintf(`{"id":%q}`, e.ID) {
				t.Fatalf("JSON not kept: %s", e.JSON)
			}
		}
		if !more {
			break
		}
		last := evs[len(evs)-1]
		q.Before = &store.Cursor{OccurredAtMs: last.OccurredAt.UnixMilli(), ID: last.ID}
	}
	if len(got) != 25 {
		t.Fatalf("paged %d events, want 25: %v", len(got), got)
	}
	for i, id := range got {
		if want := fmt.Sprintf("%016x", 24-i); id != want {
			t.Fatalf("position %d: %s, want %s (newest first, ties by id)", i, id, want)
		}
	}
}

func activityFilters(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	var batch []store.ActivityRecord
	for i := range 30 {
		batch = append(batch, rec(i, base.Add(time.Duration(i)*time.Second),
			[]string{"demo", "tracker", "files"}[i%3], []string{"success", "error"}[i%2], []string{"alice", "bob"}[i%2]))
	}
	if err := s.AppendActivity(c, batch); err != nil {
		t.Fatal(err)
	}
	count := func(q store.ActivityQuery) int {
		q.Limit = 100
		evs, _, err := s.ListActivity(c, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if (q.ConnectorID != "" && e.ConnectorID != q.ConnectorID) || (q.Outcome != "" && e.Outcome != q.Outcome) || (q.Actor != "" && e.Actor != q.Actor) {
				t.Fatalf("filter %+v let through %+v", q, e)
			}
		}
		return len(evs)
	}
	for _, tc := range []struct {
		q    store.ActivityQuery
		want int
	}{
		{store.ActivityQuery{ConnectorID: "tracker"}, 10},
		{store.ActivityQuery{Outcome: "error"}, 15},
		{store.ActivityQuery{Actor: "alice", ConnectorID: "demo"}, 5},
		{store.ActivityQuery{Since: base.Add(20 * time.Second)}, 10},
		{store.ActivityQuery{Until: base.Add(5 * time.Second)}, 5},
		{store.ActivityQuery{Since: base.Add(10 * time.Second), Until: base.Add(20 * time.Second), Outcome: "success"}, 5},
		{store.ActivityQuery{ConnectorID: "nope"}, 0},
	} {
		if got := count(tc.q); got != tc.want {
			t.Errorf("%+v: %d events, want %d", tc.q, got, tc.want)
		}
	}
}

func activityRetention(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	var batch []store.ActivityRecord
	for i := range 50 {
		batch = append(batch, rec(i, base.Add(time.Duration(i)*time.Second), "demo", "success", "a"))
	}
	if err := s.AppendActivity(c, batch); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneActivity(c, 0, base.Add(10*time.Second))
	if err != nil || n != 10 {
		t.Fatalf("prune by age: %d, %v; want 10", n, err)
	}
	n, err = s.PruneActivity(c, 20, time.Time{})
	if err != nil || n != 20 {
		t.Fatalf("prune by count: %d, %v; want 20", n, err)
	}
	evs, more, err := s.ListActivity(c, store.ActivityQuery{Limit: 100})
	if err != nil || more || len(evs) != 20 || evs[0].ID != fmt.Sprintf("%016x", 49) || evs[19].ID != fmt.Sprintf("%016x", 30) {
		t.Fatalf("after retention: %d events (more %v, err %v); want the newest 20", len(evs), more, err)
	}
	if n, err := s.PruneActivity(c, 20, time.Time{}); err != nil || n != 0 {
		t.Fatalf("prune at the bound: %d, %v; want 0", n, err)
	}
}

func key(b byte) []byte { return bytes.Repeat([]byte{b}, vault.KeyBytes) }

func vaultRotate(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	v1, err := vault.New(s, []vault.Key{{ID: "k1", Key: key(1)}}, "k1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v1.Seal(c, vault.KindCredential, "tracker", "api-key", []byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	st, err := s.GetSecret(c, store.SecretKey{Kind: vault.KindCredential, Connector: "tracker", Name: "api-key"})
	if err != nil || st.KeyID != "k1" || bytes.Contains(st.Sealed, []byte("s3cret")) {
		t.Fatalf("stored form: key %q, err %v, plaintext visible %v", st.KeyID, err, bytes.Contains(st.Sealed, []byte("s3cret")))
	}
	both, err := vault.New(s, []vault.Key{{ID: "k1", Key: key(1)}, {ID: "k2", Key: key(2)}}, "k2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := both.Open(c, vault.KindCredential, "tracker", "api-key"); err != nil || string(got) != "s3cret" {
		t.Fatalf("old key still opens: %q, %v", got, err)
	}
	r, err := both.Reseal(c)
	if err != nil || r.Resealed != 1 || r.Current != 0 {
		t.Fatalf("reseal: %+v, %v", r, err)
	}
	if r, err := both.Reseal(c); err != nil || r.Resealed != 0 || r.Current != 1 {
		t.Fatalf("second reseal: %+v, %v", r, err)
	}
	v2, _ := vault.New(s, []vault.Key{{ID: "k2", Key: key(2)}}, "k2", nil)
	if got, err := v2.Open(c, vault.KindCredential, "tracker", "api-key"); err != nil || string(got) != "s3cret" {
		t.Fatalf("after reseal, k2 alone opens: %q, %v", got, err)
	}
	if _, err := v1.Open(c, vault.KindCredential, "tracker", "api-key"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("unknown key id reads as missing: %v", err)
	}
	if ok, err := v2.Delete(c, vault.KindCredential, "tracker", "api-key"); !ok || err != nil {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	if _, err := v2.Open(c, vault.KindCredential, "tracker", "api-key"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	none, _ := vault.New(s, nil, "", nil)
	if err := none.Seal(c, vault.KindCredential, "tracker", "api-key", []byte("x")); !errors.Is(err, vault.ErrNotConfigured) ||
		!strings.Contains(err.Error(), "vault.keys") {
		t.Fatalf("unconfigured vault write: %v", err)
	}
}

func vaultMoved(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	v, _ := vault.New(s, []vault.Key{{ID: "k1", Key: key(1)}}, "k1", nil)
	if err := v.Seal(c, vault.KindCredential, "tracker", "api-key", []byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	st, err := s.GetSecret(c, store.SecretKey{Kind: vault.KindCredential, Connector: "tracker", Name: "api-key"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.SecretKey{
		{Kind: vault.KindCredential, Connector: "other", Name: "api-key"},
		{Kind: vault.KindCredential, Connector: "tracker", Name: "other"},
		{Kind: vault.KindOAuthGrant, Connector: "tracker", Name: "api-key"},
	} {
		moved := st
		moved.SecretKey = k
		if err := s.PutSecret(c, moved); err != nil {
			t.Fatal(err)
		}
		if got, err := v.Open(c, k.Kind, k.Connector, k.Name); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("moved to %+v opened: %q, %v", k, got, err)
		}
	}
}

func oauthFlows(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	v, _ := vault.New(s, []vault.Key{{ID: "k1", Key: key(1)}}, "k1", nil)
	if err := v.SealFlow(c, store.OAuthFlow{State: "st1", Connector: "tracker", ExpiresAt: time.Now().Add(time.Minute)}, []byte("verifier")); err != nil {
		t.Fatal(err)
	}
	f, data, err := v.TakeFlow(c, "st1")
	if err != nil || f.Connector != "tracker" || string(data) != "verifier" {
		t.Fatalf("take: %+v %q %v", f, data, err)
	}
	if _, _, err := v.TakeFlow(c, "st1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second take: %v, want ErrNotFound", err)
	}
	if err := v.SealFlow(c, store.OAuthFlow{State: "st2", Connector: "tracker", ExpiresAt: time.Now().Add(-time.Second)}, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.TakeFlow(c, "st2"); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("expired take: %v, want ErrExpired", err)
	}
}

func audit(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		if err := s.AppendAudit(c, store.AuditRecord{OccurredAt: base.Add(time.Duration(i) * time.Second),
			Actor: "alice", Action: "credential.set", Target: fmt.Sprint("connector:c", i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListAudit(c, 3)
	if err != nil || len(got) != 3 || got[0].Target != "connector:c4" || got[0].ID == "" {
		t.Fatalf("audit: %+v, %v", got, err)
	}
}

func concurrent(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	handles := []store.Store{s}
	if b.Twin != nil {
		handles = append(handles, b.Twin(t, s))
	}
	const writers, each, size, bound = 8, 20, 1000, 50_000
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2)
	for w := range writers {
		h := handles[w%len(handles)]
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := h.PutResult(c, id, owner, bytes.Repeat([]byte{'x'}, size), now.Add(time.Hour), bound); err != nil {
					errs <- err
				}
				if err := h.AppendActivity(c, []store.ActivityRecord{rec(w*1000+i, now, "demo", "success", id)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs, more, err := handles[len(handles)-1].ListActivity(c, store.ActivityQuery{Limit: writers * each})
	if err != nil || more || len(evs) != writers*each {
		t.Fatalf("activity from concurrent writers: %d (more %v, err %v), want %d", len(evs), more, err, writers*each)
	}
	// The byte bound held: at most bound/size results remain readable.
	live := 0
	for w := range writers {
		for i := range each {
			if _, _, err := s.ResultWindow(c, fmt.Sprintf("w%d-%d", w, i), owner, 0, 1, now); err == nil {
				live++
			}
		}
	}
	if live == 0 || live > bound/size {
		t.Fatalf("%d results live after concurrent puts; the bound allows 1..%d", live, bound/size)
	}
}

func tokens(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.UnixMilli(1_700_000_000_000).UTC()
	for i := range 3 {
		tok := store.AccessToken{ID: fmt.Sprint("t", i), Digest: fmt.Sprint("d", i), Name: "laptop", CreatedBy: "alice",
			CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if i == 2 {
			tok.ExpiresAt = base.Add(time.Hour)
		}
		if err := s.PutToken(c, tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutToken(c, store.AccessToken{ID: "t9", Digest: "d1", CreatedAt: base}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate digest: %v, want ErrConflict", err)
	}
	got, err := s.TokenByDigest(c, "d2")
	if err != nil || got.ID != "t2" || !got.ExpiresAt.Equal(base.Add(time.Hour)) || !got.RevokedAt.IsZero() {
		t.Fatalf("by digest: %+v, %v", got, err)
	}
	if _, err := s.TokenByDigest(c, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown digest: %v", err)
	}
	if ok, err := s.RevokeToken(c, "t1", "bob", base.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("revoke: %v, %v", ok, err)
	}
	if ok, _ := s.RevokeToken(c, "t1", "bob", base.Add(time.Minute)); ok {
		t.Fatal("revoked twice")
	}
	list, err := s.ListTokens(c)
	if err != nil || len(list) != 3 || list[0].ID != "t2" || list[1].RevokedBy != "bob" || list[1].RevokedAt.IsZero() {
		t.Fatalf("list: %+v, %v", list, err)
	}
	// Renaming works on a revoked token too, and only on a known id.
	if ok, err := s.RenameToken(c, "t1", "old laptop"); !ok || err != nil {
		t.Fatalf("rename: %v, %v", ok, err)
	}
	if ok, err := s.RenameToken(c, "nope", "x"); ok || err != nil {
		t.Fatalf("rename unknown: %v, %v", ok, err)
	}
	if got, err := s.TokenByDigest(c, "d1"); err != nil || got.Name != "old laptop" || got.RevokedAt.IsZero() {
		t.Fatalf("after rename: %+v, %v", got, err)
	}
}

func sessions(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	now := time.Now()
	if err := s.PutSession(c, store.OperatorSession{Digest: "s1", Subject: "sub", Email: "a@example.com", CSRFDigest: "c",
		ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSession(c, "s1", now)
	if err != nil || got.Email != "a@example.com" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := s.GetSession(c, "s1", now.Add(2*time.Hour)); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	if ok, err := s.DeleteSession(c, "s1"); !ok || err != nil {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	if _, err := s.GetSession(c, "s1", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	// A caller's (non-operator) session says so; an operator's does not.
	if err := s.PutSession(c, store.OperatorSession{Digest: "s2", Subject: "bob", CSRFDigest: "c", CallerOnly: true, Claims: `{"groups":["eng"]}`, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSession(c, "s2", now); err != nil || !got.CallerOnly || got.Subject != "bob" || got.Claims != `{"groups":["eng"]}` {
		t.Fatalf("caller session: %+v, %v", got, err)
	}
	if err := s.PutSession(c, store.OperatorSession{Digest: "s3", Subject: "ops", CSRFDigest: "c", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSession(c, "s3", now); err != nil || got.CallerOnly {
		t.Fatalf("operator session: %+v, %v", got, err)
	}
}

// stashOwner: an entry reads only for the actor that stashed it; for every
// other actor it is unknown — exactly the answer of an id never stored,
// expired or not — and the owner's reads are unchanged by their attempts.
func stashOwner(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	now := time.Now()
	if err := s.PutResult(c, "mine", owner, []byte("secret page"), now.Add(time.Minute), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResult(c, "old", owner, []byte("x"), now.Add(time.Second), 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"static:ci", "issued:laptop", "oidc:laptop", "local:", ""} {
		if _, _, err := s.ResultWindow(c, "mine", other, 0, 100, now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%q read another actor's entry: %v, want ErrNotFound", other, err)
		}
		if _, _, err := s.ResultWindow(c, "old", other, 0, 1, now.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%q learnt another actor's entry expired: %v, want ErrNotFound", other, err)
		}
	}
	if got, _, err := s.ResultWindow(c, "mine", owner, 0, 100, now); err != nil || string(got) != "secret page" {
		t.Fatalf("owner's read: %q, %v", got, err)
	}
	if twin := b.Twin; twin != nil {
		other := twin(t, s)
		if _, _, err := other.ResultWindow(c, "mine", "static:ci", 0, 100, now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another replica served another actor: %v", err)
		}
		if got, _, err := other.ResultWindow(c, "mine", owner, 0, 100, now); err != nil || string(got) != "secret page" {
			t.Fatalf("another replica, owner's read: %q, %v", got, err)
		}
	}
}

// tokenNarrowing: an issued token's connector list survives the store (and
// another replica's handle) as written; nil stays nil (not narrowed) and an
// empty list stays empty (narrowed to nothing).
func tokenNarrowing(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i, conns := range [][]string{nil, {}, {"tracker", "docs"}} {
		tok := store.AccessToken{ID: fmt.Sprint("n", i), Digest: fmt.Sprint("nd", i), Name: "ci", CreatedBy: "alice",
			CreatedAt: base.Add(time.Duration(i) * time.Second), Connectors: conns}
		if err := s.PutToken(c, tok); err != nil {
			t.Fatal(err)
		}
	}
	check := func(st store.Store, where string) {
		for i, want := range [][]string{nil, {}, {"tracker", "docs"}} {
			got, err := st.TokenByDigest(c, fmt.Sprint("nd", i))
			if err != nil {
				t.Fatal(err)
			}
			if (got.Connectors == nil) != (want == nil) || fmt.Sprint(got.Connectors) != fmt.Sprint(want) {
				t.Fatalf("%s: token n%d connectors %#v, want %#v", where, i, got.Connectors, want)
			}
		}
		list, err := st.ListTokens(c)
		if err != nil || len(list) != 3 || fmt.Sprint(list[0].Connectors) != "[tracker docs]" {
			t.Fatalf("%s: list %+v, %v", where, list, err)
		}
	}
	check(s, "same handle")
	if b.Twin != nil {
		check(b.Twin(t, s), "another replica")
	}
}

func catalogs(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	k := store.CatalogKey{Connector: "tracker"}
	if _, err := s.GetCatalog(c, k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty: %v, want ErrNotFound", err)
	}
	at := time.UnixMilli(1_700_000_000_123)
	v1 := store.StoredCatalog{CatalogKey: k, Tools: []byte(`[{"name":"a"}]`), Fingerprint: "f1", FetchedAt: at, Drift: []byte(`{}`)}
	if ok, err := s.PutCatalog(c, v1, "stale"); ok || err != nil {
		t.Fatalf("put over a missing row with prev set: %v %v, want not written", ok, err)
	}
	if ok, err := s.PutCatalog(c, v1, ""); !ok || err != nil {
		t.Fatalf("first put: %v %v", ok, err)
	}
	if ok, err := s.PutCatalog(c, v1, ""); ok || err != nil {
		t.Fatalf("second first put: %v %v, want not written (another replica won)", ok, err)
	}
	v2 := v1
	v2.Tools, v2.Fingerprint, v2.FetchedAt = []byte(`[{"name":"b"}]`), "f2", at.Add(time.Minute)
	if ok, err := s.PutCatalog(c, v2, "f0"); ok || err != nil {
		t.Fatalf("put with the wrong prev: %v %v", ok, err)
	}
	if ok, err := s.PutCatalog(c, v2, "f1"); !ok || err != nil {
		t.Fatalf("swap: %v %v", ok, err)
	}
	got, err := s.GetCatalog(c, k)
	if err != nil || got.Fingerprint != "f2" || string(got.Tools) != `[{"name":"b"}]` || !got.FetchedAt.Equal(v2.FetchedAt) || string(got.Drift) != `{}` {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Another actor's catalog of the same connector is another row.
	if _, err := s.GetCatalog(c, store.CatalogKey{Connector: "tracker", Actor: "alice"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("per-actor key: %v, want ErrNotFound", err)
	}
	if tw := twinOf(t, b, s); tw != nil {
		if got, err := tw.GetCatalog(c, k); err != nil || got.Fingerprint != "f2" {
			t.Fatalf("twin: %+v %v", got, err)
		}
	}
}

func twinOf(t *testing.T, b Backend, s store.Store) store.Store {
	if b.Twin == nil {
		return nil
	}
	return b.Twin(t, s)
}

func approvals(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	k := store.CatalogKey{Connector: "tracker"}
	at := time.UnixMilli(1_700_000_000_000)
	first := []store.ToolApproval{
		{CatalogKey: k, Tool: "b", Fingerprint: "fb1", Definition: []byte(`{"name":"b"}`), ApprovedAt: at, ApprovedBy: "connecta"},
		{CatalogKey: k, Tool: "a", Fingerprint: "fa1", Definition: []byte(`{"name":"a"}`), ApprovedAt: at, ApprovedBy: "connecta"},
	}
	if err := s.PutApprovals(c, first, false); err != nil {
		t.Fatal(err)
	}
	// Without overwrite an existing approval stays; with it, it is replaced.
	if err := s.PutApprovals(c, []store.ToolApproval{{CatalogKey: k, Tool: "a", Fingerprint: "fa2", ApprovedBy: "x"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.PutApprovals(c, []store.ToolApproval{{CatalogKey: k, Tool: "b", Fingerprint: "fb2", Definition: []byte(`{"name":"b","description":"x"}`), ApprovedAt: at.Add(time.Second), ApprovedBy: "alice"}}, true); err != nil {
		t.Fatal(err)
	}
	view := s
	if tw := twinOf(t, b, s); tw != nil {
		view = tw
	}
	got, err := view.ListApprovals(c, k)
	if err != nil || len(got) != 2 {
		t.Fatalf("list: %+v %v", got, err)
	}
	if got[0].Tool != "a" || got[0].Fingerprint != "fa1" || got[0].ApprovedBy != "connecta" || !got[0].ApprovedAt.Equal(at) {
		t.Fatalf("kept approval: %+v", got[0])
	}
	if got[1].Tool != "b" || got[1].Fingerprint != "fb2" || got[1].ApprovedBy != "alice" || string(got[1].Definition) != `{"name":"b","description":"x"}` {
		t.Fatalf("replaced approval: %+v", got[1])
	}
	if other, err := view.ListApprovals(c, store.CatalogKey{Connector: "other"}); err != nil || len(other) != 0 {
		t.Fatalf("other connector: %+v %v", other, err)
	}
}

// bigCatalog: a 10,000-tool catalog (about 2 MB of definitions) and its
// approvals round-trip.
func bigCatalog(t *testing.T, b Backend) {
	s, c := b.Open(t), ctx(t)
	k := store.CatalogKey{Connector: "big"}
	var tools bytes.Buffer
	as := make([]store.ToolApproval, 0, 10_000)
	tools.WriteByte('[')
	for i := range 10_000 {
		if i > 0 {
			tools.WriteByte(',')
		}
		def := fmt.Sprintf(`{"name":"tool_%05d","description":"%s","inputSchema":{"type":"object"}}`, i, strings.Repeat("d", 150))
		tools.WriteString(def)
		as = append(as, store.ToolApproval{CatalogKey: k, Tool: fmt.Sprintf("tool_%05d", i), Fingerprint: fmt.Sprint(i), Definition: []byte(def)})
	}
	tools.WriteByte(']')
	if ok, err := s.PutCatalog(c, store.StoredCatalog{CatalogKey: k, Tools: tools.Bytes(), Fingerprint: "big", FetchedAt: time.Now()}, ""); !ok || err != nil {
		t.Fatalf("put: %v %v", ok, err)
	}
	if err := s.PutApprovals(c, as, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCatalog(c, k)
	if err != nil || !bytes.Equal(got.Tools, tools.Bytes()) {
		t.Fatalf("get: %d bytes, %v", len(got.Tools), err)
	}
	list, err := s.ListApprovals(c, k)
	if err != nil || len(list) != 10_000 || list[9_999].Tool != "tool_09999" {
		t.Fatalf("approvals: %d, %v", len(list), err)
	}
}
