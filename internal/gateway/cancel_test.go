package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/test/testkit"
)

// abortWatch is a loopback go-sdk downstream whose "block" tool waits until
// the HTTP request that carried it ends (the TCP request torn down by the
// client) or its own SDK context ends, and records which.
type abortWatch struct {
	srv      *httptest.Server
	entered  atomic.Int64
	aborted  atomic.Int64 // the carrying POST's request context ended while the tool ran
	toolDone atomic.Int64 // the SDK handler context ended (notifications/cancelled)
	mu       sync.Mutex
	callReq  context.Context // request context of the latest tools/call POST
	stop     chan struct{}
}

// The two shapes a streamable HTTP downstream takes: stateless with JSON
// responses (the SDK server never hears of a cancellation: only tearing
// down the POST reaches it) and stateful with SSE (the POST's stream plus
// notifications/cancelled on the session).
var downstreamModes = []struct {
	name string
	opts *mcp.StreamableHTTPOptions
}{
	{"stateless_json", &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
	{"stateful_sse", &mcp.StreamableHTTPOptions{}},
}

func newAbortWatch(t *testing.T, opts *mcp.StreamableHTTPOptions) *abortWatch {
	t.Helper()
	w := &abortWatch{stop: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "abort-watch", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.mu.Lock()
			reqCtx := w.callReq
			w.mu.Unlock()
			w.entered.Add(1)
			select {
			case <-reqCtx.Done():
				w.aborted.Add(1)
				return nil, reqCtx.Err()
			case <-ctx.Done():
				w.toolDone.Add(1)
				// The SDK cancelled the handler; keep watching the POST too.
				select {
				case <-reqCtx.Done():
					w.aborted.Add(1)
				case <-w.stop:
				}
				return nil, ctx.Err()
			case <-w.stop:
				return nil, nil
			}
		})
	// stubborn ignores every cancellation (only test cleanup releases it):
	// the worst a downstream can do to Close.
	s.AddTool(&mcp.Tool{Name: "stubborn", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			w.entered.Add(1)
			<-w.stop
			return &mcp.CallToolResult{}, nil // (nil, nil) panics the SDK server under 2026-07-28
		})
	s.AddTool(&mcp.Tool{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(strings.Repeat("x", 2000))}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				w.mu.Lock()
				w.callReq = r.Context()
				w.mu.Unlock()
			}
		}
		inner.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.srv.Close)
	t.Cleanup(func() { close(w.stop) }) // runs first: releases any handler still blocked
	return w
}

func (w *abortWatch) waitEntered(t *testing.T, n int64) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, func() bool { return w.entered.Load() >= n }, "the downstream tool never started")
}

// waitAborted polls (generously) until the downstream saw its request end.
func (w *abortWatch) waitAborted(t *testing.T, n int64) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, func() bool { return w.aborted.Load() >= n },
		"the downstream request was never aborted (tool ctx ended %d times)", w.toolDone.Load())
}

func eventsFor(rec *activity.Recorder, address string) []activity.Event {
	var out []activity.Event
	for _, ev := range rec.Recent(0) {
		if ev.Address == address {
			out = append(out, ev)
		}
	}
	return out
}

// L2: a cancelled call's downstream HTTP request is torn down, so the
// downstream's request context ends; the call returns `cancelled` and is
// recorded once as cancelled.
func TestL2_CancelAbortsDownstreamRequest(t *testing.T) {
	for _, mode := range downstreamModes {
		t.Run(mode.name, func(t *testing.T) {
			w := newAbortWatch(t, mode.opts)
			env := newTestGateway(t, time.Minute, ConnectorSpec{ID: "d", URL: w.srv.URL})
			for _, how := range []string{"caller_ctx", "scope_close"} {
				t.Run(how, func(t *testing.T) {
					before := w.aborted.Load()
					entered := w.entered.Load()
					scope := env.g.NewScope()
					defer scope.Close()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					done := make(chan *Error, 1)
					go func() {
						_, gerr := env.g.Invoke(ctx, scope, CallRequest{Address: "d.block", Front: FrontDoorProgram, Source: "execute_code", RequestID: how})
						done <- gerr
					}()
					w.waitEntered(t, entered+1)
					if how == "caller_ctx" {
						cancel()
					} else {
						scope.Close()
					}
					gerr := <-done
					if gerr == nil || gerr.Code != CodeCancelled || gerr.Retryable {
						t.Fatalf("got %v, want cancelled", gerr)
					}
					w.waitAborted(t, before+1)
					var mine []activity.Event
					for _, ev := range eventsFor(env.activity, "d.block") {
						if ev.RequestID == how {
							mine = append(mine, ev)
						}
					}
					if len(mine) != 1 || mine[0].Outcome != activity.OutcomeCancelled || mine[0].ErrorCode != string(CodeCancelled) {
						t.Fatalf("events %+v, want exactly one cancelled", mine)
					}
				})
			}
		})
	}
}

// L2: Close with a call hung downstream ends the call (`cancelled`), tears
// down its request and returns promptly instead of waiting out the call
// deadline or the SDK's 5 s session-close timeout.
func TestL2_CloseWithHungCallReturnsPromptly(t *testing.T) {
	for _, mode := range downstreamModes {
		t.Run(mode.name, func(t *testing.T) {
			w := newAbortWatch(t, mode.opts)
			env := newTestGateway(t, time.Minute, ConnectorSpec{ID: "d", URL: w.srv.URL}, ConnectorSpec{ID: "s", URL: w.srv.URL})
			done := make(chan *Error, 2)
			for _, address := range []string{"d.block", "s.stubborn"} {
				go func() {
					// No scope: only the gateway's own lifetime can end these calls.
					_, gerr := env.g.Invoke(context.Background(), nil, CallRequest{Address: address, Front: FrontDoorTopLevel, Source: "call_tool"})
					done <- gerr
				}()
			}
			w.waitEntered(t, 2)
			closed := make(chan struct{})
			start := time.Now()
			go func() {
				_ = env.g.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(3 * time.Second):
				t.Fatal("Close did not return within 3 s with a hung call in flight")
			}
			t.Logf("Close took %v", time.Since(start))
			for range 2 {
				if gerr := <-done; gerr == nil || gerr.Code != CodeCancelled {
					t.Fatalf("got %v, want cancelled", gerr)
				}
			}
			w.waitAborted(t, 1)
			for _, address := range []string{"d.block", "s.stubborn"} {
				if evs := eventsFor(env.activity, address); len(evs) != 1 || evs[0].Outcome != activity.OutcomeCancelled {
					t.Fatalf("%s: events %+v", address, evs)
				}
			}
		})
	}
}

// The go-sdk server keeps the inbound request's protocol version in its
// handler context and the go-sdk client reads that same key, so a front
// door handing its handler context to Invoke must not make downstream
// sessions speak the front-door client's version.
func TestCallerContextValuesNeverReachDownstream(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{} // MCP-Protocol-Version headers the downstream got
	down := mcp.NewServer(&mcp.Implementation{Name: "down", Version: "1"}, nil)
	down.AddTool(&mcp.Tool{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"ok":true}`)}, nil
		})
	downH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return down }, nil)
	downSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
			mu.Lock()
			seen[v] = true
			mu.Unlock()
		}
		downH.ServeHTTP(w, r)
	}))
	t.Cleanup(downSrv.Close) // after the gateway's cleanup: its session holds a GET open
	// legacy: the connector's own version (2025-11-25) differs from the front
	// client's (2026-07-28), so a leak would show.
	env := newTestGateway(t, 10*time.Second, ConnectorSpec{ID: "d", URL: downSrv.URL, LegacyVersion: true})

	// The front door: a real go-sdk server whose tool hands its own handler
	// context (carrying the front client's protocol version) to Invoke.
	front := mcp.NewServer(&mcp.Implementation{Name: "front", Version: "1"}, nil)
	front.AddTool(&mcp.Tool{Name: "relay", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			scope := env.g.NewScope()
			defer scope.Close()
			res, gerr := env.g.Invoke(ctx, scope, CallRequest{Address: "d.read", Front: FrontDoorTopLevel, Source: "call_tool"})
			if gerr != nil {
				return &mcp.CallToolResult{IsError: true, Content: text(string(gerr.Code) + ": " + gerr.Message)}, nil
			}
			return &mcp.CallToolResult{Content: text(string(res.Value))}, nil
		})
	// Stateless, as connecta's own front door is: every request's handler
	// context carries that request's MCP-Protocol-Version.
	frontSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return front },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(frontSrv.Close)

	const frontVersion = "2026-07-28" // the front client's version, not ours
	client := mcp.NewClient(&mcp.Implementation{Name: "front-client", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: frontSrv.URL},
		&mcp.ClientSessionOptions{ProtocolVersion: frontVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	// The catalog loads on the gateway's own context; what a call reuses or
	// (re)connects is the session. Warm the catalog, then drop the session so
	// the relayed call connects one itself, on the context it was handed.
	if _, err := env.g.Tools(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	conn := env.g.lookup("d")
	conn.mu.Lock()
	ls := conn.sess
	conn.mu.Unlock()
	conn.drop(ls)
	mu.Lock()
	clear(seen)
	mu.Unlock()
	for i := range 2 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "relay", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != `{"ok":true}` {
			b, _ := json.Marshal(res)
			t.Fatalf("call %d: %s", i, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[frontVersion] || !seen[mcpProtocolVersion] {
		t.Fatalf("downstream saw protocol versions %v; want only %s", seen, mcpProtocolVersion)
	}
}

// V2: a successful call whose serialized result exceeds the caller's inline
// cap carries friction result_too_large; the outcome stays success. No cap
// (0) or a result that fits carries none.
func TestV2_ResultTooLargeFriction(t *testing.T) {
	w := newAbortWatch(t, &mcp.StreamableHTTPOptions{})
	env := newTestGateway(t, 10*time.Second, ConnectorSpec{ID: "d", URL: w.srv.URL}, inProcessSpec("t", nil))
	cases := []struct {
		name, address string
		max           int
		size          func(*CallResult) int
		friction      string
	}{
		{"over the cap", "d.big", 1000, nil, activity.FrictionResultTooLarge},
		{"no cap", "d.big", 0, nil, ""},
		{"fits", "d.big", 1 << 20, nil, ""},
		{"front door measures", "d.big", 1000, func(*CallResult) int { return 10 }, ""},
		{"front door measures over", "t.text_plain", 5, func(r *CallResult) int { return 6 }, activity.FrictionResultTooLarge},
		{"failure carries its own friction", "t.nope", 1, nil, activity.FrictionToolNotFound},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "v2-" + string(rune('a'+i))
			scope := env.g.NewScope()
			defer scope.Close()
			_, _ = env.g.Invoke(context.Background(), scope, CallRequest{Address: tc.address, Front: FrontDoorTopLevel,
				Source: "call_tool", RequestID: id, MaxInlineBytes: tc.max, InlineBytes: tc.size})
			var mine []activity.Event
			for _, ev := range eventsFor(env.activity, tc.address) {
				if ev.RequestID == id {
					mine = append(mine, ev)
				}
			}
			if len(mine) != 1 || mine[0].Friction != tc.friction {
				t.Fatalf("events %+v, want one with friction %q", mine, tc.friction)
			}
			if tc.friction == activity.FrictionResultTooLarge && mine[0].Outcome != activity.OutcomeSuccess {
				t.Fatalf("outcome %q, want success", mine[0].Outcome)
			}
		})
	}
}
