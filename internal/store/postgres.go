package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// Advisory lock keys (any constants unique to connecta).
const (
	pgMigrateLock = 0x636f6e6e65637401 // "connect" 01: one migrator at a time
	pgResultsLock = 0x636f6e6e65637402 // the stash byte bound: one writer at a time
)

// Boot retry of an unreachable PostgreSQL: exponential from pgRetryFirst,
// capped at pgRetryMax, for Options.ConnectRetry in all.
const (
	pgRetryFirst = 250 * time.Millisecond
	pgRetryMax   = 5 * time.Second
	pgMaxConns   = 16
)

func openPostgres(ctx context.Context, rawURL string, opts Options, m *metrics) (Store, error) {
	shown := Redact(rawURL)
	db, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, &ConfigError{URL: shown, Msg: err.Error()}
	}
	db.SetMaxOpenConns(pgMaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	d := dialect{kind: "postgres", numbered: true, lockResults: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgResultsLock))
		return err
	}}
	s := newSQLStore(db, d, m, opts.Logger)
	if err := waitReachable(ctx, db, shown, opts); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := migratePostgres(ctx, db, d, opts); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: %w", shown, err)
	}
	return s, nil
}

// waitReachable pings until the server answers or ConnectRetry is spent.
func waitReachable(ctx context.Context, db *sql.DB, shown string, opts Options) error {
	deadline := time.Now().Add(opts.ConnectRetry)
	wait := pgRetryFirst
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		remaining := time.Until(deadline)
		if opts.ConnectRetry < 0 || remaining <= 0 {
			return fmt.Errorf("store %s: %w: unreachable after %d attempts over %s: %v",
				shown, ErrUnavailable, attempt, opts.ConnectRetry.Round(time.Second), err)
		}
		wait = min(wait, remaining)
		opts.Logger.Warn("store unreachable; retrying", "url", shown, "attempt", attempt, "retryIn", wait.String(), "error", err.Error())
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(wait*2, pgRetryMax)
	}
}

// migratePostgres runs the migrations holding a session advisory lock, so
// replicas that start together migrate one after the other (the second
// finds nothing left to do).
func migratePostgres(ctx context.Context, db *sql.DB, d dialect, opts Options) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(pgMigrateLock)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	_, merr := migrate(ctx, conn, d, opts.Logger)
	_, uerr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(pgMigrateLock))
	if merr != nil {
		return merr
	}
	return errors.Join(uerr)
}
