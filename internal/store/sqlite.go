package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
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
	if err := privateSQLiteFiles(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	// A -wal or journal SQLite creates later takes the database file's mode
	// (0600), whatever the umask.
	q.Set("modeof", path)
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

// PermissionError is a SQLite store file that users other than connecta's
// may read or write: it holds stashed results in plaintext, so the server
// refuses to start on it rather than fix it silently.
type PermissionError struct {
	Path string
	Mode fs.FileMode
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("store sqlite:%s: mode %04o opens the stored results (kept in plaintext) to other users: run chmod 600 %s and start again",
		e.Path, e.Mode.Perm(), e.Path)
}

// privateSQLiteFiles creates the database and -shm files 0600 where they
// do not exist (SQLite's VFS would create them 0666 less the umask; the
// -shm lives as long as the pool's connections). The -wal is not created
// here: modeof gives it the database's mode whenever SQLite creates it, and
// an empty -wal made beside a database another process is converting to
// WAL mode fails that process's journal_mode pragma with "disk I/O error"
// (20 of 300 runs of four replicas opening a new file together). A
// database file open to group or others is refused: the operator chose or
// inherited that mode, and must fix it knowingly. A sidecar open to others
// (another program's connection made it) is closed to them: it is
// transient and follows the database.
func privateSQLiteFiles(path string) error {
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		flag := os.O_RDWR | os.O_CREATE
		if name == path+"-wal" {
			flag = os.O_RDWR
		}
		f, err := os.OpenFile(name, flag, 0o600)
		if errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("store sqlite:%s: %w", name, err)
		}
		st, err := f.Stat()
		if err == nil && st.Mode().Perm()&0o077 != 0 && name != path {
			err = f.Chmod(0o600)
		}
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("store sqlite:%s: %w", name, err)
		}
		if name == path && st.Mode().Perm()&0o066 != 0 {
			return &PermissionError{Path: path, Mode: st.Mode()}
		}
	}
	return nil
}
