package schema

import (
	"net/url"
	"strings"
)

// References are resolved as gateway/validate resolves them, so that what
// describe shows is what validation checks: by the full URI — a JSON
// pointer inside the schema resource it names (the document, or an
// embedded $id), or an anchor ($anchor, $dynamicAnchor, a "#name" $id) —
// never by the last path segment (the Node implementation's rule, which
// renders {"$ref":"#/properties/a"} as the definition named "a"). A
// reference to another document is never loaded: it renders as its name.

// rootBase matches gateway/validate's base for a root without $id.
const rootBase = "https://root.connecta.invalid/schema.json"

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

func (r *resolver) top() place { return place{base: r.baseOf(rootBase, r.doc), root: r.doc} }

// enter is the place of s found at p: s's own $id starts a resource.
func (r *resolver) enter(p place, s *value) place {
	if s == nil || s.kind != kindObject {
		return p
	}
	id := s.get("$id")
	if !id.isString() && r.draft4() {
		id = s.get("id")
	}
	if !id.isString() || strings.HasPrefix(id.s(), "#") {
		return p
	}
	uri, _, ok := resolveURI(p.base, id.s())
	if !ok {
		return p
	}
	return place{base: uri, root: s}
}

func (r *resolver) baseOf(base string, s *value) string {
	return r.enter(place{base: base, root: s}, s).base
}

func (r *resolver) draft4() bool {
	sch := r.doc.get("$schema")
	return sch.isString() && strings.Contains(sch.s(), "draft-04")
}

// resolve follows ref found at p: the target, its place, and a key naming
// it (for cycle detection); nil when it leads outside the document.
func (r *resolver) resolve(p place, ref string) (*value, place, string) {
	uri, frag, ok := resolveURI(p.base, ref)
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
	if !strings.HasPrefix(frag, "/") {
		r.index()
		a, found := r.anchors[key]
		if !found {
			return nil, p, ""
		}
		return a.v, a.at, key
	}
	cur := root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch cur.kind {
		case kindObject:
			cur = cur.get(tok)
		case kindArray:
			i, ok := index(tok)
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
			for _, k := range [...]string{"$id", "id"} {
				if a := v.get(k); a.isString() && strings.HasPrefix(a.s(), "#") && len(a.s()) > 1 {
					r.anchors[p.base+a.s()] = anchored{v, p}
				}
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

// resolveURI resolves ref against base: the URI without fragment and the
// decoded fragment.
func resolveURI(base, ref string) (uri, fragment string, ok bool) {
	b, err := url.Parse(base)
	if err != nil {
		return "", "", false
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", "", false
	}
	u = b.ResolveReference(u)
	fragment = u.Fragment
	u.Fragment, u.RawFragment = "", ""
	return u.String(), fragment, true
}

func index(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range tok {
		if c < '0' || c > '9' || n > 1<<20 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
