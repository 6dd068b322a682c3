package guest

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

func runValue(t *testing.T, e *Engine, code string) string {
	t.Helper()
	out, err := e.Run(context.Background(), Program{Code: code, Limits: testLimits(),
		Providers: []Provider{{Name: "t", Functions: []string{"echo"}}}}, &testHost{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Err != nil {
		t.Fatalf("%s: %v", code, out.Err)
	}
	return string(out.Value)
}

// An engine restored from a persisted snapshot behaves as one that
// initialized itself, run after run, and its Math.random is reseeded per
// run (the snapshot holds no run's seed).
func TestSnapshot_RestoredEngineRunsLikeAFreshOne(t *testing.T) {
	fresh := newTestEngine(t, EngineOptions{})
	data := fresh.MarshalSnapshot()
	restored := newTestEngine(t, EngineOptions{Snapshot: data})
	programs := []string{
		"async () => 1 + 1",
		"async () => (await t.echo(1, 'a'))",
		"async () => [typeof connecta, typeof t.echo, Object.keys(globalThis).length]",
		"async () => { try { null.x } catch (e) { return e.constructor.name + ': ' + e.message } }",
	}
	for _, code := range programs {
		for range 2 { // the primed instance, then a restored one
			if a, b := runValue(t, fresh, code), runValue(t, restored, code); a != b {
				t.Errorf("%s: fresh %s, restored %s", code, a, b)
			}
		}
	}
	r1, r2 := runValue(t, restored, "async () => Math.random()"), runValue(t, restored, "async () => Math.random()")
	if r1 == r2 {
		t.Errorf("two runs of a restored engine drew the same Math.random %s", r1)
	}
}

func TestSnapshot_OtherBuildsAndDamageAreRefused(t *testing.T) {
	data := newTestEngine(t, EngineOptions{}).MarshalSnapshot()
	bad := map[string][]byte{
		"empty":     {},
		"truncated": data[:len(data)-1],
		"other key": append([]byte(snapshotMagic+"0000"), data[len(snapshotMagic)+4:]...),
		"no magic":  append([]byte("x"), data[1:]...),
	}
	for name, b := range bad {
		opts := EngineOptions{Snapshot: b, CacheDir: testCacheDir, MaxArgBytes: 1 << 10, MaxResultChars: 1 << 10}
		if e, err := NewEngine(context.Background(), opts); !errors.Is(err, ErrSnapshotMismatch) {
			if e != nil {
				e.Close()
			}
			t.Errorf("%s: NewEngine error %v, want ErrSnapshotMismatch", name, err)
		}
	}
}

// Code mapped from the trusted compilation cache is unmapped whole when the
// runtime lets it go (the finalizer once assumed the code was its own
// mapping), and a later engine maps it again.
func TestCachedCode_MappedAndReleased(t *testing.T) {
	for range 3 {
		e := newTestEngine(t, EngineOptions{})
		if v := runValue(t, e, "async () => 6 * 7"); v != "42" {
			t.Fatalf("got %s", v)
		}
		e.Close()
		runtime.GC()
		runtime.GC()
	}
}
