package observe

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

var def = json.RawMessage(`{"name":"list","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`)

func learnOne(t *testing.T, result string) string {
	t.Helper()
	o := New(Options{})
	o.Learn(def, json.RawMessage(result))
	return string(o.Schema(def))
}

func TestS9_NamesAndBroadTypesOnly(t *testing.T) {
	got := learnOne(t, `{"zeta":"SECRET-1","alpha":42,"b":true,"n":null,"list":[{"id":7,"title":"SECRET-2"}],"o":{"x":1.5e300}}`)
	want := `{"type":"object","properties":{"alpha":{"type":"number"},"b":{"type":"boolean"},"list":{"type":"array","items":{"type":"object","properties":{"id":{"type":"number"},"title":{"type":"string"}}}},"n":{"type":"null"},"o":{"type":"object","properties":{"x":{"type":"number"}}},"zeta":{"type":"string"}}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if strings.Contains(got, "SECRET") || strings.Contains(got, "42") || strings.Contains(got, "required") {
		t.Fatal("schema keeps values or requires fields")
	}
}

func TestS9_ScalarAndEmptyResults(t *testing.T) {
	for result, want := range map[string]string{
		`"text"`:       `{"type":"string"}`,
		`[]`:           `{"type":"array"}`,
		`{}`:           `{"type":"object","properties":{}}`,
		`[1,"a",null]`: `{"type":"array","items":{"anyOf":[{"type":"null"},{"type":"number"},{"type":"string"}]}}`,
	} {
		if got := learnOne(t, result); got != want {
			t.Errorf("%s: got %s want %s", result, got, want)
		}
	}
}

func TestS9_MergeAcrossObservations(t *testing.T) {
	o := New(Options{})
	o.Learn(def, json.RawMessage(`{"a":1,"shared":{"x":1}}`))
	o.Learn(def, json.RawMessage(`{"b":"s","shared":{"y":true},"a":"now a string"}`))
	got := string(o.Schema(def))
	want := `{"type":"object","properties":{"a":{"anyOf":[{"type":"number"},{"type":"string"}]},"b":{"type":"string"},"shared":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"boolean"}}}}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// A different top-level type becomes a union too.
	o.Learn(def, json.RawMessage(`"x"`))
	if got := string(o.Schema(def)); !strings.HasPrefix(got, `{"anyOf":[{"type":"string"},{"type":"object"`) {
		t.Fatalf("union: %s", got)
	}
}

func TestS9_DeterministicOutput(t *testing.T) {
	a := learnOne(t, `{"b":1,"a":2,"c":{"z":1,"y":2}}`)
	b := learnOne(t, `{"c":{"y":2,"z":1},"a":2,"b":1}`)
	if a != b {
		t.Fatalf("order-dependent: %s vs %s", a, b)
	}
}

func nest(depth int) string {
	return strings.Repeat(`{"k":`, depth) + `1` + strings.Repeat(`}`, depth)
}

func TestS9_DepthBound(t *testing.T) {
	got := learnOne(t, nest(20))
	if d := strings.Count(got, `"type":"object"`); d != MaxSchemaDepth+1 {
		t.Fatalf("kept %d object levels, want %d: %s", d, MaxSchemaDepth+1, got)
	}
	if strings.Contains(got, `"type":"number"`) {
		t.Fatal("value beyond the depth bound was typed")
	}
	// Exactly at the bound: depth 6 leaf kept.
	if got := learnOne(t, nest(MaxSchemaDepth)); !strings.Contains(got, `"type":"number"`) {
		t.Fatalf("leaf at depth %d dropped: %s", MaxSchemaDepth, got)
	}
}

func countNodes(t *testing.T, schema string) int {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) int
	walk = func(v any) int {
		m, ok := v.(map[string]any)
		if !ok {
			return 0
		}
		n := 1
		if props, ok := m["properties"].(map[string]any); ok {
			for _, p := range props {
				n += walk(p)
			}
		}
		if items, ok := m["items"]; ok {
			n += walk(items)
		}
		if any, ok := m["anyOf"].([]any); ok {
			for _, b := range any {
				n += walk(b)
			}
		}
		return n
	}
	return walk(v)
}

func TestS9_NodeBound(t *testing.T) {
	var parts []string
	for i := 0; i < 40; i++ {
		parts = append(parts, fmt.Sprintf(`"p%02d":{"a":1,"b":2,"c":3,"d":4}`, i))
	}
	got := learnOne(t, "{"+strings.Join(parts, ",")+"}")
	if n := countNodes(t, got); n > MaxSchemaNodes || n < MaxSchemaNodes-5 {
		t.Fatalf("%d nodes, want ≤ %d and near it", n, MaxSchemaNodes)
	}
}

func TestS9_PropertiesPerObjectBound(t *testing.T) {
	var parts []string
	for i := 0; i < 100; i++ {
		parts = append(parts, fmt.Sprintf(`"p%03d":1`, i))
	}
	got := learnOne(t, "{"+strings.Join(parts, ",")+"}")
	var s struct{ Properties map[string]any }
	_ = json.Unmarshal([]byte(got), &s)
	if len(s.Properties) != MaxObjectProperties {
		t.Fatalf("%d properties, want %d", len(s.Properties), MaxObjectProperties)
	}
	// Merging cannot exceed the bound either.
	o := New(Options{})
	o.Learn(def, json.RawMessage("{"+strings.Join(parts[:50], ",")+"}"))
	o.Learn(def, json.RawMessage("{"+strings.Join(parts[50:], ",")+"}"))
	_ = json.Unmarshal(o.Schema(def), &s)
	if len(s.Properties) != MaxObjectProperties {
		t.Fatalf("merged: %d properties", len(s.Properties))
	}
}

func TestS9_ArrayItemsInspected(t *testing.T) {
	var items []string
	for i := 0; i < MaxArrayItems; i++ {
		items = append(items, `1`)
	}
	items = append(items, `"only after the 32nd item"`)
	got := learnOne(t, "["+strings.Join(items, ",")+"]")
	if got != `{"type":"array","items":{"type":"number"}}` {
		t.Fatalf("inspected past %d items: %s", MaxArrayItems, got)
	}
}

func TestS9_PropertyNames(t *testing.T) {
	long := strings.Repeat("n", MaxPropertyNameBytes+1)
	atBound := strings.Repeat("é", MaxPropertyNameBytes/2)
	got := learnOne(t, fmt.Sprintf(`{"__proto__":1,"constructor":2,"prototype":3,%q:4,%q:5,"ok":6,"<&>":7}`, long, atBound))
	for _, bad := range []string{"__proto__", "constructor", "prototype", long} {
		if strings.Contains(got, `"`+bad+`"`) {
			t.Fatalf("kept %q: %s", bad, got)
		}
	}
	if !strings.Contains(got, `"ok"`) || !strings.Contains(got, atBound) || !strings.Contains(got, `"<&>"`) {
		t.Fatalf("dropped a safe name or escaped HTML: %s", got)
	}
}

func TestS9_SizeBounds(t *testing.T) {
	o := New(Options{})
	big := json.RawMessage(`{"name":"` + strings.Repeat("x", MaxDefinitionBytes) + `"}`)
	o.Learn(big, json.RawMessage(`{"a":1}`))
	if o.Schema(big) != nil || o.Len() != 0 {
		t.Fatal("definition over 64 KiB observed")
	}
	// ~127 nodes named with 128-byte names exceed 16 KiB.
	var parts []string
	for i := 0; i < 48; i++ {
		name := fmt.Sprintf("%03d%s", i, strings.Repeat("q", 125))
		parts = append(parts, fmt.Sprintf(`%q:{%q:1,%q:2}`, name, name, "x"+name[1:]))
	}
	o.Learn(def, json.RawMessage("{"+strings.Join(parts, ",")+"}"))
	if o.Schema(def) != nil {
		t.Fatal("schema over 16 KiB stored")
	}
	// An earlier small observation survives an oversized merge.
	o.Learn(def, json.RawMessage(`{"a":1}`))
	o.Learn(def, json.RawMessage("{"+strings.Join(parts, ",")+"}"))
	if got := string(o.Schema(def)); got != `{"type":"object","properties":{"a":{"type":"number"}}}` {
		t.Fatalf("got %s", got)
	}
}

func TestS9_FailuresDiscardedSilently(t *testing.T) {
	o := New(Options{})
	for _, bad := range []string{``, `{`, `{"a":}`, `{"a":1} trailing`, `nul`, "\xff", strings.Repeat("[", 20000)} {
		o.Learn(def, json.RawMessage(bad))
	}
	if o.Schema(def) != nil {
		t.Fatal("invalid result learned")
	}
	o.Learn(nil, json.RawMessage(`{"a":1}`))
	if o.Len() != 0 {
		t.Fatal("empty definition learned")
	}
}

func TestS9_LRUAndExpiry(t *testing.T) {
	c := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := New(Options{Entries: 3, Now: c.Now})
	defs := make([]json.RawMessage, 5)
	for i := range defs {
		defs[i] = json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i))
	}
	for i := 0; i < 3; i++ {
		o.Learn(defs[i], json.RawMessage(`{"a":1}`))
	}
	_ = o.Schema(defs[0]) // touch: defs[1] becomes least recently used
	o.Learn(defs[3], json.RawMessage(`{"a":1}`))
	if o.Schema(defs[1]) != nil || o.Schema(defs[0]) == nil || o.Len() != 3 {
		t.Fatal("LRU evicted the wrong entry")
	}
	// The key is the exact definition: any byte change starts cold.
	if o.Schema(json.RawMessage(`{"name": "t0"}`)) != nil {
		t.Fatal("changed definition shares an entry")
	}
	c.Advance(DefaultTTL)
	if o.Schema(defs[0]) != nil {
		t.Fatal("entry outlived 24 h")
	}
	// Expired observations do not merge into a new one.
	o.Learn(defs[2], json.RawMessage(`{"b":1}`))
	if got := string(o.Schema(defs[2])); got != `{"type":"object","properties":{"b":{"type":"number"}}}` {
		t.Fatalf("expired observation merged: %s", got)
	}
}

func TestS9_CopyIsolation(t *testing.T) {
	o := New(Options{})
	o.Learn(def, json.RawMessage(`{"a":1}`))
	s := o.Schema(def)
	for i := range s {
		s[i] = 'X'
	}
	if got := string(o.Schema(def)); got != `{"type":"object","properties":{"a":{"type":"number"}}}` {
		t.Fatalf("caller mutated the cache: %s", got)
	}
}

func TestS9_Concurrent(t *testing.T) {
	o := New(Options{Entries: 4})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				d := json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, (g+i)%6))
				o.Learn(d, json.RawMessage(fmt.Sprintf(`{"f%d":%d}`, g, i)))
				_ = o.Schema(d)
			}
		}(g)
	}
	wg.Wait()
	if o.Len() > 4 {
		t.Fatalf("%d entries", o.Len())
	}
}

func FuzzInferSchema(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":null}],"c":"x"}`))
	f.Add([]byte(nest(10)))
	f.Add([]byte(`[[[[[[[[1]]]]]]]]`))
	f.Add([]byte(`{"__proto__":{"a":1},"a":{"a":{"a":1}},"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := InferSchema(data)
		if out == nil {
			return
		}
		if len(out) > MaxSchemaBytes || !json.Valid(out) {
			t.Fatalf("bad schema %q", out)
		}
		if n := countNodes(t, string(out)); n > MaxSchemaNodes {
			t.Fatalf("%d nodes", n)
		}
		// Learning twice is idempotent: merging a shape with itself.
		o := New(Options{})
		o.Learn(def, data)
		first := string(o.Schema(def))
		o.Learn(def, data)
		if second := string(o.Schema(def)); second != first {
			t.Fatalf("not idempotent:\n%s\n%s", first, second)
		}
	})
}

func BenchmarkLearn(b *testing.B) {
	o := New(Options{})
	result := json.RawMessage(`{"items":[{"id":1,"title":"a","labels":["x"]},{"id":2,"title":"b","owner":{"name":"n"}}],"next":"c"}`)
	for b.Loop() {
		o.Learn(def, result)
	}
}
