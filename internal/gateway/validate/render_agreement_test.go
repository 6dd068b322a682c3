package validate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway/schema"
)

// sampleOf is a value of a rendered primitive type.
var sampleOf = map[string]string{
	"string": `"x"`, "integer": `1`, "number": `1.5`, "boolean": `true`, "null": `null`,
}

// renderedEntries splits a compact object shape `{ a?: T, "b c": U }` into
// its entries; ok is false for anything else.
func renderedEntries(text string) (names, types []string, ok bool) {
	if !strings.HasPrefix(text, "{ ") || !strings.HasSuffix(text, " }") {
		return nil, nil, false
	}
	body := text[2 : len(text)-2]
	var parts []string
	depth, start, inString, inComment := 0, 0, false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inComment:
			if strings.HasPrefix(body[i:], "*/") {
				inComment = false
			}
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case strings.HasPrefix(body[i:], "/*"):
			inComment = true
		case c == '{' || c == '[' || c == '(':
			depth++
		case c == '}' || c == ']' || c == ')':
			depth--
		case depth == 0 && strings.HasPrefix(body[i:], ", "):
			parts = append(parts, body[start:i])
			start = i + 2
		}
	}
	parts = append(parts, body[start:])
	for _, p := range parts {
		var name, typ string
		if strings.HasPrefix(p, `"`) {
			end := strings.Index(p[1:], `"`) // quoted names in the suite need no escapes
			if end < 0 {
				return nil, nil, false
			}
			name, typ = p[1:end+1], p[end+2:]
		} else {
			i := strings.IndexAny(p, "?:")
			if i < 0 {
				return nil, nil, false
			}
			name, typ = p[:i], p[i:]
		}
		typ = strings.TrimPrefix(strings.TrimPrefix(typ, "?"), ": ")
		names, types = append(names, name), append(types, typ)
	}
	return names, types, true
}

// primitives are the alternatives of a rendered type that is a union of
// primitive types (constraint comments dropped); nil otherwise.
func primitives(typ string) []string {
	if i := strings.Index(typ, " /* "); i >= 0 {
		typ = typ[:i]
	}
	typ = strings.TrimSuffix(strings.TrimPrefix(typ, "("), ")")
	var out []string
	for _, alt := range strings.Split(typ, " | ") {
		if _, ok := sampleOf[alt]; !ok {
			return nil
		}
		out = append(out, alt)
	}
	return out
}

// refusedForUnshownType reports a type finding at path whose expectation
// does not include the rendered type.
func refusedForUnshownType(findings []Finding, path, rendered string) (Finding, bool) {
	for _, f := range findings {
		if f.Code != "type" || f.Path != path {
			continue
		}
		shown := false
		for _, t := range strings.Split(f.Expected, " | ") {
			if t == rendered || (t == "number" && rendered == "integer") {
				shown = true
			}
		}
		if !shown {
			return f, true
		}
	}
	return Finding{}, false
}

// What describe shows is what validate checks: for every schema of the
// suite's required cases (and the example), a value shaped like the
// rendered type — at the root, or at each property of a rendered object, a
// primitive or an array of one — is never refused for a type the rendering
// did not show.
func TestRender_ValueShapedLikeTheRenderingIsNotRefusedForAnotherType(t *testing.T) {
	cases := loadSuite(t)
	v := New(Options{})
	schemas := map[string]string{}
	for _, c := range cases {
		if !c.optional {
			schemas[c.draft+"\x00"+withDraft(c.schema, c.draft)] = c.id()
		}
	}
	example := `{"properties":{"a":{"type":"integer"},"b":{"$ref":"#/properties/a"}},"$defs":{"a":{"type":"string"}}}`
	schemas["draft2020-12\x00"+example] = "issue 22's example"
	checked := 0
	for key, id := range schemas {
		dir, raw, _ := strings.Cut(key, "\x00")
		comp := v.compile(json.RawMessage(raw), draftOfDir(dir))
		if comp.root == nil {
			continue // passes through: nothing is checked
		}
		s := &Schema{v: v, c: comp}
		shape := schema.RenderSearch([]byte(raw))
		if shape.Truncated {
			continue // the exact schema says more than the shape
		}
		check := func(path, rendered, args string) {
			checked++
			r := s.Evaluate(json.RawMessage(args))
			if f, bad := refusedForUnshownType(r.Findings, path, rendered); bad {
				t.Errorf("%s: rendered %q, so %s at %s is shaped like it, but validation wants %q\nschema %s", id, shape.Text, args, path, f.Expected, raw)
			}
		}
		// at checks a value shaped like rendered at path: a primitive, or
		// an array of one (its first item).
		at := func(path, rendered string, wrap func(json.RawMessage) string) {
			for _, p := range primitives(rendered) {
				check(path, p, wrap(json.RawMessage(sampleOf[p])))
			}
			if item, isArray := strings.CutSuffix(rendered, "[]"); isArray {
				itemPath := strings.TrimSuffix(path, "/") + "/0"
				for _, p := range primitives(item) {
					check(itemPath, p, wrap(json.RawMessage("["+sampleOf[p]+"]")))
				}
			}
		}
		at("/", shape.Text, func(v json.RawMessage) string { return string(v) })
		names, types, ok := renderedEntries(shape.Text)
		if !ok {
			continue
		}
		for i, name := range names {
			at("/"+escape(name), types[i], func(v json.RawMessage) string {
				args, _ := json.Marshal(map[string]json.RawMessage{name: v})
				return string(args)
			})
		}
	}
	if checked < 200 {
		t.Fatalf("only %d rendered types checked", checked)
	}
	t.Logf("%d rendered types checked over %d schemas", checked, len(schemas))
}

// withDraft declares the suite directory's draft in a root without
// $schema, so that the renderer (which knows only what the document says)
// and the validator read the same draft.
func withDraft(raw json.RawMessage, dir string) string {
	uri := map[string]string{"draft7": "http://json-schema.org/draft-07/schema#",
		"draft6": "http://json-schema.org/draft-06/schema#", "draft4": "http://json-schema.org/draft-04/schema#"}[dir]
	var obj map[string]json.RawMessage
	if uri == "" || json.Unmarshal(raw, &obj) != nil || obj == nil || obj["$schema"] != nil {
		return string(raw)
	}
	obj["$schema"], _ = json.Marshal(uri)
	out, _ := json.Marshal(obj)
	return string(out)
}
