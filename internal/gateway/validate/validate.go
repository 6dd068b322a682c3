// Package validate checks call arguments against a tool's advertised input
// schema before dispatch (E8) and reports bounded, value-free findings
// {path, code, expected}. A schema that cannot be compiled, or that needs
// anything external, passes through: nothing is ever loaded from a file or
// URL, whatever $ref or $id a hostile downstream schema carries.
//
// The evaluator is our own (JSON Schema 2020-12, 2019-09, draft-07, -06 and
// -04, checked against every required case of the official test suite): it
// keeps no package state and does no work at init (which mattered while
// every sandbox child re-executed the gateway; the child is its own binary
// now); it reports every failing keyword with its instance location and
// never the value; and its cost is bounded inside compilation and evaluation
// themselves (MaxWork, charged by what each step costs), not by a guess
// beforehand. Every pass-through has a Reason, counted (Passthroughs) and
// returned to the caller (Evaluate) so it can be logged.
package validate

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/gateway/schemaref"
	"github.com/connecta-dev/connecta/internal/jstext"
	"golang.org/x/sync/singleflight"
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
	// through, reason budget). Within it, compilation is bounded by MaxWork.
	MaxSchemaBytes = 1 << 20
	// MaxSchemaDepth: a deeper schema passes through (reason depth). Real
	// tool schemas nest a handful of levels.
	MaxSchemaDepth = 64
	// maxCollected bounds the findings collected per check.
	maxCollected = 1024
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
	// Logger receives a recovered panic (a validator bug): the call passes
	// through unvalidated, and the panic is logged and counted (Panics), so
	// validation cannot switch itself off unseen. nil discards the log line;
	// the count is kept either way.
	Logger *slog.Logger
}

// Validator compiles and caches input schemas by their exact bytes. Safe for
// concurrent use.
type Validator struct {
	entries      int
	logger       *slog.Logger
	panics       atomic.Uint64
	passthroughs [len(reasons)]atomic.Uint64
	// flight compiles each distinct schema once however many calls need it
	// at the same time: a hostile schema is not compiled once per call.
	flight singleflight.Group

	mu    sync.Mutex
	lru   *list.List // of *compiled, most recently used first
	byKey map[string]*list.Element
}

type compiled struct {
	key     string
	root    *node // nil: pass through, for reason
	needAnn bool
	reason  Reason
}

// Schema is one compiled input schema, for a caller that keeps it (a
// catalog keeps one per tool and catalog generation, so a tool's schema is
// compiled once however many calls it serves).
type Schema struct {
	v *Validator
	c *compiled
}

// New builds a Validator.
func New(opts Options) *Validator {
	v := &Validator{entries: opts.CacheEntries, logger: opts.Logger, lru: list.New(), byKey: map[string]*list.Element{}}
	if v.entries <= 0 {
		v.entries = DefaultCacheEntries
	}
	if v.logger == nil {
		v.logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// Panics is how many panics the validator recovered from (each call passed
// through unvalidated).
func (v *Validator) Panics() uint64 {
	if v == nil {
		return 0
	}
	return v.panics.Load()
}

func (v *Validator) recovered(r any, during string) {
	v.panics.Add(1)
	v.logger.Error("schema validation panicked; the call passes through unvalidated", "during", during, "panic", fmt.Sprint(r))
}

// Passthroughs is how many checks passed through unvalidated for reason.
func (v *Validator) Passthroughs(reason Reason) uint64 {
	if v == nil {
		return 0
	}
	if i := slices.Index(reasons[:], reason); i >= 0 {
		return v.passthroughs[i].Load()
	}
	return 0
}

// Result is one check's outcome.
type Result struct {
	// Findings are at most MaxFindings, sorted by path then code; nil when
	// the arguments are valid or the check passed through.
	Findings []Finding
	// Total is how many distinct findings there were before the cut.
	Total int
	// Passthrough is why the arguments were not validated; ReasonNone when
	// they were.
	Passthrough Reason
}

// Check validates args (nil means no arguments, i.e. {}) against schema and
// returns at most MaxFindings findings, sorted by path then code; nil when
// the arguments are valid, when there is no schema, or when the check
// passes through.
func (v *Validator) Check(schema, args json.RawMessage) []Finding {
	return v.Evaluate(schema, args).Findings
}

// CheckAll is Check that also reports how many distinct findings there were
// before the MaxFindings cut, so a caller can say the list is truncated.
func (v *Validator) CheckAll(schema, args json.RawMessage) (findings []Finding, total int) {
	r := v.Evaluate(schema, args)
	return r.Findings, r.Total
}

// Evaluate is Check with the pass-through reason.
func (v *Validator) Evaluate(schema, args json.RawMessage) Result {
	return v.Compile(schema).Evaluate(args)
}

// Compile returns the compiled schema (from the cache, or compiled once
// however many callers ask at the same time). An absent schema (empty or
// null) checks nothing.
func (v *Validator) Compile(schema json.RawMessage) *Schema {
	return &Schema{v: v, c: v.compiled(schema)}
}

// Evaluate checks args (nil means {}) against the compiled schema.
func (s *Schema) Evaluate(args json.RawMessage) (res Result) {
	v, c := s.v, s.c
	defer func() {
		if r := recover(); r != nil { // over budget, or a bug: pass through, never fail a call
			p, designed := r.(passThrough)
			if !designed {
				v.recovered(r, "check")
				res = Result{}
				return
			}
			res = v.passThrough(p.reason)
		}
	}()
	if c == nil {
		return Result{}
	}
	if c.root == nil {
		return v.passThrough(c.reason)
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if costDecodeByte*len(args) > MaxWork/2 {
		return v.passThrough(ReasonBudget) // decoding alone would cost half the budget
	}
	inst, err := decodeJSON(args)
	_, bounded := scan(args)
	if err != nil {
		return Result{Findings: []Finding{{Path: "/", Code: "json", Expected: "a JSON object"}}, Total: 1}
	}
	if !bounded {
		// Numbers compare exactly (big.Rat): 1e1000000 would cost seconds.
		// Such a literal passes through; the downstream judges it.
		return v.passThrough(ReasonBudget)
	}
	e := &evaluator{left: MaxWork - costDecodeByte*len(args), collect: c.needAnn} // decoding was charged
	if ok, _ := e.eval(c.root, inst, nil); ok {
		return Result{}
	}
	all := tidy(e.findings)
	if len(all) == 0 {
		return Result{}
	}
	total := len(all)
	if len(all) > MaxFindings {
		all = all[:MaxFindings]
	}
	return Result{Findings: all, Total: total}
}

func (v *Validator) passThrough(reason Reason) Result {
	if i := slices.Index(reasons[:], reason); i >= 0 {
		v.passthroughs[i].Add(1)
	}
	return Result{Passthrough: reason}
}

// compiled returns the cached validator for schema, compiling on a miss;
// nil when there is no schema.
func (v *Validator) compiled(schema json.RawMessage) *compiled {
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if len(schema) > MaxSchemaBytes {
		return &compiled{reason: ReasonBudget}
	}
	key := string(schema)
	v.mu.Lock()
	if el, ok := v.byKey[key]; ok {
		v.lru.MoveToFront(el)
		c := el.Value.(*compiled)
		v.mu.Unlock()
		return c
	}
	v.mu.Unlock()
	// Compile outside the lock (a slow schema must not stall other tools),
	// once per distinct schema in flight.
	c, _, _ := v.flight.Do(key, func() (any, error) {
		c := v.compile(schema, draft2020)
		c.key = key
		v.mu.Lock()
		defer v.mu.Unlock()
		if el, ok := v.byKey[key]; ok { // a flight that just ended stored it
			v.lru.Remove(el)
		}
		v.byKey[key] = v.lru.PushFront(c)
		for v.lru.Len() > v.entries {
			oldest := v.lru.Back()
			v.lru.Remove(oldest)
			delete(v.byKey, oldest.Value.(*compiled).key)
		}
		return c, nil
	})
	return c.(*compiled)
}

// scan is one pass over a JSON text, without decoding: its deepest
// object/array nesting, and whether every number literal is within
// NumbersBounded's bounds (brackets and digits inside strings do not count).
func scan(b []byte) (deepest int, numbersOK bool) {
	depth, inString, escaped := 0, false, false
	numbersOK = true
	for i := 0; i < len(b); i++ {
		c := b[i]
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
		case c == '-' || (c >= '0' && c <= '9'):
			start := i
			for i+1 < len(b) && strings.IndexByte("0123456789+-.eE", b[i+1]) >= 0 {
				i++
			}
			if numbersOK && !numberBounded(string(b[start:i+1])) {
				numbersOK = false
			}
		}
	}
	return deepest, numbersOK
}

// compile decodes and compiles a schema whose draft, without $schema, is
// def.
func (v *Validator) compile(schema json.RawMessage, def draft) (c *compiled) {
	defer func() {
		if r := recover(); r != nil { // a compiler bug: pass through
			c = &compiled{reason: ReasonUnsupported}
			v.recovered(r, "compile")
		}
	}()
	deepest, bounded := scan(schema)
	if deepest > MaxSchemaDepth {
		return &compiled{reason: ReasonDepth}
	}
	left := MaxCompileWork - costDecodeByte*len(schema) // decoding is charged before it runs
	if left < 0 {
		return &compiled{reason: ReasonBudget}
	}
	doc, err := decodeJSON(schema)
	if err != nil {
		return &compiled{reason: ReasonUnsupported}
	}
	if !bounded {
		// Every bound (minimum, multipleOf, …) is an exact big.Rat:
		// "minimum": 1e999999 would cost seconds per check, so such a schema
		// passes through.
		return &compiled{reason: ReasonBudget}
	}
	root, needAnn, reason := compileSchema(doc, def, left)
	return &compiled{root: root, needAnn: needAnn, reason: reason}
}

// tidy makes the collected findings distinct, bounded and sorted. A
// property that failed a keyword of its own reports that keyword, not an
// additionalProperties branch of some other (sub)schema as well (E8).
func tidy(found []Finding) []Finding {
	seen := map[Finding]bool{}
	var out []Finding
	for _, f := range found {
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
	parts := strings.Split(location, "/")
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

func escape(token string) string { return schemaref.Escape(token) }

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
	_, bounded := scan(data)
	return bounded && json.Valid(data)
}

func numberBounded(n string) bool {
	if len(n) > MaxNumberLen {
		return false
	}
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
		if err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent {
			return false
		}
	}
	return true
}
