package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// connect runs srv in memory and returns a real go-sdk client session.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func compile(t *testing.T, name string, schema any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	loc := "urn:test:" + name
	if err := c.AddResource(loc, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

type harness struct {
	t       *testing.T
	cs      *mcp.ClientSession
	tools   map[string]*mcp.Tool
	outputs map[string]*jsonschema.Schema
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cs: connect(t, NewServer()), tools: map[string]*mcp.Tool{}, outputs: map[string]*jsonschema.Schema{}}
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		h.tools[tool.Name] = tool
		h.outputs[tool.Name] = compile(t, tool.Name+":output", tool.OutputSchema)
	}
	return h
}

// call invokes a tool and, on success, checks structuredContent against the
// declared output schema and that the text content is the same JSON.
func (h *harness) call(name string, args any) (map[string]any, *mcp.CallToolResult) {
	h.t.Helper()
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		h.t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.outputs[name].Validate(inst); err != nil {
		h.t.Errorf("%s: structuredContent does not match the output schema: %v\n%s", name, err, raw)
	}
	if len(res.Content) != 1 {
		h.t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var fromText, fromStruct any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		h.t.Fatalf("%s: text is not JSON: %v", name, err)
	}
	_ = json.Unmarshal(raw, &fromStruct)
	if !reflect.DeepEqual(fromText, fromStruct) {
		h.t.Errorf("%s: text and structuredContent differ", name)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out, res
}

func errorText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || !res.IsError {
		t.Fatalf("expected an isError result, got %+v", res)
	}
	if res.StructuredContent != nil {
		t.Errorf("error result carries structuredContent")
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestDemo_ToolsDeclareSchemasAndAnnotations(t *testing.T) {
	h := newHarness(t)
	var names []string
	for n := range h.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"add_comment", "get_issue", "get_person", "list_labels", "list_people", "list_projects", "search_issues"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("tools %v", names)
	}
	for _, n := range names {
		tool := h.tools[n]
		in, _ := tool.InputSchema.(map[string]any)
		if in["type"] != "object" || tool.OutputSchema == nil {
			t.Errorf("%s: schemas %v / %v", n, tool.InputSchema, tool.OutputSchema)
		}
		compile(t, n+":input", tool.InputSchema)
		if !strings.Contains(tool.Description, "demo") || !strings.Contains(tool.Title, "demo") {
			t.Errorf("%s: not labelled demo: %q %q", n, tool.Title, tool.Description)
		}
		a := tool.Annotations
		if a == nil {
			t.Fatalf("%s: no annotations", n)
		}
		if n == "add_comment" {
			if a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
				t.Errorf("add_comment annotations: %+v", a)
			}
		} else if !a.ReadOnlyHint || (a.DestructiveHint != nil && *a.DestructiveHint) {
			t.Errorf("%s: not read-only: %+v", n, a)
		}
	}
	init := h.cs.InitializeResult()
	if init.ServerInfo.Name != ServerName || !strings.Contains(init.Instructions, "DEMO") {
		t.Errorf("server info %+v %q", init.ServerInfo, init.Instructions)
	}
}

func TestDemo_EveryToolAnswersWithinItsOutputSchema(t *testing.T) {
	h := newHarness(t)

	out, _ := h.call("list_projects", map[string]any{})
	if ps := out["projects"].([]any); len(ps) != 3 {
		t.Errorf("projects: %v", ps)
	}

	out, _ = h.call("search_issues", map[string]any{"project": "WEB", "status": "open"})
	for _, it := range out["issues"].([]any) {
		is := it.(map[string]any)
		if is["project"] != "WEB" || is["status"] != "open" {
			t.Errorf("filter leak: %v", is)
		}
	}
	out, _ = h.call("search_issues", map[string]any{"query": "webhook"})
	if out["total"].(float64) != 2 {
		t.Errorf("webhook matches: %v", out)
	}
	out, _ = h.call("search_issues", map[string]any{"assignee": "none"})
	for _, it := range out["issues"].([]any) {
		if it.(map[string]any)["assignee"] != nil {
			t.Errorf("assigned issue in unassigned filter: %v", it)
		}
	}
	out, _ = h.call("search_issues", map[string]any{"label": "security", "priority": "urgent"})
	if out["total"].(float64) < 1 {
		t.Errorf("security+urgent: %v", out)
	}

	out, _ = h.call("get_issue", map[string]any{"id": "WEB-1"})
	if out["id"] != "WEB-1" || len(out["comments"].([]any)) != 2 {
		t.Errorf("WEB-1: %v", out)
	}
	out, _ = h.call("get_issue", map[string]any{"id": "API-4"})
	if out["assignee"] != nil || len(out["comments"].([]any)) != 0 {
		t.Errorf("API-4: %v", out)
	}

	out, _ = h.call("list_people", map[string]any{})
	if len(out["people"].([]any)) != 8 {
		t.Errorf("people: %v", out)
	}
	out, _ = h.call("list_people", map[string]any{"team": "mobile"})
	if len(out["people"].([]any)) != 2 {
		t.Errorf("mobile people: %v", out)
	}
	out, _ = h.call("get_person", map[string]any{"id": "u-gus"})
	if out["person"].(map[string]any)["name"] != "Gus Adeyemi" || len(out["activeIssues"].([]any)) == 0 {
		t.Errorf("u-gus: %v", out)
	}
	out, _ = h.call("list_labels", nil)
	if len(out["labels"].([]any)) != 8 {
		t.Errorf("labels: %v", out)
	}

	out, _ = h.call("add_comment", map[string]any{"issueId": "MOB-5", "body": "Offline cache sized at 20 MB.", "author": "u-gus"})
	if out["commentCount"].(float64) != 1 || out["comment"].(map[string]any)["author"] != "u-gus" {
		t.Errorf("add_comment: %v", out)
	}
	out, _ = h.call("get_issue", map[string]any{"id": "MOB-5"})
	cs := out["comments"].([]any)
	if len(cs) != 1 || cs[0].(map[string]any)["body"] != "Offline cache sized at 20 MB." {
		t.Errorf("comment not stored: %v", out)
	}
}

func TestDemo_PaginationCoversEveryIssueOnce(t *testing.T) {
	h := newHarness(t)
	seen := map[string]bool{}
	cursor := ""
	pages := 0
	for {
		args := map[string]any{"limit": 7}
		if cursor != "" {
			args["cursor"] = cursor
		}
		out, _ := h.call("search_issues", args)
		pages++
		if out["total"].(float64) != 25 {
			t.Fatalf("total %v", out["total"])
		}
		for _, it := range out["issues"].([]any) {
			id := it.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("%s twice", id)
			}
			seen[id] = true
		}
		next, ok := out["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if len(seen) != 25 || pages != 4 {
		t.Errorf("seen %d issues in %d pages", len(seen), pages)
	}
}

func TestDemo_BadInputIsAToolError(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		tool string
		args any
		want string
	}{
		{"get_issue", map[string]any{"id": "NOPE-1"}, `Issue "NOPE-1" not found`},
		{"get_issue", map[string]any{}, "Invalid arguments"},
		{"get_person", map[string]any{"id": "u-zed"}, `Person "u-zed" not found`},
		{"search_issues", map[string]any{"limit": 500}, "Invalid arguments"},
		{"search_issues", map[string]any{"status": "closed"}, "Invalid arguments"},
		{"search_issues", map[string]any{"cursor": "garbage"}, "Invalid cursor"},
		{"search_issues", json.RawMessage(`{"limit":1e1000000}`), "number out of range"},
		{"add_comment", map[string]any{"issueId": "WEB-1"}, "Invalid arguments"},
		{"add_comment", map[string]any{"issueId": "WEB-1", "body": "   "}, "must not be blank"},
		{"add_comment", map[string]any{"issueId": "WEB-99", "body": "x"}, `Issue "WEB-99" not found`},
		{"add_comment", map[string]any{"issueId": "WEB-1", "body": "x", "author": "mallory"}, `Person "mallory" not found`},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%v", c.tool, c.args), func(t *testing.T) {
			_, res := h.call(c.tool, c.args)
			if got := errorText(t, res); !strings.Contains(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	// Unknown keys are ignored.
	if out, res := h.call("get_issue", map[string]any{"id": "WEB-2", "verbose": true}); res.IsError || out["id"] != "WEB-2" {
		t.Errorf("unknown key: %v", res)
	}
}

// TestDemo_WritesStayInTheirInstance: each NewServer has its own copy.
func TestDemo_WritesStayInTheirInstance(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	a.call("add_comment", map[string]any{"issueId": "WEB-4", "body": "taking this"})
	outA, _ := a.call("get_issue", map[string]any{"id": "WEB-4"})
	outB, _ := b.call("get_issue", map[string]any{"id": "WEB-4"})
	if len(outA["comments"].([]any)) != 1 || len(outB["comments"].([]any)) != 0 {
		t.Errorf("a %v / b %v", outA["comments"], outB["comments"])
	}
}

func TestDemo_DatasetShape(t *testing.T) {
	var d dataset
	if err := json.Unmarshal(dataJSON, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Projects) != 3 || len(d.Issues) != 25 || len(d.People) != 8 || len(d.Labels) != 8 {
		t.Fatalf("sizes %d %d %d %d", len(d.Projects), len(d.Issues), len(d.People), len(d.Labels))
	}
	people := map[string]bool{}
	for _, p := range d.People {
		people[p.ID] = true
	}
	labels := map[string]bool{}
	for _, l := range d.Labels {
		labels[l.Name] = true
	}
	for _, is := range d.Issues {
		if is.Assignee != nil && !people[*is.Assignee] || !people[is.Reporter] {
			t.Errorf("%s: unknown person", is.ID)
		}
		for _, l := range is.Labels {
			if !labels[l] {
				t.Errorf("%s: unknown label %s", is.ID, l)
			}
		}
		for _, c := range is.Comments {
			if !people[c.Author] {
				t.Errorf("%s: unknown comment author %s", is.ID, c.Author)
			}
		}
	}
	if !strings.Contains(Title, "demo") || !strings.Contains(Guide, "demo") || !strings.Contains(Description, "DEMO") || ID != "demo" {
		t.Error("identity not labelled demo")
	}
}

// FuzzToolArguments: any argument bytes give a result (an isError one for
// bad input), never a panic or a protocol error, and successes carry JSON.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{"id":"WEB-1"}`, `{"limit":50,"cursor":"b2Zmc2V0OjEw"}`,
		`{"issueId":"WEB-1","body":"hi"}`, `{"query":"\u0000"}`, `[1,2]`, `{"limit":1e400}`, `{"limit":1e1000000}`, `{"cursor":"b2Zmc2V0Ojk5OTk5OTk5OTk5OTk5OTk5OTk5"}`} {
		f.Add("search_issues", []byte(s))
		f.Add("get_issue", []byte(s))
		f.Add("add_comment", []byte(s))
	}
	st := &state{now: func() time.Time { return time.Unix(0, 0) }}
	if err := json.Unmarshal(dataJSON, &st.data); err != nil {
		f.Fatal(err)
	}
	handlers := map[string]mcp.ToolHandler{}
	for _, tl := range st.tools() {
		handlers[tl.def.Name] = tl.handler()
	}
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		h, ok := handlers[name]
		if !ok {
			return
		}
		res, err := h(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args}})
		if err != nil {
			t.Fatalf("protocol error: %v", err)
		}
		if !res.IsError && !json.Valid(res.StructuredContent.(json.RawMessage)) {
			t.Fatal("invalid structuredContent")
		}
	})
}

// refuseLoader keeps the test's reference compiler from reading files or URLs.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("demo test: external schema %q refused", url)
}
