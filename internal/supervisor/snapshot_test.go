package supervisor

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
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

// The warm-up leaves the compiled code and the post-initialization snapshot
// in memfds the parent seals for good before any child sees them; children
// restore the snapshot from their descriptor.
func TestSnapshot_WarmUpFillsSealedDescriptorsChildrenRestoreIt(t *testing.T) {
	p, lb := snapshotPool(t, sharedCacheDir(t))
	if p.code == nil || p.snap == nil || len(p.code.key) != 64 {
		t.Fatalf("descriptors after the warm-up: code %+v snapshot %+v; log:\n%s", p.code, p.snap, lb.String())
	}
	for _, f := range []*sealedFile{p.code, p.snap} {
		seals, err := unix.FcntlInt(f.f.Fd(), unix.F_GET_SEALS, 0)
		if err != nil || seals&sealAll != sealAll {
			t.Fatalf("%s seals %#x, %v", f.f.Name(), seals, err)
		}
		if _, err := f.f.WriteAt([]byte{0}, 0); err == nil {
			t.Fatalf("%s is still writable", f.f.Name())
		}
	}
	for range 2 {
		if res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{}); err != nil || res.Err != nil || string(res.Value) != "2" {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	if n := counter(t, p.m.snapshotFallbacks); n != 0 {
		t.Fatalf("%v fallbacks with a good snapshot; log:\n%s", n, lb.String())
	}
}
