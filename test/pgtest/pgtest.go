// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb into
// a temporary directory, the server on 127.0.0.1 at a free port with a
// private socket directory, stopped and removed when the test ends. It never
// touches a cluster it did not start (Debian's own on 5432 included).
//
// The server binaries are found at run time: $CONNECTA_PG_BIN, else the
// newest /usr/lib/postgresql/*/bin (Debian's versioned directory), else PATH.
// Running as root (CI), the cluster belongs to the `postgres` user and the
// server runs as that user, since PostgreSQL refuses to run as root.
//
// When PostgreSQL cannot start, the test is skipped with the reason, or
// fails when CONNECTA_REQUIRE_POSTGRES=1 (set by .ci/run).
//
// Typical use:
//
//	c := pgtest.Start(t)         // one cluster for this test
//	url := c.Database(t)         // a fresh, empty database on it
//	st, err := store.Open(ctx, url, store.Options{})
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// RequireEnv makes an unavailable PostgreSQL a failure instead of a skip.
const RequireEnv = "CONNECTA_REQUIRE_POSTGRES"

const (
	startTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
	superuser    = "postgres"
)

// Cluster is one running throwaway server.
type Cluster struct {
	dir, data, sockets string
	bin                string
	port               int
	cred               *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start initializes and starts a cluster that lives until t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := Launch()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Logf("pgtest: %v", err)
		}
	})
	return c
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("pgtest: PostgreSQL is required (%s=1) but could not start: %v", RequireEnv, err)
	}
	t.Skipf("pgtest: PostgreSQL unavailable, skipping (set %s=1 to fail instead): %v", RequireEnv, err)
}

// Bin returns the directory of the PostgreSQL server binaries.
func Bin() (string, error) {
	if d := os.Getenv("CONNECTA_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no initdb: install PostgreSQL (Debian: apt-get install postgresql) or set CONNECTA_PG_BIN")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Launch initializes and starts a cluster outside a test (benchmarks); the
// caller must Close it.
func Launch() (*Cluster, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connecta-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, data: filepath.Join(dir, "data"), sockets: filepath.Join(dir, "sock"), bin: bin}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.Mkdir(c.sockets, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user to own the cluster: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, p := range []string{dir, c.sockets} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	initdb := c.command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", superuser, "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := c.Restart(); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// URL is the superuser's URL for database name ("postgres" always exists).
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, c.port, name)
}

// Database creates a fresh, empty database and returns its URL.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	u, err := c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// CreateDatabase creates a fresh, empty database and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return c.URL(name), nil
}

// Restart starts the server (again, on the same port and data) and waits
// until it accepts connections. Tests of a store that comes back use
// Stop then Restart.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("pgtest: already running")
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if c.cred != nil {
		_ = logf.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	cmd := c.command(filepath.Join(c.bin, "postgres"), "-D", c.data, "-p", strconv.Itoa(c.port), "-k", c.sockets,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.cmd, c.done, c.log = cmd, done, logf
	deadline := time.Now().Add(startTimeout)
	for {
		if err := c.ping(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %v; log: %s", startTimeout, err, c.logTail())
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited at start: %s", c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) ping() error {
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and
// waits for it to exit. The data stays for Restart.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	_ = c.log.Close()
	c.cmd, c.done, c.log = nil, nil, nil
	return nil
}

// Close stops the server and removes the cluster.
func (c *Cluster) Close() error {
	err := c.Stop()
	return errors.Join(err, os.RemoveAll(c.dir))
}
