package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/store/storetest"
	"github.com/connecta-dev/connecta/test/pgtest"
)

func open(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url, store.Options{ConnectRetry: -1})
	if err != nil {
		t.Fatalf("open %s: %v", store.Redact(url), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// urls remembers each store's URL so Twin can open the same data again.
var urls sync.Map

func openURL(t *testing.T, url string) store.Store {
	s := open(t, url)
	urls.Store(s, url)
	return s
}

func twin(t *testing.T, s store.Store) store.Store {
	u, _ := urls.Load(s)
	return open(t, u.(string))
}

func TestConformanceMemory(t *testing.T) {
	storetest.Run(t, storetest.Backend{Open: func(t *testing.T) store.Store { return open(t, "memory:") }})
}

func TestConformanceSQLite(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store { return openURL(t, "sqlite:"+filepath.Join(t.TempDir(), "state.db")) },
		Twin: twin,
	})
}

func TestConformancePostgres(t *testing.T) {
	c := pgtest.Start(t)
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store { return openURL(t, c.Database(t)) },
		Twin: twin,
	})
}

func TestUnknownSchemeRefused(t *testing.T) {
	for _, u := range []string{"redis://x", "mem:", "", "file:/tmp/x", "sqlite:"} {
		_, err := store.Open(context.Background(), u, store.Options{})
		var ce *store.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a ConfigError", u, err)
		}
	}
}

func TestSQLiteUnwritablePathRefused(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "missing", "state.db"), dir} {
		_, err := store.Open(context.Background(), "sqlite:"+p, store.Options{})
		var ce *store.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", p, err)
		}
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		_ = os.Mkdir(ro, 0o500)
		if _, err := store.Open(context.Background(), "sqlite:"+filepath.Join(ro, "s.db"), store.Options{}); err == nil {
			t.Error("read-only directory accepted")
		}
	}
}

func TestPasswordNeverInMessages(t *testing.T) {
	_, err := store.Open(context.Background(), "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1", store.Options{ConnectRetry: -1})
	if err == nil || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("unreachable: %v, want ErrUnavailable", err)
	}
	if s := err.Error(); strings.Contains(s, "hunter2") {
		t.Fatalf("password in error: %s", s)
	}
}

func TestPostgresUnreachableRetriedThenRefused(t *testing.T) {
	start := time.Now()
	_, err := store.Open(context.Background(), "postgres://u@127.0.0.1:1/db", store.Options{ConnectRetry: 1500 * time.Millisecond})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d < time.Second || d > 20*time.Second {
		t.Fatalf("gave up after %s, want about the retry window", d)
	}
}

// The SQLite store holds stashed results in plaintext: its file, -wal and
// -shm are created 0600 whatever the umask, and a store file open to group
// or others refuses to start with a typed error naming the fix.
func TestSQLiteFilesPrivateAndOpenFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := openURL(t, "sqlite:"+path)
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", name, fi.Mode().Perm())
		}
	}
	_ = st.Close()
	// A sidecar another program's connection made 0644 is closed again.
	if f, err := os.OpenFile(path+"-shm", os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		_ = f.Close()
	}
	_ = os.Chmod(path+"-shm", 0o644)
	_ = openURL(t, "sqlite:"+path).Close()
	if fi, err := os.Stat(path + "-shm"); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("-shm left %04o", fi.Mode().Perm())
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(context.Background(), "sqlite:"+path, store.Options{})
		var pe *store.PermissionError
		if !errors.As(err, &pe) || pe.Path != path || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Fatalf("store file %04o: %v, want a PermissionError naming chmod 600", mode, err)
		}
	}
}
