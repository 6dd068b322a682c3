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
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// versionedHTTP is a real go-sdk server over streamable HTTP that speaks
// only the given protocol versions; it records every JSON-RPC method it is
// sent and the Mcp-Method / Mcp-Name headers that came with each.
type versionedHTTP struct {
	url    string
	server *mcp.Server

	mu       sync.Mutex
	methods  []string
	badHeads []string // requests whose Mcp-Method / Mcp-Name did not match the body
	versions map[string]bool

	entered chan struct{} // "hold" has started
	release chan struct{} // "hold" may return
}

func newVersionedHTTP(t testing.TB, versions []string, stateless bool) *versionedHTTP {
	t.Helper()
	d := &versionedHTTP{versions: map[string]bool{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "versioned", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(string(req.Params.Arguments))}, nil
		})
	server.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			d.entered <- struct{}{}
			select {
			case <-d.release:
				return &mcp.CallToolResult{Content: text(`"held"`)}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	d.server = server
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
				d.mu.Lock()
				d.methods = append(d.methods, msg.Method)
				d.versions[r.Header.Get("Mcp-Protocol-Version")] = true
				if stateless && msg.ID != nil {
					wantName := ""
					if msg.Method == "tools/call" {
						wantName = msg.Params.Name
					}
					if r.Header.Get("Mcp-Method") != msg.Method || r.Header.Get("Mcp-Name") != wantName {
						d.badHeads = append(d.badHeads, fmt.Sprintf("%s: Mcp-Method %q Mcp-Name %q", msg.Method, r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name")))
					}
				}
				d.mu.Unlock()
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d.url = srv.URL + "/mcp"
	return d
}

// take returns the methods seen since the last take, by count.
func (d *versionedHTTP) take() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, m := range d.methods {
		out[m]++
	}
	d.methods = nil
	return out
}

// program runs n calls in one scope (one execution) and one top-level call
// (call_tool), checking every answer.
func versionRound(t *testing.T, g *Gateway, id string, n int) {
	t.Helper()
	scope := g.NewScope()
	for i := range n {
		args := fmt.Sprintf(`{"i":%d}`, i)
		res, gerr := g.Invoke(context.Background(), scope, CallRequest{Address: id + ".echo", Args: json.RawMessage(args), Front: FrontDoorProgram, Source: "execute_code"})
		if gerr != nil {
			t.Fatalf("program call %d: %s: %s", i, gerr.Code, gerr.Message)
		}
		if string(res.Value) != args {
			t.Fatalf("program call %d: got %s, want %s", i, res.Value, args)
		}
	}
	scope.Close()
	top := g.NewScope()
	defer top.Close()
	if _, gerr := g.Invoke(context.Background(), top, CallRequest{Address: id + ".echo", Front: FrontDoorTopLevel, Source: "call_tool"}); gerr != nil {
		t.Fatalf("call_tool: %s: %s", gerr.Code, gerr.Message)
	}
}

// Under versionNegotiation auto a 2026-07-28-only downstream is reached
// without initialize: one server/discover per catalog refresh, then one
// connection every execution reuses, so a five-call program sends five
// tools/call and nothing else once the catalog is fresh; every request
// carries Mcp-Method, and tools/call Mcp-Name.
func TestVersionNegotiation_StatelessDownstreamNoHandshake(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.url})

	versionRound(t, env.g, "s", 5)
	first := d.take()
	t.Logf("first round: %v", first)
	if first["initialize"] != 0 || first["server/discover"] != 1 || first["tools/list"] != 1 || first["tools/call"] != 6 {
		t.Fatalf("first round sent %v; want one server/discover, one tools/list, six tools/call and no initialize", first)
	}
	versionRound(t, env.g, "s", 5)
	if again := d.take(); len(again) != 1 || again["tools/call"] != 6 {
		t.Fatalf("with a fresh catalog the round sent %v; want six tools/call and nothing else", again)
	}

	// A catalog refresh discovers once more, on a fresh connection.
	env.g.lookup("s").invalidateCatalog()
	versionRound(t, env.g, "s", 5)
	if third := d.take(); third["initialize"] != 0 || third["server/discover"] != 1 || third["tools/list"] != 1 || third["tools/call"] != 6 {
		t.Fatalf("after a refresh the round sent %v; want one server/discover, one tools/list, six tools/call", third)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.badHeads) > 0 {
		t.Fatalf("requests without matching Mcp-Method / Mcp-Name: %v", d.badHeads)
	}
	if len(d.versions) != 1 || !d.versions["2026-07-28"] {
		t.Fatalf("downstream saw MCP-Protocol-Version %v", d.versions)
	}
	if v := env.g.ConnectorStates()["s"].ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("connectorStates protocolVersion %q", v)
	}
}

// A downstream that speaks only 2025-06-18 is reached through the session
// fallback, and P4 still gives every execution its own session.
func TestVersionNegotiation_SessionDownstreamFallsBack(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2025-06-18"}, false)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "o", URL: d.url})
	versionRound(t, env.g, "o", 5)
	got := d.take()
	// The connector's own session (catalog) and one per scope (P4): three
	// initializes; only the first session tried server/discover (refused).
	if got["initialize"] != 3 || got["server/discover"] != 1 || got["tools/list"] != 1 || got["tools/call"] != 6 {
		t.Fatalf("sent %v; want one server/discover, three initialize, one tools/list, six tools/call", got)
	}
	if v := env.g.ConnectorStates()["o"].ProtocolVersion; v != "2025-06-18" {
		t.Fatalf("connectorStates protocolVersion %q", v)
	}
}

// versionNegotiation: legacy never sends server/discover, even to a
// downstream that would speak 2026-07-28.
func TestVersionNegotiation_LegacyPinsSessions(t *testing.T) {
	d := newVersionedHTTP(t, nil, false)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "l", URL: d.url, LegacyVersion: true})
	versionRound(t, env.g, "l", 2)
	if got := d.take(); got["server/discover"] != 0 || got["initialize"] != 3 {
		t.Fatalf("sent %v; want no server/discover and three initialize", got)
	}
	if v := env.g.ConnectorStates()["l"].ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("connectorStates protocolVersion %q", v)
	}
}

// A catalog refresh under 2026-07-28 moves the connector to a fresh
// connection; a call still running on the old one finishes there, and the
// old connection closes after it.
func TestVersionNegotiation_RefreshRetiresConnectionAfterItsCalls(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.url})
	c := env.g.lookup("s")
	if _, err := env.g.Tools(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	old := c.sess
	c.mu.Unlock()
	done := make(chan *Error, 1)
	go func() {
		_, gerr := env.g.Invoke(context.Background(), nil, CallRequest{Address: "s.hold", Front: FrontDoorTopLevel, Source: "call_tool"})
		done <- gerr
	}()
	<-d.entered
	c.invalidateCatalog()
	if _, err := env.g.Tools(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	fresh := c.sess
	c.mu.Unlock()
	if fresh == old || fresh == nil {
		t.Fatal("the refresh kept the old connection")
	}
	if old.dead.Load() {
		t.Fatal("the old connection closed under its running call")
	}
	close(d.release)
	if gerr := <-done; gerr != nil {
		t.Fatalf("the call on the retired connection failed: %s: %s", gerr.Code, gerr.Message)
	}
	waitFor(t, "the retired connection to close", func() bool { return old.dead.Load() })
	if got := d.take(); got["server/discover"] != 2 {
		t.Fatalf("sent %v; want two server/discover (one per refresh)", got)
	}
}

// Under 2026-07-28 list changes arrive through subscriptions/listen (the
// SDK opens it at connect when the server offers tools.listChanged): a tool
// the server adds is in the next listing.
func TestVersionNegotiation_ListChangedThroughSubscriptionsListen(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.url})
	if _, err := env.g.Tools(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	d.server.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	c := env.g.lookup("s")
	waitFor(t, "list_changed to mark the catalog stale", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cat.dirty
	})
	tools, err := env.g.Tools(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 3 {
		t.Fatalf("%d tools after list_changed, want 3", len(tools))
	}
}

// A downstream ttlMs above 0 on tools/list caps how long the catalog is
// served; 0 (or none) keeps ours, as does a ttlMs longer than ours.
func TestCatalogTTL_DownstreamTTLMsCapsOurs(t *testing.T) {
	for _, tc := range []struct {
		ttlMs int64
		want  time.Duration
	}{{2000, 2 * time.Second}, {0, DefaultCatalogTTL}, {int64(DefaultCatalogTTL/time.Millisecond) * 2, DefaultCatalogTTL}} {
		server := mcp.NewServer(&mcp.Implementation{Name: "ttl", Version: "1"}, &mcp.ServerOptions{
			SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
				if _, ok := req.(*mcp.ListToolsRequest); ok {
					c.TTLMs = int(tc.ttlMs)
				}
			},
		})
		server.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
		env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "d", URL: srv.URL})
		if _, err := env.g.Tools(context.Background(), "d"); err != nil {
			t.Fatal(err)
		}
		c := env.g.lookup("d")
		c.mu.Lock()
		got := c.cat.entry.expires.Sub(c.cat.entry.fetchedAt)
		c.mu.Unlock()
		if got != tc.want {
			t.Errorf("ttlMs %d: catalog served for %v, want %v", tc.ttlMs, got, tc.want)
		}
		_ = env.g.Close()
		srv.Close()
	}
}
