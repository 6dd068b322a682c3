package supervisor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func snapshotPool(t *testing.T, dir string) (*Pool, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	p, err := New(context.Background(), testOptions(Options{Slots: 1, Spares: 1, CacheDir: dir,
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(lb, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, lb
}

// The parent's warm-up persists the post-initialization snapshot beside the
// compilation cache and the parent hands its checksum to every child, which
// restores it; a snapshot that no longer matches the parent's checksum is
// not used: the child initializes afresh, the parent warns and counts it.
func TestSnapshot_WarmUpPersistsItChildrenVerifyIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, lb := snapshotPool(t, dir)
	name, sum, ok := strings.Cut(p.snapshot, ":")
	if !ok || len(sum) != 64 {
		t.Fatalf("parent recorded snapshot %q; log:\n%s", p.snapshot, lb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{}); err != nil || res.Err != nil || string(res.Value) != "2" {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if n := counter(t, p.m.snapshotFallbacks); n != 0 {
		t.Fatalf("%v fallbacks with a good snapshot; log:\n%s", n, lb.String())
	}

	// Damage the file behind the parent's back: children must not use it.
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the spare started before the damage, then one after it
		if res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{}); err != nil || res.Err != nil || string(res.Value) != "2" {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if n := counter(t, p.m.snapshotFallbacks); n < 1 {
		t.Fatalf("no fallback counted for a damaged snapshot; log:\n%s", lb.String())
	}
	if !strings.Contains(lb.String(), "snapshot checksum mismatch") {
		t.Fatalf("no WARN naming the mismatch; log:\n%s", lb.String())
	}
}
