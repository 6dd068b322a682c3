package validate

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxWork bounds what compiling one schema, and what evaluating one check,
// may cost, in units of roughly a nanosecond of this evaluator's work on one
// core. Each step is charged what it costs before it runs: an evaluation of
// a (subschema, value) pair, a pattern by its compiled size times the input
// length (Go's regexp is linear, but in both), enum and const by the bytes
// of the canonical form compared, uniqueItems by the items' bytes, an
// object's keys by their count, and annotation merging by the properties
// merged. A check or compilation that needs more passes through (reason
// budget), like any other schema connecta cannot evaluate: nothing is
// shared between paths, so a 1.5 KB schema whose $defs chain
// anyOf: [{$ref: next}, {$ref: next}] twenty levels deep costs 2^20
// evaluations. A reference cycle that never consumes the value ends at
// maxEvalDepth (reason depth).
const MaxWork = 20_000_000

// MaxCompileWork bounds compiling one schema, decoding included, in the
// same units: with MaxWork, about 50 ms of CPU for any schema of at most
// MaxSchemaBytes and any check of it (BenchmarkPathological).
const MaxCompileWork = 25_000_000

// Unit costs, measured with BenchmarkPathological (see docs/DECISIONS.md).
const (
	costEval           = 400  // one (subschema, value) evaluation
	costNode           = 3000 // compiling one (sub)schema
	costPatternCompile = 300  // per pattern byte compiled
	costInstCompile    = 150  // per instruction of a compiled pattern
	costMatchStep      = 2    // per compiled instruction per input byte
	costMatch          = 150  // per match started
	costScope          = 20   // per dynamic-scope entry searched
	costByte           = 2    // per byte canonicalized, counted or compared
	costKey            = 100  // per object key sorted or visited, annotation merged, enum value stored
	costNumber         = 300  // per number made exact (big.Rat)
	costDecodeByte     = 30   // per byte of JSON decoded (encoding/json into any: allocation-bound)
)

// maxEvalDepth bounds the evaluation's recursion.
const maxEvalDepth = 4096

// seg is one step of an instance location, rendered only for findings.
type seg struct {
	parent *seg
	token  string
}

func (s *seg) pointer() string {
	if s == nil {
		return "/"
	}
	n := 0
	for p := s; p != nil; p = p.parent {
		n += 1 + len(p.token) + strings.Count(p.token, "~") + strings.Count(p.token, "/")
	}
	b := make([]byte, n)
	for p := s; p != nil; p = p.parent {
		t := p.token
		if strings.ContainsAny(t, "~/") {
			t = escape(t)
		}
		n -= len(t)
		copy(b[n:], t)
		n--
		b[n] = '/'
	}
	return string(b)
}

// annotations are what a successful evaluation evaluated, for
// unevaluatedProperties and unevaluatedItems; collected only when the
// schema has one of them. Sets are shared copy-on-write, so passing a large
// set up a $ref chain costs nothing per level.
type annotations struct {
	props    map[string]bool
	items    int // items [0, items) were evaluated
	allItems bool
	itemSet  map[int]bool // items evaluated by contains
	shared   bool         // props and itemSet belong to someone else too
}

func (e *evaluator) merge(a *annotations, b annotations) {
	if !e.collect {
		return
	}
	a.items = max(a.items, b.items)
	a.allItems = a.allItems || b.allItems
	if len(b.props) > 0 {
		if len(a.props) == 0 && len(a.itemSet) == 0 {
			a.props, a.shared = b.props, true
		} else {
			e.spend(costKey * len(b.props))
			a.own()
			for p := range b.props {
				a.props[p] = true
			}
		}
	}
	if len(b.itemSet) > 0 {
		e.spend(costKey * len(b.itemSet))
		a.own()
		if a.itemSet == nil {
			a.itemSet = map[int]bool{}
		}
		for i := range b.itemSet {
			a.itemSet[i] = true
		}
	}
}

// own copies shared sets before a write.
func (a *annotations) own() {
	if !a.shared {
		return
	}
	a.shared = false
	props := make(map[string]bool, len(a.props))
	for p := range a.props {
		props[p] = true
	}
	a.props = props
	if a.itemSet != nil {
		set := make(map[int]bool, len(a.itemSet))
		for i := range a.itemSet {
			set[i] = true
		}
		a.itemSet = set
	}
}

func (e *evaluator) prop(a *annotations, name string) {
	if !e.collect {
		return
	}
	a.own()
	if a.props == nil {
		a.props = map[string]bool{}
	}
	a.props[name] = true
}

func (e *evaluator) item(a *annotations, i int) {
	if !e.collect {
		return
	}
	a.own()
	if a.itemSet == nil {
		a.itemSet = map[int]bool{}
	}
	a.itemSet[i] = true
}

type evaluator struct {
	left     int
	depth    int
	collect  bool // annotations are needed
	findings []Finding
	// scope is the dynamic scope: the resources entered, outermost first.
	scope []*resource
}

// spend charges n units and unwinds the whole check when the budget is
// gone (Check recovers and passes the arguments through).
func (e *evaluator) spend(n int) {
	e.left -= n
	if e.left < 0 {
		panic(passThrough{ReasonBudget})
	}
}

func (e *evaluator) add(path *seg, code, expected string) {
	if len(e.findings) < maxCollected {
		p := path.pointer()
		e.spend(costEval + 4*costByte*len(p)) // walking the path costs more than its bytes
		e.findings = append(e.findings, Finding{Path: p, Code: code, Expected: expected})
	}
}

// count checks a length against its declared bounds (-1: none), the
// finding naming the bound's keyword and what is counted ("at least 2
// items"); it reports whether the length is within them.
func (e *evaluator) count(path *seg, count, lo, hi int, loKeyword, hiKeyword, what string) bool {
	ok := true
	if lo >= 0 && count < lo {
		e.add(path, loKeyword, "at least "+strconv.Itoa(lo)+" "+what)
		ok = false
	}
	if hi >= 0 && count > hi {
		e.add(path, hiKeyword, "at most "+strconv.Itoa(hi)+" "+what)
		ok = false
	}
	return ok
}

// tentative evaluates n against v and returns where its findings start, for
// a caller that keeps them only on some outcomes.
func (e *evaluator) tentative(n *node, v any, path *seg) (bool, annotations, int) {
	mark := len(e.findings)
	ok, ann := e.eval(n, v, path)
	return ok, ann, mark
}

func (e *evaluator) eval(n *node, v any, path *seg) (ok bool, ann annotations) {
	e.spend(costEval)
	if e.depth >= maxEvalDepth {
		panic(passThrough{ReasonDepth})
	}
	e.depth++
	entered := len(e.scope) == 0 || e.scope[len(e.scope)-1] != n.res
	if entered {
		e.scope = append(e.scope, n.res)
	}
	defer func() {
		e.depth--
		if entered {
			e.scope = e.scope[:len(e.scope)-1]
		}
	}()

	if n.isBool {
		if !n.boolean {
			e.add(path, falseSchemaKeyword(n.loc), "no value here")
		}
		return n.boolean, ann
	}
	ok = true
	fail := func(p *seg, code, expected string) {
		e.add(p, code, expected)
		ok = false
	}
	if n.ref != nil {
		r, a := e.eval(n.ref, v, path)
		if r {
			e.merge(&ann, a)
		}
		ok = r
		if n.refOnly {
			return ok, ann
		}
	}
	if n.dynamic != nil {
		r, a := e.eval(e.dynamicTarget(n.dynamic), v, path)
		if r {
			e.merge(&ann, a)
		}
		ok = ok && r
	}

	if num, isNumber := v.(json.Number); isNumber && !plainInteger(num) && slices.Contains(n.types, "integer") {
		e.spend(costNumber) // integer-ness of 1.0 or 1e3 is exact arithmetic
	}
	if n.types != nil && !slices.ContainsFunc(n.types, func(t string) bool { return hasType(v, t) }) {
		fail(path, "type", n.sortedTypes)
	}
	if n.hasEnum || n.hasConst {
		k := e.canonical(v)
		if n.hasEnum && !n.enum[k] {
			fail(path, "enum", "one of the declared values")
		}
		if n.hasConst && n.constant != k {
			fail(path, "const", "the declared constant")
		}
	}

	switch val := v.(type) {
	case json.Number:
		e.number(n, val, path, fail)
	case string:
		if n.minLength >= 0 || n.maxLength >= 0 {
			e.spend(costByte * len(val) / 8)
			count := utf8.RuneCountInString(val)
			if !e.count(path, count, n.minLength, n.maxLength, "minLength", "maxLength", "characters") {
				ok = false
			}
		}
		if n.pattern != nil {
			e.spend(matchCost(n.patternCost, len(val)))
			if !n.pattern.MatchString(val) {
				fail(path, "pattern", "a string matching "+n.patternSrc)
			}
		}
	}

	// In-place applicators: their annotations count as evaluated here.
	for _, s := range n.allOf {
		r, a := e.eval(s, v, path)
		if r {
			e.merge(&ann, a)
		}
		ok = ok && r
	}
	if n.anyOf != nil {
		mark, matched := len(e.findings), false
		for _, s := range n.anyOf {
			if r, a := e.eval(s, v, path); r {
				matched = true
				e.merge(&ann, a)
			}
		}
		if matched {
			e.findings = e.findings[:mark]
		} else {
			ok = false
			if len(e.findings) == mark {
				e.add(path, "anyOf", "a matching alternative")
			}
		}
	}
	if n.oneOf != nil {
		mark, matches := len(e.findings), 0
		var matchedAnn annotations
		for _, s := range n.oneOf {
			if r, a := e.eval(s, v, path); r {
				matches++
				matchedAnn = a
			}
		}
		switch {
		case matches == 1:
			e.findings = e.findings[:mark]
			e.merge(&ann, matchedAnn)
		case matches > 1:
			e.findings = e.findings[:mark]
			fail(path, "oneOf", "exactly one matching alternative")
		default:
			ok = false
			if len(e.findings) == mark {
				e.add(path, "oneOf", "exactly one matching alternative")
			}
		}
	}
	if n.not != nil {
		r, _, mark := e.tentative(n.not, v, path)
		e.findings = e.findings[:mark]
		if r {
			fail(path, "not", "a value the declared schema does not exclude")
		}
	}
	if n.ifS != nil {
		r, a, mark := e.tentative(n.ifS, v, path)
		e.findings = e.findings[:mark]
		branch := n.elseS
		if r {
			e.merge(&ann, a)
			branch = n.thenS
		}
		if branch != nil {
			r, a := e.eval(branch, v, path)
			if r {
				e.merge(&ann, a)
			}
			ok = ok && r
		}
	}

	switch val := v.(type) {
	case map[string]any:
		if n.objectKeywords && !e.object(n, val, path, &ann) {
			ok = false
		}
	case []any:
		if n.arrayKeywords && !e.array(n, val, path, &ann) {
			ok = false
		}
	}
	return ok, ann
}

// dynamicTarget is where a $dynamicRef or $recursiveRef leads in the
// current dynamic scope: the outermost resource that declares the same
// $dynamicAnchor (or a root $recursiveAnchor), else the initial target.
func (e *evaluator) dynamicTarget(d *dynamicRef) *node {
	e.spend(costScope * len(e.scope)) // the scope is searched
	switch {
	case d.anchor != "":
		for _, r := range e.scope {
			if t, ok := r.dynamic[d.anchor]; ok {
				return t
			}
		}
	case d.recursive:
		for _, r := range e.scope {
			if r.recursive {
				return r.root
			}
		}
	}
	return d.initial
}

// matchCost is what matching a compiled pattern of cost instructions
// against n bytes may cost.
func matchCost(cost, n int) int { return costMatch + costMatchStep*cost*(n+1) }

func (e *evaluator) number(n *node, num json.Number, path *seg, fail func(*seg, string, string)) {
	if n.minimum == nil && n.maximum == nil && n.exclusiveMinimum == nil &&
		n.exclusiveMaximum == nil && n.multipleOf == nil {
		return
	}
	e.spend(costNumber * 2) // exact value and comparisons
	if n.multipleOf != nil {
		e.spend(costNumber * 3) // an exact division
	}
	x, good := new(big.Rat).SetString(string(num))
	if !good {
		return
	}
	if n.minimum != nil && x.Cmp(n.minimum) < 0 {
		fail(path, "minimum", ">= "+ratString(n.minimum))
	}
	if n.maximum != nil && x.Cmp(n.maximum) > 0 {
		fail(path, "maximum", "<= "+ratString(n.maximum))
	}
	if n.exclusiveMinimum != nil && x.Cmp(n.exclusiveMinimum) <= 0 {
		fail(path, "exclusiveMinimum", "> "+ratString(n.exclusiveMinimum))
	}
	if n.exclusiveMaximum != nil && x.Cmp(n.exclusiveMaximum) >= 0 {
		fail(path, "exclusiveMaximum", "< "+ratString(n.exclusiveMaximum))
	}
	if n.multipleOf != nil && !new(big.Rat).Quo(x, n.multipleOf).IsInt() {
		fail(path, "multipleOf", "a multiple of "+ratString(n.multipleOf))
	}
}

func (e *evaluator) object(n *node, obj map[string]any, path *seg, ann *annotations) bool {
	ok := true
	e.spend(costKey * len(obj))
	names := sortedKeys(obj) // findings in a stable order
	for _, name := range names {
		child := &seg{path, name}
		matched := false
		if s, has := n.properties[name]; has {
			matched = true
			if r, _ := e.eval(s, obj[name], child); !r {
				ok = false
			}
		}
		for _, p := range n.patternProperties {
			e.spend(matchCost(p.cost, len(name)))
			if p.re.MatchString(name) {
				matched = true
				if r, _ := e.eval(p.n, obj[name], child); !r {
					ok = false
				}
			}
		}
		if matched {
			e.prop(ann, name)
			continue
		}
		if n.additional != nil {
			e.prop(ann, name)
			if n.additional.isBool && !n.additional.boolean {
				e.spend(costEval)
				e.add(child, "additionalProperties", "no additional properties")
				ok = false
			} else if r, _ := e.eval(n.additional, obj[name], child); !r {
				ok = false
			}
		}
	}
	if n.propertyNames != nil {
		for _, name := range names {
			child := &seg{path, name}
			r, _, mark := e.tentative(n.propertyNames, name, child)
			if !r {
				e.findings = e.findings[:mark]
				e.add(child, "propertyNames", "property names matching the declared schema")
				ok = false
			}
		}
	}
	for _, name := range n.required {
		if _, has := obj[name]; !has {
			e.add(&seg{path, name}, "required", declaredType(n, name))
			ok = false
		}
	}
	if !e.count(path, len(obj), n.minProperties, n.maxProperties, "minProperties", "maxProperties", "properties") {
		ok = false
	}
	for _, prop := range n.dependentKeys {
		if _, has := obj[prop]; !has {
			continue
		}
		for _, name := range n.dependentRequired[prop] {
			if _, has := obj[name]; !has {
				e.add(&seg{path, name}, n.dependencyCode, "present when "+prop+" is present")
				ok = false
			}
		}
	}
	for _, prop := range n.dependentSchemaKs {
		if _, has := obj[prop]; !has {
			continue
		}
		r, a := e.eval(n.dependentSchemas[prop], obj, path)
		if r {
			e.merge(ann, a)
		}
		ok = ok && r
	}
	if n.unevaluatedProps != nil {
		for _, name := range names {
			if ann.props[name] {
				continue
			}
			if r, _ := e.eval(n.unevaluatedProps, obj[name], &seg{path, name}); !r {
				ok = false
			}
		}
		for _, name := range names {
			e.prop(ann, name)
		}
	}
	return ok
}

func (e *evaluator) array(n *node, arr []any, path *seg, ann *annotations) bool {
	ok := true
	item := func(i int) *seg { return &seg{path, strconv.Itoa(i)} }
	for i, s := range n.prefixItems {
		if i >= len(arr) {
			break
		}
		if r, _ := e.eval(s, arr[i], item(i)); !r {
			ok = false
		}
	}
	ann.items = max(ann.items, min(len(n.prefixItems), len(arr)))
	if n.items != nil {
		if n.itemsAreAddition && n.items.isBool && !n.items.boolean && len(arr) > len(n.prefixItems) {
			e.add(path, "additionalItems", "at most "+strconv.Itoa(len(n.prefixItems))+" items")
			ok = false
		} else {
			for i := len(n.prefixItems); i < len(arr); i++ {
				if r, _ := e.eval(n.items, arr[i], item(i)); !r {
					ok = false
				}
			}
		}
		ann.allItems = true
	}
	if n.contains != nil {
		matches := 0
		for i, x := range arr {
			r, _, mark := e.tentative(n.contains, x, item(i))
			e.findings = e.findings[:mark]
			if r {
				matches++
				e.item(ann, i)
			}
		}
		switch {
		case n.minContains >= 0 && matches < n.minContains:
			e.add(path, "minContains", "at least "+strconv.Itoa(n.minContains)+" matching items")
			ok = false
		case n.minContains < 0 && matches == 0:
			e.add(path, "contains", "an item matching the declared schema")
			ok = false
		}
		if n.maxContains >= 0 && matches > n.maxContains {
			e.add(path, "maxContains", "at most "+strconv.Itoa(n.maxContains)+" matching items")
			ok = false
		}
	}
	if !e.count(path, len(arr), n.minItems, n.maxItems, "minItems", "maxItems", "items") {
		ok = false
	}
	if n.uniqueItems && len(arr) > 1 {
		seen := make(map[string]bool, len(arr))
		for _, x := range arr {
			k := e.canonical(x)
			if seen[k] {
				e.add(path, "uniqueItems", "unique items")
				ok = false
				break
			}
			seen[k] = true
		}
	}
	if n.unevaluatedItems != nil && !ann.allItems {
		for i := ann.items; i < len(arr); i++ {
			if ann.itemSet[i] {
				continue
			}
			if r, _ := e.eval(n.unevaluatedItems, arr[i], item(i)); !r {
				ok = false
			}
		}
		ann.allItems = true
	}
	return ok
}

func hasType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case map[string]any:
		return t == "object"
	case []any:
		return t == "array"
	case json.Number:
		if t == "number" {
			return true
		}
		if t != "integer" {
			return false
		}
		if plainInteger(x) {
			return true
		}
		r, ok := new(big.Rat).SetString(string(x))
		return ok && r.IsInt()
	}
	return false
}

// plainInteger: a literal without fraction or exponent is an integer.
func plainInteger(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// canonical renders a JSON value so that equal JSON values (numbers by
// value, 1 equals 1.0; objects regardless of member order) render the same:
// enum, const and uniqueItems compare these.
func canonical(v any) string {
	var b strings.Builder
	writeCanonical(&b, v, nil)
	return b.String()
}

// canonical is canonical charged as it goes: a huge instance value unwinds
// the check before it has been copied whole.
func (e *evaluator) canonical(v any) string {
	var b strings.Builder
	writeCanonical(&b, v, e)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any, e *evaluator) {
	charge := func(n int) {
		if e != nil {
			e.spend(n)
		}
	}
	switch x := v.(type) {
	case json.Number:
		charge(costNumber + costByte*len(x))
		if r, ok := new(big.Rat).SetString(string(x)); ok {
			b.WriteString("n" + r.RatString() + ";")
		} else {
			b.WriteString("n" + string(x) + ";")
		}
	case string:
		charge(costByte * (len(x) + 2))
		b.WriteString(strconv.Quote(x))
	case map[string]any:
		charge(costKey * (len(x) + 1))
		b.WriteByte('{')
		for _, k := range sortedKeys(x) {
			charge(costByte * (len(k) + 2))
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeCanonical(b, x[k], e)
		}
		b.WriteByte('}')
	case []any:
		charge(costKey)
		b.WriteByte('[')
		for _, it := range x {
			writeCanonical(b, it, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case bool:
		charge(costByte * 5)
		b.WriteString(strconv.FormatBool(x))
	case nil:
		charge(costByte * 4)
		b.WriteString("null")
	}
}

// declaredType is the expectation for a missing required property: its
// declared type when the schema names one, else "present".
func declaredType(n *node, name string) string {
	prop, ok := n.properties[name]
	if !ok || len(prop.types) == 0 || prop.refOnly {
		return "present"
	}
	return strings.Join(prop.types, " | ")
}
