package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

func TestS5_UnwrapsDownstreamResults(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", nil))
	cases := []struct {
		name, address, want string
	}{
		// The go-sdk server itself escapes <&>; those bytes pass through as sent.
		{"structuredContent wins, exact bytes", "t.read_items", `{"z":1,"a":{"n":12345678901234567890},"html":"\u003c\u0026\u003e"}`},
		{"text JSON-parsed", "t.text_json", `{"b":1,"a":[1,2]}`},
		{"text blocks joined with newline", "t.text_multi", `[
1]`},
		{"raw text when it does not parse, no HTML escaping", "t.text_plain", `"hello <world> & co"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, gerr := env.call(t, tc.address, "", false)
			if gerr != nil {
				t.Fatalf("unexpected error %s", errJSON(t, gerr))
			}
			want := tc.want
			if tc.address == "t.text_multi" {
				want = `[1]`
			}
			if string(res.Value) != want {
				t.Fatalf("value = %s, want %s", res.Value, want)
			}
			if res.Result == nil || res.Attempts != 1 {
				t.Fatalf("result %v attempts %d", res.Result, res.Attempts)
			}
		})
	}
	t.Run("non-text content is the raw result", func(t *testing.T) {
		res, gerr := env.call(t, "t.image", "", false)
		if gerr != nil {
			t.Fatal(errJSON(t, gerr))
		}
		var v struct {
			Content []map[string]any `json:"content"`
		}
		if err := json.Unmarshal(res.Value, &v); err != nil || len(v.Content) != 1 || v.Content[0]["type"] != "image" {
			t.Fatalf("value = %s", res.Value)
		}
	})
	t.Run("args pass through exactly", func(t *testing.T) {
		args := `{"z":"<b>","big":12345678901234567890,"a":[1,{"y":null}]}`
		res, gerr := env.call(t, "t.echo", args, false)
		if gerr != nil {
			t.Fatal(errJSON(t, gerr))
		}
		if string(res.Value) != strings.ReplaceAll(strings.ReplaceAll(args, "<", `\u003c`), ">", `\u003e`) {
			t.Fatalf("echo = %s", res.Value)
		}
	})
	t.Run("isError throws connector_call_failed with the downstream text", func(t *testing.T) {
		_, gerr := env.call(t, "t.fails", "", false)
		if gerr == nil || gerr.Code != CodeConnectorCallFailed || gerr.Message != "boom: widget 7 is broken" || gerr.Retryable {
			t.Fatalf("got %v", gerr)
		}
		_, gerr = env.call(t, "t.fails_ratelimit", "", false)
		if gerr == nil || gerr.Code != CodeConnectorCallFailed || !gerr.Retryable {
			t.Fatalf("rate-limit prose: got %v", gerr)
		}
	})
}

func TestS6_ReadOnlyPredicateFailsClosed(t *testing.T) {
	spec := inProcessSpec("t", nil)
	spec.ReadOnly = []string{"classified", "destructive"}
	spec.ApprovalRequired = []string{"ro_but_approval", "destructive"}
	env := newTestGateway(t, 5*time.Second, spec)
	tools, err := env.g.Tools(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Tool{}
	for i := range tools {
		byName[tools[i].Name] = &tools[i]
	}
	cases := []struct {
		tool string
		want bool
	}{
		{"read_items", true},
		{"unannotated", false},
		{"destructive", false},   // in both lists: approval wins
		{"contradictory", false}, // readOnlyHint contradicted by destructiveHint
		{"not_destructive_write", false},
		{"classified", true},       // operator readOnly
		{"ro_but_approval", false}, // operator approvalRequired
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			tool := byName[tc.tool]
			if tool == nil {
				t.Fatalf("tool %s not listed", tc.tool)
			}
			if got := env.g.ReadOnly(tool); got != tc.want {
				t.Fatalf("ReadOnly = %v, want %v", got, tc.want)
			}
		})
	}
	if env.g.ReadOnly(nil) {
		t.Fatal("nil tool is read-only")
	}
}

func TestE4_DestructiveRefusalNeverDispatched(t *testing.T) {
	var counters serverCounters
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", &counters))
	big := `{"blob":"` + strings.Repeat("x", 600) + `"}`
	cases := []struct {
		name, address, args string
		echo                bool
	}{
		{"unannotated", "t.unannotated", `{"a": 1}`, true},
		{"destructive", "t.destructive", "", true},
		{"contradictory", "t.contradictory", `{}`, true},
		{"args over 512 bytes are not echoed", "t.unannotated", big, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := counters.calls.Load()
			res, gerr := env.call(t, tc.address, tc.args, false)
			if gerr == nil || gerr.Code != CodeDestructiveNeedsApproval || gerr.Retryable {
				t.Fatalf("got %v", gerr)
			}
			if counters.calls.Load() != before || res.Attempts != 0 {
				t.Fatal("refused call reached the downstream")
			}
			na, _ := gerr.Detail("nextAction").(Object)
			b, _ := json.Marshal(na)
			s := string(b)
			if !strings.HasPrefix(s, `{"tool":"call_destructive_tool","arguments":{"address":"`+tc.address+`"`) {
				t.Fatalf("nextAction = %s", s)
			}
			hasArgs := strings.Contains(s, `"args":`)
			if hasArgs != tc.echo {
				t.Fatalf("args echoed = %v, want %v: %s", hasArgs, tc.echo, s)
			}
			if !tc.echo && !strings.Contains(s, "re-send") {
				t.Fatalf("purpose does not ask to re-send: %s", s)
			}
			if tc.args == `{"a": 1}` && !strings.Contains(s, `"args":{"a":1}`) {
				t.Fatalf("args not echoed whole: %s", s)
			}
		})
	}
	t.Run("AllowWrite dispatches any tool, read-only included", func(t *testing.T) {
		for _, address := range []string{"t.unannotated", "t.read_items"} {
			before := counters.calls.Load()
			if _, gerr := env.call(t, address, "", true); gerr != nil {
				t.Fatal(errJSON(t, gerr))
			}
			if counters.calls.Load() != before+1 {
				t.Fatal("not dispatched exactly once")
			}
		}
	})
}

func TestE7_PolicyRefusalNeverRetryable(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("svc-503", nil))
	cases := []struct {
		address string
		code    Code
	}{
		{"svc-503.temporary_429", CodeUnknownTool},
		{"svc-504.read_items", CodeUnknownAddress},
		{"svc-503.unannotated", CodeDestructiveNeedsApproval},
		{"timeout-503", CodeUnknownAddress},
		{"svc-503." + strings.Repeat("é", 30000), CodeUnknownTool},
	}
	for _, tc := range cases {
		t.Run(string(tc.code), func(t *testing.T) {
			_, gerr := env.call(t, tc.address, "", false)
			if gerr == nil || gerr.Code != tc.code || gerr.Retryable {
				t.Fatalf("got %v", gerr)
			}
			if len(errJSON(t, gerr)) > 4096 {
				t.Fatalf("refusal not clamped: %d bytes", len(errJSON(t, gerr)))
			}
			if tc.code != CodeDestructiveNeedsApproval {
				if !strings.Contains(errJSON(t, gerr), `"function":"connecta.search"`) {
					t.Fatalf("program recovery not keyed to connecta.search: %s", errJSON(t, gerr))
				}
			}
		})
	}
}

func TestE8_InvalidArgsValueFree(t *testing.T) {
	var counters serverCounters
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", &counters))
	secret := "VALUE-THAT-MUST-NOT-ECHO"
	_, gerr := env.call(t, "t.strict", `{"n":"`+secret+`","extra":"`+secret+`"}`, false)
	if gerr == nil || gerr.Code != CodeInvalidArgs || gerr.Retryable {
		t.Fatalf("got %v", gerr)
	}
	s := errJSON(t, gerr)
	if strings.Contains(s, secret) {
		t.Fatalf("finding echoes a value: %s", s)
	}
	for _, want := range []string{`"validation":{"issues":[`, `"connector":"t"`, `"operation":"t.strict"`,
		`"nextAction":{"function":"connecta.search","arguments":{"query":"strict","connector":"t","includeSchemas":"compact"}`,
		`"retry":"Correct the listed arguments and retry t.strict."`} {
		if !strings.Contains(s, want) {
			t.Fatalf("missing %s in %s", want, s)
		}
	}
	if counters.calls.Load() != 0 {
		t.Fatal("invalid call dispatched")
	}
	// Top-level front door keys recovery to search_tools.
	scope := env.g.NewScope()
	defer scope.Close()
	_, gerr = env.g.Invoke(context.Background(), scope, CallRequest{Address: "t.strict", Args: json.RawMessage(`[]`), Front: FrontDoorTopLevel, Source: "call_tool"})
	if gerr == nil || gerr.Code != CodeInvalidArgs || !strings.Contains(errJSON(t, gerr), `"tool":"search_tools"`) {
		t.Fatalf("top level: %v", gerr)
	}
	// A downstream JSON-RPC -32602 is invalid_args too.
	_, gerr = env.call(t, "t.rpc_invalid", "", false)
	if gerr == nil || gerr.Code != CodeInvalidArgs || gerr.Message != "n must be positive" {
		t.Fatalf("rpc -32602: %v", gerr)
	}
}

func TestE2_InputRequiredUnsupported(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", nil))
	_, gerr := env.call(t, "t.elicit", "", false)
	if gerr == nil || gerr.Code != CodeInputRequiredUnsupported || gerr.Retryable {
		t.Fatalf("got %v", gerr)
	}
}

func TestE3_MissingCredentialIsAuthRequired(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "tracker", URL: m.url(), MissingCredential: "${credential:tracker-token}"})
	_, gerr := env.call(t, "tracker.read_items", "", false)
	if gerr == nil || gerr.Code != CodeAuthRequired || gerr.Retryable {
		t.Fatalf("got %v", gerr)
	}
	s := errJSON(t, gerr)
	for _, want := range []string{`"connector":"tracker"`, `"operation":"tracker.read_items"`, `"recovery":"operator_config"`,
		`"nextAction":{"tool":"authorize_connector","arguments":{"connector":"tracker"}`,
		`"retry":"Retry tracker.read_items after the operator completes recovery."`, `${credential:tracker-token}`} {
		if !strings.Contains(s, want) {
			t.Fatalf("missing %s in %s", want, s)
		}
	}
	if m.listPOST.Load() != 0 || m.callPOST.Load() != 0 {
		t.Fatal("a connector with a missing credential was contacted")
	}
	obj, aerr := env.g.Authorize(context.Background(), "tracker")
	if aerr != nil {
		t.Fatal(aerr)
	}
	b, _ := json.Marshal(obj)
	if !strings.Contains(string(b), `"recovery":"operator_config"`) || !strings.Contains(string(b), `${credential:tracker-token}`) {
		t.Fatalf("authorize = %s", b)
	}
	// Discovery sees the same typed failure.
	if _, err := env.g.Tools(context.Background(), "tracker"); err == nil || err.(*Error).Code != CodeAuthRequired {
		t.Fatalf("Tools: %v", err)
	}
}

func TestE2_ClassifiesHTTPFailures(t *testing.T) {
	closed := newMisbehavingHTTP(t)
	closedURL := closed.url()
	closed.srv.Close() // a port nobody listens on: ECONNREFUSED

	type check func(t *testing.T, e *Error, m *misbehavingHTTP)
	hasDetail := func(key, want string) check {
		return func(t *testing.T, e *Error, m *misbehavingHTTP) {
			got, _ := e.Detail(key).(string)
			if key == "code" {
				got = transportDetail(e, "code")
			}
			if want == "*" {
				if got == "" {
					t.Fatalf("no details.%s: %s", key, errJSON(t, e))
				}
				return
			}
			if got != want {
				t.Fatalf("details.%s = %q, want %q", key, got, want)
			}
		}
	}
	originIs := func(t *testing.T, e *Error, m *misbehavingHTTP) {
		if h := transportDetail(e, "host"); h != m.srv.URL {
			t.Fatalf("host = %q, want %q", h, m.srv.URL)
		}
	}
	retryAfter := func(min, max int64) check {
		return func(t *testing.T, e *Error, m *misbehavingHTTP) {
			if e.RetryAfterMs == nil || *e.RetryAfterMs < min || *e.RetryAfterMs > max {
				t.Fatalf("retryAfterMs = %v", e.RetryAfterMs)
			}
		}
	}
	cases := []struct {
		name      string
		mode      string
		code      Code
		retryable bool
		checks    []check
	}{
		{"401 auth_required with E3 envelope", "call:status=401", CodeAuthRequired, false, []check{hasDetail("recovery", "unavailable"), hasDetail("operation", "h.read_items")}},
		{"403 auth_required", "call:status=403", CodeAuthRequired, false, nil},
		{"429 Retry-After seconds", "call:429secs", CodeRateLimited, true, []check{retryAfter(7000, 7000)}},
		{"429 Retry-After HTTP date", "call:429date", CodeRateLimited, true, []check{retryAfter(80_000, 91_000)}},
		{"500 unavailable", "call:status=500", CodeUnavailable, true, []check{originIs}},
		{"503 unavailable", "call:status=503", CodeUnavailable, true, []check{originIs}},
		{"503 with Retry-After is rate_limited", "call:503secs", CodeRateLimited, true, []check{retryAfter(7000, 7000)}},
		{"other status is not invented", "call:status=418", CodeConnectorCallFailed, false, nil},
		{"connection reset", "call:reset", CodeUnavailable, true, []check{originIs, hasDetail("code", "ECONNRESET")}},
		{"connection closed", "call:eof", CodeUnavailable, true, []check{originIs}},
		{"invalid JSON", "call:badjson", CodeConnectorCallFailed, false, nil},
		{"1 GB body is cut off", "call:huge", CodeConnectorCallFailed, false, nil},
		{"hang is timeout", "call:hang", CodeTimeout, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMisbehavingHTTP(t)
			env := listedGateway(t, m, tc.code == CodeTimeout, 2*time.Second)
			m.set(tc.mode)
			res, gerr := env.call(t, "h.read_items", "", false)
			if gerr == nil {
				t.Fatalf("no error; value %s", res.Value)
			}
			if gerr.Code != tc.code || gerr.Retryable != tc.retryable {
				t.Fatalf("got %s", errJSON(t, gerr))
			}
			t.Logf("%s", errJSON(t, gerr))
			s := errJSON(t, gerr)
			if strings.Contains(s, "s3cret") || strings.Contains(s, "provider prose") {
				t.Fatalf("leak: %s", s)
			}
			if m.callPOST.Load() != 1 || res.Attempts != 1 {
				t.Fatalf("Y1: %d tools/call POSTs, attempts %d", m.callPOST.Load(), res.Attempts)
			}
			for _, c := range tc.checks {
				c(t, gerr, m)
			}
			if tc.code == CodeTimeout && gerr.Message != "Tool call timed out after 2000ms" {
				t.Fatalf("timeout message %q", gerr.Message)
			}
			// The connector recovers once the downstream behaves.
			m.set("")
			if _, gerr := env.call(t, "h.read_items", "", false); gerr != nil {
				t.Fatalf("after recovery: %s", errJSON(t, gerr))
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		env := newTestGateway(t, 2*time.Second, ConnectorSpec{ID: "h", URL: closedURL})
		_, gerr := env.call(t, "h.read_items", "", false)
		if gerr == nil || gerr.Code != CodeCatalogLookupFailed || !gerr.Retryable {
			t.Fatalf("got %v", gerr)
		}
	})
}

// TestE2_CatalogFailureServesTheStaleCatalog: an outage on refresh keeps
// serving the last catalog, stale; an auth failure is never hidden by it.
func TestE2_CatalogFailureServesTheStaleCatalog(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 2*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	want, err := env.g.Tools(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	c := env.g.lookup("h")
	c.invalidateCatalog()
	m.set("list:status=500")
	got, err := env.g.Tools(context.Background(), "h")
	if err != nil || len(got) != len(want) {
		t.Fatalf("refresh failed with 500: %d tools, %v; want the stale catalog", len(got), err)
	}
	if st := env.g.ConnectorStates()["h"]; st.Catalog.State != CatalogStale || st.State != StateFailed {
		t.Fatalf("state %+v, want failed with a stale catalog", st)
	}
	c.invalidateCatalog()
	m.set("list:status=401")
	_, err = env.g.Tools(context.Background(), "h")
	if gerr, _ := err.(*Error); gerr == nil || gerr.Code != CodeAuthRequired {
		t.Fatalf("401 on list: %v", err)
	}
	m.set("")
	if _, err := env.g.Tools(context.Background(), "h"); err != nil {
		t.Fatal(err)
	}
	if h := env.g.Health()[0]; h.ConsecutiveFailures != 0 || h.LastFailure.IsZero() || h.CatalogTools == 0 {
		t.Fatalf("health %+v", h)
	}
}

func TestCatalog_PaginatedExactAndSingleFlight(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	var wg sync.WaitGroup
	results := make([][]Tool, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools, err := env.g.Tools(context.Background(), "h")
			if err != nil {
				t.Error(err)
			}
			results[i] = tools
		}()
	}
	wg.Wait()
	pages := m.listPOST.Load()
	// 20 tools at 4 a page: 5 pages, listed once for eight concurrent readers.
	if pages != 5 {
		t.Fatalf("tools/list POSTs = %d, want 5 (one refresh in flight)", pages)
	}
	tools := results[0]
	if len(tools) != 20 {
		t.Fatalf("%d tools", len(tools))
	}
	var ri *Tool
	for i := range tools {
		if tools[i].Name == "read_items" {
			ri = &tools[i]
		}
	}
	if ri == nil || string(ri.InputSchema) != readItemsSchema {
		t.Fatalf("input schema not exact: %s", ri.InputSchema)
	}
	if !strings.HasPrefix(string(ri.Definition), "{") || !strings.Contains(string(ri.Definition), readItemsSchema) {
		t.Fatalf("definition: %s", ri.Definition)
	}
	if ri.Annotations == nil || ri.Annotations.ReadOnlyHint == nil || !*ri.Annotations.ReadOnlyHint || ri.Address() != "h.read_items" {
		t.Fatalf("annotations %+v", ri.Annotations)
	}
	// Cached: no further listing.
	if _, err := env.g.Tools(context.Background(), "h"); err != nil || m.listPOST.Load() != pages {
		t.Fatalf("cache miss: %v %d", err, m.listPOST.Load())
	}
}

func TestCatalog_ListChangedInvalidates(t *testing.T) {
	server := newTestServer(nil)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "t", InProcess: func() *mcp.Server { return server }})
	tools, err := env.g.Tools(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	n := len(tools)
	server.AddTool(&mcp.Tool{Name: "added_later", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	testkit.Eventually(t, 10*time.Second, func() bool {
		tools, err := env.g.Tools(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		return len(tools) == n+1
	}, "list_changed never invalidated the catalog")
}

func TestSession_ExpiryReconnectsOnce(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	if _, gerr := env.call(t, "h.read_items", "", false); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	m.set("call:404once")
	before := m.counters.calls.Load()
	res, gerr := env.call(t, "h.read_items", "", false)
	if gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	if m.counters.calls.Load() != before+1 || res.Attempts != 1 {
		t.Fatalf("handler ran %d times", m.counters.calls.Load()-before)
	}
}

func TestDeadline_AdmissionAndScope(t *testing.T) {
	spec := inProcessSpec("t", nil)
	spec.Admission = &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 32, QueueTimeout: time.Minute, RetryAfter: time.Second}
	env := newTestGateway(t, 300*time.Millisecond, spec)
	// Warm the catalog outside the 300 ms call deadline, which a loaded
	// machine can spend on the first listing alone.
	if _, err := env.g.Tools(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	scope := env.g.NewScope()
	first := make(chan *Error, 1)
	go func() {
		_, gerr := env.g.Invoke(context.Background(), scope, CallRequest{Address: "t.hang", Source: "execute_code", Timeout: time.Minute})
		first <- gerr
	}()
	// Wait until the hanging call holds the only permit.
	c := env.g.lookup("t")
	testkit.Eventually(t, 10*time.Second, func() bool { return c.gate.snapshot().Active > 0 }, "the hanging call never held the permit")
	res, gerr := env.call(t, "t.read_items", "", false)
	if gerr == nil || gerr.Code != CodeTimeout || gerr.Message != "Tool call timed out after 300ms" || res.Attempts != 0 {
		t.Fatalf("admission inside the deadline: %v", gerr)
	}
	scope.Close()
	if gerr := <-first; gerr == nil || gerr.Code != CodeCancelled || gerr.Retryable {
		t.Fatalf("scope close: %v", gerr)
	}
	events := env.activity.Recent(10)
	if len(events) < 2 || events[0].Outcome != "cancelled" {
		t.Fatalf("events %+v", events)
	}
}

func TestV1_OneEventPerAttemptedCall(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", nil), ConnectorSpec{ID: "locked", URL: "http://127.0.0.1:9/mcp", MissingCredential: "${env:LOCKED}"})
	calls := []struct {
		address string
		args    string
		outcome string
		code    string
		record  bool
	}{
		{"t.read_items", "", "success", "", true},
		{"t.unannotated", "", "error", "destructive_tool_requires_approval", true},
		{"t.nope", "", "error", "unknown_tool", true},
		{"ghost.read_items", "", "error", "unknown_address", true},
		{"t.strict", `{}`, "error", "invalid_args", true},
		{"locked.anything", "", "error", "auth_required", true},
		{"t.fails", "", "error", "connector_call_failed", true},
		{"nodot", "", "", "", false},
		{".lead", "", "", "", false},
		{"trail.", "", "", "", false},
	}
	want := 0
	for _, c := range calls {
		env.call(t, c.address, c.args, false)
		if c.record {
			want++
		}
	}
	events := env.activity.Recent(100)
	if len(events) != want {
		t.Fatalf("%d events, want %d", len(events), want)
	}
	// Recent is newest first.
	i := len(events) - 1
	for _, c := range calls {
		if !c.record {
			continue
		}
		ev := events[i]
		i--
		conn, tool, _ := strings.Cut(c.address, ".")
		if ev.Address != c.address || ev.ConnectorID != conn || ev.ToolName != tool || ev.Source != "execute_code" ||
			ev.Outcome != c.outcome || ev.ErrorCode != c.code || ev.Attempts < 1 || ev.RequestID != "req-1" {
			t.Fatalf("%s: event %+v", c.address, ev)
		}
	}
}

func TestS9_LearnsFromReadOnlySuccess(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", nil))
	tools, _ := env.g.Tools(context.Background(), "t")
	var tj *Tool
	for i := range tools {
		if tools[i].Name == "text_json" {
			tj = &tools[i]
		}
	}
	if env.g.ObservedOutputSchema(tj) != nil {
		t.Fatal("observed before any call")
	}
	if _, gerr := env.call(t, "t.text_json", "", false); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	if s := env.g.ObservedOutputSchema(tj); s == nil {
		t.Fatal("nothing learned")
	} else if strings.Contains(string(s), "[1,2]") {
		t.Fatalf("values leaked: %s", s)
	}
	// A write (via AllowWrite) learns nothing.
	if _, gerr := env.call(t, "t.unannotated", "", true); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	for i := range tools {
		if tools[i].Name == "unannotated" && env.g.ObservedOutputSchema(&tools[i]) != nil {
			t.Fatal("learned from a non-read-only call")
		}
	}
}

func TestMetrics_OnPassedRegistry(t *testing.T) {
	env := newTestGateway(t, 5*time.Second, inProcessSpec("t", nil))
	env.call(t, "t.read_items", "", false)
	env.call(t, "t.fails", "", false)
	families, err := env.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"connecta_downstream_calls_total", "connecta_downstream_call_duration_seconds", "connecta_catalog_refreshes_total"} {
		if !names[want] {
			t.Fatalf("missing metric %s (have %v)", want, names)
		}
	}
}

// transportDetail reads E1's nested details.host / details.code.
func transportDetail(e *Error, key string) string {
	d, _ := e.Detail("details").(Object)
	for _, f := range d {
		if f.Key == key {
			s, _ := f.Value.(string)
			return s
		}
	}
	return ""
}

func TestE3_RejectedAtInitializeIsAuthRequired(t *testing.T) {
	m := newMisbehavingHTTP(t)
	m.set("all:status=401")
	// No deadline under test: the refusal must come before it.
	env := newTestGateway(t, 30*time.Second, ConnectorSpec{ID: "h", URL: m.url(),
		Headers: map[string]string{"Authorization": "Bearer wrong"}, CredentialRefs: []string{"${credential:h-token}"}})
	res, gerr := env.call(t, "h.read_items", "", false)
	if gerr == nil || gerr.Code != CodeAuthRequired || gerr.Detail("recovery") != "operator_config" || gerr.Detail("operation") != "h.read_items" {
		t.Fatalf("got %v", gerr)
	}
	if res.Attempts != 0 || m.callPOST.Load() != 0 {
		t.Fatal("a call was dispatched without a catalog")
	}
	if strings.Contains(errJSON(t, gerr), "wrong") {
		t.Fatal("credential leaked")
	}
	if h := env.g.Health()[0]; h.ConsecutiveFailures == 0 || h.LastErrorCode != "auth_required" {
		t.Fatalf("health %+v", h)
	}
}

func TestE2_RefusedAfterCatalogIsUnavailable(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 30*time.Second, ConnectorSpec{ID: "h", URL: m.url()}) // no deadline under test
	if _, gerr := env.call(t, "h.read_items", "", false); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	m.srv.CloseClientConnections()
	m.srv.Close()
	_, gerr := env.call(t, "h.read_items", "", false)
	if gerr == nil || gerr.Code != CodeUnavailable || !gerr.Retryable || transportDetail(gerr, "code") != "ECONNREFUSED" {
		t.Fatalf("got %v", gerr)
	}
}

func BenchmarkInvoke_InProcess(b *testing.B) {
	g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "t", InProcess: func() *mcp.Server { return newTestServer(nil) }}}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	scope := g.NewScope()
	defer scope.Close()
	req := CallRequest{Address: "t.text_json", Source: "call_tool"}
	if _, gerr := g.Invoke(context.Background(), scope, req); gerr != nil {
		b.Fatal(gerr)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, gerr := g.Invoke(context.Background(), scope, req); gerr != nil {
			b.Fatal(gerr)
		}
	}
}

func TestP4_ScopeLoadsEachCatalogOnce(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	scope := env.g.NewScope()
	defer scope.Close()
	call := func(s *Scope) {
		t.Helper()
		if _, gerr := env.g.Invoke(context.Background(), s, CallRequest{Address: "h.read_items", Source: "execute_code"}); gerr != nil {
			t.Fatal(errJSON(t, gerr))
		}
	}
	call(scope)
	pages := m.listPOST.Load()
	env.g.lookup("h").invalidateCatalog()
	call(scope)
	if m.listPOST.Load() != pages {
		t.Fatal("the scope loaded the catalog twice")
	}
	other := env.g.NewScope()
	defer other.Close()
	call(other)
	if m.listPOST.Load() != 2*pages {
		t.Fatalf("a new scope after list_changed did not refresh: %d", m.listPOST.Load())
	}
}

func TestCatalog_ListChangedOverHTTP(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	tools, err := env.g.Tools(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	n := len(tools)
	m.server.AddTool(&mcp.Tool{Name: "added_later", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	testkit.Eventually(t, 10*time.Second, func() bool {
		tools, err := env.g.Tools(context.Background(), "h")
		if err != nil {
			t.Fatal(err)
		}
		return len(tools) == n+1
	}, "list_changed (standalone SSE) never invalidated the catalog")
}

// listedGateway is a gateway on m's downstream whose catalog is listed
// before the test sets a fault, so that a call's deadline is spent on the
// call alone. Only a test of the deadline itself (underTest) gets the
// short one; the others get one a loaded machine (-race) cannot spend.
func listedGateway(t *testing.T, m *misbehavingHTTP, underTest bool, short time.Duration) *testEnv {
	t.Helper()
	timeout := 30 * time.Second
	if underTest {
		timeout = short
	}
	env := newTestGateway(t, timeout, ConnectorSpec{ID: "h", URL: m.url()})
	if _, err := env.g.Tools(context.Background(), "h"); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestY1_OneDownstreamAttemptPerCall(t *testing.T) {
	cases := []struct{ mode, address string }{
		{"call:status=503", "h.read_items"},
		{"call:429secs", "h.read_items"},
		{"call:reset", "h.read_items"},
		{"", "h.fails_ratelimit"},     // retryable prose is still not retried
		{"call:hang", "h.read_items"}, // a timeout is not retried
	}
	for _, tc := range cases {
		t.Run(tc.mode+tc.address, func(t *testing.T) {
			m := newMisbehavingHTTP(t)
			env := listedGateway(t, m, tc.mode == "call:hang", 500*time.Millisecond)
			m.set(tc.mode)
			res, gerr := env.call(t, tc.address, "", false)
			if gerr == nil || !gerr.Retryable {
				t.Fatalf("want a retryable failure, got %v", gerr)
			}
			if m.callPOST.Load() != 1 || res.Attempts != 1 {
				t.Fatalf("%d tools/call POSTs, attempts %d", m.callPOST.Load(), res.Attempts)
			}
		})
	}
}

// A downstream whose pages add up to more tool definitions than the catalog
// cap is a failed (partial) catalog, not an unbounded one.
func TestCatalog_TotalBytesBounded(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	env.g.maxCatalog = 200 // the fixture's 20 tools are far more than 200 bytes
	_, err := env.g.Tools(context.Background(), "h")
	var ge *Error
	if !errors.As(err, &ge) || ge.Code != CodeCatalogLookupFailed || !strings.Contains(ge.Message, "more than 200 bytes") {
		t.Fatalf("want catalog_lookup_failed naming the byte cap, got %v", err)
	}
}
