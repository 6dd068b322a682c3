package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Migrations are embedded, numbered NNNN_name.sql, applied in order, each
// once, each in its own transaction. They are additive only: a new table, a
// new column with a default, a new index — never a rename or a drop — so a
// replica still running the previous binary keeps working while a newer one
// has migrated. One file serves both dialects (BLOB reads BYTEA on
// PostgreSQL).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	stmts   []string
}

// loadMigrations parses the embedded files; a malformed name is a build
// mistake, caught by the tests.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", name)
		}
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: rest, stmts: splitSQL(string(body))})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migration %04d_%s: version %d is used twice", out[i].version, out[i].name, out[i].version)
		}
	}
	return out, nil
}

// LatestSchema is the schema version this binary migrates to: its highest
// migration. Numbers are reserved per change, so a binary may lack one
// below its highest (a change not yet merged); each migration is applied
// by number, whatever was applied before it.
func LatestSchema() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// splitSQL drops `--` comments and splits on `;` (the migration files hold
// no string literals with either).
func splitSQL(body string) []string {
	var b strings.Builder
	for line := range strings.Lines(body) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	var out []string
	for stmt := range strings.SplitSeq(b.String(), ";") {
		if s := strings.TrimSpace(stmt); s != "" {
			out = append(out, s)
		}
	}
	return out
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version       BIGINT PRIMARY KEY,
    name          TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL
)`

// migrate brings the schema on conn up to date. The caller holds whatever
// lock makes it exclusive (PostgreSQL's advisory lock; SQLite's write lock is
// taken by each transaction). A schema newer than this binary refuses.
func migrate(ctx context.Context, conn *sql.Conn, d dialect, log *slog.Logger) (int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return 0, err
	}
	latest := 0
	if len(ms) > 0 {
		latest = ms[len(ms)-1].version
	}
	if current > latest {
		return current, fmt.Errorf("%w: the database is at schema %d, this binary knows %d (upgrade connecta, or point it at another database)",
			ErrSchemaTooNew, current, latest)
	}
	done, err := appliedVersions(ctx, conn)
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		applied, err := applyMigration(ctx, conn, d, m)
		if err != nil {
			return current, err
		}
		if applied {
			current = max(current, m.version)
			log.Info("store schema migrated", "version", m.version, "name", m.name)
		}
	}
	return current, nil
}

// appliedVersions reads which migrations were applied (by number: one
// below the highest may be missing when it came from a change merged later).
func appliedVersions(ctx context.Context, conn *sql.Conn) (map[int]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		out[v] = true
	}
	return out, rows.Err()
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// applyMigration applies m unless it already was, and says whether it did.
func applyMigration(ctx context.Context, conn *sql.Conn, d dialect, m migration) (bool, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Another process may have applied it between our read and our lock
	// (SQLite, where the lock is the transaction itself).
	var done int
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&done); err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	if done > 0 {
		return false, nil
	}
	for _, stmt := range m.stmts {
		if _, err := tx.ExecContext(ctx, d.ddl(stmt)); err != nil {
			return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES (?, ?, ?)`),
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %04d_%s: %w", m.version, m.name, err)
	}
	return true, tx.Commit()
}
