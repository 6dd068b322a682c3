package contract_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/contract"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Through the real /mcp of the application as app.New builds it (the seven
// tools, request admission, identity): execute_code is listed with its
// description, runs, records activity with the request's identity, and a
// program's call and call_tool meet the same refusal (S6). An external test
// package, because app imports contract.
func TestServer_ExecuteCodeThroughRealMCPEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: spawns sandbox children")
	}
	ctx := context.Background()
	downstream := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "inproc", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"pong":true}`}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "erase", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "erased"}}}, nil
			})
		return s
	}
	cache := filepath.Join(os.TempDir(), "connecta-contract-test-cache")
	cfg, err := config.Parse("e2e.yaml", []byte(fmt.Sprintf("connectors: []\nexecutor: {concurrency: 1, maxQueueSize: 4, spares: 1, cacheDir: %q}\n", cache)), config.Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Options{Config: cfg, Executor: true,
		Connectors: []gateway.ConnectorSpec{{ID: "inproc", Title: "In process", InProcess: downstream}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv, rec := a.Server, a.Activity
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, tl := range tools.Tools {
		if tl.Name == contract.ToolName {
			desc = tl.Description
		}
	}
	if !strings.Contains(desc, "Connectors: inproc (In process).") || !strings.Contains(desc, "20 host calls") {
		t.Fatalf("execute_code description: %q", desc)
	}
	run := func(code string) string {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: contract.ToolName, Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Content[0].(*mcp.TextContent).Text
	}
	if got := run(`async () => 1 + 1`); got != `{"result":2}` {
		t.Fatal(got)
	}
	if got := run(`async () => (await connecta.call("inproc.ping")).pong`); got != `{"result":true}` {
		t.Fatal(got)
	}
	got := run(`async () => { try { await connecta.call("inproc.erase") } catch (e) { return e.code } }`)
	top, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": "inproc.erase"}})
	if err != nil {
		t.Fatal(err)
	}
	topText := top.Content[0].(*mcp.TextContent).Text
	if got != `{"result":"destructive_tool_requires_approval"}` || !strings.Contains(topText, "destructive_tool_requires_approval") {
		t.Fatalf("S6 parity: program %s, call_tool %s", got, topText)
	}
	var sawProgramEvent bool
	for _, e := range rec.Recent(100) {
		if e.Source == "execute_code" && e.ToolName == "ping" {
			sawProgramEvent = true
			if e.RequestID == "" {
				t.Errorf("execute_code event without the request's identity: %+v", e)
			}
		}
	}
	if !sawProgramEvent {
		t.Fatal("no execute_code activity event")
	}
}
