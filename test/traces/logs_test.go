package traces_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/contract"
	"github.com/connecta-dev/connecta/test/testkit"
)

// TestTrace_DeepWarningsCarryTheRequestsTraceId: the log lines a request
// causes far below the server — the gateway's catalog refresh of a stdio
// connector that exits at once (its start and the refresh failing), and the
// supervisor's "execution over budget" — carry the request's traceId, and
// the spanId of a span of that trace, so a log line leads to the trace.
func TestTrace_DeepWarningsCarryTheRequestsTraceId(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: spawns sandbox children")
	}
	const (
		logTrace = "ffffffffffffffffffffffffffffffff"
		logSpan  = "ffffffffffffffff"
	)
	be := newBackend(t)
	down := newDownstream(t)
	var logs testkit.Buffer
	l := startWith(t, be.endpoint(), down.srv.URL, setup{
		connectors: "  - id: broken\n    command: [sh, -c, 'exit 3']\n",
		executor:   ", cpuTimeMs: 50",
		logs:       &logs,
	})
	program := `async () => {
  try { await connecta.call("broken.anything", {}); } catch (e) {}
  for (;;) {}
}`
	r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": "00-" + logTrace + "-" + logSpan + "-01"},
		Name: contract.ToolName, Arguments: map[string]any{"code": program}})
	if err != nil {
		t.Fatal(err)
	}
	if text := r.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "CPU budget") {
		t.Fatalf("the program was not ended by its CPU budget: %s", text)
	}
	l.close()
	spanIDs := map[string]bool{}
	// request, admission, execution, child spawn, program, the host call
	// and its catalog load
	for _, s := range be.trace(t, logTrace, 7) {
		spanIDs[s.ID] = true
	}
	want := map[string]bool{"stdio server could not be started": false, "catalog refresh failed": false, "execution over budget": false}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec struct {
			Msg     string `json:"msg"`
			TraceID string `json:"traceId"`
			SpanID  string `json:"spanId"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if _, ok := want[rec.Msg]; !ok {
			continue
		}
		if rec.TraceID != logTrace || !spanIDs[rec.SpanID] {
			t.Errorf("%q: traceId %q spanId %q, want the request's trace and one of its spans", rec.Msg, rec.TraceID, rec.SpanID)
		}
		want[rec.Msg] = true
	}
	for msg, seen := range want {
		if !seen {
			t.Errorf("no %q line in the log:\n%s", msg, logs.String())
		}
	}
}
