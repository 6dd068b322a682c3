package validate

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/big"
	"strings"
	"testing"
)

// A validator bug must not fail the call, nor switch validation off unseen:
// the call passes through, and the panic is logged and counted. (Before, the
// recover swallowed it.)
func TestPanic_PassesThroughLoggedAndCounted(t *testing.T) {
	var logs bytes.Buffer
	v := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	schema := json.RawMessage(`{"type":"number","multipleOf":2}`)
	c := v.compiled(schema)
	c.root.multipleOf = new(big.Rat) // a corrupted node: Quo by zero panics
	if got, total := v.CheckAll(schema, json.RawMessage(`3`)); got != nil || total != 0 {
		t.Fatalf("a panicking check must pass through, got %v %d", got, total)
	}
	if v.Panics() != 1 || !strings.Contains(logs.String(), "schema validation panicked") {
		t.Fatalf("panics %d, log %q", v.Panics(), logs.String())
	}
	// The evaluation budget is a designed pass-through, not a bug.
	if (*Validator)(nil).Panics() != 0 {
		t.Fatal("nil validator")
	}
}
