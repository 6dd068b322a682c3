package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/test/pgtest"
)

func callBudgets(t *testing.T, s store.Store) *store.CallBudgets {
	t.Helper()
	b, err := store.NewCallBudgets(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Two replicas on one PostgreSQL count against one budget: 3 per window in
// total, whichever replica takes them, even when they all race.
// TestCallBudgets runs the shared-budget cases on one throwaway cluster
// (a database each); the store-down case stops its own.
func TestCallBudgets(t *testing.T) {
	c := pgtest.Start(t)
	for name, f := range map[string]func(*testing.T, string){
		"ReplicasShareOneBudget":              replicasShareOneBudget,
		"RetryAfterIsWhenTheOldestCallLeaves": retryAfterIsWhenTheOldestCallLeaves,
		"MaintenanceDeletesOnlyEmptyWindows":  maintenanceDeletesOnlyEmptyWindows,
	} {
		t.Run(name, func(t *testing.T) { f(t, c.Database(t)) })
	}
}

func replicasShareOneBudget(t *testing.T, u string) {
	a, b := callBudgets(t, open(t, u)), callBudgets(t, open(t, u))
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		r := a
		if i%2 == 1 {
			r = b
		}
		wg.Go(func() {
			ok, retry, err := r.TakeCall(ctx, "tracker", "", 3, time.Minute)
			switch {
			case err != nil:
				t.Error(err)
			case ok:
				admitted.Add(1)
			case retry <= 0 || retry > time.Minute:
				t.Errorf("retryAfter %v outside (0, 1m]", retry)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 3 {
		t.Fatalf("%d of 20 racing calls on two replicas admitted, want 3", n)
	}
	// Another connector, or another partition, has its own budget.
	for _, key := range [][2]string{{"other", ""}, {"tracker", "alice"}, {"tracker", "bob"}} {
		if ok, _, err := b.TakeCall(ctx, key[0], key[1], 3, time.Minute); err != nil || !ok {
			t.Fatalf("%v: %v %v", key, ok, err)
		}
	}
}

// The refusal waits exactly until the oldest call that must leave does: the
// database clock's milliseconds, so it is at most the window and shrinks.
func retryAfterIsWhenTheOldestCallLeaves(t *testing.T, u string) {
	b := callBudgets(t, open(t, u))
	ctx := context.Background()
	window := 10 * time.Second
	if ok, _, err := b.TakeCall(ctx, "c", "", 1, window); err != nil || !ok {
		t.Fatalf("first: %v %v", ok, err)
	}
	ok, first, err := b.TakeCall(ctx, "c", "", 1, window)
	if err != nil || ok || first <= 0 || first > window {
		t.Fatalf("second: %v %v %v", ok, first, err)
	}
	time.Sleep(20 * time.Millisecond) // the database's clock must move: no fake clock reaches it
	_, later, err := b.TakeCall(ctx, "c", "", 1, window)
	if err != nil || later >= first {
		t.Fatalf("retryAfter did not shrink: %v then %v (%v)", first, later, err)
	}
	// A changed maxCalls is another rule (a reload), with a ring of its own.
	if ok, _, err := b.TakeCall(ctx, "c", "", 2, window); err != nil || !ok {
		t.Fatalf("changed maxCalls: %v %v", ok, err)
	}
}

// The maintenance job deletes rows with no call left in their window, and
// only those.
func maintenanceDeletesOnlyEmptyWindows(t *testing.T, u string) {
	st := open(t, u)
	b := callBudgets(t, st)
	ctx := context.Background()
	if ok, _, err := b.TakeCall(ctx, "short", "", 5, time.Millisecond); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, _, err := b.TakeCall(ctx, "long", "", 1, time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	time.Sleep(10 * time.Millisecond) // the short window has passed on the database's clock
	store.MaintainOnce(ctx, st, store.MaintainOptions{})
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left []string
	rows, err := db.Query(`SELECT connector FROM call_budgets`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		_ = rows.Scan(&c)
		left = append(left, c)
	}
	if len(left) != 1 || left[0] != "long" {
		t.Fatalf("rows left %v, want [long]", left)
	}
	if ok, _, _ := b.TakeCall(ctx, "long", "", 1, time.Hour); ok {
		t.Fatal("the live budget was reset by the sweep")
	}
}

func TestCallBudgets_StoreDownIsUnavailable(t *testing.T) {
	c := pgtest.Start(t)
	b := callBudgets(t, open(t, c.Database(t)))
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.TakeCall(context.Background(), "c", "", 1, time.Second)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("store down: %v, want ErrUnavailable", err)
	}
}

// SQLite and memory: keep budgets in the process (two processes on one
// SQLite file do not share one).
func TestCallBudgets_OnlyPostgresIsShared(t *testing.T) {
	for _, u := range []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "s.db")} {
		if _, err := store.NewCallBudgets(open(t, u)); !errors.Is(err, store.ErrNotShared) {
			t.Errorf("%s: %v, want ErrNotShared", u, err)
		}
	}
}

// BenchmarkTakeCall is what a shared budget adds to each call: one store
// round trip (one upsert) on a loopback PostgreSQL.
func BenchmarkTakeCall(b *testing.B) {
	c, err := pgtest.Launch()
	if err != nil {
		b.Skip(err)
	}
	defer c.Close()
	u, err := c.CreateDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	s, err := store.Open(context.Background(), u, store.Options{ConnectRetry: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	budgets, err := store.NewCallBudgets(s)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// ping is one trivial round trip (SELECT 1), the same-run baseline.
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := s.Ping(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A full ring refuses; the 10,000 ring is a long row being filled; the
	// 1,000-per-hour ring is filled, then full.
	for _, bc := range []struct {
		name   string
		max    int
		window time.Duration
	}{{"full_at_60", 60, time.Minute}, {"full_at_10000", 10_000, time.Hour}, {"admitted_1000_per_hour", 1000, time.Hour}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := budgets.TakeCall(ctx, bc.name, "", bc.max, bc.window); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
