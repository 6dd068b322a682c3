package guest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// testCacheDir is one wazero compilation cache per test binary: a cold
// compile costs ~280 ms, a warm one ~10 ms.
var testCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "guest-cache-")
	if err != nil {
		panic(err)
	}
	testCacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func newTestEngine(t testing.TB, opts EngineOptions) *Engine {
	t.Helper()
	opts.CacheDir = testCacheDir
	if opts.MaxArgBytes == 0 {
		opts.MaxArgBytes = ipc.MaxPayloadBytes
	}
	if opts.MaxResultChars == 0 {
		opts.MaxResultChars = ipc.MaxResultChars
	}
	e, err := NewEngine(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testHost records calls and log entries; reply decides how each call is
// settled (default: resolve with the call's arguments array).
type testHost struct {
	mu    sync.Mutex
	calls []Call
	logs  []LogEntry
	reply func(ctx context.Context, c Call, settle func(Reply))
}

func (h *testHost) Call(ctx context.Context, c Call, settle func(Reply)) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if h.reply != nil {
		h.reply(ctx, c, settle)
		return
	}
	settle(Reply{Value: c.Args})
}

func (h *testHost) Log(e LogEntry) {
	h.mu.Lock()
	h.logs = append(h.logs, e)
	h.mu.Unlock()
}

func (h *testHost) callCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

var connectaProvider = []Provider{{Name: "connecta", Functions: []string{"search", "describe", "call", "emit"}}}

// testLimits keep failing rows quick but leave ordinary programs room on a
// loaded machine; the defaults are exercised separately.
func testLimits() Limits {
	return Limits{CPUTime: time.Second, Wall: 10 * time.Second}
}

func runProgram(t testing.TB, e *Engine, h Host, prog Program) *Outcome {
	t.Helper()
	if h == nil {
		h = &testHost{}
	}
	if prog.Providers == nil {
		prog.Providers = connectaProvider
	}
	out, err := e.Run(context.Background(), prog, h)
	if err != nil {
		t.Fatalf("Run(%.60q): %v", prog.Code, err)
	}
	return out
}

// wantValue asserts success with exactly this JSON text.
func wantValue(t testing.TB, out *Outcome, want string) {
	t.Helper()
	if out.Err != nil {
		t.Fatalf("error %s: %q, want value %s", out.Err.Kind, out.Err.Message, want)
	}
	if string(out.Value) != want {
		t.Fatalf("value %s, want %s", out.Value, want)
	}
}

// wantError asserts failure of this kind whose message contains substr.
func wantError(t testing.TB, out *Outcome, kind ErrorKind, substr string) {
	t.Helper()
	if out.Err == nil {
		t.Fatalf("value %s, want %s error containing %q", out.Value, kind, substr)
	}
	if out.Err.Kind != kind || !strings.Contains(out.Err.Message, substr) {
		t.Fatalf("error %s: %q, want %s containing %q", out.Err.Kind, out.Err.Message, kind, substr)
	}
}

// assertHealthy proves the engine still runs programs after a bad one.
func assertHealthy(t testing.TB, e *Engine) {
	t.Helper()
	out := runProgram(t, e, nil, Program{Code: "async () => 3 + 4", Limits: testLimits()})
	wantValue(t, out, "7")
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
