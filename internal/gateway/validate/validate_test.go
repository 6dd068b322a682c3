package validate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/jstext"
)

const objSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 2, "maxLength": 5},
    "count": {"type": "integer", "minimum": 1, "maximum": 10},
    "mode": {"enum": ["a", "b"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "nested": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": false}
  },
  "required": ["name"],
  "additionalProperties": false
}`

func TestE8_FindingsTable(t *testing.T) {
	v := New(Options{})
	cases := []struct {
		name   string
		schema string
		args   string
		want   []Finding
	}{
		{"valid", objSchema, `{"name":"abc","count":3}`, nil},
		{"missing required reports declared type", objSchema, `{}`,
			[]Finding{{Path: "/name", Code: "required", Expected: "string"}}},
		{"declared property wrong type reports type, not additionalProperties", objSchema, `{"name":"abc","count":"three"}`,
			[]Finding{{Path: "/count", Code: "type", Expected: "integer"}}},
		{"undeclared property reports additionalProperties", objSchema, `{"name":"abc","extra":1}`,
			[]Finding{{Path: "/extra", Code: "additionalProperties", Expected: "no additional properties"}}},
		{"enum", objSchema, `{"name":"abc","mode":"zzz"}`,
			[]Finding{{Path: "/mode", Code: "enum", Expected: "one of the declared values"}}},
		{"minimum", objSchema, `{"name":"abc","count":0}`,
			[]Finding{{Path: "/count", Code: "minimum", Expected: ">= 1"}}},
		{"maximum", objSchema, `{"name":"abc","count":11}`,
			[]Finding{{Path: "/count", Code: "maximum", Expected: "<= 10"}}},
		{"minLength", objSchema, `{"name":"a"}`,
			[]Finding{{Path: "/name", Code: "minLength", Expected: "at least 2 characters"}}},
		{"nested item type", objSchema, `{"name":"abc","tags":["ok",5]}`,
			[]Finding{{Path: "/tags/1", Code: "type", Expected: "string"}}},
		{"maxItems", objSchema, `{"name":"abc","tags":["a","b","c"]}`,
			[]Finding{{Path: "/tags", Code: "maxItems", Expected: "at most 2 items"}}},
		{"nested required and undeclared", objSchema, `{"name":"abc","nested":{"y":1}}`,
			[]Finding{{Path: "/nested/x", Code: "required", Expected: "number"}, {Path: "/nested/y", Code: "additionalProperties", Expected: "no additional properties"}}},
		{"root not an object", objSchema, `[1]`,
			[]Finding{{Path: "/", Code: "type", Expected: "object"}}},
		{"nil args mean {}", objSchema, ``,
			[]Finding{{Path: "/name", Code: "required", Expected: "string"}}},
		{"required without declared type", `{"type":"object","required":["q"]}`, `{}`,
			[]Finding{{Path: "/q", Code: "required", Expected: "present"}}},
		{"pointer escaping", `{"type":"object","properties":{"a/b":{"type":"string"}}}`, `{"a/b":1}`,
			[]Finding{{Path: "/a~1b", Code: "type", Expected: "string"}}},
		{"type union", `{"type":"object","properties":{"v":{"type":["string","null"]}}}`, `{"v":1}`,
			[]Finding{{Path: "/v", Code: "type", Expected: "null | string"}}},
		{"false property", `{"type":"object","properties":{"v":false}}`, `{"v":1}`,
			[]Finding{{Path: "/v", Code: "properties", Expected: "no value here"}}},
		{"unevaluatedProperties", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`,
			[]Finding{{Path: "/b", Code: "unevaluatedProperties", Expected: "no value here"}}},
		{"allOf: property declared in a sibling reports only its keyword",
			`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"a":{}},"additionalProperties":false}]}`,
			`{"a":1}`, []Finding{{Path: "/a", Code: "type", Expected: "string"}}},
		{"draft-07 metaschema is embedded", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"string"}}}`,
			`{"a":1}`, []Finding{{Path: "/a", Code: "type", Expected: "string"}}},
		{"local $ref resolves", `{"$defs":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/s"}}}`,
			`{"a":1}`, []Finding{{Path: "/a", Code: "type", Expected: "string"}}},
		{"unsupported: invalid schema passes through", `{"type":12}`, `{"a":1}`, nil},
		{"unsupported: not JSON passes through", `{"type":`, `{"a":1}`, nil},
		{"unsupported: relative external $ref passes through", `{"$ref":"other.json"}`, `{"a":1}`, nil},
		{"unsupported: http $ref passes through", `{"$ref":"https://example.invalid/s.json"}`, `{"a":1}`, nil},
		{"unsupported: unknown $schema passes through", `{"$schema":"https://example.invalid/meta","type":"string"}`, `{"a":1}`, nil},
		{"no schema passes through", ``, `{"a":1}`, nil},
		{"true schema", `true`, `{"a":1}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := v.Check(json.RawMessage(tc.schema), json.RawMessage(tc.args))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Check = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestE8_FindingsNeverCarryValues(t *testing.T) {
	v := New(Options{})
	secret := "SECRET-VALUE-7731"
	schema := `{"type":"object","properties":{
	  "a":{"type":"integer"},"b":{"enum":["x"]},"c":{"const":"y"},"d":{"pattern":"^q$"},
	  "e":{"maxLength":1},"f":{"format":"email"},"g":{"not":{"type":"string"}},"h":{"oneOf":[{"type":"string"},{"type":"string"}]}},
	  "additionalProperties":false}`
	args := fmt.Sprintf(`{"a":%q,"b":%q,"c":%q,"d":%q,"e":%q,"f":%q,"g":%q,"h":%q}`,
		secret, secret, secret, secret, secret, secret, secret, secret)
	got := v.Check(json.RawMessage(schema), json.RawMessage(args))
	if len(got) == 0 {
		t.Fatal("expected findings")
	}
	raw, _ := json.Marshal(got)
	if strings.Contains(string(raw), "SECRET") {
		t.Fatalf("findings leak the value: %s", raw)
	}
}

func TestE8_FindingsBounded(t *testing.T) {
	v := New(Options{})
	var props, args []string
	for i := 0; i < 50; i++ {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"string"}`, i))
		args = append(args, fmt.Sprintf(`"p%02d":1`, i))
	}
	long := strings.Repeat("é", 1000) + "\xff"
	key, _ := json.Marshal(long)
	args = append(args, string(key)+":1")
	schema := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":false}`
	got, total := v.CheckAll(json.RawMessage(schema), json.RawMessage("{"+strings.Join(args, ",")+"}"))
	if len(got) != MaxFindings || total != 51 {
		t.Fatalf("got %d findings, total %d; want %d, 51", len(got), total, MaxFindings)
	}
	if got[0].Path != "/p00" {
		t.Fatalf("findings not sorted: %v", got)
	}
	// The hostile-named property sorts after the p.. ones; check it directly.
	got = v.Check(json.RawMessage(`{"type":"object","additionalProperties":false}`), json.RawMessage("{"+string(key)+":1}"))
	if len(got) != 1 || jstext.Len(got[0].Path) > MaxPathChars || !utf8.ValidString(got[0].Path) || !strings.HasSuffix(got[0].Path, "…") || !got[0].Clipped {
		t.Fatalf("path not clamped: %d bytes", len(got[0].Path))
	}
	// The bound is in UTF-16 units: a non-ASCII path within it is whole.
	within := strings.Repeat("é", MaxPathChars-2)
	key, _ = json.Marshal(within)
	got = v.Check(json.RawMessage(`{"type":"object","additionalProperties":false}`), json.RawMessage("{"+string(key)+":1}"))
	if len(got) != 1 || got[0].Path != "/"+within || got[0].Clipped {
		t.Fatalf("a %d-unit path was cut: %d units, clipped %v", MaxPathChars-1, jstext.Len(got[0].Path), got[0].Clipped)
	}
}

// A hostile schema must not open files: the referenced path is a FIFO, so
// opening it would block the test forever; a regular file whose schema would
// reject the arguments proves nothing was validated against it.
func TestE8_LoaderRefusesEverything(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	reject := filepath.Join(dir, "reject.json")
	if err := os.WriteFile(reject, []byte(`false`), 0o600); err != nil {
		t.Fatal(err)
	}
	v := New(Options{})
	for _, schema := range []string{
		`{"$ref":"file://` + fifo + `"}`,
		`{"$ref":"file://` + reject + `"}`,
		`{"$id":"file://` + dir + `/","$ref":"reject.json"}`,
		`{"$ref":"` + reject + `"}`,
		`{"type":"object","properties":{"a":{"$ref":"file://` + reject + `#"}}}`,
		`{"$schema":"file://` + reject + `"}`,
		`{"$dynamicRef":"file://` + reject + `"}`,
	} {
		if got := v.Check(json.RawMessage(schema), json.RawMessage(`{"a":1}`)); got != nil {
			t.Errorf("schema %s: got findings %v, want pass-through", schema, got)
		}
	}
}

func TestE8_CacheByExactBytesIsBounded(t *testing.T) {
	v := New(Options{CacheEntries: 4})
	for i := 0; i < 20; i++ {
		s := fmt.Sprintf(`{"type":"object","properties":{"a":{"type":"string"}},"x-%d":1}`, i)
		if got := v.Check(json.RawMessage(s), json.RawMessage(`{"a":1}`)); len(got) != 1 {
			t.Fatalf("iteration %d: %v", i, got)
		}
	}
	v.mu.Lock()
	n := v.lru.Len()
	v.mu.Unlock()
	if n != 4 {
		t.Fatalf("cache holds %d entries, want 4", n)
	}
	// Same bytes hit the cache: the cached entry is the same pointer.
	s := json.RawMessage(`{"type":"string"}`)
	a, b := v.compiled(s), v.compiled(append(json.RawMessage(nil), s...))
	if a != b {
		t.Fatal("identical schema bytes compiled twice")
	}
	if c := v.compiled(json.RawMessage(`{"type": "string"}`)); c == a {
		t.Fatal("different bytes shared an entry")
	}
}

func TestE8_ConcurrentChecks(t *testing.T) {
	v := New(Options{CacheEntries: 2})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func(g int) {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 50; i++ {
				s := fmt.Sprintf(`{"type":"object","properties":{"a":{"type":"string"}},"x":%d}`, (g+i)%5)
				if got := v.Check(json.RawMessage(s), json.RawMessage(`{"a":true}`)); len(got) != 1 {
					t.Errorf("got %v", got)
					return
				}
			}
		}(g)
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(objSchema), []byte(`{"name":"x","count":"y","zz":[1]}`))
	f.Add([]byte(`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`), []byte(`{}`))
	f.Add([]byte(`{"type":"object","required":["a"]}`), []byte(`[]`))
	f.Add([]byte(`{"anyOf":[{"type":"string"},{"type":"object","additionalProperties":false}]}`), []byte(`{"a":1}`))
	f.Add([]byte(`{"$id":"https://x.invalid/r","$defs":{"e":{"$id":"e.json","$anchor":"a","type":"integer"}},"properties":{"a":{"$ref":"e.json#a"},"b":{"$ref":"https://x.invalid/e.json"}}}`), []byte(`{"a":"x","b":1}`))
	f.Add([]byte(`{"$dynamicAnchor":"n","properties":{"c":{"$dynamicRef":"#n"}},"$defs":{"x":{"$id":"x","$dynamicAnchor":"n","type":"string"}}}`), []byte(`{"c":{"c":1}}`))
	f.Add([]byte(`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"items":{"$recursiveRef":"#"},"unevaluatedItems":false}`), []byte(`[[1],[]]`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","then":{"$id":"#t","minimum":3},"properties":{"n":{"$ref":"#t"}}}`), []byte(`{"n":1}`))
	v := New(Options{CacheEntries: 8})
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		got, total := v.CheckAll(schema, args)
		if len(got) > MaxFindings || total < len(got) {
			t.Fatalf("unbounded: %d findings, total %d", len(got), total)
		}
		for _, fd := range got {
			if jstext.Len(fd.Path) > MaxPathChars || jstext.Len(fd.Code) > MaxCodeChars || jstext.Len(fd.Expected) > MaxExpectedChars {
				t.Fatalf("field over its bound: %#v", fd)
			}
			if !utf8.ValidString(fd.Path) || !utf8.ValidString(fd.Code) || !utf8.ValidString(fd.Expected) {
				t.Fatalf("invalid UTF-8: %#v", fd)
			}
			if fd.Path == "" || fd.Path[0] != '/' {
				t.Fatalf("path not a pointer: %#v", fd)
			}
		}
	})
}

func TestE8_DeepHostileSchemaIsBounded(t *testing.T) {
	v := New(Options{})
	nested := func(levels int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"items":`, levels-1) + `{"type":"string"}` + strings.Repeat(`}`, levels-1))
	}
	arr := func(levels int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`[`, levels-1) + `1` + strings.Repeat(`]`, levels-1))
	}
	// At the depth bound the schema is enforced; one deeper passes through
	// (compile time grows steeply with depth: 1,000 levels take seconds).
	if got := v.Check(nested(MaxSchemaDepth), arr(MaxSchemaDepth)); len(got) != 1 || got[0].Code != "type" {
		t.Fatalf("schema at the depth bound not enforced: %v", got)
	}
	if got := v.Check(nested(MaxSchemaDepth+1), arr(MaxSchemaDepth+1)); got != nil {
		t.Fatalf("schema over the depth bound compiled: %v", got)
	}
	_ = v.Check(nested(3000), json.RawMessage(`[1]`)) // returns at once
	huge := `{"type":"object","properties":{"a":{"pattern":"` + strings.Repeat("(a+)+", 20000) + `"}}}`
	_ = v.Check(json.RawMessage(huge), json.RawMessage(`{"a":"aaaa"}`))
	over := `{"type":"string","x":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	if got := v.Check(json.RawMessage(over), json.RawMessage(`1`)); got != nil {
		t.Fatalf("schema over %d bytes was compiled: %v", MaxSchemaBytes, got)
	}
}

func BenchmarkCheckCached(b *testing.B) {
	v := New(Options{})
	schema, args := json.RawMessage(objSchema), json.RawMessage(`{"name":"abc","count":"x","extra":1}`)
	for b.Loop() {
		_ = v.Check(schema, args)
	}
}

func TestE8_HugeNumberLiteralPassesThroughCheaply(t *testing.T) {
	v := New(Options{})
	schema := json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","maximum":100}}}`)
	for _, args := range []string{`{"limit":1e1000000}`, `{"limit":1e-1000000}`, `{"limit":` + strings.Repeat("9", 100) + `}`} {
		if got := v.Check(schema, json.RawMessage(args)); got != nil {
			t.Errorf("Check(%s) = %v, want pass-through", args, got)
		}
	}
	if got := v.Check(schema, json.RawMessage(`{"limit":1e3}`)); len(got) != 1 || got[0].Code != "maximum" {
		t.Errorf("an ordinary over-maximum number must still be reported, got %v", got)
	}
}

func TestE8_HugeNumberInSchemaPassesThrough(t *testing.T) {
	v := New(Options{})
	// Each exact bound would cost the compiler (and every check) a
	// million-digit big.Rat; such a schema is unsupported and passes through.
	for _, schema := range []string{
		`{"type":"object","properties":{"n":{"type":"number","minimum":1e999999}}}`,
		`{"type":"object","properties":{"n":{"type":"number","multipleOf":1e-999999}}}`,
		`{"type":"object","properties":{"n":{"type":"number","maximum":` + strings.Repeat("9", 100) + `}}}`,
	} {
		if got := v.Check(json.RawMessage(schema), json.RawMessage(`{"n":1.5}`)); got != nil {
			t.Errorf("Check(%s) = %v, want pass-through", schema, got)
		}
	}
	bounded := json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","minimum":1e400}}}`)
	if got := v.Check(bounded, json.RawMessage(`{"n":1.5}`)); len(got) != 1 || got[0].Code != "minimum" {
		t.Errorf("a bound within ±%d exponent must still be enforced, got %v", MaxNumberExponent, got)
	}
}

// chainSchema is n $defs levels of anyOf: [{$ref: next}, {$ref: next}]: 2^n
// evaluations of one value for a schema of about 70 n bytes.
func chainSchema(n int) json.RawMessage {
	defs := make([]string, 0, n+1)
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string"}`, n))
	return json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`)
}

func TestE8_ExponentialRefFanOutPassesThrough(t *testing.T) {
	v := New(Options{})
	// 2^20 evaluations (a minute of CPU before the bound): unsupported.
	if got := v.Check(chainSchema(20), json.RawMessage(`{"a":1}`)); got != nil {
		t.Fatalf("a schema costing 2^20 evaluations was evaluated: %v", got)
	}
	// Recursion through items doubles per level of the arguments instead.
	rec := json.RawMessage(`{"anyOf":[{"$ref":"#/$defs/x"},{"$ref":"#/$defs/x"}],"$defs":{"x":{"type":"array","items":{"$ref":"#"}}}}`)
	deep := json.RawMessage(strings.Repeat("[", 30) + strings.Repeat("]", 30))
	if got := v.Check(rec, deep); got != nil {
		t.Fatalf("a schema costing 2^30 evaluations was evaluated: %v", got)
	}
	// A short chain, and the usual $ref/anyOf shapes, are still enforced.
	if got := v.Check(chainSchema(4), json.RawMessage(`{"a":1}`)); len(got) == 0 {
		t.Fatal("a cheap $ref chain must still be enforced")
	}
	optional := json.RawMessage(`{"type":"object","properties":{"owner":{"anyOf":[{"$ref":"#/$defs/Person"},{"type":"null"}]},` +
		`"tags":{"type":"array","items":{"$ref":"#/$defs/Tag"}}},` +
		`"$defs":{"Person":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},"Tag":{"type":"string"}}}`)
	got := v.Check(optional, json.RawMessage(`{"owner":{},"tags":["a",1]}`))
	if len(got) == 0 {
		t.Fatal("an ordinary $ref/anyOf schema must still be enforced")
	}
	if got := v.Check(json.RawMessage(`{"$defs":{"a b":{"type":"string"}},"$ref":"#/$defs/a%20b"}`), json.RawMessage(`1`)); len(got) != 1 || got[0].Code != "type" {
		t.Fatalf("a percent-encoded local $ref must still be enforced, got %v", got)
	}
}
