package main

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	"github.com/connecta-dev/connecta/internal/config"
)

// runtime.* overrides GOGC / GOMEMLIMIT when the key is in the file; an
// absent gcPercent yields to a set GOGC and otherwise takes the default.
func TestApplyRuntime_FileOverridesEnvironment(t *testing.T) {
	prevGC, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(set map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := set[k]; return v, ok }
	}
	gcNow := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

	applyRuntime(config.Runtime{GCPercent: config.DefaultRuntimeGCPercent}, env(nil), log)
	if got := gcNow(); got != 400 {
		t.Errorf("default: gcPercent %d, want 400", got)
	}
	debug.SetGCPercent(150) // as GOGC=150 would have set it at start
	applyRuntime(config.Runtime{GCPercent: config.DefaultRuntimeGCPercent}, env(map[string]string{"GOGC": "150"}), log)
	if got := gcNow(); got != 150 {
		t.Errorf("GOGC without the key: gcPercent %d, want 150", got)
	}
	applyRuntime(config.Runtime{GCPercent: 250, GCPercentSet: true, MemoryLimitBytes: 1 << 30, MemoryLimitSet: true},
		env(map[string]string{"GOGC": "150", "GOMEMLIMIT": "10MiB"}), log)
	if got, lim := gcNow(), debug.SetMemoryLimit(-1); got != 250 || lim != 1<<30 {
		t.Errorf("keys over env: gcPercent %d limit %d, want 250 and 1 GiB", got, lim)
	}
	applyRuntime(config.Runtime{GCPercent: 250, MemoryLimitSet: true}, env(nil), log)
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		t.Errorf("memoryLimitBytes 0: limit %d, want none", lim)
	}
}
