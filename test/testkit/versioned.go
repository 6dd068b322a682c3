package testkit

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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// VersionedMCP is a real go-sdk server over streamable HTTP that speaks
// only the given protocol versions and has one tool, "echo" (read-only; it
// answers its arguments as text). It records every JSON-RPC method it is
// sent, the MCP-Protocol-Version of each, and, when stateless, each request
// whose Mcp-Method / Mcp-Name headers do not match its body. It stops when
// the test ends.
type VersionedMCP struct {
	URL    string
	Server *mcp.Server

	mu       sync.Mutex
	methods  map[string]int
	badHeads []string
	versions map[string]bool
}

// NewVersionedMCP starts a VersionedMCP; nil versions are the SDK's own.
func NewVersionedMCP(t testing.TB, versions []string, stateless bool) *VersionedMCP {
	t.Helper()
	d := &VersionedMCP{methods: map[string]int{}, versions: map[string]bool{}}
	d.Server = mcp.NewServer(&mcp.Implementation{Name: "versioned", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	d.Server.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return d.Server }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			d.record(r, body, stateless)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL + "/mcp"
	return d
}

func (d *VersionedMCP) record(r *http.Request, body []byte, stateless bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.methods[msg.Method]++
	d.versions[r.Header.Get("Mcp-Protocol-Version")] = true
	if !stateless || msg.ID == nil {
		return
	}
	wantName := ""
	if msg.Method == "tools/call" {
		wantName = msg.Params.Name
	}
	if r.Header.Get("Mcp-Method") != msg.Method || r.Header.Get("Mcp-Name") != wantName {
		d.badHeads = append(d.badHeads, fmt.Sprintf("%s: Mcp-Method %q Mcp-Name %q", msg.Method, r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name")))
	}
}

// Take returns the methods seen since the last Take, by count.
func (d *VersionedMCP) Take() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.methods
	d.methods = map[string]int{}
	return out
}

// BadHeaders are the requests whose Mcp-Method / Mcp-Name did not match
// the body (stateless only).
func (d *VersionedMCP) BadHeaders() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.badHeads...)
}

// Versions are the MCP-Protocol-Version headers seen ("" for none).
func (d *VersionedMCP) Versions() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.versions))
	for v := range d.versions {
		out[v] = true
	}
	return out
}
