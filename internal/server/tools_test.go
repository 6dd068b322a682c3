package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/server"
)

func TestCallTool_ReadOnlyPassesContentThroughWithoutStructuredContent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "call_tool", `{"address":"down.list_items"}`)
	if res.IsError || res.StructuredContent != nil {
		t.Fatalf("isError=%v structured=%v", res.IsError, res.StructuredContent)
	}
	if got := textOf(t, res); got != `{"items":[{"id":1,"name":"alpha"},{"id":2,"name":"beta"}],"count":2}` {
		t.Fatalf("text = %s", got)
	}
	if ev := h.activity.Recent(1); len(ev) != 1 || ev[0].Source != "call_tool" || ev[0].Outcome != "success" {
		t.Fatalf("activity %+v", ev)
	}
}

func TestE4_CallToolRefusesNonReadOnlyWithNextAction(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "call_tool", `{"address":"down.delete_item","args":{"id":7}}`)
	if !res.IsError {
		t.Fatal("refusal must be isError")
	}
	m := decode(t, textOf(t, res))
	if m["ok"] != false || m["attempts"] != float64(0) {
		t.Fatalf("envelope %v", m)
	}
	e := m["error"].(map[string]any)
	if e["code"] != "destructive_tool_requires_approval" || e["retryable"] != false {
		t.Fatalf("error %v", e)
	}
	na := e["nextAction"].(map[string]any)
	if na["tool"] != "call_destructive_tool" {
		t.Fatalf("nextAction %v", na)
	}
	sameJSON(t, res)
	if _, calls := h.down.args(); calls != 0 {
		t.Fatal("refused call was dispatched")
	}
	if ev := h.activity.Recent(1); len(ev) != 1 || ev[0].Friction != "destructive_reroute" {
		t.Fatalf("activity %+v", ev)
	}
}

func TestCallDestructiveTool_AnyToolAndReasonNeverForwarded(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "call_destructive_tool", `{"address":"down.delete_item","args":{"id":7},"reason":"user asked: SECRET-REASON"}`)
	if res.IsError {
		t.Fatalf("destructive call failed: %s", textOf(t, res))
	}
	args, _ := h.down.args()
	if strings.Contains(args, "SECRET-REASON") || args != `{"id":7}` {
		t.Fatalf("downstream saw %s", args)
	}
	// Read-only tools too.
	if res := call(t, cs, "call_destructive_tool", `{"address":"down.echo","args":{}}`); res.IsError {
		t.Fatalf("read-only via destructive: %s", textOf(t, res))
	}
	if ev := h.activity.Recent(1); ev[0].Source != "call_destructive_tool" {
		t.Fatalf("source %q", ev[0].Source)
	}
	res = call(t, cs, "call_destructive_tool", `{"address":"down.echo","reason":"`+strings.Repeat("r", 501)+`"}`)
	if e := failureOf(t, res); e["code"] != "invalid_args" || !strings.Contains(e["message"].(string), `"reason"`) {
		t.Fatalf("overlong reason: %s", textOf(t, res))
	}
}

func TestCallTool_ValueModeAndFields(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "call_tool", `{"address":"down.list_items","resultMode":"value","fields":["items[].id","count"]}`)
	const want = `{"ok":true,"data":{"items[].id":[1,2],"count":2},"durationMs":`
	if got := textOf(t, res); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, `,"attempts":1}`) {
		t.Fatalf("got %s", got)
	}
	res = call(t, cs, "call_tool", `{"address":"down.list_items","resultMode":"value","fields":["items[].id","nope"]}`)
	m := decode(t, textOf(t, res))
	meta := m["data"].(map[string]any)["$connecta"].(map[string]any)
	if meta["type"] != "field_projection" || meta["unmatchedFields"].([]any)[0] != "nope" {
		t.Fatalf("projection %v", m)
	}
	// mcp mode: fields apply to each JSON text block.
	res = call(t, cs, "call_tool", `{"address":"down.list_items","fields":["count"]}`)
	if got := textOf(t, res); got != `{"count":2}` {
		t.Fatalf("mcp fields: %s", got)
	}
}

func TestCallTool_OverCapIsTruncatedAndGetResultPagesItBack(t *testing.T) {
	h := newHarness(t, harnessOptions{maxInlineBytes: 1024})
	cs := h.connect(t, "")
	res := call(t, cs, "call_tool", `{"address":"down.big","args":{"bytes":5000}}`)
	text := textOf(t, res)
	head, notice, ok := strings.Cut(text, "\n")
	if !ok || len(head) > 1024 {
		t.Fatalf("head %d bytes", len(head))
	}
	var n struct {
		Truncated  bool   `json:"truncated"`
		ResultID   string `json:"resultId"`
		TotalBytes int    `json:"totalBytes"`
		NextAction struct {
			Tool string `json:"tool"`
		} `json:"nextAction"`
	}
	if err := json.Unmarshal([]byte(notice), &n); err != nil || !n.Truncated || n.NextAction.Tool != "get_result" {
		t.Fatalf("notice %s (%v)", notice, err)
	}
	var all strings.Builder
	offset := 0
	for i := 0; i < 100; i++ {
		page := call(t, cs, "get_result", `{"id":"`+n.ResultID+`","offset":`+itoa(offset)+`,"maxBytes":333}`)
		var p struct {
			Offset     int    `json:"offset"`
			NextOffset *int   `json:"nextOffset"`
			TotalBytes int    `json:"totalBytes"`
			Text       string `json:"text"`
		}
		if err := json.Unmarshal([]byte(textOf(t, page)), &p); err != nil {
			t.Fatalf("page: %v %s", err, textOf(t, page))
		}
		all.WriteString(p.Text)
		if p.NextOffset == nil {
			break
		}
		offset = *p.NextOffset
	}
	if all.Len() != n.TotalBytes || !strings.HasPrefix(all.String(), head) {
		t.Fatalf("paged %d bytes, want %d", all.Len(), n.TotalBytes)
	}
	res = call(t, cs, "get_result", `{"id":"nope"}`)
	if e := failureOf(t, res); e["code"] != "invalid_args" || e["message"] != `Unknown or expired result id "nope"` {
		t.Fatalf("unknown id: %s", textOf(t, res))
	}
}

func TestE2_DownstreamHTTPFailuresClassified(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	// Warm the catalog so the failures hit the call itself.
	call(t, cs, "call_tool", `{"address":"down.echo"}`)
	for _, tc := range []struct{ mode, code string }{
		{"401", "auth_required"},
		{"429", "rate_limited"},
		{"500", "unavailable"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h.down.mode.Store(tc.mode)
			defer h.down.mode.Store("")
			res := call(t, cs, "call_tool", `{"address":"down.echo","resultMode":"value"}`)
			e := failureOf(t, res)
			if e["code"] != tc.code {
				t.Fatalf("got code %v: %s", e["code"], textOf(t, res))
			}
			if tc.mode == "429" && e["retryAfterMs"] != float64(2000) {
				t.Fatalf("retryAfterMs %v", e["retryAfterMs"])
			}
		})
	}
}

func TestSkills_ListFetchAndErrors(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	list := textOf(t, call(t, cs, "skills", `{}`))
	if !strings.HasPrefix(list, "Available skills. Fetch one with skills({ name: \"<name>\" }).\n\n- `usage` — ") ||
		!strings.Contains(list, "- `connector:down` — ") {
		t.Fatalf("list:\n%s", list)
	}
	usage := textOf(t, call(t, cs, "skills", `{"name":"usage"}`))
	if len(usage) >= server.MaxUsageSkillBytes {
		t.Fatalf("usage skill is %d bytes", len(usage))
	}
	for _, must := range []string{"setTimeout", "fetch", "crypto", "20", "15 s", "execute.maxHostCalls", "execute.hostCallTimeoutMs"} {
		if !strings.Contains(usage, must) {
			t.Errorf("usage skill lacks %q (X5, L4, L8)", must)
		}
	}
	if g := textOf(t, call(t, cs, "skills", `{"name":"connector:down"}`)); g != "# Downstream guide\n\nUse echo for echoes." {
		t.Fatalf("guide %q", g)
	}
	for _, tc := range []struct{ name, want string }{
		{"connector:ghost", "Unknown connector"},
		{"down", "connector:down"},
		{"nope", `Unknown skill "nope". Available skills: usage, connector:down`},
	} {
		res := call(t, cs, "skills", `{"name":"`+tc.name+`"}`)
		if !res.IsError || !strings.Contains(textOf(t, res), tc.want) {
			t.Errorf("%s: %s", tc.name, textOf(t, res))
		}
	}
}

func TestSearchTools_GroupedPageAndBounds(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "search_tools", `{"query":"echo arguments"}`)
	if res.IsError {
		t.Fatalf("search: %s", textOf(t, res))
	}
	m := decode(t, textOf(t, res))
	groups := m["connectors"].([]any)
	first := groups[0].(map[string]any)
	if first["id"] != "down" || first["tools"].([]any)[0].(map[string]any)["address"] != "down.echo" {
		t.Fatalf("page %s", textOf(t, res))
	}
	sameJSON(t, res)
	res = call(t, cs, "search_tools", `{"limit":101}`)
	if !res.IsError || decode(t, textOf(t, res))["error"].(map[string]any)["code"] != "invalid_args" {
		t.Fatalf("limit 101: %s", textOf(t, res))
	}
}

func TestAuthorizeConnector_UnknownAndKnown(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "authorize_connector", `{"connector":"ghost"}`)
	if e := failureOf(t, res); e["code"] != "invalid_args" || e["message"] != `Unknown connector "ghost"` {
		t.Fatalf("unknown: %s", textOf(t, res))
	}
	res = call(t, cs, "authorize_connector", `{"connector":"down"}`)
	if res.IsError {
		t.Fatalf("known: %s", textOf(t, res))
	}
	m := decode(t, textOf(t, res))
	if m["connector"] != "down" || m["recovery"] == nil {
		t.Fatalf("answer %v", m)
	}
}

// sameJSON checks that structuredContent holds the same JSON as the text
// (the Go client decodes it into maps, so compare values, not bytes).
func sameJSON(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	sc, _ := json.Marshal(res.StructuredContent)
	var a, b any
	_ = json.Unmarshal(sc, &a)
	_ = json.Unmarshal([]byte(textOf(t, res)), &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("structuredContent differs from text:\n%s\n%s", sc, textOf(t, res))
	}
}

func TestBadInput_HugeAddressAndControlCharactersStayBounded(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	for _, addr := range []string{"ghost." + strings.Repeat("x", 50000), "down." + strings.Repeat("\u0001\u001f", 20000), strings.Repeat("é", 30000)} {
		b, _ := json.Marshal(map[string]any{"address": addr})
		res := call(t, cs, "call_tool", string(b))
		if !res.IsError {
			t.Fatalf("want a refusal for a %d-byte address", len(addr))
		}
		if n := len(textOf(t, res)); n > 8192 { // 512-byte clamps, JSON-escaped
			t.Fatalf("refusal is %d bytes for a %d-byte address", n, len(addr))
		}
	}
	// The server stays up.
	if res := call(t, cs, "call_tool", `{"address":"down.echo"}`); res.IsError {
		t.Fatalf("after: %s", textOf(t, res))
	}
}

func TestActivity_AuthenticatedRecentEvents(t *testing.T) {
	const token = "activity-token-0123456789abcdef"
	h := newHarness(t, harnessOptions{tokens: []server.Token{{Name: "ops", Value: token}}})
	cs := h.connect(t, token)
	call(t, cs, "call_tool", `{"address":"down.echo","args":{"secret":"PAYLOAD-VALUE"}}`)
	req, _ := http.NewRequest(http.MethodGet, h.url+"/activity?limit=5", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"address":"down.echo"`) || !strings.Contains(string(body), `"actor":"ops"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "PAYLOAD-VALUE") {
		t.Fatal("activity leaks a payload")
	}
}
