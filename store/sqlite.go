package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3": pure Go (wasm2go), no cgo
)

// sqliteMaxConns bounds the pool: WAL gives concurrent readers and one
// writer; each connection is a separate SQLite instance with its own memory.
const sqliteMaxConns = 4

// openSQLite opens (creating) the database at path in WAL mode. Writers
// wait for each other (busy_timeout) inside immediate transactions, which is
// what makes two processes on one file safe, migrations included.
func openSQLite(ctx context.Context, path string, opts Options, m *metrics) (Store, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(wal)")
	q.Add("_pragma", "synchronous(normal)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("store sqlite:%s: %w", path, err)
	}
	db.SetMaxOpenConns(sqliteMaxConns)
	s := newSQLStore(db, dialect{kind: "sqlite"}, m, opts.Logger)
	conn, err := firstConn(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store sqlite:%s: %w", path, err)
	}
	_, err = migrate(ctx, conn, s.d, opts.Logger)
	_ = conn.Close()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store sqlite:%s: %w", path, err)
	}
	return s, nil
}

// firstConn opens the first connection, whose journal_mode(wal) pragma
// converts a new database file. That conversion needs an exclusive lock that
// SQLite's busy handler does not wait for, so processes creating one file
// at once (replicas starting together) can see "database is locked": retry
// it for a bounded time. Once the file is in WAL mode it stays so, and later
// connections do not need the lock.
func firstConn(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		conn, err := db.Conn(ctx)
		if err == nil || !strings.Contains(err.Error(), "database is locked") || time.Now().After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
