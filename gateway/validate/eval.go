package validate

import (
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxEvaluations bounds how many (subschema, value) evaluations one check
// may cost. Nothing is shared between paths, so a 1.5 KB schema whose $defs
// chain anyOf: [{$ref: next}, {$ref: next}] twenty levels deep costs 2^20
// evaluations of one value, doubling with every further level; a check that
// needs more than this is unsupported and passes through, like any other
// schema connecta cannot evaluate. A reference cycle that never consumes the
// value ends the same way, at maxEvalDepth.
const MaxEvaluations = 100_000

// maxEvalDepth bounds the evaluation's recursion.
const maxEvalDepth = 4096

var errOverBudget = errors.New("schema evaluation over budget")

// seg is one step of an instance location, rendered only for findings.
type seg struct {
	parent *seg
	token  string
}

func (s *seg) pointer() string {
	if s == nil {
		return "/"
	}
	var toks []string
	for p := s; p != nil; p = p.parent {
		toks = append(toks, p.token)
	}
	var b strings.Builder
	for i := len(toks) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(escape(toks[i]))
	}
	return b.String()
}

// annotations are what a successful evaluation evaluated, for
// unevaluatedProperties and unevaluatedItems.
type annotations struct {
	props    map[string]bool
	items    int // items [0, items) were evaluated
	allItems bool
	itemSet  map[int]bool // items evaluated by contains
}

func (a *annotations) merge(b annotations) {
	for p := range b.props {
		a.prop(p)
	}
	a.items = max(a.items, b.items)
	a.allItems = a.allItems || b.allItems
	for i := range b.itemSet {
		if a.itemSet == nil {
			a.itemSet = map[int]bool{}
		}
		a.itemSet[i] = true
	}
}

func (a *annotations) prop(name string) {
	if a.props == nil {
		a.props = map[string]bool{}
	}
	a.props[name] = true
}

type evaluator struct {
	left     int
	depth    int
	findings []Finding
}

// spend charges n evaluations and unwinds the whole check when the budget
// is gone (Check recovers and passes the arguments through).
func (e *evaluator) spend(n int) {
	e.left -= n
	if e.left < 0 {
		panic(errOverBudget)
	}
}

func (e *evaluator) add(path *seg, code, expected string) {
	if len(e.findings) < maxCollected {
		e.findings = append(e.findings, Finding{Path: path.pointer(), Code: code, Expected: expected})
	}
}

// tentative evaluates n against v and returns where its findings start, for
// a caller that keeps them only on some outcomes.
func (e *evaluator) tentative(n *node, v any, path *seg) (bool, annotations, int) {
	mark := len(e.findings)
	ok, ann := e.eval(n, v, path)
	return ok, ann, mark
}

func (e *evaluator) eval(n *node, v any, path *seg) (ok bool, ann annotations) {
	e.spend(1)
	if e.depth >= maxEvalDepth {
		panic(errOverBudget)
	}
	e.depth++
	defer func() { e.depth-- }()

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
			ann.merge(a)
		}
		ok = r
		if n.refOnly {
			return ok, ann
		}
	}

	if n.types != nil && !slices.ContainsFunc(n.types, func(t string) bool { return hasType(v, t) }) {
		fail(path, "type", n.sortedTypes)
	}
	if n.hasEnum {
		e.spend(len(n.enum))
		if !slices.ContainsFunc(n.enum, func(x any) bool { return equalJSON(x, v) }) {
			fail(path, "enum", "one of the declared values")
		}
	}
	if n.hasConst && !equalJSON(n.constant, v) {
		fail(path, "const", "the declared constant")
	}

	switch val := v.(type) {
	case json.Number:
		e.number(n, val, path, fail)
	case string:
		if n.minLength >= 0 || n.maxLength >= 0 {
			count := utf8.RuneCountInString(val)
			if n.minLength >= 0 && count < n.minLength {
				fail(path, "minLength", "at least "+strconv.Itoa(n.minLength)+" characters")
			}
			if n.maxLength >= 0 && count > n.maxLength {
				fail(path, "maxLength", "at most "+strconv.Itoa(n.maxLength)+" characters")
			}
		}
		if n.pattern != nil {
			e.spend(len(val) / 256)
			if !n.pattern.MatchString(val) {
				fail(path, "pattern", "a string matching "+n.patternSrc)
			}
		}
	}

	// In-place applicators: their annotations count as evaluated here.
	for _, s := range n.allOf {
		r, a := e.eval(s, v, path)
		if r {
			ann.merge(a)
		}
		ok = ok && r
	}
	if n.anyOf != nil {
		mark, matched := len(e.findings), false
		for _, s := range n.anyOf {
			if r, a := e.eval(s, v, path); r {
				matched = true
				ann.merge(a)
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
			ann.merge(matchedAnn)
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
			ann.merge(a)
			branch = n.thenS
		}
		if branch != nil {
			r, a := e.eval(branch, v, path)
			if r {
				ann.merge(a)
			}
			ok = ok && r
		}
	}

	switch val := v.(type) {
	case map[string]any:
		if !e.object(n, val, path, &ann) {
			ok = false
		}
	case []any:
		if !e.array(n, val, path, &ann) {
			ok = false
		}
	}
	return ok, ann
}

func (e *evaluator) number(n *node, num json.Number, path *seg, fail func(*seg, string, string)) {
	if n.minimum == nil && n.maximum == nil && n.exclusiveMinimum == nil &&
		n.exclusiveMaximum == nil && n.multipleOf == nil {
		return
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
			e.spend(len(name) / 256)
			if p.re.MatchString(name) {
				matched = true
				if r, _ := e.eval(p.n, obj[name], child); !r {
					ok = false
				}
			}
		}
		if matched {
			ann.prop(name)
			continue
		}
		if n.additional != nil {
			ann.prop(name)
			if n.additional.isBool && !n.additional.boolean {
				e.spend(1)
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
	if n.minProperties >= 0 && len(obj) < n.minProperties {
		e.add(path, "minProperties", "at least "+strconv.Itoa(n.minProperties)+" properties")
		ok = false
	}
	if n.maxProperties >= 0 && len(obj) > n.maxProperties {
		e.add(path, "maxProperties", "at most "+strconv.Itoa(n.maxProperties)+" properties")
		ok = false
	}
	for _, prop := range sortedKeys(n.dependentRequired) {
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
	for _, prop := range sortedKeys(n.dependentSchemas) {
		if _, has := obj[prop]; !has {
			continue
		}
		r, a := e.eval(n.dependentSchemas[prop], obj, path)
		if r {
			ann.merge(a)
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
			ann.prop(name)
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
				if ann.itemSet == nil {
					ann.itemSet = map[int]bool{}
				}
				ann.itemSet[i] = true
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
	if n.minItems >= 0 && len(arr) < n.minItems {
		e.add(path, "minItems", "at least "+strconv.Itoa(n.minItems)+" items")
		ok = false
	}
	if n.maxItems >= 0 && len(arr) > n.maxItems {
		e.add(path, "maxItems", "at most "+strconv.Itoa(n.maxItems)+" items")
		ok = false
	}
	if n.uniqueItems && len(arr) > 1 {
		e.spend(len(arr))
		seen := make(map[string]bool, len(arr))
		for _, x := range arr {
			k := canonical(x)
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
		r, ok := new(big.Rat).SetString(string(x))
		return ok && r.IsInt()
	}
	return false
}

// equalJSON is JSON equality: numbers by value (1 equals 1.0), objects
// regardless of member order.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		rx, ok1 := new(big.Rat).SetString(string(x))
		ry, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, has := y[k]
			if !has || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b // nil, bool, string
	}
}

// canonical renders a JSON value so that equalJSON values render the same.
func canonical(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case json.Number:
			if r, ok := new(big.Rat).SetString(string(x)); ok {
				b.WriteString("n" + r.RatString() + ";")
			} else {
				b.WriteString("n" + string(x) + ";")
			}
		case string:
			b.WriteString(strconv.Quote(x))
		case map[string]any:
			b.WriteByte('{')
			for _, k := range sortedKeys(x) {
				b.WriteString(strconv.Quote(k))
				b.WriteByte(':')
				walk(x[k])
			}
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for _, e := range x {
				walk(e)
				b.WriteByte(',')
			}
			b.WriteByte(']')
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case nil:
			b.WriteString("null")
		}
	}
	walk(v)
	return b.String()
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
