// Package schema renders JSON Schemas as compact TypeScript-like shapes for
// discovery (S1, S4) and derives the key lists of S2 from the same walk.
//
// Every walk is bounded: 2,000 node visits per shape (retries included), a
// byte cap per shape (1,024 search, 8,192 describe), 256 bytes per enum node
// and constraint comment in search mode, depth 4, and the raw-JSON fallback
// gives up past 32 levels. A hostile schema (deep nesting, huge enums, $ref
// cycles, megabyte descriptions) costs at most one linear parse plus that
// budget. Of ours it imports only internal/gateway/schemaref, the reference rule it
// shares with internal/gateway/validate, and jstext (clipping).
package schema

// Shape is one rendered schema.
type Shape struct {
	Text string
	// Truncated is set whenever any cap applied (enum, constraint, shape,
	// work budget), and for conditional schemas and unresolved $dynamicRef:
	// the exact schema says more than Text.
	Truncated bool
}

// Keys are the top-level names of an object-shaped schema (S2).
type Keys struct {
	Properties []string // declared property names, in declared order
	Required   []string // required names that are declared properties
}

// Doc is one parsed schema. The zero value is not usable; use Parse.
type Doc struct {
	root *value
}

// Parse decodes raw schema bytes once for any number of renders. It never
// fails: bytes that are not JSON give a Doc whose shapes are
// `unknown /* truncated */` and which has no key lists.
func Parse(raw []byte) *Doc {
	root, err := parse(raw)
	if err != nil {
		return &Doc{}
	}
	return &Doc{root: root}
}

// Valid reports whether the bytes decoded as JSON.
func (d *Doc) Valid() bool { return d.root != nil }

// Search renders the compact search shape: no property prose, required
// properties first, at most MaxSearchShapeBytes.
func (d *Doc) Search() Shape { return d.bounded(false) }

// Describe renders the compact describe shape: property prose as
// `// description` comments, declared order, at most MaxDescribeShapeBytes.
func (d *Doc) Describe() Shape { return d.bounded(true) }

// Keys returns the S2 key lists from the renderer's walk (allOf composes
// only when every part is an object, $ref/$dynamicRef resolve locally). ok
// is false for a schema that is not an object shape (a union, an array, an
// enum, an unresolvable reference, or a walk over budget): absent lists mean
// "read the schema", where empty ones would claim the tool takes no fields.
func (d *Doc) Keys() (keys Keys, ok bool) {
	if d.root == nil {
		return Keys{}, false
	}
	w := newWork(MaxSearchShapeBytes)
	defer func() {
		if p := recover(); p != nil {
			if !isBudgetPanic(p) {
				panic(p)
			}
			keys, ok = Keys{}, false
		}
	}()
	rs := newResolver(d.root)
	k := objectKeys(d.root, rs, rs.top(), nil, 0, w)
	if k == nil {
		return Keys{}, false
	}
	return *k, true
}

// RenderSearch parses raw and renders its search shape.
func RenderSearch(raw []byte) Shape { return Parse(raw).Search() }

// RenderDescribe parses raw and renders its describe shape.
func RenderDescribe(raw []byte) Shape { return Parse(raw).Describe() }

// ObjectKeys parses raw and returns its key lists.
func ObjectKeys(raw []byte) (Keys, bool) { return Parse(raw).Keys() }

func isBudgetPanic(p any) bool {
	switch p.(type) {
	case workExceeded, sizeExceeded:
		return true
	}
	return false
}

func (d *Doc) bounded(describe bool) Shape {
	if d.root == nil {
		return Shape{Text: "unknown" + truncationMarker, Truncated: true}
	}
	limit := MaxSearchShapeBytes
	opt := renderOptions{
		requiredFirst:       true,
		enumByteLimit:       MaxEnumBytes,
		renderConstraints:   true,
		constraintByteLimit: MaxConstraintBytes,
	}
	if describe {
		limit = MaxDescribeShapeBytes
		opt = renderOptions{
			propertyDescriptions: true,
			enumByteLimit:        limit,
			renderConstraints:    true,
			constraintByteLimit:  limit,
		}
	}
	w := newWork(limit)
	text, err := d.pass(w, opt)
	if err == nil {
		return Shape{Text: text, Truncated: w.truncated}
	}
	if _, size := err.(sizeExceeded); size && !describe {
		// A constraint-free retry shares the budget; ref text is per pass
		// because it includes constraints.
		w.refs = map[string]string{}
		opt.renderConstraints = false
		if text, err := d.pass(w, opt); err == nil {
			return Shape{Text: text, Truncated: true}
		}
	}
	return Shape{Text: keyOnlyShape(d.root, w), Truncated: true}
}

// pass runs one walk, turning the budget sentinels into an error value.
func (d *Doc) pass(w *work, opt renderOptions) (text string, err any) {
	defer func() {
		if p := recover(); p != nil {
			if !isBudgetPanic(p) {
				panic(p)
			}
			text, err = "", p
		}
	}()
	rs := newResolver(d.root)
	r := &renderer{res: rs, at: rs.top(), w: w, opt: opt}
	return r.render(d.root, 0), nil
}

// keyOnlyShape is the structurally valid stand-in for a shape too large to
// carry: quoted keys typed unknown, required first, added while they fit
// MaxSearchShapeBytes; `unknown /* truncated */` when nothing fits, the
// schema is not an object, or the work budget is spent.
func keyOnlyShape(root *value, w *work) (shape string) {
	const fallback = "unknown" + truncationMarker
	defer func() {
		if p := recover(); p != nil {
			if !isBudgetPanic(p) {
				panic(p)
			}
			shape = fallback
		}
	}()
	rs := newResolver(root)
	keys := objectKeys(root, rs, rs.top(), nil, 0, w)
	if keys == nil {
		return fallback
	}
	required := make(map[string]bool, len(keys.Required))
	for _, k := range keys.Required {
		required[k] = true
	}
	ordered := make([]string, 0, len(keys.Properties))
	for _, k := range keys.Properties {
		if required[k] {
			ordered = append(ordered, k)
		}
	}
	for _, k := range keys.Properties {
		if !required[k] {
			ordered = append(ordered, k)
		}
	}
	var parts []string
	size := len("{  }" + truncationMarker)
	for _, k := range ordered {
		part := jsQuote(k)
		if !required[k] {
			part += "?"
		}
		part += ": unknown"
		add := len(part)
		if len(parts) > 0 {
			add += len(", ")
		}
		if size+add > MaxSearchShapeBytes {
			break
		}
		parts = append(parts, part)
		size += add
	}
	if len(parts) == 0 && len(ordered) > 0 {
		return fallback
	}
	return "{ " + joinComma(parts) + " }" + truncationMarker
}

func joinComma(parts []string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 2
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, p...)
	}
	return string(b)
}

// objectKeys is the key-collecting twin of the renderer; its branch order
// must match node's. nil means "not an object shape".
func objectKeys(s *value, rs *resolver, at place, seen []string, depth int, w *work) *Keys {
	w.visit()
	if depth > MaxDepth || s.kind != kindObject {
		return nil
	}
	at = rs.enter(at, s)
	if allOf := s.get("allOf"); allOf.isArray() {
		own := newObject()
		keys, vals := s.members()
		for i, k := range keys {
			w.visit()
			w.text(k)
			if k != "allOf" {
				own.set(k, vals[i])
			}
		}
		var parts []*Keys
		if declaresShape(own) {
			p := objectKeys(own, rs, at, seen, depth, w)
			if p == nil {
				return nil
			}
			parts = append(parts, p)
		}
		for _, m := range allOf.elems() {
			p := objectKeys(m, rs, at, seen, depth+1, w)
			if p == nil {
				return nil
			}
			parts = append(parts, p)
		}
		if len(parts) == 0 {
			return nil
		}
		return mergeKeys(parts)
	}

	ref := s.get("$ref")
	if ref == nil || ref.kind == kindNull {
		ref = s.get("$dynamicRef")
	}
	if ref.isString() {
		target, to, key := rs.resolve(at, w.str(ref))
		if target == nil {
			return nil
		}
		for _, n := range seen {
			if n == key {
				return nil
			}
		}
		return objectKeys(target, rs, to, append(seen[:len(seen):len(seen)], key), depth, w)
	}

	union := s.get("oneOf")
	if union == nil || union.kind == kindNull {
		union = s.get("anyOf")
	}
	if union.isArray() || s.get("enum").isArray() || s.has("const") {
		return nil
	}
	typ := s.get("type")
	if (typ.isString() && typ.s() == "array") || s.get("items").truthy() || s.get("prefixItems").isArray() {
		return nil
	}
	if (typ.isString() && typ.s() == "object") || s.get("properties").truthy() {
		props := s.get("properties")
		if !props.isObject() {
			return &Keys{Properties: []string{}, Required: []string{}}
		}
		properties := propertyNames(props, w)
		declared := make(map[string]bool, len(properties))
		for _, p := range properties {
			declared[p] = true
		}
		required := []string{}
		for _, q := range schemaRequired(s, w) {
			if declared[q] {
				required = append(required, q)
			}
		}
		return &Keys{Properties: properties, Required: required}
	}
	return nil
}

// mergeKeys unions parts in declaration order, first occurrence winning.
func mergeKeys(parts []*Keys) *Keys {
	out := &Keys{Properties: []string{}, Required: []string{}}
	seenP, seenR := map[string]bool{}, map[string]bool{}
	for _, p := range parts {
		for _, k := range p.Properties {
			if !seenP[k] {
				seenP[k] = true
				out.Properties = append(out.Properties, k)
			}
		}
		for _, k := range p.Required {
			if !seenR[k] {
				seenR[k] = true
				out.Required = append(out.Required, k)
			}
		}
	}
	return out
}
