package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// statefulHTTP is a real go-sdk server over streamable HTTP whose tool
// "next" counts per downstream session: the state P4 must not carry from
// one execution into the next.
type statefulHTTP struct {
	url                  string
	initializes, deletes atomic.Int64
	mu                   sync.Mutex
	count                map[string]int
}

func newStatefulHTTP(t testing.TB) *statefulHTTP {
	t.Helper()
	d := &statefulHTTP{count: map[string]int{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "stateful", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "next", Description: "count calls in this session", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			d.mu.Lock()
			d.count[req.Session.ID()]++
			n := d.count[req.Session.ID()]
			d.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodDelete:
			d.deletes.Add(1)
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				d.initializes.Add(1)
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d.url = srv.URL + "/mcp"
	return d
}

// scopeCalls runs n calls of s.next in one scope, as one execution does,
// and returns the values the downstream answered.
func scopeCalls(t testing.TB, g *Gateway, n int) []string {
	t.Helper()
	scope := g.NewScope()
	defer scope.Close()
	var got []string
	for range n {
		res, gerr := g.Invoke(context.Background(), scope, CallRequest{Address: "s.next", Front: FrontDoorProgram, Source: "execute_code"})
		if gerr != nil {
			t.Fatalf("call: %s", gerr.Message)
		}
		got = append(got, string(res.Value))
	}
	return got
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, cond, "timed out waiting for %s", what)
}

// TestP4_SessionPerScopeOnHTTP: each scope (execution or top-level call)
// gets its own downstream session, closed (DELETE) when the scope closes,
// so the downstream's per-session state starts fresh every time.
func TestP4_SessionPerScopeOnHTTP(t *testing.T) {
	d := newStatefulHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.url})
	first := scopeCalls(t, env.g, 3)
	second := scopeCalls(t, env.g, 2)
	if fmt.Sprint(first) != "[1 2 3]" || fmt.Sprint(second) != "[1 2]" {
		t.Fatalf("per-session counts %v then %v: state leaked across scopes", first, second)
	}
	// Two scoped sessions plus the connector's own, which lists the catalog.
	if n := d.initializes.Load(); n != 3 {
		t.Fatalf("%d initializes, want 3", n)
	}
	waitFor(t, "both scoped sessions to be closed", func() bool { return d.deletes.Load() == 2 })

	// Parallel calls of one execution share its one session.
	scope := env.g.NewScope()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, gerr := env.g.Invoke(context.Background(), scope, CallRequest{Address: "s.next", Front: FrontDoorProgram, Source: "execute_code"}); gerr != nil {
				t.Errorf("parallel call: %s", gerr.Message)
			}
		}()
	}
	wg.Wait()
	scope.Close()
	if n := d.initializes.Load(); n != 4 {
		t.Fatalf("%d initializes after a parallel scope, want 4", n)
	}
}

// TestP4_SharedSessionOptIn: sharedSession: true shares the connector's one
// session, so state carries over (the operator said it is stateless).
func TestP4_SharedSessionOptIn(t *testing.T) {
	d := newStatefulHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.url, SharedSession: true})
	first := scopeCalls(t, env.g, 2)
	second := scopeCalls(t, env.g, 2)
	if fmt.Sprint(first) != "[1 2]" || fmt.Sprint(second) != "[3 4]" {
		t.Fatalf("shared counts %v then %v", first, second)
	}
	if n := d.initializes.Load(); n != 1 {
		t.Fatalf("%d initializes, want 1", n)
	}
}

// BenchmarkP4_FiveCallExecution measures what a session per execution costs
// a five-call program over loopback: the same five calls in one scope, on
// the connector's shared session and on a fresh one (initialize,
// notifications/initialized, and the close's DELETE, which is off the
// caller's path).
func BenchmarkP4_FiveCallExecution(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "perExecution"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			d := newStatefulHTTP(b)
			g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "s", URL: d.url, SharedSession: shared}}})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			scopeCalls(b, g, 1) // warm the catalog and the shared session
			b.ResetTimer()
			for range b.N {
				scopeCalls(b, g, 5)
			}
		})
	}
}

// BenchmarkP4_ScopedSessionOpen is the added cost alone: one scoped
// session's initialize and notifications/initialized over loopback, and
// its close (the DELETE).
func BenchmarkP4_ScopedSessionOpen(b *testing.B) {
	d := newStatefulHTTP(b)
	g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "s", URL: d.url}}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	c := g.lookup("s")
	b.ResetTimer()
	for range b.N {
		ls, err := c.connect(context.Background(), true)
		if err != nil {
			b.Fatal(err)
		}
		ls.close()
	}
}
