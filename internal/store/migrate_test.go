package store_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/test/pgtest"
)

// schemaCases gives each SQL backend a fresh URL and a raw handle on it.
func schemaCases(t *testing.T) map[string]func(t *testing.T) (string, *sql.DB) {
	return map[string]func(t *testing.T) (string, *sql.DB){
		"sqlite": func(t *testing.T) (string, *sql.DB) {
			p := filepath.Join(t.TempDir(), "state.db")
			db, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: p}).EscapedPath()+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return "sqlite:" + p, db
		},
		"postgres": func(t *testing.T) (string, *sql.DB) {
			u := pgtest.Start(t).Database(t)
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return u, db
		},
	}
}

func TestMigrationsSafeWhenReplicasStartTogether(t *testing.T) {
	for name, mk := range schemaCases(t) {
		t.Run(name, func(t *testing.T) {
			u, _ := mk(t)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() {
					s, err := store.Open(context.Background(), u, store.Options{ConnectRetry: -1})
					if err == nil {
						var v int
						v, err = s.SchemaVersion(context.Background())
						if err == nil && v != store.LatestSchema() {
							err = errors.New("schema version mismatch")
						}
						_ = s.Close()
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("replica %d: %v", i, err)
				}
			}
		})
	}
}

func TestSchemaNewerThanBinaryRefusesToBoot(t *testing.T) {
	for name, mk := range schemaCases(t) {
		t.Run(name, func(t *testing.T) {
			u, db := mk(t)
			s, err := store.Open(context.Background(), u, store.Options{ConnectRetry: -1})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES (9999, 'future', 0)`); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Open(context.Background(), u, store.Options{ConnectRetry: -1}); !errors.Is(err, store.ErrSchemaTooNew) {
				t.Fatalf("open on a newer schema: %v, want ErrSchemaTooNew", err)
			}
		})
	}
}

func TestMigrationFilesWellFormed(t *testing.T) {
	if store.LatestSchema() < 5 {
		t.Fatalf("LatestSchema = %d: the embedded migrations did not load", store.LatestSchema())
	}
}

// Migration numbers are reserved per change, so a database may have one
// applied above a number it lacks (a change merged later): each migration
// is applied by number, whatever the highest applied one is.
func TestMigrationsAppliedByNumberNotByHighest(t *testing.T) {
	for name, mk := range schemaCases(t) {
		t.Run(name, func(t *testing.T) {
			u, db := mk(t)
			s, err := store.Open(context.Background(), u, store.Options{ConnectRetry: -1})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			// As if 0006 came from a change merged after the highest one.
			for _, q := range []string{`DROP TABLE inflight`, `DROP TABLE replicas`, `DELETE FROM schema_migrations WHERE version = 6`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			s, err = store.Open(context.Background(), u, store.Options{ConnectRetry: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM inflight`).Scan(&n); err != nil {
				t.Fatalf("0006 was not applied below the highest: %v", err)
			}
		})
	}
}
