package contract

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"github.com/connecta-dev/connecta/test/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Execution failures (E5) need their own pools: overload, cancellation and
// shutdown are pool states.

func newPoolService(t *testing.T, e *env, popts supervisor.Options, o Options) (*supervisor.Pool, *Service) {
	t.Helper()
	cache := filepath.Join(os.TempDir(), "connecta-contract-test-cache")
	popts.CacheDir = cache
	pool, err := supervisor.New(context.Background(), testPoolOptions(popts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	disc, err := discovery.New(discovery.Options{Catalog: e.gw})
	if err != nil {
		t.Fatal(err)
	}
	o.Gateway, o.Discovery, o.Pool = e.gw, disc, pool
	svc, err := New(testOptions(o))
	if err != nil {
		t.Fatal(err)
	}
	return pool, svc
}

func call(svc *Service, ctx context.Context, code string, diagnostics bool) *mcp.CallToolResult {
	args, _ := json.Marshal(map[string]any{"code": code, "diagnostics": diagnostics})
	res, _ := svc.Handle(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolName, Arguments: args}})
	return res
}

// waitHits waits until the fixture saw n more calls of tool.
func waitHits(t *testing.T, e *env, tool string, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool { return e.fixture.count(tool) >= n }, "%s never reached %d hits", tool, n)
}

func TestE5_L7_AdmissionOverloadedTypedBeforeAnyCatalog(t *testing.T) {
	e := testEnv(t)
	_, svc := newPoolService(t, e, supervisor.Options{Slots: 1, MaxQueue: 0, Spares: 1, QueueTimeout: 321 * time.Millisecond}, Options{})
	start := e.fixture.count("hang")
	done := make(chan *mcp.CallToolResult, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- call(svc, ctx, `async () => { await connecta.emit({ type: "text", text: "x" }); await connecta.call("reader.hang") }`, false)
	}()
	waitHits(t, e, "hang", start+1)
	lists := e.fixture.lists.Load()
	res := call(svc, context.Background(), `async () => connecta.search({ query: "x" })`, false)
	want := `{"error":{"code":"executor_overloaded","message":"Executor queue is full.","retryable":true,"retryAfterMs":321}}`
	if textOf(res) != want || !res.IsError {
		t.Fatalf("got %s", textOf(res))
	}
	if e.fixture.lists.Load() != lists {
		t.Fatal("L7: a refused execution loaded a catalog")
	}
	cancel()
	r := <-done
	// Client cancellation mid-run: executor_cancelled, blocks discarded, never visible in the guest.
	if !strings.HasPrefix(textOf(r), `{"error":{"code":"executor_cancelled"`) || !strings.Contains(textOf(r), `"emittedDiscarded":1`) {
		t.Fatalf("cancelled run: %s", textOf(r))
	}
}

func TestE5_M4_ShutdownMidRunReportsDiscard(t *testing.T) {
	e := testEnv(t)
	pool, svc := newPoolService(t, e, supervisor.Options{Slots: 1, MaxQueue: 1, Spares: 1}, Options{})
	start := e.fixture.count("hang")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- call(svc, context.Background(), `async () => { console.log("started"); await connecta.emit({ type: "text", text: "x" }); await connecta.call("reader.hang") }`, false)
	}()
	waitHits(t, e, "hang", start+1)
	_ = pool.Close()
	r := <-done
	want := `{"error":{"code":"executor_closed","message":"Executor is shutting down.","retryable":false},"logs":"started","emittedDiscarded":1}`
	if textOf(r) != want {
		t.Fatalf("got %s", textOf(r))
	}
	sc, _ := json.Marshal(r.StructuredContent)
	if !jsonEqual(sc, []byte(want)) {
		t.Fatal("structuredContent differs")
	}
	after := call(svc, context.Background(), `async () => 1`, false)
	if !strings.Contains(textOf(after), `"code":"executor_closed"`) || strings.Contains(textOf(after), "emittedDiscarded") {
		t.Fatalf("after close: %s", textOf(after))
	}
}

func TestL2_CancelledExecutionAbortsInFlightCalls(t *testing.T) {
	e := testEnv(t)
	_, svc := newPoolService(t, e, supervisor.Options{Slots: 1, MaxQueue: 1, Spares: 1}, Options{})
	start := e.fixture.count("hang")
	before := e.snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(svc, ctx, `async () => { await connecta.call("reader.hang") }`, true) }()
	waitHits(t, e, "hang", start+1)
	cancel()
	r := <-done
	if !strings.Contains(textOf(r), `"code":"executor_cancelled"`) || !strings.Contains(textOf(r), `"diagnostics"`) {
		t.Fatalf("got %s", textOf(r))
	}
	// The in-flight host call was cancelled first and recorded so (L2, V2).
	c := &check{env: e, before: before}
	if !testkit.Poll(5*time.Second, func() bool { return hasOutcome(c, "hang", "cancelled") }) {
		t.Fatalf("no cancelled event: %+v", c.events())
	}
	// The pool is healthy afterwards.
	if r := call(svc, context.Background(), `async () => 9`, false); textOf(r) != `{"result":9}` {
		t.Fatalf("next run: %s", textOf(r))
	}
}

func hasOutcome(c *check, tool, outcome string) bool {
	for _, e := range c.events() {
		if e.ToolName == tool && e.Outcome == outcome {
			return true
		}
	}
	return false
}

// L2's "in-flight host calls abort" down to the connector: the downstream
// handler must see its request end when the execution is cancelled.
func TestL2_DownstreamRequestAbortedOnCancel(t *testing.T) {
	e := testEnv(t)
	_, svc := newPoolService(t, e, supervisor.Options{Slots: 1, MaxQueue: 1, Spares: 1}, Options{})
	start := e.fixture.count("hang")
	cancelledBefore := e.fixture.cancelled.Load()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- call(svc, ctx, `async () => { await connecta.call("reader.hang") }`, false) }()
	waitHits(t, e, "hang", start+1)
	cancel()
	<-done
	testkit.Eventually(t, 5*time.Second, func() bool { return e.fixture.cancelled.Load() != cancelledBefore },
		"the cancelled call's downstream HTTP request was never aborted")
}
