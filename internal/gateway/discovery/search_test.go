package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/lexical"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/test/testkit"
)

func newService(t testing.TB, f *fixtureCatalog, opts ...func(*Options)) *Service {
	t.Helper()
	o := Options{Catalog: f}
	for _, fn := range opts {
		fn(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func search(t testing.TB, s *Service, front gateway.FrontDoor, args string) (json.RawMessage, *gateway.Error) {
	t.Helper()
	p, err := DecodeSearchArgs(json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	return s.Search(context.Background(), front, p)
}

func mustSearch(t testing.TB, s *Service, front gateway.FrontDoor, args string) map[string]any {
	t.Helper()
	raw, err := search(t, s, front, args)
	if err != nil {
		t.Fatalf("search %s: %v", args, err)
	}
	return decode(t, raw)
}

func decode(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	return m
}

// orderedKeys lists an object's keys in serialized order.
func orderedKeys(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	depth := 0
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
				expectKey = v == '{' && depth == 1
			} else {
				depth--
				expectKey = depth == 1
			}
			continue
		case string:
			if depth == 1 && expectKey {
				keys = append(keys, v)
				expectKey = false
				continue
			}
		}
		if depth == 1 {
			expectKey = true
		}
	}
	return keys
}

func rawField(t testing.TB, raw []byte, path ...any) json.RawMessage {
	t.Helper()
	cur := json.RawMessage(raw)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				t.Fatalf("at %v: %v", p, err)
			}
			cur = m[k]
		case int:
			var a []json.RawMessage
			if err := json.Unmarshal(cur, &a); err != nil || k >= len(a) {
				t.Fatalf("at %v: %v", p, err)
			}
			cur = a[k]
		}
	}
	return cur
}

func wantCode(t testing.TB, ge *gateway.Error, code gateway.Code) *gateway.Error {
	t.Helper()
	if ge == nil {
		t.Fatalf("want *gateway.Error %s, got none", code)
	}
	if ge.Code != code {
		t.Fatalf("want %s, got %s: %s", code, ge.Code, ge.Message)
	}
	return ge
}

func TestS1_ProgramPageIsFlatWithKeyListsByDefault(t *testing.T) {
	s := newService(t, trackerFixture())
	raw, err := search(t, s, gateway.FrontDoorProgram, `{"query":"list issues","connector":"tracker","includeSchemas":"compact"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := orderedKeys(t, raw); !reflect.DeepEqual(got, []string{"tools", "total", "offset", "limit", "hasMore"}) {
		t.Fatalf("page keys %v", got)
	}
	row := rawField(t, raw, "tools", 0)
	want := []string{"name", "address", "description", "inputSchema", "inputKeys", "requiredInputKeys", "annotations",
		"connectorTitle", "guide", "guideSummary"}
	if got := orderedKeys(t, row); !reflect.DeepEqual(got, want) {
		t.Fatalf("row keys %v\nwant %v", got, want)
	}
	r := decode(t, row)
	if r["address"] != "tracker.list_issues" || r["connectorTitle"] != "Issue tracker" || r["guide"] != "connector:tracker" {
		t.Fatalf("row %v", r)
	}
	if r["inputSchema"] != `{ project: string, state?: "open" | "closed", limit?: integer /* >= 1; <= 100 */ }` {
		t.Fatalf("schema %q", r["inputSchema"])
	}
	if fmt.Sprint(r["inputKeys"]) != "[project state limit]" || fmt.Sprint(r["requiredInputKeys"]) != "[project]" {
		t.Fatalf("keys %v %v", r["inputKeys"], r["requiredInputKeys"])
	}
	if r["guideSummary"] != "Always scope issue queries by project key. Labels are case-sensitive." {
		t.Fatalf("summary %q", r["guideSummary"])
	}
}

func TestS1_TopLevelPageIsGroupedByConnector(t *testing.T) {
	s := newService(t, trackerFixture())
	raw, err := search(t, s, gateway.FrontDoorTopLevel, `{"query":"get","includeSchemas":"compact"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := orderedKeys(t, raw); got[0] != "connectors" || got[1] != "total" {
		t.Fatalf("page keys %v", got)
	}
	page := decode(t, raw)
	groups := page["connectors"].([]any)
	var ids []string
	for _, g := range groups {
		gm := g.(map[string]any)
		ids = append(ids, gm["id"].(string))
		for _, row := range gm["tools"].([]any) {
			rm := row.(map[string]any)
			if _, ok := rm["connectorTitle"]; ok {
				t.Fatal("grouped rows carry no connectorTitle")
			}
			// S2: search_tools carries key lists whenever schemas are requested.
			if _, ok := rm["inputKeys"]; !ok {
				t.Fatalf("no key lists at the top level: %v", rm)
			}
		}
	}
	if !reflect.DeepEqual(ids, []string{"tracker", "ci"}) {
		t.Fatalf("groups %v", ids)
	}
	g0 := rawField(t, raw, "connectors", 0)
	if got := orderedKeys(t, g0); !reflect.DeepEqual(got, []string{"id", "title", "guide", "guideSummary", "tools"}) {
		t.Fatalf("group keys %v", got)
	}
}

func TestS2_IncludeSchemaKeysFalseBuysTheBytesBack(t *testing.T) {
	s := newService(t, trackerFixture())
	page := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"get issue","includeSchemas":"compact","includeSchemaKeys":false}`)
	for _, row := range page["tools"].([]any) {
		for _, k := range []string{"inputKeys", "requiredInputKeys", "outputKeys"} {
			if _, ok := row.(map[string]any)[k]; ok {
				t.Fatalf("%s present with includeSchemaKeys false", k)
			}
		}
	}
	// No schemas requested: no lists either.
	page = mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"get issue"}`)
	if _, ok := page["tools"].([]any)[0].(map[string]any)["inputKeys"]; ok {
		t.Fatal("key lists without schemas")
	}
}

func TestS2_KeyListSemantics(t *testing.T) {
	f := trackerFixture()
	many := `{"type":"object","properties":{` + func() string {
		var parts []string
		for i := 0; i < 120; i++ {
			parts = append(parts, fmt.Sprintf(`"field_%03d":{"type":"object","properties":{"x":{"type":"string"}}}`, i))
		}
		return strings.Join(parts, ",")
	}() + `}}`
	f.tools["misc"] = []gateway.Tool{
		tool("misc", "no_input", "Takes nothing.", boolp(true), ""),
		tool("misc", "union_input", "Union.", boolp(true), `{"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"null"}]}`),
		tool("misc", "huge_input", "Huge.", boolp(true), many),
		tool("misc", "with_output", "Has output.", boolp(true), `{"type":"object"}`),
		tool("misc", "empty_output", "Empty output object.", boolp(true), `{"type":"object"}`),
	}
	f.tools["misc"][3].OutputSchema = json.RawMessage(`{"type":"object","properties":{"items":{"type":"array"},"next":{"type":"string"}}}`)
	f.tools["misc"][4].OutputSchema = json.RawMessage(`{"type":"object"}`)
	f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: "misc"})
	s := newService(t, f)
	page := mustSearch(t, s, gateway.FrontDoorProgram, `{"connector":"misc","includeSchemas":"compact","limit":10}`)
	rows := map[string]map[string]any{}
	for _, r := range page["tools"].([]any) {
		rows[r.(map[string]any)["name"].(string)] = r.(map[string]any)
	}
	if got := rows["no_input"]; fmt.Sprint(got["inputKeys"]) != "[]" || fmt.Sprint(got["requiredInputKeys"]) != "[]" || got["inputSchema"] != "{}" {
		t.Fatalf("zero-input object: %v", got)
	}
	if _, ok := rows["union_input"]["inputKeys"]; ok {
		t.Fatal("union carries key lists")
	}
	if h := rows["huge_input"]; h["inputSchemaTruncated"] != true || h["inputKeys"] != nil {
		t.Fatalf("truncated shape keeps its list: %v", h)
	}
	if fmt.Sprint(rows["with_output"]["outputKeys"]) != "[items next]" {
		t.Fatalf("outputKeys %v", rows["with_output"]["outputKeys"])
	}
	if _, ok := rows["empty_output"]["outputKeys"]; ok {
		t.Fatal("output object without properties carries outputKeys")
	}
}

func TestS1_ObservedOutputSchemaIsLabelled(t *testing.T) {
	f := trackerFixture()
	f.observed["ci.get_run"] = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`)
	f.tools["ci"][1].OutputSchema = json.RawMessage(`{"type":"object","properties":{"lines":{"type":"array"}}}`)
	s := newService(t, f)
	page := mustSearch(t, s, gateway.FrontDoorProgram, `{"connector":"ci","includeSchemas":"compact"}`)
	rows := page["tools"].([]any)
	run, logs := rows[0].(map[string]any), rows[1].(map[string]any)
	if run["outputSchemaSource"] != "observed" || run["outputSchema"] != "{ status?: string }" {
		t.Fatalf("observed: %v", run)
	}
	if _, ok := logs["outputSchemaSource"]; ok {
		t.Fatalf("declared schema carries a source marker: %v", logs)
	}
	d, err := s.Describe(context.Background(), gateway.FrontDoorProgram, DescribeParams{Addresses: []string{"ci.get_run"}})
	if err != nil || decode(t, rawField(t, d, "tools", 0))["outputSchemaSource"] != "observed" {
		t.Fatalf("describe: %s %v", d, err)
	}
}

func TestS1a_SafetyClassesPartitionTheCatalog(t *testing.T) {
	f := trackerFixture()
	// Contradictory: readOnly but destructive → approval required.
	f.tools["chat"] = append(f.tools["chat"], gateway.Tool{ConnectorID: "chat", Name: "purge",
		Annotations: &gateway.Annotations{ReadOnlyHint: boolp(true), DestructiveHint: boolp(true)}})
	s := newService(t, f)
	addrs := func(args string) []string {
		var out []string
		for _, r := range mustSearch(t, s, gateway.FrontDoorProgram, args)["tools"].([]any) {
			out = append(out, r.(map[string]any)["address"].(string))
		}
		return out
	}
	all := addrs(`{"limit":100}`)
	ro := addrs(`{"limit":100,"safety":"readOnly"}`)
	ap := addrs(`{"limit":100,"safety":"approvalRequired"}`)
	if !reflect.DeepEqual(all, addrs(`{"limit":100,"safety":"all"}`)) {
		t.Fatal(`"all" differs from omitted`)
	}
	if len(ro)+len(ap) != len(all) {
		t.Fatalf("classes do not partition: %d + %d != %d", len(ro), len(ap), len(all))
	}
	for _, a := range ro {
		for _, b := range ap {
			if a == b {
				t.Fatalf("%s in both classes", a)
			}
		}
	}
	for _, want := range []string{"chat.purge", "ci.rerun", "tracker.create_issue", "chat.post_message"} {
		found := false
		for _, a := range ap {
			found = found || a == want
		}
		if !found {
			t.Fatalf("%s (false, missing or contradictory annotations) not approval-required: %v", want, ap)
		}
	}
}

func TestS1a_ConnectorScopeLoadsOnlyThatCatalog(t *testing.T) {
	f := trackerFixture()
	s := newService(t, f)
	mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"run","connector":"ci"}`)
	if got := f.loaded(); !reflect.DeepEqual(got, []string{"ci"}) {
		t.Fatalf("loaded %v", got)
	}
}

func TestS1a_UnscopedFanOutIsBoundedAtFour(t *testing.T) {
	f := &fixtureCatalog{tools: map[string][]gateway.Tool{}, gate: make(chan struct{})}
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("c%d", i)
		f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: id})
		f.tools[id] = []gateway.Tool{tool(id, "t", "", boolp(true), "")}
	}
	s := newService(t, f)
	done := make(chan *gateway.Error, 1)
	go func() {
		_, err := search(t, s, gateway.FrontDoorProgram, `{}`)
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return f.inFlight.Load() >= DefaultConcurrency },
		"%d catalog loads never ran at once", DefaultConcurrency)
	close(f.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := f.peak.Load(); p != DefaultConcurrency {
		t.Fatalf("peak concurrency %d, want %d", p, DefaultConcurrency)
	}
	if len(f.loaded()) != 10 {
		t.Fatalf("loaded %v", f.loaded())
	}
}

func TestS3_BoundsAreInvalidArgsBeforeAnyCatalogLoads(t *testing.T) {
	long := strings.Repeat("c", MaxConnectorArgBytes+1)
	cases := map[string]string{
		`{"limit":0}`:                   "limit",
		`{"limit":101}`:                 "limit",
		`{"limit":1.5}`:                 "limit",
		`{"limit":"8"}`:                 "limit",
		`{"offset":-1}`:                 "offset",
		`{"offset":0.5}`:                "offset",
		`{"offset":"2"}`:                "offset",
		`{"query":5}`:                   "query",
		`{"query":null}`:                "query",
		`{"query":["a"]}`:               "query",
		`{"connector":"` + long + `"}`:  "connector",
		`{"connector":7}`:               "connector",
		`{"safety":"writes"}`:           "safety",
		`{"includeSchemas":"yaml"}`:     "includeSchemas",
		`[1,2]`:                         "object",
		`{"query":7,"limit":0}`:         "query", // query is checked first
		`{"limit":100,"offset":1e400}`:  "offset",
		`{"limit":9007199254740993000}`: "limit",
	}
	for args, mention := range cases {
		f := trackerFixture()
		s := newService(t, f)
		_, err := search(t, s, gateway.FrontDoorProgram, args)
		e := wantCode(t, err, gateway.CodeInvalidArgs)
		if e.Retryable || !strings.Contains(e.Message, mention) {
			t.Errorf("%s: %+v", args, e)
		}
		if len(f.loaded()) != 0 {
			t.Errorf("%s: catalogs loaded before validation: %v", args, f.loaded())
		}
		b, _ := json.Marshal(e)
		if !strings.HasPrefix(string(b), `{"code":"invalid_args","message":`) {
			t.Errorf("error JSON %s", b)
		}
	}
	// Typed callers get the same checks.
	f := trackerFixture()
	zero := 0
	_, err := newService(t, f).Search(context.Background(), gateway.FrontDoorTopLevel, SearchParams{Limit: &zero})
	wantCode(t, err, gateway.CodeInvalidArgs)
}

func TestS3_AcceptedBoundaryValues(t *testing.T) {
	s := newService(t, trackerFixture())
	for _, args := range []string{`{"limit":1}`, `{"limit":100}`, `{"limit":2.0}`, `{"offset":0}`, `{"offset":1e2}`,
		`{"connector":"` + strings.Repeat("c", MaxConnectorArgBytes) + `"}`, `{"query":""}`, `{"unknownKey":1}`, `null`, ``} {
		if _, err := search(t, s, gateway.FrontDoorProgram, args); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
}

func TestS3_PageOverCeilingIsResultTooLarge(t *testing.T) {
	f := trackerFixture()
	var tools []gateway.Tool
	for i := 0; i < 100; i++ {
		tools = append(tools, tool("big", fmt.Sprintf("tool_%d", i), strings.Repeat("word ", 600), boolp(true), ""))
	}
	f.tools["big"] = tools
	f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: "big"})
	s := newService(t, f)
	_, err := search(t, s, gateway.FrontDoorProgram, `{"connector":"big","limit":100,"fullDescriptions":true}`)
	e := wantCode(t, err, gateway.CodeResultTooLarge)
	if e.Retryable || !strings.Contains(e.Message, "limit") || !strings.Contains(e.Message, "256000") {
		t.Fatalf("%+v", e)
	}
	// Summaries fit.
	if _, err := search(t, s, gateway.FrontDoorProgram, `{"connector":"big","limit":100}`); err != nil {
		t.Fatal(err)
	}
	// The complete top-level result (both copies) is the server's to
	// measure; it refuses with the same error.
	if e := SearchResultTooLarge(MaxResultBytes + 1); e.Code != gateway.CodeResultTooLarge || !strings.Contains(e.Message, "limit") {
		t.Fatalf("%+v", e)
	}
}

func TestS1_PaginationIsStableAndComplete(t *testing.T) {
	f := thousandTools()
	s := newService(t, f)
	var seen []string
	offset := 0
	for {
		raw, err := search(t, s, gateway.FrontDoorProgram, fmt.Sprintf(`{"query":"list","limit":100,"offset":%d}`, offset))
		if err != nil {
			t.Fatal(err)
		}
		page := decode(t, raw)
		for _, r := range page["tools"].([]any) {
			seen = append(seen, r.(map[string]any)["address"].(string))
		}
		if page["hasMore"] != true {
			if _, ok := page["nextOffset"]; ok {
				t.Fatal("nextOffset without more")
			}
			break
		}
		offset = int(page["nextOffset"].(float64))
	}
	total := int(mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"list"}`)["total"].(float64))
	if len(seen) != total {
		t.Fatalf("paged %d of %d", len(seen), total)
	}
	uniq := map[string]bool{}
	for _, a := range seen {
		if uniq[a] {
			t.Fatalf("%s twice", a)
		}
		uniq[a] = true
	}
	// Same query, same bytes.
	a, _ := search(t, s, gateway.FrontDoorTopLevel, `{"query":"list project comments","includeSchemas":"compact","limit":100}`)
	b, _ := search(t, s, gateway.FrontDoorTopLevel, `{"query":"list project comments","includeSchemas":"compact","limit":100}`)
	if !bytes.Equal(a, b) {
		t.Fatal("nondeterministic page")
	}
	// Past the end: empty page, no nextOffset.
	past := mustSearch(t, s, gateway.FrontDoorProgram, `{"offset":5000}`)
	if len(past["tools"].([]any)) != 0 || past["hasMore"] != false || past["offset"].(float64) != 5000 {
		t.Fatalf("past the end: %v", past)
	}
}

func TestS1_NoMatchAnalysis(t *testing.T) {
	f := trackerFixture()
	f.failures["chat"] = &gateway.Error{Code: gateway.CodeUnavailable, Message: "chat is down", Retryable: true}
	s := newService(t, f)

	browse := mustSearch(t, s, gateway.FrontDoorProgram, `{}`)
	qa := browse["queryAnalysis"].(map[string]any)
	if qa["unavailableConnectorCount"].(float64) != 1 || !strings.Contains(qa["guidance"].(string), "1 connector catalog was unavailable") {
		t.Fatalf("browse analysis %v", qa)
	}
	if _, ok := qa["catalogError"]; ok {
		t.Fatal("unscoped search echoes a catalog error")
	}

	scoped := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"post","connector":"chat"}`)
	ce := scoped["queryAnalysis"].(map[string]any)["catalogError"].(map[string]any)
	if ce["code"] != "unavailable" || ce["retryable"] != true || ce["message"] != "chat is down" {
		t.Fatalf("catalogError %v", ce)
	}

	guided := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"zebra","connector":"tracker","safety":"readOnly"}`)
	qa = guided["queryAnalysis"].(map[string]any)
	if qa["guide"] != "connector:tracker" || qa["guideSummary"] == nil ||
		!strings.Contains(qa["guidance"].(string), "read-only capability") || !strings.Contains(qa["guidance"].(string), "Change safety") {
		t.Fatalf("scoped guided miss %v", qa)
	}
	if fmt.Sprint(qa["unmatchedTerms"]) != "[zebra]" {
		t.Fatalf("terms %v", qa)
	}

	mixed := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"日本 labels"}`)
	if mixed["total"].(float64) != 1 {
		t.Fatalf("mixed input searches with its ASCII terms: %v", mixed)
	}
	if _, ok := mixed["queryAnalysis"]; ok {
		t.Fatal("complete match reports analysis")
	}

	noTerms, err := search(t, s, gateway.FrontDoorTopLevel, `{"query":"   日本語   "}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(noTerms), `"unmatchedTerms":["日本語"]`) || !strings.Contains(string(noTerms), `"total":0`) {
		t.Fatalf("no ASCII terms: %s", noTerms)
	}
}

func TestS1_HungCatalogTimesOutAlone(t *testing.T) {
	f := trackerFixture()
	f.block = map[string]bool{"chat": true}
	s := newService(t, f, func(o *Options) { o.CatalogTimeout = 20 * time.Millisecond })
	page := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"post message","connector":"chat"}`)
	ce := page["queryAnalysis"].(map[string]any)["catalogError"].(map[string]any)
	if ce["code"] != "timeout" || ce["retryable"] != true || !strings.Contains(ce["message"].(string), `connecta.search probe of "chat" timed out`) {
		t.Fatalf("%v", ce)
	}
	all := mustSearch(t, s, gateway.FrontDoorTopLevel, `{"query":"issue"}`)
	if all["total"].(float64) == 0 {
		t.Fatal("one hung catalog failed the search")
	}
}

func TestS1_CancelledSearchEndsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	f := trackerFixture()
	f.block = map[string]bool{"tracker": true, "ci": true, "chat": true}
	s := newService(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *gateway.Error, 1)
	go func() {
		_, err := s.Search(ctx, gateway.FrontDoorProgram, SearchParams{})
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return f.inFlight.Load() >= 3 }, "the three catalog loads never started")
	cancel()
	wantCode(t, <-done, gateway.CodeCancelled)
	testkit.GoroutinesAtMost(t, 10*time.Second, before) // a leak never ends; a loaded machine is only slow
}

func TestS1_NoHTMLEscapingAndNoScores(t *testing.T) {
	f := trackerFixture()
	f.tools["ci"][0].Description = "Get <b>run</b> & status"
	s := newService(t, f)
	raw, _ := search(t, s, gateway.FrontDoorProgram, `{"query":"run status"}`)
	if !strings.Contains(string(raw), `"Get <b>run</b> & status"`) {
		t.Fatalf("escaped: %s", raw)
	}
	if strings.Contains(string(raw), "score") {
		t.Fatal("rows expose a score")
	}
}

func TestS1_DescriptionsAreSummarizedUnlessFull(t *testing.T) {
	f := trackerFixture()
	long := strings.Repeat("alpha  beta\n", 40)
	f.tools["ci"][0].Description = long
	s := newService(t, f)
	row := mustSearch(t, s, gateway.FrontDoorProgram, `{"connector":"ci","limit":1}`)["tools"].([]any)[0].(map[string]any)
	d := row["description"].(string)
	if jstext.Len(d) != SearchDescriptionLen || !strings.HasSuffix(d, "…") || strings.Contains(d, "  ") {
		t.Fatalf("%d %q", jstext.Len(d), d)
	}
	row = mustSearch(t, s, gateway.FrontDoorProgram, `{"connector":"ci","limit":1,"fullDescriptions":true}`)["tools"].([]any)[0].(map[string]any)
	if row["description"] != long {
		t.Fatal("full description altered")
	}
}

func TestS1_ConnectorTitleIsNormalizedAndBounded(t *testing.T) {
	f := trackerFixture()
	f.connectors[1].Title = strings.Repeat("é", 100)
	s := newService(t, f)
	row := mustSearch(t, s, gateway.FrontDoorProgram, `{"connector":"ci","limit":1}`)["tools"].([]any)[0].(map[string]any)
	title := row["connectorTitle"].(string)
	if len(title) > MaxConnectorTitle || !strings.HasSuffix(title, "…") {
		t.Fatalf("%d bytes: %q", len(title), title)
	}
}

func thousandTools() *fixtureCatalog {
	verbs := []string{"list", "get", "create", "update", "delete", "search"}
	nouns := []string{"issue", "project", "label", "user", "comment", "run", "job", "log", "file", "page"}
	f := &fixtureCatalog{tools: map[string][]gateway.Tool{}}
	for c := 0; c < 4; c++ {
		id := fmt.Sprintf("svc%d", c)
		f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: id, Title: "Service " + id})
		for i := 0; i < 250; i++ {
			n := c*250 + i
			v, o := verbs[n%len(verbs)], nouns[(n/len(verbs))%len(nouns)]
			ro := v == "list" || v == "get" || v == "search"
			f.tools[id] = append(f.tools[id], tool(id, fmt.Sprintf("%s_%s_%d", v, o, n),
				fmt.Sprintf("%s a %s in workspace %d; returns the %s with its metadata.", v, o, n%37, o), boolp(ro),
				fmt.Sprintf(`{"type":"object","properties":{"workspace":{"type":"integer","minimum":0},"%sId":{"type":"string"},"fields":{"type":"array","items":{"enum":["id","name","created","updated"]}}},"required":["workspace"]}`, o)))
		}
	}
	return f
}

func BenchmarkSearch1000Tools(b *testing.B) {
	s := newService(b, thousandTools())
	p, _ := DecodeSearchArgs(json.RawMessage(`{"query":"list project comments","includeSchemas":"compact"}`))
	for _, front := range []struct {
		name string
		door gateway.FrontDoor
	}{{"program", gateway.FrontDoorProgram}, {"toplevel", gateway.FrontDoorTopLevel}} {
		b.Run(front.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Search(context.Background(), front.door, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The gateway hands out a fresh copy of a listing on every load: the index
// built for it is reused all the same (one per connector and safety class),
// and rows show the current copy's schema.
func TestS1_IndexReusedAcrossListingCopies(t *testing.T) {
	f := trackerFixture()
	f.clone = true
	s := newService(t, f)
	var cat *lexical.Catalog
	for range 5 {
		mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"list issues","connector":"tracker"}`)
		s.mu.Lock()
		n := len(s.indexes)
		var ix *catalogIndex
		for _, v := range s.indexes {
			ix = v
		}
		s.mu.Unlock()
		if n != 1 {
			t.Fatalf("index cache holds %d entries for one connector, want 1", n)
		}
		if cat != nil && ix.cat != cat {
			t.Fatal("the lexical index was rebuilt for an unchanged listing")
		}
		cat = ix.cat
	}
	f.tools["tracker"][0].InputSchema = json.RawMessage(`{"type":"object","properties":{"fresh":{"type":"string"}}}`)
	raw, err := search(t, s, gateway.FrontDoorProgram, `{"query":"list issues","connector":"tracker","includeSchemas":"json"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"fresh"`) {
		t.Fatalf("a reused index served a stale schema: %s", raw)
	}
}
