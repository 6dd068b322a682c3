package main

import (
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/connecta-dev/connecta/internal/config"
)

// applyRuntime sets the serving process's GC target and memory limit from
// runtime.* (docs/DECISIONS.md): a key in the file overrides GOGC / GOMEMLIMIT; an
// absent key leaves a set variable alone and otherwise takes the default.
// Only serve calls it: a sandbox child never reaches here, and its heap is
// bounded by the engine, not by the Go runtime.
func applyRuntime(r config.Runtime, lookupEnv func(string) (string, bool), log *slog.Logger) {
	gc := "runtime.gcPercent"
	if env, fromEnv := lookupEnv("GOGC"); r.GCPercentSet || !fromEnv {
		debug.SetGCPercent(r.GCPercent)
	} else {
		gc = "GOGC=" + env
	}
	if r.MemoryLimitSet {
		limit := r.MemoryLimitBytes
		if limit == 0 {
			limit = math.MaxInt64 // no limit, as the runtime spells it
		}
		debug.SetMemoryLimit(limit)
	}
	// A negative limit reads the current one without changing it.
	log.Debug("go runtime", "gcTarget", gc, "memoryLimitBytes", debug.SetMemoryLimit(-1))
}
