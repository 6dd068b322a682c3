package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway/schemaref"
)

// The compiler turns a decoded schema document into a graph of nodes, once
// per distinct schema, so a check never interprets keywords again. It knows
// every schema resource of the document — the root and each embedded $id
// (id before draft-06), with its own base URI — and resolves $ref by the
// full URI: a JSON pointer inside the resource it names, or an anchor
// ($anchor, $dynamicAnchor, or a draft-04..07 "#name" $id). $dynamicRef
// (2020-12) and $recursiveRef (2019-09) keep their initial target and are
// redirected through the dynamic scope at evaluation time.
//
// What passes through (the downstream judges the arguments), with its
// reason: a reference to any other document, including json-schema.org
// metaschemas (remote_ref); an unknown $schema, an embedded resource of
// another draft, an ill-typed keyword, a pattern Go's regexp cannot compile,
// a dangling pointer or anchor (unsupported); nesting over MaxSchemaDepth
// (depth); compilation over its work budget (budget).

type draft int

const (
	draft4    draft = 4
	draft6    draft = 6
	draft7    draft = 7
	draft2019 draft = 2019
	draft2020 draft = 2020
)

// draftOf maps a $schema URL to its draft; ok is false for anything else.
func draftOf(s string) (draft, bool) {
	s = strings.TrimSuffix(s, "#")
	s, found := strings.CutPrefix(s, "https://")
	if !found {
		s, _ = strings.CutPrefix(s, "http://")
	}
	switch s {
	case "json-schema.org/draft-04/schema":
		return draft4, true
	case "json-schema.org/draft-06/schema":
		return draft6, true
	case "json-schema.org/draft-07/schema":
		return draft7, true
	case "json-schema.org/draft/2019-09/schema":
		return draft2019, true
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/schema":
		return draft2020, true
	}
	return 0, false
}

// node is one compiled (sub)schema. Absent keywords are nil, empty or -1.
type node struct {
	loc string    // JSON pointer of this schema inside the document, "" for the root
	res *resource // the schema resource this node belongs to

	isBool, boolean bool

	ref     *node
	refOnly bool // before 2019-09 a $ref's siblings are ignored
	// dynamic is a $dynamicRef (2020-12) or $recursiveRef (2019-09).
	dynamic *dynamicRef

	types       []string // as declared
	sortedTypes string   // "null | string", for findings

	hasEnum  bool
	enum     map[string]bool // canonical forms
	hasConst bool
	constant string // canonical form

	minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf *big.Rat

	minLength, maxLength         int
	pattern                      *regexp.Regexp
	patternSrc                   string
	patternCost                  int // instructions of the compiled pattern
	minItems, maxItems           int
	uniqueItems                  bool
	minContains, maxContains     int
	minProperties, maxProperties int

	required          []string
	properties        map[string]*node
	patternProperties []patternNode
	additional        *node
	unevaluatedProps  *node
	propertyNames     *node
	dependentRequired map[string][]string
	dependentKeys     []string // sorted keys of dependentRequired
	dependencyCode    string   // "dependentRequired", or "dependencies"
	dependentSchemas  map[string]*node
	dependentSchemaKs []string // sorted keys of dependentSchemas

	prefixItems      []*node
	items            *node // applies after prefixItems
	itemsAreAddition bool  // items is draft-07's additionalItems
	contains         *node
	unevaluatedItems *node

	allOf, anyOf, oneOf    []*node
	not, ifS, thenS, elseS *node

	objectKeywords, arrayKeywords bool // any keyword that looks inside
}

// resource is one schema resource: the document root or an embedded $id.
type resource struct {
	uri   string // absolute, without fragment
	loc   string
	value any
	root  *node
	// dynamic are the $dynamicAnchor names of this resource (2020-12);
	// recursive is a root "$recursiveAnchor": true (2019-09).
	dynamic   map[string]*node
	recursive bool
}

// dynamicRef is a reference redirected by the dynamic scope.
type dynamicRef struct {
	initial *node
	// anchor is the $dynamicAnchor name the initial target carries (the
	// 2020-12 "bookend"); "" means the reference acts as a plain $ref.
	anchor    string
	recursive bool // $recursiveRef whose initial target has $recursiveAnchor
}

type patternNode struct {
	re   *regexp.Regexp
	cost int
	n    *node
}

// Reason says why a check passed through unvalidated; it labels
// connecta_validation_passthrough_total.
type Reason string

const (
	ReasonNone        Reason = ""
	ReasonUnsupported Reason = "unsupported" // a keyword or form connecta does not evaluate exactly
	ReasonBudget      Reason = "budget"      // compiling or evaluating would cost more than MaxWork
	ReasonDepth       Reason = "depth"       // nesting over MaxSchemaDepth, or evaluation over maxEvalDepth
	ReasonRemoteRef   Reason = "remote_ref"  // a reference to another document (never loaded)
)

// reasons are every pass-through reason, in counter order.
var reasons = [...]Reason{ReasonUnsupported, ReasonBudget, ReasonDepth, ReasonRemoteRef}

// Reasons lists every pass-through reason, for series at zero from start.
func Reasons() []Reason { return reasons[:] }

// passThrough unwinds compilation or evaluation with its reason.
type passThrough struct{ reason Reason }

func (p passThrough) Error() string { return "schema passes through: " + string(p.reason) }

var errUnsupported = passThrough{ReasonUnsupported}

type compiler struct {
	root      any
	draft     draft
	byLoc     map[string]*node
	resources map[string]*resource // by absolute URI
	anchors   map[string]*anchorAt // by absolute URI with fragment
	pending   []pendingRef
	regexps   map[string]compiledRegexp
	left      int  // compile work left (of MaxCompileWork)
	needAnn   bool // some unevaluated* keyword needs annotations
}

type anchorAt struct {
	loc     string
	value   any
	base    string
	dynamic bool
	res     *resource
}

type compiledRegexp struct {
	re   *regexp.Regexp
	cost int
}

type pendingRef struct {
	n    *node
	ref  string
	base string
	kind refKind
}

type refKind int

const (
	plainRef refKind = iota
	dynamicRefKind
	recursiveRefKind
)

// decodeJSON decodes exactly one JSON value with numbers kept as literals.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// compileSchema compiles a decoded schema document whose draft, without a
// $schema, is def, within left units of work; nil root means it passes
// through, for reason.
func compileSchema(doc any, def draft, left int) (root *node, needAnn bool, reason Reason) {
	c := &compiler{root: doc, draft: def, byLoc: map[string]*node{},
		resources: map[string]*resource{}, anchors: map[string]*anchorAt{},
		regexps: map[string]compiledRegexp{}, left: left}
	defer func() {
		if r := recover(); r != nil {
			p, ok := r.(passThrough)
			if !ok {
				panic(r)
			}
			root, needAnn, reason = nil, false, p.reason
		}
	}()
	if obj, ok := doc.(map[string]any); ok {
		if s, has := obj["$schema"]; has {
			c.draft = schemaDraft(s)
		}
	}
	root = c.at("", doc, schemaref.RootBase, nil)
	// References are resolved after the whole tree is compiled so that
	// every resource and anchor in it is known; a target outside the
	// compiled tree (say "#/$defs/x/properties/y", or inside an unknown
	// keyword) compiles on demand and may add more.
	for len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		c.link(p)
	}
	for key, a := range c.anchors {
		if !a.dynamic {
			continue
		}
		if a.res.dynamic == nil {
			a.res.dynamic = map[string]*node{}
		}
		a.res.dynamic[strings.TrimPrefix(key, a.base+"#")] = c.byLoc[a.loc]
	}
	return root, c.needAnn, ReasonNone
}

func schemaDraft(s any) draft {
	str, ok := s.(string)
	if !ok {
		unsupported()
	}
	d, ok := draftOf(str)
	if !ok {
		// Another metaschema: its vocabularies live in a document that is
		// never loaded.
		panic(passThrough{ReasonRemoteRef})
	}
	return d
}

func unsupported() { panic(errUnsupported) }

// spend charges compile work (one unit per node and per keyword, the
// pattern's size for a regexp).
func (c *compiler) spend(n int) {
	c.left -= n
	if c.left < 0 {
		panic(passThrough{ReasonBudget})
	}
}

// at compiles the schema s found at loc with base URI base inside resource
// res (nil: s starts one), once per location.
func (c *compiler) at(loc string, s any, base string, res *resource) *node {
	if n, ok := c.byLoc[loc]; ok {
		return n
	}
	c.spend(costNode + costByte*len(loc)) // a node keeps its location
	if strings.Count(loc, "/") > 2*MaxSchemaDepth {
		panic(passThrough{ReasonDepth})
	}
	n := &node{loc: loc, res: res, minLength: -1, maxLength: -1, minItems: -1, maxItems: -1,
		minContains: -1, maxContains: -1, minProperties: -1, maxProperties: -1}
	c.byLoc[loc] = n
	switch v := s.(type) {
	case bool:
		n.isBool, n.boolean = true, v
		if res == nil {
			n.res = c.resource(base, loc, s)
			n.res.root = n
		}
		return n
	case map[string]any:
		c.object(n, v, base)
		return n
	}
	unsupported()
	return nil
}

func (c *compiler) resource(uri, loc string, value any) *resource {
	if prev, dup := c.resources[uri]; dup && prev.loc != loc {
		unsupported() // two resources claim one URI
	}
	r := &resource{uri: uri, loc: loc, value: value}
	c.resources[uri] = r
	return r
}

func (c *compiler) child(n *node, s any, tokens ...string) *node {
	loc := n.loc
	for _, t := range tokens {
		loc += "/" + escape(t)
	}
	return c.at(loc, s, n.res.uri, n.res)
}

// resolveURI is schemaref.Resolve; a reference that is no URI is
// unsupported.
func resolveURI(base, ref string) (uri, fragment string) {
	uri, fragment, ok := schemaref.Resolve(base, ref)
	if !ok {
		unsupported()
	}
	return uri, fragment
}

func (c *compiler) object(n *node, obj map[string]any, base string) {
	c.spend(costKey * len(obj))
	idKey := schemaref.IDKeyword(c.draft == draft4)
	_, hasRef := obj["$ref"]
	oldRef := hasRef && c.draft <= draft7
	oldAnchor := ""
	// Before 2019-09 a $ref's siblings, $id included, are ignored.
	if id, has := obj[idKey]; has && !oldRef {
		s, ok := id.(string)
		if !ok {
			unsupported()
		}
		uri, frag := resolveURI(base, s)
		switch {
		case c.draft <= draft7 && schemaref.PlainNameID(s):
			oldAnchor = frag // the old spelling of an anchor
		case frag != "" && c.draft >= draft2019:
			unsupported() // 2019-09 on, an $id carries no fragment
		default:
			if n.loc != "" {
				if sch, has := obj["$schema"]; has && schemaDraft(sch) != c.draft {
					unsupported() // an embedded resource of another draft
				}
			}
			n.res = c.resource(uri, n.loc, obj)
			n.res.root = n
			base = uri
			if frag != "" {
				c.anchor(base, frag, n, obj, false)
			}
		}
	}
	if n.res == nil { // the document root without an $id
		n.res = c.resource(base, n.loc, obj)
		n.res.root = n
	}
	if oldAnchor != "" {
		c.anchor(base, oldAnchor, n, obj, false)
	}
	if c.draft >= draft2019 {
		if a, has := obj["$anchor"]; has {
			s, ok := a.(string)
			if !ok || s == "" {
				unsupported()
			}
			c.anchor(base, s, n, obj, false)
		}
	}
	if c.draft >= draft2020 {
		if a, has := obj["$dynamicAnchor"]; has {
			s, ok := a.(string)
			if !ok || s == "" {
				unsupported()
			}
			c.anchor(base, s, n, obj, true)
		}
		if r, has := obj["$dynamicRef"]; has {
			s, ok := r.(string)
			if !ok {
				unsupported()
			}
			c.pending = append(c.pending, pendingRef{n, s, base, dynamicRefKind})
		}
	}
	if c.draft == draft2019 {
		if a, has := obj["$recursiveAnchor"]; has {
			b, ok := a.(bool)
			if !ok {
				unsupported()
			}
			if b && n.res.root == n {
				n.res.recursive = true
			}
		}
		if r, has := obj["$recursiveRef"]; has {
			s, ok := r.(string)
			if !ok || s != "#" {
				unsupported()
			}
			c.pending = append(c.pending, pendingRef{n, s, base, recursiveRefKind})
		}
	}
	if ref, has := obj["$ref"]; has {
		s, ok := ref.(string)
		if !ok {
			unsupported()
		}
		c.pending = append(c.pending, pendingRef{n, s, base, plainRef})
		if c.draft <= draft7 {
			n.refOnly = true
			// $ref's siblings are ignored, but definitions may still be
			// referenced from elsewhere.
			c.defs(n, obj)
			return
		}
	}
	c.defs(n, obj)

	if t, has := obj["type"]; has {
		switch v := t.(type) {
		case string:
			n.types = []string{v}
		case []any:
			for _, x := range v {
				s, ok := x.(string)
				if !ok {
					unsupported()
				}
				n.types = append(n.types, s)
			}
		default:
			unsupported()
		}
		for _, t := range n.types {
			switch t {
			case "array", "boolean", "integer", "null", "number", "object", "string":
			default:
				unsupported()
			}
		}
		sorted := slices.Clone(n.types)
		slices.Sort(sorted)
		n.sortedTypes = strings.Join(slices.Compact(sorted), " | ")
	}
	if e, has := obj["enum"]; has {
		list, ok := e.([]any)
		if !ok {
			unsupported()
		}
		n.hasEnum, n.enum = true, make(map[string]bool, len(list))
		for _, x := range list {
			k := canonical(x)
			c.spend(costKey + costByte*len(k))
			n.enum[k] = true
		}
	}
	if v, has := obj["const"]; has && c.draft >= draft6 {
		n.hasConst, n.constant = true, canonical(v)
		c.spend(costByte * len(n.constant))
	}

	n.minimum = c.number(obj, "minimum")
	n.maximum = c.number(obj, "maximum")
	if c.draft == draft4 {
		// Draft-04 spells exclusive bounds as booleans beside the bound.
		if c.flag(obj, "exclusiveMinimum") {
			n.exclusiveMinimum, n.minimum = n.minimum, nil
		}
		if c.flag(obj, "exclusiveMaximum") {
			n.exclusiveMaximum, n.maximum = n.maximum, nil
		}
	} else {
		n.exclusiveMinimum = c.number(obj, "exclusiveMinimum")
		n.exclusiveMaximum = c.number(obj, "exclusiveMaximum")
	}
	if n.multipleOf = c.number(obj, "multipleOf"); n.multipleOf != nil && n.multipleOf.Sign() <= 0 {
		unsupported()
	}

	n.minLength = c.count(obj, "minLength")
	n.maxLength = c.count(obj, "maxLength")
	if p, has := obj["pattern"]; has {
		s, ok := p.(string)
		if !ok {
			unsupported()
		}
		re := c.regexp(s)
		n.pattern, n.patternSrc, n.patternCost = re.re, s, re.cost
	}

	n.minItems = c.count(obj, "minItems")
	n.maxItems = c.count(obj, "maxItems")
	n.uniqueItems = c.flag(obj, "uniqueItems")
	if c.draft >= draft2020 {
		if p, has := obj["prefixItems"]; has {
			n.prefixItems = c.list(n, "prefixItems", p)
		}
		if it, has := obj["items"]; has {
			if _, isList := it.([]any); isList {
				unsupported() // the tuple form is prefixItems since 2020-12
			}
			n.items = c.child(n, it, "items")
		}
	} else if it, has := obj["items"]; has {
		if list, isList := it.([]any); isList {
			n.prefixItems = c.list(n, "items", list)
			if add, has := obj["additionalItems"]; has {
				n.items, n.itemsAreAddition = c.child(n, add, "additionalItems"), true
			}
		} else {
			n.items = c.child(n, it, "items")
		}
	}
	if c.draft >= draft6 {
		if s, has := obj["contains"]; has {
			n.contains = c.child(n, s, "contains")
		}
		if s, has := obj["propertyNames"]; has {
			n.propertyNames = c.child(n, s, "propertyNames")
		}
	}
	if c.draft >= draft2019 {
		n.minContains = c.count(obj, "minContains")
		n.maxContains = c.count(obj, "maxContains")
		if s, has := obj["unevaluatedItems"]; has {
			n.unevaluatedItems = c.child(n, s, "unevaluatedItems")
			c.needAnn = true
		}
		if s, has := obj["unevaluatedProperties"]; has {
			n.unevaluatedProps = c.child(n, s, "unevaluatedProperties")
			c.needAnn = true
		}
	}

	n.minProperties = c.count(obj, "minProperties")
	n.maxProperties = c.count(obj, "maxProperties")
	if r, has := obj["required"]; has {
		list, ok := r.([]any)
		if !ok {
			unsupported()
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				unsupported()
			}
			n.required = append(n.required, s)
		}
	}
	if p, has := obj["properties"]; has {
		m, ok := p.(map[string]any)
		if !ok {
			unsupported()
		}
		n.properties = make(map[string]*node, len(m))
		for name, s := range m {
			n.properties[name] = c.child(n, s, "properties", name)
		}
	}
	if p, has := obj["patternProperties"]; has {
		m, ok := p.(map[string]any)
		if !ok {
			unsupported()
		}
		keys := sortedKeys(m)
		for _, src := range keys {
			re := c.regexp(src)
			n.patternProperties = append(n.patternProperties,
				patternNode{re: re.re, cost: re.cost, n: c.child(n, m[src], "patternProperties", src)})
		}
	}
	if s, has := obj["additionalProperties"]; has {
		n.additional = c.child(n, s, "additionalProperties")
	}
	if c.draft >= draft2019 {
		if d, has := obj["dependentRequired"]; has {
			n.dependentRequired = c.stringLists(d)
			n.dependencyCode = "dependentRequired"
		}
		if d, has := obj["dependentSchemas"]; has {
			n.dependentSchemas = c.schemaMap(n, "dependentSchemas", d)
		}
	}
	// dependencies is draft-07's spelling of both; 2019-09 on it is kept for
	// compatibility, as validators commonly do.
	if d, has := obj["dependencies"]; has {
		m, ok := d.(map[string]any)
		if !ok {
			unsupported()
		}
		if n.dependencyCode == "" {
			n.dependencyCode = "dependencies"
		}
		for name, v := range m {
			if _, dup := n.dependentRequired[name]; dup {
				unsupported() // one property, two dependency keywords
			}
			if _, dup := n.dependentSchemas[name]; dup {
				unsupported()
			}
			if list, isList := v.([]any); isList {
				if n.dependentRequired == nil {
					n.dependentRequired = map[string][]string{}
				}
				n.dependentRequired[name] = c.stringLists(map[string]any{name: list})[name]
				continue
			}
			if n.dependentSchemas == nil {
				n.dependentSchemas = map[string]*node{}
			}
			n.dependentSchemas[name] = c.child(n, v, "dependencies", name)
		}
	}

	for _, k := range [...]string{"allOf", "anyOf", "oneOf"} {
		v, has := obj[k]
		if !has {
			continue
		}
		list := c.list(n, k, v)
		if len(list) == 0 {
			unsupported()
		}
		switch k {
		case "allOf":
			n.allOf = list
		case "anyOf":
			n.anyOf = list
		case "oneOf":
			n.oneOf = list
		}
	}
	if s, has := obj["not"]; has {
		n.not = c.child(n, s, "not")
	}
	if c.draft >= draft7 {
		// then and else are compiled without if too: a reference may name
		// them (and their $id), though they apply only beside if.
		var thenS, elseS *node
		if t, has := obj["then"]; has {
			thenS = c.child(n, t, "then")
		}
		if e, has := obj["else"]; has {
			elseS = c.child(n, e, "else")
		}
		if s, has := obj["if"]; has {
			n.ifS, n.thenS, n.elseS = c.child(n, s, "if"), thenS, elseS
		}
	}
	n.dependentKeys = sortedKeys(n.dependentRequired)
	n.dependentSchemaKs = sortedKeys(n.dependentSchemas)
	n.objectKeywords = n.properties != nil || n.patternProperties != nil || n.additional != nil ||
		n.unevaluatedProps != nil || n.propertyNames != nil || n.required != nil ||
		n.minProperties >= 0 || n.maxProperties >= 0 || n.dependentRequired != nil || n.dependentSchemas != nil
	n.arrayKeywords = n.prefixItems != nil || n.items != nil || n.contains != nil || n.unevaluatedItems != nil ||
		n.minItems >= 0 || n.maxItems >= 0 || n.uniqueItems
}

// defs compiles $defs and definitions so their anchors are known and their
// keywords checked, as a metaschema would.
func (c *compiler) defs(n *node, obj map[string]any) {
	for _, k := range [...]string{"$defs", "definitions"} {
		d, has := obj[k]
		if !has {
			continue
		}
		m, ok := d.(map[string]any)
		if !ok {
			unsupported()
		}
		for _, name := range sortedKeys(m) {
			c.child(n, m[name], k, name)
		}
	}
}

// anchor registers a plain-name fragment of the resource at base.
func (c *compiler) anchor(base, name string, n *node, value any, dynamic bool) {
	key := base + "#" + name
	if prev, dup := c.anchors[key]; dup {
		if prev.loc != n.loc {
			unsupported() // one anchor names two schemas
		}
		prev.dynamic = prev.dynamic || dynamic
		return
	}
	c.anchors[key] = &anchorAt{loc: n.loc, value: value, base: base, dynamic: dynamic, res: n.res}
}

func (c *compiler) list(n *node, keyword string, v any) []*node {
	list, ok := v.([]any)
	if !ok {
		unsupported()
	}
	out := make([]*node, len(list))
	for i, s := range list {
		out[i] = c.child(n, s, keyword, itoa(i))
	}
	return out
}

func (c *compiler) schemaMap(n *node, keyword string, v any) map[string]*node {
	m, ok := v.(map[string]any)
	if !ok {
		unsupported()
	}
	out := make(map[string]*node, len(m))
	for name, s := range m {
		out[name] = c.child(n, s, keyword, name)
	}
	return out
}

func (c *compiler) stringLists(v any) map[string][]string {
	m, ok := v.(map[string]any)
	if !ok {
		unsupported()
	}
	out := make(map[string][]string, len(m))
	for name, l := range m {
		list, ok := l.([]any)
		if !ok {
			unsupported()
		}
		names := make([]string, 0, len(list))
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				unsupported()
			}
			names = append(names, s)
		}
		out[name] = names
	}
	return out
}

func (c *compiler) number(obj map[string]any, k string) *big.Rat {
	v, has := obj[k]
	if !has {
		return nil
	}
	return ratOf(v)
}

// ratOf is the exact value of a number literal (NumbersBounded has already
// bounded its size); anything else is unsupported.
func ratOf(v any) *big.Rat {
	num, ok := v.(json.Number)
	if !ok {
		unsupported()
	}
	r, ok := new(big.Rat).SetString(string(num))
	if !ok {
		unsupported()
	}
	return r
}

func (c *compiler) count(obj map[string]any, k string) int {
	v, has := obj[k]
	if !has {
		return -1
	}
	r := ratOf(v)
	if !r.IsInt() || r.Sign() < 0 {
		unsupported()
	}
	if !r.Num().IsInt64() || r.Num().Int64() > math.MaxInt32 {
		return math.MaxInt32 // larger than any instance can be
	}
	return int(r.Num().Int64())
}

func (c *compiler) flag(obj map[string]any, k string) bool {
	v, has := obj[k]
	if !has {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		unsupported()
	}
	return b
}

// regexp compiles a pattern (ECMA-262, rewritten by ecmaToRE2) with Go's
// RE2 engine (linear-time matching); syntax it does not accept makes the
// schema unsupported. Its cost
// is the size of the compiled program: matching costs at most that many
// steps per input byte, which the evaluator charges before it runs.
func (c *compiler) regexp(src string) compiledRegexp {
	if re, ok := c.regexps[src]; ok {
		return re
	}
	c.spend(len(src) * costPatternCompile)
	re2, ok := ecmaToRE2(src)
	if !ok {
		unsupported()
	}
	parsed, err := syntax.Parse(re2, syntax.Perl)
	if err != nil {
		unsupported()
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		unsupported()
	}
	// A short pattern can expand to a large program ("[a-z]{1000}"):
	// compiling the real matcher costs per instruction.
	c.spend(len(prog.Inst) * costInstCompile)
	re, err := regexp.Compile(re2)
	if err != nil {
		unsupported()
	}
	out := compiledRegexp{re: re, cost: max(1, len(prog.Inst))}
	c.regexps[src] = out
	return out
}

// link resolves one pending reference.
func (c *compiler) link(p pendingRef) {
	switch p.kind {
	case plainRef:
		p.n.ref = c.resolveRef(p.ref, p.base)
	case recursiveRefKind:
		// "#" names the current resource's root; redirected only when that
		// root carries "$recursiveAnchor": true.
		target := c.resolveRef(p.ref, p.base)
		p.n.dynamic = &dynamicRef{initial: target, recursive: target.res.recursive && target.res.root == target}
	case dynamicRefKind:
		target := c.resolveRef(p.ref, p.base)
		d := &dynamicRef{initial: target}
		// The bookend: redirected only when the fragment is a plain name
		// that the initial target declares as its $dynamicAnchor.
		uri, frag := resolveURI(p.base, p.ref)
		if a, ok := c.anchors[uri+"#"+frag]; ok && !schemaref.IsPointer(frag) && a.dynamic {
			d.anchor = frag
		}
		p.n.dynamic = d
	}
}

// resolveRef follows a reference inside this document: its URI, resolved
// against base, names one of the document's resources, and its fragment a
// JSON pointer inside that resource or an anchor of it. Anything else would
// be loaded from somewhere, which never happens.
func (c *compiler) resolveRef(ref, base string) *node {
	uri, frag := resolveURI(base, ref)
	res, ok := c.resources[uri]
	if !ok {
		panic(passThrough{ReasonRemoteRef})
	}
	if frag == "" {
		return c.at(res.loc, res.value, res.uri, nil)
	}
	if !schemaref.IsPointer(frag) {
		a, ok := c.anchors[uri+"#"+frag]
		if !ok {
			unsupported()
		}
		return c.at(a.loc, a.value, a.base, a.res)
	}
	cur, loc := res.value, res.loc
	for _, tok := range schemaref.Tokens(frag) {
		c.spend(costKey)
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				unsupported()
			}
			cur = next
		case []any:
			i, ok := schemaref.Index(tok)
			if !ok || i >= len(v) {
				unsupported()
			}
			cur = v[i]
		default:
			unsupported()
		}
		loc += "/" + schemaref.Escape(tok)
	}
	return c.at(loc, cur, res.uri, res)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func itoa(i int) string { return strconv.Itoa(i) }
