package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func enumSchema(n int, value func(i int) string) []byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = value(i)
	}
	b, _ := json.Marshal(map[string]any{"type": "string", "enum": vals})
	return b
}

func TestS1_EnumNodeCappedAt256BytesWithExactOmittedCount(t *testing.T) {
	for _, n := range []int{20, 21, 100, 10_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := RenderSearch(enumSchema(n, func(i int) string { return fmt.Sprintf("value-%05d", i) }))
			if !s.Truncated {
				t.Fatalf("%d values: not truncated: %s", n, s.Text)
			}
			if len(s.Text) > MaxEnumBytes {
				t.Fatalf("enum node is %d bytes > %d: %s", len(s.Text), MaxEnumBytes, s.Text)
			}
			kept := strings.Count(s.Text, `"value-`)
			want := fmt.Sprintf("unknown /* %d enum values omitted */)", n-kept)
			if !strings.HasSuffix(s.Text, want) {
				t.Fatalf("want suffix %q in %s", want, s.Text)
			}
			// Whole values only: every kept value is complete and in order.
			for i := 0; i < kept; i++ {
				if !strings.Contains(s.Text, fmt.Sprintf(`"value-%05d"`, i)) {
					t.Fatalf("value %d missing or clipped: %s", i, s.Text)
				}
			}
		})
	}
}

func TestS1_SmallEnumStaysCompleteAndUnflagged(t *testing.T) {
	s := RenderSearch([]byte(`{"enum":["a","b","c"]}`))
	if s.Text != `"a" | "b" | "c"` || s.Truncated {
		t.Fatalf("got %+v", s)
	}
}

func TestS1_OneOmittedValueIsSingular(t *testing.T) {
	// 23 values of 11 bytes: the last one does not fit.
	s := RenderSearch(enumSchema(22, func(i int) string { return fmt.Sprintf("v%08d", i) }))
	if !strings.Contains(s.Text, "enum value omitted") && !strings.Contains(s.Text, "enum values omitted") {
		t.Fatalf("no marker: %s", s.Text)
	}
	if strings.Contains(s.Text, " 1 enum values") {
		t.Fatalf("plural for one: %s", s.Text)
	}
}

func TestS1_EmptyEnumIsNever(t *testing.T) {
	if s := RenderSearch([]byte(`{"enum":[]}`)); s.Text != "never" || s.Truncated {
		t.Fatalf("got %+v", s)
	}
}

func TestS1_ShapeCapStaysStructurallyValid(t *testing.T) {
	props := map[string]any{}
	var req []string
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("k%03d", i)
		props[k] = map[string]any{"type": "object", "properties": map[string]any{"deep": map[string]any{"type": "string"}}}
		if i%7 == 0 {
			req = append(req, k)
		}
	}
	s := RenderSearch(mustJSON(t, map[string]any{"type": "object", "properties": props, "required": req}))
	if !s.Truncated || len(s.Text) > MaxSearchShapeBytes {
		t.Fatalf("%d bytes, truncated=%v", len(s.Text), s.Truncated)
	}
	if !strings.HasPrefix(s.Text, `{ "k000": unknown, "k007": unknown`) || !strings.HasSuffix(s.Text, " } /* truncated */") {
		t.Fatalf("not required-first quoted keys: %s", s.Text)
	}
}

func TestS1_ExhaustedWorkIsUnknownTruncated(t *testing.T) {
	props := map[string]any{}
	for i := 0; i < MaxWork+1; i++ {
		props[fmt.Sprintf("p%05d", i)] = map[string]any{}
	}
	s := RenderSearch(mustJSON(t, map[string]any{"type": "object", "properties": props}))
	if s.Text != "unknown /* truncated */" || !s.Truncated {
		t.Fatalf("got %+v", s)
	}
	if _, ok := ObjectKeys(mustJSON(t, map[string]any{"type": "object", "properties": props})); ok {
		t.Fatal("key lists from an exhausted walk")
	}
}

func TestS2_KeyListsAbsentForNonObjectShapes(t *testing.T) {
	for _, raw := range []string{
		`{"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"null"}]}`,
		`{"type":"array","items":{"type":"object","properties":{"a":{}}}}`,
		`{"enum":[{"a":1}]}`,
		`{"const":{"a":1}}`,
		`{"$ref":"#/$defs/Nope"}`,
		`{"prefixItems":[{"type":"object"}]}`,
		`{"allOf":[{"type":"object","properties":{"a":{}}},{"type":"string"}]}`,
		`"string"`,
		`not json`,
	} {
		if k, ok := ObjectKeys([]byte(raw)); ok {
			t.Errorf("%s: got lists %+v, want absent", raw, k)
		}
	}
}

func TestS2_ZeroInputObjectKeepsEmptyLists(t *testing.T) {
	k, ok := ObjectKeys([]byte(`{"type":"object"}`))
	if !ok || k.Properties == nil || k.Required == nil || len(k.Properties) != 0 || len(k.Required) != 0 {
		t.Fatalf("got %+v %v", k, ok)
	}
	b, _ := json.Marshal(k)
	if string(b) != `{"Properties":[],"Required":[]}` {
		t.Fatalf("lists must marshal as [], got %s", b)
	}
}

func TestS2_RequiredKeysAreDeclaredPropertiesOnly(t *testing.T) {
	k, ok := ObjectKeys([]byte(`{"type":"object","properties":{"a":{},"b":{}},"required":["ghost","b",1,"a"]}`))
	if !ok || strings.Join(k.Required, ",") != "b,a" {
		t.Fatalf("got %+v", k)
	}
}

func TestS2_TopLevelRefAndAllOfCompose(t *testing.T) {
	raw := `{"allOf":[{"$ref":"#/$defs/Base"},{"properties":{"extra":{}},"required":["extra"]}],
		"$defs":{"Base":{"type":"object","properties":{"id":{},"extra":{}},"required":["id"]}}}`
	k, ok := ObjectKeys([]byte(raw))
	if !ok || strings.Join(k.Properties, ",") != "id,extra" || strings.Join(k.Required, ",") != "id,extra" {
		t.Fatalf("got %+v %v", k, ok)
	}
}

func TestS1_PrefixItemsTupleRests(t *testing.T) {
	cases := map[string]string{
		`{"prefixItems":[{"type":"string"}],"items":{"type":"number"}}`: "[string, ...number[]]",
		`{"prefixItems":[{"type":"string"}]}`:                           "[string, ...unknown[]]",
		`{"prefixItems":[{"type":"string"}],"items":true}`:              "[string, ...unknown[]]",
		`{"prefixItems":[{"type":"string"}],"items":false}`:             "[string]",
		`{"prefixItems":[]}`:                                            "[...unknown[]]",
	}
	for raw, want := range cases {
		if s := RenderSearch([]byte(raw)); s.Text != want || s.Truncated {
			t.Errorf("%s: got %+v want %q", raw, s, want)
		}
	}
}

func TestS1_ConditionalKeepsBaseAndFlags(t *testing.T) {
	for _, kw := range []string{`"if":{}`, `"then":{}`, `"else":{}`, `"dependentSchemas":{}`} {
		raw := `{"type":"object","properties":{"a":{"type":"string"}},` + kw + `}`
		s := RenderSearch([]byte(raw))
		if s.Text != "{ a?: string } /* conditional */" || !s.Truncated {
			t.Errorf("%s: got %+v", kw, s)
		}
	}
}

// A $dynamicRef resolves to the anchor it names, as in validation; a
// definition that merely shares the name is not that anchor (the Node
// implementation's last-segment rule rendered it).
func TestS1_DynamicRefResolvesItsAnchor(t *testing.T) {
	s := RenderSearch([]byte(`{"$dynamicRef":"#meta","$defs":{"meta":{"$dynamicAnchor":"meta","type":"object","properties":{"x":{"type":"string"}}}}}`))
	if s.Text != "{ x?: string }" || s.Truncated {
		t.Fatalf("got %+v", s)
	}
	s = RenderSearch([]byte(`{"$dynamicRef":"#meta","$defs":{"meta":{"type":"object","properties":{"x":{"type":"string"}}}}}`))
	if s.Text != "unknown" || !s.Truncated {
		t.Fatalf("a same-named definition without the anchor: got %+v", s)
	}
	s = RenderSearch([]byte(`{"$dynamicRef":"#meta"}`))
	if s.Text != "unknown" || !s.Truncated {
		t.Fatalf("unresolved: got %+v", s)
	}
}

func TestS1_DescribeKeepsProseWithin8192(t *testing.T) {
	s := RenderDescribe([]byte(`{"type":"object","properties":{"q":{"type":"string","description":"What to find"}}}`))
	if s.Text != "{ q?: string // What to find }" || s.Truncated {
		t.Fatalf("got %+v", s)
	}
	big := RenderDescribe(mustJSON(t, map[string]any{"type": "object", "properties": map[string]any{
		"q": map[string]any{"type": "string", "description": strings.Repeat("d", MaxDescribeShapeBytes)},
	}}))
	if !big.Truncated || len(big.Text) > MaxDescribeShapeBytes || big.Text != `{ "q"?: unknown } /* truncated */` {
		t.Fatalf("got %+v", big)
	}
}

// Hostile schemas stay bounded: each finishes with a bounded shape.
func TestS1_HostileSchemasStayBounded(t *testing.T) {
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 5000) + `{}` + strings.Repeat(`}}`, 5000)
	hugeDesc := `{"type":"object","properties":{"a":{"type":"string","description":"` + strings.Repeat("x", 10<<20) + `"}}}`
	hugeEnum := string(enumSchema(1_000_000, func(i int) string { return fmt.Sprint(i) }))
	defs := map[string]any{}
	for i := 0; i < 200; i++ {
		props := map[string]any{}
		for j := 0; j < 200; j++ {
			props[fmt.Sprintf("p%d", j)] = map[string]any{"$ref": fmt.Sprintf("#/$defs/D%d", (i+j)%200)}
		}
		defs[fmt.Sprintf("D%d", i)] = map[string]any{"type": "object", "properties": props}
	}
	refStorm := string(mustJSON(t, map[string]any{"$ref": "#/$defs/D0", "$defs": defs}))
	nestedArrays := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	bigPattern := `{"type":"string","pattern":"` + strings.Repeat("a", 1<<20) + `"}`
	deepConst := `{"const":` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `}`
	for name, raw := range map[string]string{
		"deep nesting": deep, "10 MB description": hugeDesc, "million-value enum": hugeEnum,
		"$ref storm": refStorm, "nested arrays": nestedArrays, "1 MB pattern": bigPattern, "deep const": deepConst,
	} {
		t.Run(name, func(t *testing.T) {
			d := Parse([]byte(raw))
			s, ds := d.Search(), d.Describe()
			d.Keys()
			if len(s.Text) > MaxSearchShapeBytes+len(truncationMarker) || len(ds.Text) > MaxDescribeShapeBytes {
				t.Fatalf("unbounded: search %d, describe %d bytes", len(s.Text), len(ds.Text))
			}
		})
	}
}

func TestParseKeepsDeclaredOrderAndLastDuplicate(t *testing.T) {
	s := RenderSearch([]byte(`{"properties":{"z":{"type":"string"},"a":{"type":"number"},"z":{"type":"boolean"}}}`))
	if s.Text != "{ z?: boolean, a?: number }" {
		t.Fatalf("got %q", s.Text)
	}
}

func TestJSNumberFormatting(t *testing.T) {
	cases := map[string]string{
		"1": "1", "-0": "0", "1.0": "1", "2.50": "2.5", "1e3": "1000", "1e21": "1e+21", "1.5e-7": "1.5e-7",
		"0.000001": "0.000001", "123456789012345678901234": "123456789012345678901234", "-1.25E+2": "-125",
		"1e400": "null",
	}
	for in, want := range cases {
		if got, _ := jsNumber(in); got != want {
			t.Errorf("jsNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"allOf":[{"$ref":"#/$defs/A"}],"$defs":{"A":{"enum":[1,2,3]}}}`,
		`{"prefixItems":[{"type":"string"}],"items":{"$dynamicRef":"#x"},"$defs":{"x":{"if":{}}}}`,
		`{"anyOf":[{"const":"a"},{"type":["null","string"],"pattern":"*/"}]}`,
		`[1,{"a":null}]`, `"x"`, `{`,
		`{"$id":"https://x.invalid/r","properties":{"a":{"$ref":"e.json#a"},"b":{"$ref":"#/properties/a"}},"$defs":{"e":{"$id":"e.json","$anchor":"a","type":"integer"}}}`,
		`{"$dynamicRef":"#n","$defs":{"n":{"$dynamicAnchor":"n","items":{"$dynamicRef":"#n"}}}}`,
		`{"$ref":"#/$defs/a~1b/0","$defs":{"a/b":[{"type":"string"}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := Parse(raw)
		s, ds := d.Search(), d.Describe()
		if len(s.Text) > MaxSearchShapeBytes+len(truncationMarker) {
			t.Fatalf("search shape %d bytes", len(s.Text))
		}
		if len(ds.Text) > MaxDescribeShapeBytes {
			t.Fatalf("describe shape %d bytes", len(ds.Text))
		}
		if utf8.Valid(raw) && (!utf8.ValidString(s.Text) || !utf8.ValidString(ds.Text)) {
			t.Fatalf("invalid UTF-8 out of valid input")
		}
		if k, ok := d.Keys(); ok && (k.Properties == nil || k.Required == nil) {
			t.Fatalf("nil list in present keys")
		}
	})
}

func BenchmarkRenderSearch(b *testing.B) {
	raw := []byte(`{"type":"object","properties":{"project":{"type":"string","description":"Project key"},"state":{"enum":["open","closed","all"]},"labels":{"type":"array","items":{"type":"string"}},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["project"]}`)
	b.ReportAllocs()
	for b.Loop() {
		d := Parse(raw)
		d.Search()
		d.Keys()
	}
}

func TestS1_ResolvedRefTextIsReusedWithinOneWalk(t *testing.T) {
	req := make([]string, 300)
	for i := range req {
		req[i] = fmt.Sprintf("r%d", i)
	}
	props := map[string]any{}
	for i := 0; i < 10; i++ {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": "#/$defs/D"}
	}
	raw := mustJSON(t, map[string]any{"type": "object", "properties": props,
		"$defs": map[string]any{"D": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{}}, "required": req}}})
	// Ten uncached renders of D would cost 3,000+ visits; reuse keeps it whole.
	s := RenderSearch(raw)
	if s.Truncated || !strings.HasPrefix(s.Text, "{ p0?: { x?: {} }, p1?: { x?: {} }") {
		t.Fatalf("got %+v", s)
	}
}

// The example: describe showed b?: string (the definition named by
// the last segment) while validation checks #/properties/a, an integer.
func TestS1_RefResolvesByFullPointer(t *testing.T) {
	s := RenderSearch([]byte(`{"properties":{"a":{"type":"integer"},"b":{"$ref":"#/properties/a"}},"$defs":{"a":{"type":"string"}}}`))
	if s.Text != "{ a?: integer, b?: integer }" {
		t.Fatalf("got %+v", s)
	}
}
