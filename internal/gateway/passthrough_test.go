package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A check that passes through is visible: counted by reason (every reason
// at 0 from start) and logged once per (connector, tool, reason); the call
// still reaches the downstream.
func TestE8_PassThroughIsCountedAndLoggedOnce(t *testing.T) {
	var calls atomic.Int64
	server := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "pt", Version: "1"}, nil)
		for name, schema := range map[string]string{
			"remote":  `{"type":"object","properties":{"a":{"$ref":"https://example.invalid/other.json"}}}`,
			"checked": `{"type":"object","properties":{"a":{"type":"integer"}}}`,
		} {
			s.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(schema), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					calls.Add(1)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
				})
		}
		return s
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{{ID: "pt", InProcess: server}},
		CallTimeout: 5 * time.Second,
		Validator:   validate.New(validate.Options{}),
		Metrics:     reg,
		Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	count := func(reason validate.Reason) float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "connecta_validation_passthrough_total")
		if err != nil || n != len(validate.Reasons()) {
			t.Fatalf("series %d (want one per reason), %v", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "connecta_validation_passthrough_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == string(reason) {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Fatalf("no series for %s", reason)
		return 0
	}
	for _, r := range validate.Reasons() {
		if count(r) != 0 {
			t.Fatalf("%s not at 0 from start", r)
		}
	}
	call := func(tool, args string) *Error {
		scope := g.NewScope()
		defer scope.Close()
		_, gerr := g.Invoke(context.Background(), scope, CallRequest{Address: "pt." + tool, Args: json.RawMessage(args),
			Front: FrontDoorProgram, Source: "execute_code", RequestID: "r", Actor: "tester"})
		return gerr
	}
	for range 3 {
		if gerr := call("remote", `{"a":"anything"}`); gerr != nil {
			t.Fatalf("a pass-through must reach the downstream: %v", gerr)
		}
	}
	if gerr := call("checked", `{"a":"x"}`); gerr == nil || gerr.Code != CodeInvalidArgs {
		t.Fatalf("a supported schema is still enforced: %v", gerr)
	}
	if calls.Load() != 3 || count(validate.ReasonRemoteRef) != 3 || count(validate.ReasonBudget) != 0 {
		t.Fatalf("calls %d, remote_ref %v", calls.Load(), count(validate.ReasonRemoteRef))
	}
	if n := strings.Count(logs.String(), "argument validation passed through"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
	for _, want := range []string{"connector=pt", "tool=remote", "reason=remote_ref"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log line lacks %s:\n%s", want, logs.String())
		}
	}
}

// A tool's input schema is compiled once per catalog generation, however
// small the validator's LRU: the catalog entry keeps it.
func TestE8_InputSchemaCompiledOncePerCatalogGeneration(t *testing.T) {
	v := validate.New(validate.Options{CacheEntries: 1})
	entry := &catalogEntry{inputs: new(sync.Map), tools: []Tool{
		{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		{Name: "b", InputSchema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}}}`)},
	}}
	first := entry.inputSchema(&entry.tools[0], v)
	for range 3 {
		_ = entry.inputSchema(&entry.tools[1], v) // evicts a from the LRU of one
		if got := entry.inputSchema(&entry.tools[0], v); got != first {
			t.Fatal("a's schema was compiled again within one catalog generation")
		}
	}
	if r := first.Evaluate(json.RawMessage(`{"n":"x"}`)); len(r.Findings) != 1 {
		t.Fatalf("the kept schema still checks: %+v", r)
	}
	next := &catalogEntry{inputs: new(sync.Map), tools: entry.tools}
	if next.inputSchema(&next.tools[0], v) == first {
		t.Fatal("a new catalog generation keeps its own compiled schemas")
	}
}
