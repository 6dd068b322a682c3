// Package validate checks call arguments against a tool's advertised input
// schema before dispatch (E8) and reports bounded, value-free findings
// {path, code, expected}. A schema that cannot be compiled, or that needs
// anything external, passes through: nothing is ever loaded from a file or
// URL, whatever $ref or $id a hostile downstream schema carries.
package validate

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/jstext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Bounds (E8: bounded findings) and defaults.
const (
	// MaxFindings is how many findings one check reports.
	MaxFindings = 8
	// MaxPathChars, MaxCodeChars and MaxExpectedChars bound each field in
	// UTF-16 code units, the unit the model's JSON.stringify counts; a
	// clipped field ends in jstext.Marker and sets Finding.Clipped.
	MaxPathChars     = 256
	MaxCodeChars     = 64
	MaxExpectedChars = 128
	// DefaultCacheEntries bounds the compiled-validator LRU.
	DefaultCacheEntries = 256
	// MaxSchemaBytes: a larger advertised schema is not compiled (passes
	// through). Compiling 256 KiB of properties takes about half a second on
	// one core and 1 MiB about sixteen, once per distinct schema.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaDepth: compile time grows steeply with nesting (1,000 levels
	// take seconds), so a deeper schema is unsupported and passes through.
	// Real tool schemas nest a handful of levels.
	MaxSchemaDepth = 64
	// maxCollected bounds the validator errors walked per check.
	maxCollected = 1024
	// schemaURL is the in-memory location the schema is compiled under; every
	// other URL is refused by the loader.
	schemaURL = "https://connecta.invalid/input-schema.json"
)

// Finding is one bounded, value-free validation finding: where (a JSON
// pointer into the arguments, "/" for the root), which schema keyword failed,
// and what the schema expected. The offending value is never included.
type Finding struct {
	Path     string `json:"path"`
	Code     string `json:"code"`
	Expected string `json:"expected"`
	// Clipped reports that a field was cut to its bound.
	Clipped bool `json:"-"`
}

// Options configure a Validator.
type Options struct {
	// CacheEntries bounds the compiled-validator cache; 0 means the default.
	CacheEntries int
}

// Validator compiles and caches input schemas by their exact bytes. Safe for
// concurrent use.
type Validator struct {
	entries int

	mu      sync.Mutex
	lru     *list.List // of *compiled, most recently used first
	byKey   map[string]*list.Element
	pending map[string]*pendingCompile
}

type compiled struct {
	key    string
	schema *jsonschema.Schema // nil: unsupported, pass through
	doc    any                // the decoded schema, for declared types
}

// New builds a Validator.
func New(opts Options) *Validator {
	v := &Validator{entries: opts.CacheEntries, lru: list.New(),
		byKey: map[string]*list.Element{}, pending: map[string]*pendingCompile{}}
	if v.entries <= 0 {
		v.entries = DefaultCacheEntries
	}
	return v
}

// Check validates args (nil means no arguments, i.e. {}) against schema and
// returns at most MaxFindings findings, sorted by path then code; nil when
// the arguments are valid, when there is no schema, or when the schema is
// unsupported (pass through).
func (v *Validator) Check(schema, args json.RawMessage) []Finding {
	findings, _ := v.CheckAll(schema, args)
	return findings
}

// CheckAll is Check that also reports how many distinct findings there were
// before the MaxFindings cut, so a caller can say the list is truncated.
func (v *Validator) CheckAll(schema, args json.RawMessage) (findings []Finding, total int) {
	defer func() {
		if recover() != nil { // a validator bug passes through, never fails a call
			findings, total = nil, 0
		}
	}()
	c := v.compiled(schema)
	if c == nil || c.schema == nil {
		return nil, 0
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if !NumbersBounded(args) {
		// jsonschema compares numbers exactly (big.Rat): 1e1000000 costs it
		// seconds. Such a literal passes through; the downstream judges it.
		return nil, 0
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return []Finding{{Path: "/", Code: "json", Expected: "a JSON object"}}, 1
	}
	if !withinBudget(c.doc, inst) {
		return nil, 0
	}
	err = c.schema.Validate(inst)
	if err == nil {
		return nil, 0
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return nil, 0 // e.g. an invalid JSON value type: not the caller's mistake
	}
	if hasRefCycle(verr) {
		return nil, 0 // a schema that cannot be evaluated passes through
	}
	all := findingsOf(verr, c.doc)
	if len(all) == 0 {
		return nil, 0
	}
	total = len(all)
	if len(all) > MaxFindings {
		all = all[:MaxFindings]
	}
	return all, total
}

// compiled returns the cached validator for schema, compiling on a miss.
func (v *Validator) compiled(schema json.RawMessage) *compiled {
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) || len(schema) > MaxSchemaBytes {
		return nil
	}
	key := string(schema)
	v.mu.Lock()
	if el, ok := v.byKey[key]; ok {
		v.lru.MoveToFront(el)
		c := el.Value.(*compiled)
		v.mu.Unlock()
		return c
	}
	if p, ok := v.pending[key]; ok {
		// Another call is compiling these exact bytes: wait for it rather
		// than compile a hostile schema once per concurrent call.
		v.mu.Unlock()
		<-p.done
		return p.result
	}
	p := &pendingCompile{done: make(chan struct{})}
	v.pending[key] = p
	v.mu.Unlock()

	// Compile outside the lock: a slow schema must not stall other tools.
	c := &compiled{key: key}
	c.schema, c.doc = compile(schema) // never panics: compile recovers

	v.mu.Lock()
	delete(v.pending, key)
	v.byKey[key] = v.lru.PushFront(c)
	for v.lru.Len() > v.entries {
		oldest := v.lru.Back()
		v.lru.Remove(oldest)
		delete(v.byKey, oldest.Value.(*compiled).key)
	}
	v.mu.Unlock()
	p.result = c
	close(p.done)
	return c
}

// pendingCompile is one in-flight compilation; result is set before done
// closes.
type pendingCompile struct {
	done   chan struct{}
	result *compiled
}

// nestingDepth is the deepest object/array nesting in a JSON text, counted
// without decoding (brackets inside strings do not count).
func nestingDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// refuseAll is the URL loader: it loads nothing. The library serves the
// standard metaschemas from its embedded copies without asking a loader.
type refuseAll struct{}

var errExternalRef = errors.New("external schema references are not loaded")

func (refuseAll) Load(url string) (any, error) { return nil, errExternalRef }

func compile(schema json.RawMessage) (s *jsonschema.Schema, doc any) {
	defer func() {
		if recover() != nil {
			s, doc = nil, nil
		}
	}()
	if nestingDepth(schema) > MaxSchemaDepth {
		return nil, nil
	}
	if !NumbersBounded(schema) {
		// The compiler turns every bound (minimum, multipleOf, …) into an
		// exact big.Rat: "minimum": 1e999999 costs seconds per keyword at
		// compile and again per check, so such a schema passes through.
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseAll{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, nil
	}
	s, err = c.Compile(schemaURL)
	if err != nil {
		return nil, nil
	}
	return s, doc
}

func hasRefCycle(e *jsonschema.ValidationError) bool {
	if _, ok := e.ErrorKind.(*kind.RefCycle); ok {
		return true
	}
	for _, c := range e.Causes {
		if hasRefCycle(c) {
			return true
		}
	}
	return false
}

// findingsOf flattens the validator's error tree into distinct, sorted,
// value-free findings.
func findingsOf(root *jsonschema.ValidationError, doc any) []Finding {
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(leaves) >= maxCollected {
			return
		}
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)

	seen := map[Finding]bool{}
	var out []Finding
	add := func(f Finding) {
		var pc, cc, xc bool
		f.Path, pc = clamp(f.Path, MaxPathChars)
		f.Code, cc = clamp(f.Code, MaxCodeChars)
		f.Expected, xc = clamp(f.Expected, MaxExpectedChars)
		f.Clipped = pc || cc || xc
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, e := range leaves {
		path := pointer(e.InstanceLocation)
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, name := range k.Missing {
				add(Finding{Path: join(path, name), Code: "required", Expected: declaredType(doc, e.SchemaURL, name)})
			}
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				add(Finding{Path: join(path, name), Code: "additionalProperties", Expected: "no additional properties"})
			}
		case *kind.DependentRequired:
			for _, name := range k.Missing {
				add(Finding{Path: join(path, name), Code: "dependentRequired", Expected: "present when " + k.Prop + " is present"})
			}
		case *kind.Dependency:
			for _, name := range k.Missing {
				add(Finding{Path: join(path, name), Code: "dependencies", Expected: "present when " + k.Prop + " is present"})
			}
		default:
			code, expected := describe(e)
			add(Finding{Path: path, Code: code, Expected: expected})
		}
	}

	// A property that failed a keyword of its own reports that keyword, not
	// an additionalProperties branch of some other (sub)schema as well.
	hasOther := map[string]bool{}
	for _, f := range out {
		if f.Code != "additionalProperties" {
			hasOther[f.Path] = true
		}
	}
	out = slices.DeleteFunc(out, func(f Finding) bool {
		return f.Code == "additionalProperties" && hasOther[f.Path]
	})
	slices.SortFunc(out, func(a, b Finding) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(a.Code, b.Code); c != 0 {
			return c
		}
		return strings.Compare(a.Expected, b.Expected)
	})
	return out
}

// describe maps one leaf error to its keyword and a value-free expectation:
// only schema-authored constraints, never the instance.
func describe(e *jsonschema.ValidationError) (code, expected string) {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return "type", strings.Join(k.Want, " | ")
	case *kind.Enum:
		return "enum", "one of the declared values"
	case *kind.Const:
		return "const", "the declared constant"
	case *kind.Format:
		return "format", k.Want
	case *kind.MinProperties:
		return "minProperties", "at least " + strconv.Itoa(k.Want) + " properties"
	case *kind.MaxProperties:
		return "maxProperties", "at most " + strconv.Itoa(k.Want) + " properties"
	case *kind.MinItems:
		return "minItems", "at least " + strconv.Itoa(k.Want) + " items"
	case *kind.MaxItems:
		return "maxItems", "at most " + strconv.Itoa(k.Want) + " items"
	case *kind.AdditionalItems:
		return "additionalItems", "at most " + strconv.Itoa(k.Count) + " items"
	case *kind.UniqueItems:
		return "uniqueItems", "unique items"
	case *kind.Contains:
		return "contains", "an item matching the declared schema"
	case *kind.MinContains:
		return "minContains", "at least " + strconv.Itoa(k.Want) + " matching items"
	case *kind.MaxContains:
		return "maxContains", "at most " + strconv.Itoa(k.Want) + " matching items"
	case *kind.MinLength:
		return "minLength", "at least " + strconv.Itoa(k.Want) + " characters"
	case *kind.MaxLength:
		return "maxLength", "at most " + strconv.Itoa(k.Want) + " characters"
	case *kind.Pattern:
		return "pattern", "a string matching " + k.Want
	case *kind.Minimum:
		return "minimum", ">= " + ratString(k.Want)
	case *kind.Maximum:
		return "maximum", "<= " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum", "> " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum", "< " + ratString(k.Want)
	case *kind.MultipleOf:
		return "multipleOf", "a multiple of " + ratString(k.Want)
	case *kind.PropertyNames:
		return "propertyNames", "property names matching the declared schema"
	case *kind.Not:
		return "not", "a value the declared schema does not exclude"
	case *kind.OneOf:
		return "oneOf", "exactly one matching alternative"
	case *kind.AnyOf:
		return "anyOf", "a matching alternative"
	case *kind.FalseSchema:
		// A false subschema: name the keyword that holds it
		// (unevaluatedProperties, items, properties/x, …).
		return falseSchemaKeyword(e.SchemaURL), "no value here"
	case *kind.ContentEncoding:
		return "contentEncoding", k.Want
	case *kind.ContentMediaType:
		return "contentMediaType", k.Want
	case *kind.ContentSchema:
		return "contentSchema", "content matching the declared schema"
	case *kind.RefCycle:
		return "$ref", "a schema without reference cycles"
	}
	if p := e.ErrorKind.KeywordPath(); len(p) > 0 {
		return p[len(p)-1], "the declared schema constraint"
	}
	return "schema", "the declared schema constraint"
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "the declared bound"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// falseSchemaKeyword names the keyword whose subschema is `false`, from its
// location: ".../unevaluatedProperties" → unevaluatedProperties,
// ".../properties/x" → properties (a declared property the schema forbids).
func falseSchemaKeyword(location string) string {
	_, frag, _ := strings.Cut(location, "#")
	parts := strings.Split(frag, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		switch parts[i] {
		case "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
			"items", "prefixItems", "additionalItems", "contains", "propertyNames",
			"then", "else", "not", "$ref":
			return parts[i]
		}
		if i > 0 && (parts[i-1] == "properties" || parts[i-1] == "patternProperties" ||
			parts[i-1] == "$defs" || parts[i-1] == "definitions") {
			return parts[i-1]
		}
	}
	return "false"
}

// declaredType is the expectation for a missing required property: its
// declared type when the schema names one, else "present".
func declaredType(doc any, location, name string) string {
	node := resolve(doc, location)
	obj, ok := node.(map[string]any)
	if !ok {
		return "present"
	}
	props, ok := obj["properties"].(map[string]any)
	if !ok {
		return "present"
	}
	prop, ok := props[name].(map[string]any)
	if !ok {
		return "present"
	}
	switch t := prop["type"].(type) {
	case string:
		return t
	case []any:
		names := make([]string, 0, len(t))
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return "present"
			}
			names = append(names, s)
		}
		if len(names) > 0 {
			return strings.Join(names, " | ")
		}
	}
	return "present"
}

// resolve follows the JSON-pointer fragment of a schema location inside our
// own document; a location in any other resource resolves to nil.
func resolve(doc any, location string) any {
	base, frag, _ := strings.Cut(location, "#")
	if base != schemaURL {
		return nil
	}
	if frag == "" {
		return doc
	}
	cur := doc
	for _, part := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// pointer renders an instance location as a JSON pointer; the root is "/".
func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

func join(path, name string) string {
	if path == "/" {
		return "/" + escape(name)
	}
	return path + "/" + escape(name)
}

// clamp returns s as valid UTF-8 of at most max UTF-16 code units, cut on a
// character boundary with a marker when longer.
func clamp(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return jstext.ClampUnits(s, max)
}

// Bounds on number literals that validation will evaluate.
const (
	MaxNumberLen      = 64
	MaxNumberExponent = 400
)

// NumbersBounded reports whether data is JSON whose number literals are all
// at most MaxNumberLen characters with an exponent within ±MaxNumberExponent.
// Exact number comparison (as JSON Schema validators do) is unbounded work
// on a literal like 1e1000000.
func NumbersBounded(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if len(n) > MaxNumberLen {
			return false
		}
		if i := strings.IndexAny(string(n), "eE"); i >= 0 {
			exp, err := strconv.Atoi(strings.TrimPrefix(string(n[i+1:]), "+"))
			if err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent {
				return false
			}
		}
	}
}
