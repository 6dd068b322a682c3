package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// versionedHTTP is testkit's versioned downstream with a second tool,
// "hold", that signals entered and returns once release is closed.
type versionedHTTP struct {
	*testkit.VersionedMCP

	entered chan struct{} // "hold" has started
	release chan struct{} // "hold" may return
}

func newVersionedHTTP(t testing.TB, versions []string, stateless bool) *versionedHTTP {
	t.Helper()
	d := &versionedHTTP{VersionedMCP: testkit.NewVersionedMCP(t, versions, stateless), entered: make(chan struct{}, 1), release: make(chan struct{})}
	d.Server.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			d.entered <- struct{}{}
			select {
			case <-d.release:
				return &mcp.CallToolResult{Content: text(`"held"`)}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return d
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
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.URL})

	versionRound(t, env.g, "s", 5)
	first := d.Take()
	t.Logf("first round: %v", first)
	if first["initialize"] != 0 || first["server/discover"] != 1 || first["tools/list"] != 1 || first["tools/call"] != 6 {
		t.Fatalf("first round sent %v; want one server/discover, one tools/list, six tools/call and no initialize", first)
	}
	versionRound(t, env.g, "s", 5)
	if again := d.Take(); len(again) != 1 || again["tools/call"] != 6 {
		t.Fatalf("with a fresh catalog the round sent %v; want six tools/call and nothing else", again)
	}

	// A catalog refresh discovers once more, on a fresh connection.
	env.g.lookup("s").invalidateCatalog()
	versionRound(t, env.g, "s", 5)
	if third := d.Take(); third["initialize"] != 0 || third["server/discover"] != 1 || third["tools/list"] != 1 || third["tools/call"] != 6 {
		t.Fatalf("after a refresh the round sent %v; want one server/discover, one tools/list, six tools/call", third)
	}

	if bad := d.BadHeaders(); len(bad) > 0 {
		t.Fatalf("requests without matching Mcp-Method / Mcp-Name: %v", bad)
	}
	if versions := d.Versions(); len(versions) != 1 || !versions["2026-07-28"] {
		t.Fatalf("downstream saw MCP-Protocol-Version %v", versions)
	}
	if v := env.g.ConnectorStates()["s"].ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("connectorStates protocolVersion %q", v)
	}
}

// A downstream that speaks only 2025-06-18 is reached through the session
// fallback, and P4 still gives every execution its own session.
func TestVersionNegotiation_SessionDownstreamFallsBack(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2025-06-18"}, false)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "o", URL: d.URL})
	versionRound(t, env.g, "o", 5)
	got := d.Take()
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
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "l", URL: d.URL, LegacyVersion: true})
	versionRound(t, env.g, "l", 2)
	if got := d.Take(); got["server/discover"] != 0 || got["initialize"] != 3 {
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
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.URL})
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
	if got := d.Take(); got["server/discover"] != 2 {
		t.Fatalf("sent %v; want two server/discover (one per refresh)", got)
	}
}

// Under 2026-07-28 list changes arrive through subscriptions/listen (the
// SDK opens it at connect when the server offers tools.listChanged): a tool
// the server adds is in the next listing.
func TestVersionNegotiation_ListChangedThroughSubscriptionsListen(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "s", URL: d.URL})
	if _, err := env.g.Tools(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	d.Server.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
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
