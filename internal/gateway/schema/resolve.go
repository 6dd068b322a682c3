package schema

import (
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway/schemaref"
)

// References follow internal/gateway/schemaref's rule, as in internal/gateway/validate, so
// that what describe shows is what validation checks: by the full URI — a
// JSON pointer inside the schema resource it names (the document, or an
// embedded $id), or an anchor ($anchor, $dynamicAnchor, a "#name" $id) —
// never by the last path segment (the Node implementation's rule, which
// rendered {"$ref":"#/properties/a"} as the definition named "a"). A
// reference to another document is never loaded: it renders as its name.

// maxIndexVisits bounds the one walk that indexes embedded resources and
// anchors (done only for a reference that needs it).
const maxIndexVisits = 4 * MaxWork

// place is where a schema sits: its base URI and its resource's root.
type place struct {
	base string
	root *value
}

// resolver resolves the references of one document.
type resolver struct {
	doc       *value
	indexed   bool
	resources map[string]*value   // absolute URI → resource root
	anchors   map[string]anchored // by absolute URI#name
}

type anchored struct {
	v  *value
	at place
}

func newResolver(doc *value) *resolver { return &resolver{doc: doc} }

func (r *resolver) top() place {
	return place{base: r.enter(place{base: schemaref.RootBase, root: r.doc}, r.doc).base, root: r.doc}
}

// enter is the place of s found at p: s's own $id starts a resource.
func (r *resolver) enter(p place, s *value) place {
	if s == nil || s.kind != kindObject {
		return p
	}
	if r.oldRef() && s.has("$ref") {
		return p // before 2019-09 a $ref's siblings, $id included, are ignored
	}
	id := s.get(schemaref.IDKeyword(r.draft4()))
	if !id.isString() || schemaref.PlainNameID(id.s()) {
		return p
	}
	uri, _, ok := schemaref.Resolve(p.base, id.s())
	if !ok {
		return p
	}
	return place{base: uri, root: s}
}

func (r *resolver) draft4() bool { return r.declares("draft-04") }

// oldRef: the document declares draft-04, -06 or -07.
func (r *resolver) oldRef() bool {
	return r.declares("draft-04") || r.declares("draft-06") || r.declares("draft-07")
}

func (r *resolver) declares(draft string) bool {
	sch := r.doc.get("$schema")
	return sch.isString() && strings.Contains(sch.s(), "json-schema.org/"+draft+"/")
}

// resolve follows ref found at p: the target, its place, and a key naming
// it (for cycle detection); nil when it leads outside the document.
func (r *resolver) resolve(p place, ref string) (*value, place, string) {
	uri, frag, ok := schemaref.Resolve(p.base, ref)
	if !ok {
		return nil, p, ""
	}
	key := uri + "#" + frag
	root := p.root
	if uri != p.base {
		r.index()
		res, found := r.resources[uri]
		if !found {
			return nil, p, ""
		}
		root = res
	}
	at := place{base: uri, root: root}
	if frag == "" {
		return root, at, key
	}
	if !schemaref.IsPointer(frag) {
		r.index()
		a, found := r.anchors[key]
		if !found {
			return nil, p, ""
		}
		return a.v, a.at, key
	}
	cur := root
	for _, tok := range schemaref.Tokens(frag) {
		switch cur.kind {
		case kindObject:
			cur = cur.get(tok)
		case kindArray:
			i, ok := schemaref.Index(tok)
			if !ok || i >= len(cur.elems()) {
				return nil, p, ""
			}
			cur = cur.elems()[i]
		default:
			return nil, p, ""
		}
		if cur == nil {
			return nil, p, ""
		}
	}
	return cur, at, key
}

// index walks the document once for embedded resources and anchors.
func (r *resolver) index() {
	if r.indexed {
		return
	}
	r.indexed = true
	r.resources, r.anchors = map[string]*value{}, map[string]anchored{}
	visits := 0
	var walk func(v *value, p place)
	walk = func(v *value, p place) {
		if visits++; visits > maxIndexVisits {
			return
		}
		switch v.kind {
		case kindArray:
			for _, it := range v.elems() {
				walk(it, p)
			}
		case kindObject:
			p = r.enter(p, v)
			if p.root == v {
				r.resources[p.base] = v
			}
			for _, k := range [...]string{"$anchor", "$dynamicAnchor"} {
				if a := v.get(k); a.isString() {
					r.anchors[p.base+"#"+a.s()] = anchored{v, p}
				}
			}
			if a := v.get(schemaref.IDKeyword(r.draft4())); a.isString() && schemaref.PlainNameID(a.s()) && len(a.s()) > 1 {
				r.anchors[p.base+a.s()] = anchored{v, p}
			}
			keys, vals := v.members()
			for i, k := range keys {
				switch k {
				case "enum", "const", "default", "examples":
					continue // values, not schemas
				}
				walk(vals[i], p)
			}
		}
	}
	top := r.top()
	r.resources[top.base] = r.doc
	walk(r.doc, top)
}
