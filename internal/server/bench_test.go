package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/test/testkit"
)

// thousandTools is an in-process downstream with 1,000 read-only tools with
// realistic names, descriptions and schemas.
func thousandTools() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "catalog", Version: "1"}, nil)
	nouns := []string{"issue", "project", "user", "label", "comment", "milestone", "release", "build", "job", "artifact"}
	verbs := []string{"list", "get", "search", "count", "export", "describe", "find", "summarize", "compare", "watch"}
	for i := 0; i < 1000; i++ {
		noun, verb := nouns[i%10], verbs[(i/10)%10]
		name := fmt.Sprintf("%s_%s_%d", verb, noun, i/100)
		schema := fmt.Sprintf(`{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100},"state":{"enum":["open","closed","all"]},"page%d":{"type":"integer"}},"required":["id"]}`, i)
		s.AddTool(&mcp.Tool{
			Name:        name,
			Description: fmt.Sprintf("%s the %s records of the tracker, filtered by state and paged; variant %d.", verb, noun, i),
			InputSchema: json.RawMessage(schema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
	}
	return s
}

func BenchmarkSearchTools_1000Tools(b *testing.B) {
	h := newHarness(b, harnessOptions{extra: []gateway.ConnectorSpec{{ID: "catalog", Title: "Catalog", InProcess: thousandTools}}})
	cs := h.connect(b, "")
	args := json.RawMessage(`{"query":"list open issues by state","connector":"catalog","includeSchemas":"compact","limit":20}`)
	// Warm the catalog once; the benchmark measures search, not listing.
	if res := call(b, cs, "search_tools", string(args)); res.IsError {
		b.Fatalf("search: %s", textOf(b, res))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("search: %v", err)
		}
	}
}

// BenchmarkSearchTools_1000Tools_Access is the 1,000-tool search, same run,
// without access rules and with a "*" rule without writes (every row is
// read-only, so both pages are equal; the rules' filter runs on every
// search), reporting the overhead.
func BenchmarkSearchTools_1000Tools_Access(b *testing.B) {
	tokens := []server.Token{{Name: "laptop", Value: tokLaptop}}
	extra := []gateway.ConnectorSpec{{ID: "catalog", Title: "Catalog", InProcess: thousandTools}}
	plain := newHarness(b, harnessOptions{tokens: tokens, extra: extra})
	ruled := newHarness(b, harnessOptions{tokens: tokens, extra: extra, access: "access:\n  - callers: {tokens: [laptop]}\n    connectors: [\"*\"]\n"})
	cp, cr := plain.connect(b, tokLaptop), ruled.connect(b, tokLaptop)
	args := json.RawMessage(`{"query":"list open issues by state","connector":"catalog","includeSchemas":"compact","limit":20}`)
	run := func(cs *mcp.ClientSession) (time.Duration, string) {
		t0 := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("search: %v", err)
		}
		return time.Since(t0), textOf(b, res)
	}
	if _, p := run(cp); func() bool { _, r := run(cr); return r != p }() {
		b.Fatal("the pages differ")
	}
	var tp, tr time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, _ := run(cp)
		c, _ := run(cr)
		tp, tr = tp+a, tr+c
	}
	b.StopTimer()
	b.ReportMetric(float64(tp.Microseconds())/float64(b.N), "plain-us/op")
	b.ReportMetric(float64(tr.Microseconds())/float64(b.N), "rules-us/op")
	b.ReportMetric(100*(float64(tr)/float64(tp)-1), "overhead-%")
}

// BenchmarkCallTool_Overhead measures call_tool through connecta against
// the same downstream round trip made directly, and reports p50/p99 of both
// and the p50 overhead.
func BenchmarkCallTool_Overhead(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	cs := h.connect(b, "")
	client := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	direct, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: h.down.url + "/mcp", HTTPClient: &http.Client{}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	viaArgs := json.RawMessage(`{"address":"down.echo","args":{"q":"x"}}`)
	directArgs := json.RawMessage(`{"q":"x"}`)
	call(b, cs, "call_tool", string(viaArgs)) // warm the catalog and sessions
	via := make([]time.Duration, 0, b.N)
	dir := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: directArgs}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool", Arguments: viaArgs})
		if err != nil || res.IsError {
			b.Fatalf("call_tool: %v", err)
		}
		t2 := time.Now()
		dir = append(dir, t1.Sub(t0))
		via = append(via, t2.Sub(t1))
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(float64(len(s)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(dir, .5), "direct-p50-ms")
	b.ReportMetric(pct(dir, .99), "direct-p99-ms")
	b.ReportMetric(pct(via, .5), "connecta-p50-ms")
	b.ReportMetric(pct(via, .99), "connecta-p99-ms")
	b.ReportMetric(pct(via, .5)-pct(dir, .5), "overhead-p50-ms")
}

// BenchmarkExecuteCode_Parent drives execute_code `1+1` over raw HTTP (a
// keep-alive client that allocates little) and reports the parent's share:
// this test process is the parent, every program runs in a child process, so
// allocs/op and B/op are the server's allocation per execution plus a small
// client constant.
func BenchmarkExecuteCode_Parent(b *testing.B) {
	sharedPool(b)
	h := newHarness(b, harnessOptions{code: withCode})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"async () => 1+1"}}}`)
	client := &http.Client{}
	post := func() {
		req := testkit.MCPRequest(b, h.url+"/mcp", bytes.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`\"result\":2`)) {
			b.Fatalf("status %d: %s", resp.StatusCode, out)
		}
	}
	post()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		post()
	}
}

// BenchmarkStream_HundredLines runs a program that logs 100 lines, plain
// and with a progress token (every line a notification on the response),
// interleaved, and reports the p50 of each and the streaming overhead.
func BenchmarkStream_HundredLines(b *testing.B) {
	sharedPool(b)
	h := newHarness(b, harnessOptions{code: withStreamingCode})
	code := `async () => { for (let i = 0; i < 100; i++) console.log("line " + i); return 100 }`
	run := func(meta map[string]any) {
		resp := h.post(b, context.Background(), rpcCall(1, "execute_code", map[string]any{"code": code}, meta), "")
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(out, []byte(`\"result\":100`)) {
			b.Fatalf("%s", out)
		}
	}
	run(nil)
	plain := make([]time.Duration, 0, b.N)
	streamed := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run(nil)
		t1 := time.Now()
		run(map[string]any{"progressToken": 1})
		plain, streamed = append(plain, t1.Sub(t0)), append(streamed, time.Since(t1))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(plain), "plain-p50-ms")
	b.ReportMetric(p50(streamed), "streamed-p50-ms")
	b.ReportMetric(100*(p50(streamed)/p50(plain)-1), "overhead-%")
}

// BenchmarkAccess_20Rules interleaves call_tool and search_tools on two
// servers with the same connectors and caller, one without access rules and
// one with 20 (the caller matches two, reaching everything through globs),
// and reports the
// same-run overhead of the rules (the hot path: the caller's precomputed
// view, asked at each door).
func BenchmarkAccess_20Rules(b *testing.B) {
	sharedPool(b)
	connectors := "connectors:\n" + demoConnector("tracker", "Tracker", false) + demoConnector("docs", "Docs", false) + demoConnector("payments", "Payments", true)
	var rules strings.Builder
	rules.WriteString("access:\n")
	for i := range 17 {
		fmt.Fprintf(&rules, "  - callers: {tokens: [%s]}\n    connectors: [payments]\n    tools: [\"payments.get_%d*\"]\n", []string{"ci", "ops"}[i%2], i)
	}
	// laptop reaches everything, through globs, so both servers answer
	// the same pages: the difference is the rules' cost alone.
	rules.WriteString("  - callers: {tokens: [laptop]}\n    connectors: [tracker, payments]\n    tools: [\"tracker.*\", \"payments.*\"]\n    writes: true\n")
	rules.WriteString("  - callers: {tokens: [laptop]}\n    connectors: [docs]\n    tools: [\"docs.*_*\"]\n    writes: true\n")
	rules.WriteString("  - callers: {issuedTokens: true}\n    connectors: [\"*\"]\n")
	plain := newAccessServerB(b, accessAuth+connectors)
	ruled := newAccessServerB(b, accessAuth+connectors+rules.String())
	cp, cr := plain.connectB(b, tokLaptop), ruled.connectB(b, tokLaptop)
	callArgs := json.RawMessage(`{"address":"tracker.list_projects","resultMode":"value"}`)
	searchArgs := json.RawMessage(`{"query":"list issues","limit":20}`)
	for _, cs := range []*mcp.ClientSession{cp, cr} { // warm catalogs and sessions
		for _, a := range []json.RawMessage{callArgs, searchArgs} {
			name := "call_tool"
			if a[2] == 'q' {
				name = "search_tools"
			}
			if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: a}); err != nil || res.IsError {
				b.Fatalf("%s: %v", name, err)
			}
		}
	}
	for _, a := range []json.RawMessage{callArgs, searchArgs} { // the same pages: only the cost differs
		name := map[bool]string{true: "search_tools", false: "call_tool"}[a[2] == 'q']
		rp, _ := cp.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: a})
		rr, _ := cr.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: a})
		jp, _ := json.Marshal(rp.StructuredContent)
		jr, _ := json.Marshal(rr.StructuredContent)
		if stripTimings(string(jp)) != stripTimings(string(jr)) {
			b.Fatalf("%s differs:\n%s\n%s", name, jp, jr)
		}
	}
	var tPlain, tRuled time.Duration
	one := func(cs *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		for _, c := range []struct {
			name string
			args json.RawMessage
		}{{"call_tool", callArgs}, {"search_tools", searchArgs}} {
			if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: c.args}); err != nil || res.IsError {
				b.Fatalf("%s: %v", c.name, err)
			}
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tPlain += one(cp)
			tRuled += one(cr)
		} else {
			tRuled += one(cr)
			tPlain += one(cp)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tPlain.Microseconds())/float64(b.N), "plain-us/op")
	b.ReportMetric(float64(tRuled.Microseconds())/float64(b.N), "rules-us/op")
	b.ReportMetric(100*(float64(tRuled)/float64(tPlain)-1), "overhead-%")
}
