package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The compiler turns a decoded schema document into a tree of nodes, once
// per distinct schema, so a check never interprets keywords again. Anything
// it does not understand exactly — an unknown $schema, a reference it cannot
// follow inside this document, an embedded $id, dynamic references, an
// ill-typed keyword, a pattern Go's regexp cannot compile — makes the schema
// unsupported: it passes through and the downstream judges the arguments.

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
	loc string // JSON pointer of this schema inside the document, "" for the root

	isBool, boolean bool

	ref     *node
	refOnly bool // before 2019-09 a $ref's siblings are ignored

	types       []string // as declared
	sortedTypes string   // "null | string", for findings

	hasEnum  bool
	enum     []any
	hasConst bool
	constant any

	minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf *big.Rat

	minLength, maxLength         int
	pattern                      *regexp.Regexp
	patternSrc                   string
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
	dependencyCode    string // "dependentRequired", or "dependencies" before 2019-09
	dependentSchemas  map[string]*node

	prefixItems      []*node
	items            *node // applies after prefixItems
	itemsAreAddition bool  // items is draft-07's additionalItems
	contains         *node
	unevaluatedItems *node

	allOf, anyOf, oneOf    []*node
	not, ifS, thenS, elseS *node
}

type patternNode struct {
	re *regexp.Regexp
	n  *node
}

var errUnsupported = errors.New("unsupported schema")

type compiler struct {
	root    any
	draft   draft
	rootID  string // the root's $id without fragment, "" when none
	byLoc   map[string]*node
	anchors map[string]string // $anchor name → location
	pending []pendingRef
	regexps map[string]*regexp.Regexp
}

type pendingRef struct {
	n   *node
	ref string
}

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

// compileSchema compiles a decoded schema document; nil means unsupported.
func compileSchema(doc any) (root *node) {
	c := &compiler{root: doc, draft: draft2020, byLoc: map[string]*node{},
		anchors: map[string]string{}, regexps: map[string]*regexp.Regexp{}}
	if obj, ok := doc.(map[string]any); ok {
		if s, has := obj["$schema"]; has {
			str, ok := s.(string)
			if !ok {
				return nil
			}
			d, ok := draftOf(str)
			if !ok {
				return nil
			}
			c.draft = d
		}
	}
	defer func() {
		if r := recover(); r != nil {
			if r != errUnsupported { //nolint:errorlint // sentinel identity
				panic(r)
			}
			root = nil
		}
	}()
	root = c.at("", doc)
	// References are resolved after the whole tree is compiled so that
	// anchors anywhere in it are known; a target outside the compiled tree
	// (say "#/$defs/x/properties/y") compiles on demand and may add more.
	for len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		p.n.ref = c.resolveRef(p.ref)
	}
	return root
}

func unsupported() { panic(errUnsupported) }

// at compiles the schema s found at loc, once per location.
func (c *compiler) at(loc string, s any) *node {
	if n, ok := c.byLoc[loc]; ok {
		return n
	}
	n := &node{loc: loc, minLength: -1, maxLength: -1, minItems: -1, maxItems: -1,
		minContains: -1, maxContains: -1, minProperties: -1, maxProperties: -1}
	c.byLoc[loc] = n
	switch v := s.(type) {
	case bool:
		n.isBool, n.boolean = true, v
		return n
	case map[string]any:
		c.object(n, v)
		return n
	}
	unsupported()
	return nil
}

func (c *compiler) child(n *node, s any, tokens ...string) *node {
	loc := n.loc
	for _, t := range tokens {
		loc += "/" + escape(t)
	}
	return c.at(loc, s)
}

func (c *compiler) object(n *node, obj map[string]any) {
	idKey := "$id"
	if c.draft == draft4 {
		idKey = "id"
	}
	if id, has := obj[idKey]; has {
		s, ok := id.(string)
		switch {
		case !ok:
			unsupported()
		case n.loc == "":
			c.rootID, _, _ = strings.Cut(s, "#")
		case c.draft <= draft7 && strings.HasPrefix(s, "#") && len(s) > 1:
			c.anchor(s[1:], n.loc) // the old spelling of an anchor
		default:
			unsupported() // an embedded resource rebases every reference below it
		}
	}
	if c.draft >= draft2019 {
		for _, k := range [...]string{"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"} {
			if _, has := obj[k]; has {
				unsupported()
			}
		}
		if a, has := obj["$anchor"]; has {
			s, ok := a.(string)
			if !ok || s == "" {
				unsupported()
			}
			c.anchor(s, n.loc)
		}
	}
	if ref, has := obj["$ref"]; has {
		s, ok := ref.(string)
		if !ok {
			unsupported()
		}
		c.pending = append(c.pending, pendingRef{n, s})
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
		n.hasEnum, n.enum = true, list
	}
	if v, has := obj["const"]; has && c.draft >= draft6 {
		n.hasConst, n.constant = true, v
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
		n.pattern, n.patternSrc = c.regexp(s), s
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
		}
		if s, has := obj["unevaluatedProperties"]; has {
			n.unevaluatedProps = c.child(n, s, "unevaluatedProperties")
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
			n.patternProperties = append(n.patternProperties,
				patternNode{re: c.regexp(src), n: c.child(n, m[src], "patternProperties", src)})
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
	} else if d, has := obj["dependencies"]; has {
		m, ok := d.(map[string]any)
		if !ok {
			unsupported()
		}
		n.dependencyCode = "dependencies"
		for name, v := range m {
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
		if s, has := obj["if"]; has {
			n.ifS = c.child(n, s, "if")
			if t, has := obj["then"]; has {
				n.thenS = c.child(n, t, "then")
			}
			if e, has := obj["else"]; has {
				n.elseS = c.child(n, e, "else")
			}
		}
	}
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

func (c *compiler) anchor(name, loc string) {
	if prev, dup := c.anchors[name]; dup && prev != loc {
		unsupported()
	}
	c.anchors[name] = loc
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

// regexp compiles a pattern with Go's RE2 engine (linear-time matching);
// ECMA-262 syntax it does not accept makes the schema unsupported.
func (c *compiler) regexp(src string) *regexp.Regexp {
	if re, ok := c.regexps[src]; ok {
		return re
	}
	re, err := regexp.Compile(src)
	if err != nil {
		unsupported()
	}
	c.regexps[src] = re
	return re
}

// resolveRef follows a reference inside this document: "#", "#/pointer",
// "#anchor", or the same prefixed with the root's own $id. Anything else
// would be loaded from somewhere, which never happens.
func (c *compiler) resolveRef(ref string) *node {
	base, frag, hasFrag := strings.Cut(ref, "#")
	if base != "" && (c.rootID == "" || base != c.rootID) {
		unsupported()
	}
	if !hasFrag || frag == "" {
		return c.at("", c.root)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		unsupported()
	}
	if !strings.HasPrefix(frag, "/") {
		loc, ok := c.anchors[frag]
		if !ok {
			unsupported()
		}
		return c.byLoc[loc]
	}
	cur, loc := c.root, ""
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				unsupported()
			}
			cur = next
		case []any:
			i, err := atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				unsupported()
			}
			cur = v[i]
		default:
			unsupported()
		}
		loc += "/" + escape(tok)
	}
	return c.at(loc, cur)
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

func atoi(s string) (int, error) {
	if s != "0" && strings.HasPrefix(s, "0") {
		return 0, strconv.ErrSyntax // JSON pointer array indexes have no leading zeros
	}
	return strconv.Atoi(s)
}
