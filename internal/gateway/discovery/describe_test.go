package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
)

func describe(t testing.TB, s *Service, front gateway.FrontDoor, args string) (json.RawMessage, *gateway.Error) {
	t.Helper()
	p, err := DecodeDescribeArgs(json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	return s.Describe(context.Background(), front, p)
}

func describeEntries(t testing.TB, s *Service, front gateway.FrontDoor, args string) (json.RawMessage, []map[string]any) {
	t.Helper()
	raw, err := describe(t, s, front, args)
	if err != nil {
		t.Fatalf("describe %s: %v", args, err)
	}
	var out struct{ Tools []map[string]any }
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return raw, out.Tools
}

func TestS4_DescribeAnswersInOrderAndMissesNeverFailTheCall(t *testing.T) {
	f := trackerFixture()
	f.failures["chat"] = &gateway.Error{Code: gateway.CodeRateLimited, Message: "slow down", Retryable: true,
		RetryAfterMs: func() *int64 { v := int64(1500); return &v }()}
	s := newService(t, f)
	raw, tools := describeEntries(t, s, gateway.FrontDoorProgram,
		`{"addresses":["ci.get_run","ghost.read_items","tracker.list_issue","chat.post_message","tracker.list_issues","ci.get_run"]}`)
	if len(tools) != 6 {
		t.Fatalf("%d entries", len(tools))
	}
	if tools[0]["address"] != "ci.get_run" || tools[0]["inputSchema"] != "{ runId: integer }" || tools[5]["name"] != "get_run" {
		t.Fatalf("success entries %v", tools)
	}
	if got := orderedKeys(t, rawField(t, raw, "tools", 4)); !reflect.DeepEqual(got,
		[]string{"address", "name", "description", "guide", "guideSummary", "inputSchema", "annotations"}) {
		t.Fatalf("entry keys %v", got)
	}
	if tools[4]["inputSchema"] != `{ project: string // Project key, state?: "open" | "closed", limit?: integer /* >= 1; <= 100 */ }` {
		t.Fatalf("describe keeps prose in declared order: %q", tools[4]["inputSchema"])
	}

	miss := tools[1]["errorDetails"].(map[string]any)
	if miss["code"] != "unknown_address" || miss["retryable"] != false || tools[1]["error"] != `Unknown address "ghost.read_items"` {
		t.Fatalf("unknown address %v", tools[1])
	}
	na := miss["nextAction"].(map[string]any)
	if na["function"] != "connecta.search" || fmt.Sprint(na["arguments"]) != "map[includeSchemas:compact query:read items]" {
		t.Fatalf("nextAction %v", na)
	}
	if got := orderedKeys(t, rawField(t, raw, "tools", 1, "errorDetails")); !reflect.DeepEqual(got,
		[]string{"code", "message", "retryable", "nextAction"}) {
		t.Fatalf("miss keys %v", got)
	}

	tm := tools[2]["errorDetails"].(map[string]any)
	if tm["code"] != "unknown_tool" || tm["message"] != `Unknown tool "list_issue" on connector "tracker"` {
		t.Fatalf("unknown tool %v", tm)
	}
	args := tm["nextAction"].(map[string]any)["arguments"].(map[string]any)
	if args["connector"] != "tracker" || args["query"] != "list issue" {
		t.Fatalf("scoped recovery %v", args)
	}
	if fmt.Sprint(tm["suggestions"]) != "[tracker.list_issues tracker.get_issue]" {
		t.Fatalf("suggestions %v", tm["suggestions"])
	}

	cf := tools[3]["errorDetails"].(map[string]any)
	if cf["code"] != "rate_limited" || cf["retryable"] != true || cf["retryAfterMs"].(float64) != 1500 || len(cf) != 4 {
		t.Fatalf("catalog failure %v", cf)
	}
	if got := orderedKeys(t, rawField(t, raw, "tools", 3, "errorDetails")); !reflect.DeepEqual(got,
		[]string{"code", "message", "retryable", "retryAfterMs"}) {
		t.Fatalf("catalog failure keys %v", got)
	}
	// One catalog load per connector, whatever the number of addresses.
	if n := len(f.loaded()); n != 3 {
		t.Fatalf("loaded %v", f.loaded())
	}
}

func TestE7_RecoveryIsKeyedToTheFrontDoor(t *testing.T) {
	s := newService(t, trackerFixture())
	_, prog := describeEntries(t, s, gateway.FrontDoorProgram, `{"address":"ci.nope"}`)
	_, top := describeEntries(t, s, gateway.FrontDoorTopLevel, `{"address":"ci.nope"}`)
	p := prog[0]["errorDetails"].(map[string]any)["nextAction"].(map[string]any)
	q := top[0]["errorDetails"].(map[string]any)["nextAction"].(map[string]any)
	if p["function"] != "connecta.search" || p["tool"] != nil {
		t.Fatalf("program recovery %v", p)
	}
	if q["tool"] != "search_tools" || q["function"] != nil {
		t.Fatalf("top-level recovery %v", q)
	}
	if p["purpose"] != "Find the connector's current canonical tool address." {
		t.Fatalf("purpose %v", p["purpose"])
	}
}

func TestE7_MissesArePinnedNotRetryableWhateverTheAddressSays(t *testing.T) {
	f := trackerFixture()
	f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: "svc-503"})
	f.tools["svc-503"] = nil
	s := newService(t, f)
	_, tools := describeEntries(t, s, gateway.FrontDoorProgram,
		`{"addresses":["svc-503.temporarily_unavailable_429","timeout-503.rate_limit"]}`)
	for _, e := range tools {
		if d := e["errorDetails"].(map[string]any); d["retryable"] != false {
			t.Fatalf("retryable miss %v", d)
		}
	}
	for _, e := range []*gateway.Error{
		gateway.UnknownAddress(gateway.FrontDoorProgram, "econnreset.503"),
		gateway.UnknownTool(gateway.FrontDoorTopLevel, "svc-503", "temporarily timed out"),
	} {
		if e.Retryable {
			t.Fatalf("%+v", e)
		}
	}
}

func TestE7_CallerAuthoredTextIsClampedTo512Bytes(t *testing.T) {
	s := newService(t, trackerFixture())
	huge := "ghost." + strings.Repeat("x_", 25_000) // 50 KB invented address
	raw, tools := describeEntries(t, s, gateway.FrontDoorProgram, fmt.Sprintf(`{"addresses":[%q,"ci.get_run"]}`, huge))
	addr := tools[0]["address"].(string)
	if len(addr) != jstext.MaxEchoBytes+len("…") || !strings.HasSuffix(addr, "…") || !strings.HasPrefix(huge, strings.TrimSuffix(addr, "…")) {
		t.Fatalf("address %d bytes", len(addr))
	}
	d := tools[0]["errorDetails"].(map[string]any)
	if msg := d["message"].(string); len(msg) > jstext.MaxEchoBytes+32 {
		t.Fatalf("message %d bytes", len(msg))
	}
	if q := d["nextAction"].(map[string]any)["arguments"].(map[string]any)["query"].(string); len(q) > jstext.MaxEchoBytes+len("…") {
		t.Fatalf("query %d bytes", len(q))
	}
	if len(raw) > 4_000 {
		t.Fatalf("refusal of %d bytes for one invented address", len(raw))
	}
	// Code points are never split.
	multi := "ghost." + strings.Repeat("é", 600)
	_, tools = describeEntries(t, s, gateway.FrontDoorProgram, fmt.Sprintf(`{"address":%q}`, multi))
	if a := tools[0]["address"].(string); !strings.HasSuffix(a, "é…") {
		t.Fatalf("split code point: %q", a[len(a)-8:])
	}
	// A short address is exact and untagged.
	_, tools = describeEntries(t, s, gateway.FrontDoorProgram, `{"address":"ghost.x"}`)
	if tools[0]["address"] != "ghost.x" {
		t.Fatal(tools[0]["address"])
	}
}

func TestS4_BoundsAndShapes(t *testing.T) {
	s := newService(t, trackerFixture())
	var many []string
	for i := 0; i <= MaxDescribeAddresses; i++ {
		many = append(many, fmt.Sprintf("ci.t%d", i))
	}
	b, _ := json.Marshal(map[string]any{"addresses": many})
	_, err := describe(t, s, gateway.FrontDoorProgram, string(b))
	if e := wantCode(t, err, gateway.CodeInvalidArgs); !strings.Contains(e.Message, "at most 100") {
		t.Fatal(e.Message)
	}
	b, _ = json.Marshal(map[string]any{"addresses": many[:MaxDescribeAddresses]})
	if _, err := describe(t, s, gateway.FrontDoorProgram, string(b)); err != nil {
		t.Fatalf("100 addresses: %v", err)
	}
	for _, args := range []string{`{"address":"a.b","addresses":["a.b"]}`, `{}`, `{"address":5}`, `{"addresses":"a.b"}`,
		`{"address":"ci.get_run","format":"yaml"}`} {
		_, err := describe(t, s, gateway.FrontDoorProgram, args)
		wantCode(t, err, gateway.CodeInvalidArgs)
	}
	_, tools := describeEntries(t, s, gateway.FrontDoorProgram, `{"address":"ci.get_run","format":"json"}`)
	if !reflect.DeepEqual(tools[0]["inputSchema"], map[string]any{"type": "object", "properties": map[string]any{
		"runId": map[string]any{"type": "integer"}}, "required": []any{"runId"}}) {
		t.Fatalf("json format %v", tools[0]["inputSchema"])
	}
	_, tools = describeEntries(t, s, gateway.FrontDoorProgram, `{"address":"ci.rerun"}`)
	if tools[0]["inputSchema"] != "{}" {
		t.Fatalf("missing input schema renders as an empty object: %v", tools[0]["inputSchema"])
	}
	_, tools = describeEntries(t, s, gateway.FrontDoorProgram, `{"addresses":[]}`)
	if len(tools) != 0 {
		t.Fatal(tools)
	}
}

func TestS4_DescribeOverCeilingIsResultTooLarge(t *testing.T) {
	f := trackerFixture()
	var tools []gateway.Tool
	var addrs []string
	for i := 0; i < 100; i++ {
		tools = append(tools, tool("big", fmt.Sprintf("t%d", i), strings.Repeat("long words ", 300), boolp(true), ""))
		addrs = append(addrs, fmt.Sprintf("big.t%d", i))
	}
	f.tools["big"] = tools
	f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: "big"})
	s := newService(t, f)
	_, err := s.Describe(context.Background(), gateway.FrontDoorProgram, DescribeParams{Addresses: addrs, FullDescriptions: true})
	wantCode(t, err, gateway.CodeResultTooLarge)
	if _, err := s.Describe(context.Background(), gateway.FrontDoorProgram, DescribeParams{Addresses: addrs}); err != nil {
		t.Fatal(err)
	}
}

func TestS4_SuggestionsAreCanonicalNearestFirstAndBounded(t *testing.T) {
	f := trackerFixture()
	huge := strings.Repeat("n", 600)
	f.tools["ci"] = append(f.tools["ci"], tool("ci", huge, "", boolp(true), ""))
	s := newService(t, f)
	_, tools := describeEntries(t, s, gateway.FrontDoorProgram, `{"addresses":["ci.get_runs","ci.zzzzzzzzzzzzzzz","ci.`+strings.Repeat("n", 599)+`"]}`)
	if got := fmt.Sprint(tools[0]["errorDetails"].(map[string]any)["suggestions"]); got != "[ci.get_run]" {
		t.Fatalf("suggestions %s", got)
	}
	if _, ok := tools[1]["errorDetails"].(map[string]any)["suggestions"]; ok {
		t.Fatal("far miss carries suggestions")
	}
	if _, ok := tools[2]["errorDetails"].(map[string]any)["suggestions"]; ok {
		t.Fatal("a suggestion over 512 bytes would not be canonical")
	}
}

func TestE7_MissHelpers(t *testing.T) {
	if got := gateway.RecoveryQuery("ghost.read_items"); got != "read items" {
		t.Fatal(got)
	}
	if got := gateway.RecoveryQuery("a.b..c--d__e"); got != "b c d e" {
		t.Fatal(got)
	}
	if got := gateway.RecoveryQuery("..."); got != "..." {
		t.Fatalf("empty query falls back to the address: %q", got)
	}
	e := gateway.UnknownAddress(gateway.FrontDoorTopLevel, "ghost.read_items")
	b, _ := json.Marshal(e)
	want := `{"code":"unknown_address","message":"Unknown address \"ghost.read_items\"","retryable":false,"nextAction":{"tool":"search_tools","arguments":{"query":"read items","includeSchemas":"compact"},"purpose":"Find the configured canonical address before retrying."}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if jstext.Clamp("short", jstext.MaxEchoBytes) != "short" || jstext.Clamp("héllo", 2) != "h…" {
		t.Fatal("clamp")
	}
}

func TestGuideSummaryBoundaries(t *testing.T) {
	cases := []struct{ guide, want string }{
		{"# Title\n\nShort first paragraph.", "Short first paragraph."},
		{"---\nname: x\n---\n<!-- note -->\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\nReal text here.", "Real text here."},
		{"# Only a heading", "Only a heading"},
		{"Use e.g. the project key to scope every query you make against the tracker. Then page through results with the cursor returned by each call, always.",
			"Use e.g. the project key to scope every query you make against the tracker."},
		{strings.Repeat("word ", 40), strings.TrimSpace(strings.Repeat("word ", 23)) + "…"},
		{"```\ncode\n```\n- bullet item text", "bullet item text"},
	}
	for _, c := range cases {
		got := GuideSummary(&gateway.ConnectorInfo{ID: "x", Guide: c.guide})
		if got != c.want {
			t.Errorf("guide %q\n got %q\nwant %q", c.guide, got, c.want)
		}
		if jstext.Len(got) > GuideSummaryLen {
			t.Errorf("summary %d units", jstext.Len(got))
		}
	}
	if GuideSummary(&gateway.ConnectorInfo{ID: "x", Guide: "  \n "}) != "" {
		t.Fatal("blank guide summarized")
	}
	if got := GuideSummary(&gateway.ConnectorInfo{ID: "x", Guide: "```\nonly code\n```", Description: "Tracker."}); got != "Tracker." {
		t.Fatal(got)
	}
}
