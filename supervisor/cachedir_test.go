package supervisor

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func cacheDirPool(dir string) *Pool {
	return &Pool{opts: Options{CacheDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A cache directory others can read or write is never used as it is: its
// entries are native code. A private subdirectory is used instead.
func TestCacheDir_OpenDirectoryUsesAPrivateSubdirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := cacheDirPool(dir).prepareCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "connecta-"+strconv.Itoa(os.Getuid()))
	if got != want {
		t.Fatalf("cache dir %q, want %q", got, want)
	}
	fi, err := os.Stat(got)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("private subdirectory: %v, mode %v", err, fi.Mode())
	}

	// A private directory is used as it is.
	priv := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, err := cacheDirPool(priv).prepareCacheDir(); err != nil || got != priv {
		t.Fatalf("private dir: %q, %v", got, err)
	}
}

// When no private directory can be had, the pool refuses to start and says
// what to do, instead of letting every child compile in memory.
func TestCacheDir_UnusableRefusesToBootNamingTheFix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "connecta-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(sub, 0o755); err != nil { // squatted, or left open
		t.Fatal(err)
	}
	if err := os.Chmod(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), testOptions(Options{CacheDir: dir, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err == nil {
		t.Fatal("New accepted an unusable cache directory")
	}
	for _, want := range []string{dir, "chmod 700", "executor.cacheDir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cacheDirPool(file).prepareCacheDir(); err == nil || !strings.Contains(err.Error(), "executor.cacheDir") {
		t.Fatalf("a file as cache dir: %v", err)
	}
}
