package schema

import (
	"math"
	"strconv"
	"strings"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Bounds of the compact renderer (0.24.4, S1/S4). Bytes are UTF-8.
const (
	MaxSearchShapeBytes   = 1_024                   // one rendered search shape
	MaxEnumBytes          = MaxSearchShapeBytes / 4 // one enum node in search mode
	MaxConstraintBytes    = MaxSearchShapeBytes / 4 // one constraint comment in search mode
	MaxDescribeShapeBytes = 8_192                   // one compact describe shape, prose kept
	MaxWork               = 2_000                   // node visits per shape, retries included
	MaxDepth              = 4                       // deeper nodes render "…"
	maxJSONNesting        = 32                      // raw-JSON fallback nesting before the walk gives up

	truncationMarker  = " /* truncated */"
	conditionalMarker = " /* conditional */"
)

// sentinels unwound by the top of a walk; never escape the package.
type (
	workExceeded struct{}
	sizeExceeded struct{}
)

// work is the per-shape budget shared by every pass over one schema.
type work struct {
	remaining int
	byteLimit int
	truncated bool
	refs      map[string]string // resolved $ref text, reused within one pass
}

func newWork(byteLimit int) *work {
	return &work{remaining: MaxWork, byteLimit: byteLimit, refs: map[string]string{}}
}

func (w *work) visit() {
	if w.remaining <= 0 {
		panic(workExceeded{})
	}
	w.remaining--
}

// text refuses any single piece of text over the byte limit, so a hostile
// scalar is never copied into a larger string.
func (w *work) text(s string) string {
	if len(s) > w.byteLimit {
		panic(sizeExceeded{})
	}
	return s
}

// str is text() for a JSON string, refusing an oversized one before
// decoding it.
func (w *work) str(v *value) string {
	if v.strMinBytes() > w.byteLimit {
		panic(sizeExceeded{})
	}
	return w.text(v.s())
}

// json serializes a value as JSON.stringify would, spending one visit per
// node and refusing output over the byte limit or nesting over 32.
func (w *work) json(v *value) string {
	size := 0
	add := func(n int) {
		size += n
		if size > w.byteLimit {
			panic(sizeExceeded{})
		}
	}
	// First pass: budget (visits, nesting, a lower bound on bytes).
	var walk func(v *value, level int, isMember bool, key string)
	walk = func(v *value, level int, isMember bool, key string) {
		w.visit()
		w.text(key)
		if v.kind == kindString {
			w.str(v)
		}
		if isMember {
			add(quotedLen(key))
		}
		switch v.kind {
		case kindString:
			add(quotedLen(v.s()))
		case kindNumber:
			s, _ := jsNumber(v.lit())
			add(len(s))
		case kindBool, kindNull:
			add(4)
		case kindArray, kindObject:
			if level > maxJSONNesting {
				panic(workExceeded{})
			}
			if v.kind == kindArray {
				for i, it := range v.elems() {
					walk(it, level+1, false, strconv.Itoa(i))
				}
			} else {
				keys, vals := v.members()
				for i, k := range keys {
					walk(vals[i], level+1, true, k)
				}
			}
		}
	}
	walk(v, 0, false, "")
	return w.text(string(appendJSValue(nil, v)))
}

// appendJSValue writes v as JSON.stringify(JSON.parse(raw)) would.
func appendJSValue(dst []byte, v *value) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindBool:
		if v.boolean() {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindNumber:
		s, _ := jsNumber(v.lit())
		return append(dst, s...)
	case kindString:
		return jstext.AppendQuote(dst, v.s())
	case kindArray:
		dst = append(dst, '[')
		for i, it := range v.elems() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSValue(dst, it)
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	keys, vals := v.members()
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jstext.AppendQuote(dst, k)
		dst = append(dst, ':')
		dst = appendJSValue(dst, vals[i])
	}
	return append(dst, '}')
}

type renderOptions struct {
	propertyDescriptions bool
	requiredFirst        bool
	enumByteLimit        int
	renderConstraints    bool
	constraintByteLimit  int
}

// renderer walks one schema document.
type renderer struct {
	res  *resolver
	at   place // where the schema being rendered sits
	w    *work
	opt  renderOptions
	seen []string // resolved $ref keys on the current path, in insertion order
}

func (r *renderer) seenHas(name string) bool {
	for _, s := range r.seen {
		if s == name {
			return true
		}
	}
	return false
}

// parts accumulates joined pieces, refusing before it grows past the limit.
type parts struct {
	w              *work
	sep            string
	prefix, suffix string
	items          []string
	bytes          int
}

func newParts(w *work, sep, prefix, suffix string) *parts {
	return &parts{w: w, sep: sep, prefix: prefix, suffix: suffix, bytes: len(prefix) + len(suffix)}
}

func (p *parts) add(s string) {
	added := len(s)
	if len(p.items) > 0 {
		added += len(p.sep)
	}
	if p.bytes+added > p.w.byteLimit {
		panic(sizeExceeded{})
	}
	p.items = append(p.items, s)
	p.bytes += added
}

func (p *parts) finish() string { return p.prefix + strings.Join(p.items, p.sep) + p.suffix }

func (r *renderer) render(s *value, depth int) string {
	r.w.visit()
	return r.w.text(r.node(s, depth))
}

var conditionalKeys = [...]string{"dependentSchemas", "if", "then", "else"}

func isConditionalKey(k string) bool {
	for _, c := range conditionalKeys {
		if k == c {
			return true
		}
	}
	return false
}

// without copies an object minus the named keys, spending a visit per key.
func (r *renderer) without(s *value, drop func(string) bool) *value {
	out := newObject()
	keys, vals := s.members()
	for i, k := range keys {
		r.w.visit()
		r.w.text(k)
		if !drop(k) {
			out.set(k, vals[i])
		}
	}
	return out
}

func (r *renderer) constrain(rendered string, s *value) string {
	if !r.opt.renderConstraints {
		return rendered
	}
	return renderConstraints(rendered, s, r.opt.constraintByteLimit, r.w)
}

func (r *renderer) node(s *value, depth int) string {
	if depth > MaxDepth {
		return "…"
	}
	if s.kind != kindObject {
		return r.w.json(s)
	}
	saved := r.at
	r.at = r.res.enter(r.at, s)
	defer func() { r.at = saved }()

	// Conditions have no single static shape: keep the base, mark it, and
	// send callers to the exact schema.
	if s.has("dependentSchemas") || s.has("if") || s.has("then") || s.has("else") {
		r.w.truncated = true
		base := r.without(s, isConditionalKey)
		rendered := "unknown"
		if declaresShape(base) {
			rendered = r.render(base, depth)
		}
		return rendered + conditionalMarker
	}

	// allOf composes: the schema's own shape (at this depth) and each member.
	if allOf := s.get("allOf"); allOf.isArray() {
		own := r.without(s, func(k string) bool { return k == "allOf" })
		ownShape := declaresShape(own)
		group := allOf.length() > 1
		if ownShape {
			group = allOf.length() > 0
		}
		p := newParts(r.w, " & ", "", "")
		add := func(rendered string) {
			if group {
				rendered = grouped(rendered)
			}
			p.add(rendered)
		}
		if ownShape {
			add(r.render(own, depth))
		}
		for _, m := range allOf.elems() {
			add(r.render(m, depth+1))
		}
		if len(p.items) == 0 {
			return "unknown"
		}
		return p.finish()
	}

	ref := s.get("$ref")
	dynamic := ref == nil
	if ref == nil || ref.kind == kindNull {
		ref = s.get("$dynamicRef")
	}
	if ref.isString() {
		text := r.w.str(ref)
		name := refName(text)
		if dynamic {
			name = strings.TrimPrefix(name, "#")
		}
		target, at, resolved := r.res.resolve(r.at, text)
		if target == nil {
			if dynamic {
				r.w.truncated = true
				return "unknown"
			}
			return name
		}
		if r.seenHas(resolved) {
			return name
		}
		key := resolved + "\x00" + strconv.Itoa(depth) + "\x00" + strings.Join(r.seen, "\x00")
		rendered, ok := r.w.refs[key]
		if !ok {
			r.seen = append(r.seen, resolved)
			outer := r.at
			r.at = at
			rendered = r.render(target, depth)
			r.at = outer
			r.seen = r.seen[:len(r.seen)-1]
			r.w.refs[key] = rendered
		}
		return r.constrain(rendered, s)
	}

	union := s.get("oneOf")
	if union == nil || union.kind == kindNull {
		union = s.get("anyOf")
	}
	if union.isArray() {
		p := newParts(r.w, " | ", "", "")
		for _, m := range union.elems() {
			p.add(r.render(m, depth+1))
		}
		rendered := p.finish()
		if rendered == "" {
			rendered = "unknown"
		}
		return r.constrain(rendered, s)
	}
	if enum := s.get("enum"); enum.isArray() {
		return r.constrain(r.renderEnum(enum.elems(), enum.length()), s)
	}
	if c := s.get("const"); c != nil {
		return r.constrain(r.w.json(c), s)
	}

	typ := s.get("type")
	if prefix := s.get("prefixItems"); prefix.isArray() {
		p := newParts(r.w, ", ", "[", "]")
		for _, it := range prefix.elems() {
			p.add(r.render(it, depth+1))
		}
		items := s.get("items")
		if !(items != nil && items.kind == kindBool && !items.boolean()) {
			rest := "unknown"
			if items != nil && !(items.kind == kindBool && items.boolean()) {
				rest = r.render(items, depth+1)
			}
			p.add("..." + grouped(rest) + "[]")
		}
		return p.finish()
	}
	if (typ.isString() && typ.s() == "array") || s.get("items").truthy() {
		items := "unknown"
		if it := s.get("items"); it.truthy() {
			items = r.render(it, depth+1)
		}
		return items + "[]"
	}
	if (typ.isString() && typ.s() == "object") || s.get("properties").truthy() {
		props := s.get("properties")
		if !props.isObject() {
			props = newObject()
		}
		requiredSet := map[string]bool{}
		for _, q := range schemaRequired(s, r.w) {
			requiredSet[q] = true
		}
		isRequired := func(k string) bool { return requiredSet[k] }
		declared := propertyNames(props, r.w)
		keys := declared
		if r.opt.requiredFirst {
			keys = make([]string, 0, len(declared))
			for _, k := range declared {
				if isRequired(k) {
					keys = append(keys, k)
				}
			}
			for _, k := range declared {
				if !isRequired(k) {
					keys = append(keys, k)
				}
			}
		}
		if len(keys) == 0 {
			return "{}"
		}
		p := newParts(r.w, ", ", "{ ", " }")
		for _, k := range keys {
			optional := "?"
			if isRequired(k) {
				optional = ""
			}
			prop := props.get(k)
			rendered := r.render(prop, depth+1)
			comment := ""
			if r.opt.propertyDescriptions {
				if d := prop.get("description"); d.isString() {
					comment = " // " + r.w.str(d)
				}
			}
			r.w.text(k)
			p.add(k + optional + ": " + rendered + comment)
		}
		return p.finish()
	}
	if typ.isString() {
		return r.constrain(r.w.str(typ), s)
	}
	if typ.isArray() {
		p := newParts(r.w, " | ", "", "")
		for _, it := range typ.elems() {
			r.w.visit()
			p.add(r.w.text(jsString(it)))
		}
		return r.constrain(p.finish(), s)
	}
	if r.opt.renderConstraints && len(constraintEntries(s)) > 0 {
		return renderConstraints("unknown", s, r.opt.constraintByteLimit, r.w)
	}
	return r.w.json(s)
}

func enumMarker(omitted int) string {
	noun := "values"
	if omitted == 1 {
		noun = "value"
	}
	return "unknown /* " + strconv.Itoa(omitted) + " enum " + noun + " omitted */"
}

// renderEnum keeps whole values within the enum byte limit, then an exact
// count of the rest: `("a" | "b" | unknown /* 3 enum values omitted */)`.
func (r *renderer) renderEnum(values []*value, count int) string {
	if count == 0 {
		return "never"
	}
	limit := r.opt.enumByteLimit
	rendered := "(" + enumMarker(count) + ")"
	var full strings.Builder
	kept := 0
	for i, v := range values {
		text, ok := r.enumValue(v)
		if !ok {
			break
		}
		if kept > 0 {
			full.WriteString(" | ")
		}
		full.WriteString(text)
		kept++
		if full.Len() > limit {
			break
		}
		if i == count-1 {
			return full.String()
		}
		marker := enumMarker(count - kept)
		if 1+full.Len()+3+len(marker)+1 <= limit {
			rendered = "(" + full.String() + " | " + marker + ")"
		}
	}
	r.w.truncated = true
	return rendered
}

// enumValue serializes one enum value; a value over the byte limit ends the
// kept prefix rather than the walk (work exhaustion still unwinds).
func (r *renderer) enumValue(v *value) (text string, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			if _, size := p.(sizeExceeded); !size {
				panic(p)
			}
			text, ok = "", false
		}
	}()
	return r.w.json(v), true
}

func refName(ref string) string {
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// declaresShape says whether a schema has anything the renderer draws on its
// own (so `{allOf:[…]}` does not render an empty own half as `{} & …`).
func declaresShape(s *value) bool {
	if s.get("$ref").isString() || s.get("$dynamicRef").isString() {
		return true
	}
	for _, k := range [...]string{"allOf", "prefixItems", "oneOf", "anyOf", "enum"} {
		if s.get(k).isArray() {
			return true
		}
	}
	for _, k := range [...]string{"dependentSchemas", "if", "then", "else", "const", "items", "properties", "type"} {
		if s.has(k) {
			return true
		}
	}
	return len(constraintEntries(s)) > 0
}

// grouped parenthesizes a top-level union so it does not read as part of a
// surrounding `&` or suffix.
func grouped(part string) string {
	nesting := 0
	for i := 0; i < len(part); i++ {
		switch part[i] {
		case '{', '(', '[':
			nesting++
		case '}', ')', ']':
			nesting--
		case ' ':
			if nesting == 0 && strings.HasPrefix(part[i:], " | ") {
				return "(" + part + ")"
			}
		}
	}
	return part
}

// safeConstraintValue quotes a format/pattern and escapes "*/" so the
// comment cannot close early; an absurd value becomes an oversized
// placeholder that the byte check drops whole.
func safeConstraintValue(v *value) string {
	if v.strMinBytes() > MaxDescribeShapeBytes {
		return strings.Repeat("x", MaxDescribeShapeBytes+1)
	}
	s := v.s()
	if jstext.Len(s) > MaxDescribeShapeBytes {
		return strings.Repeat("x", MaxDescribeShapeBytes+1)
	}
	return strings.ReplaceAll(jsQuote(s), "*/", `*\/`)
}

func constraintEntries(s *value) []string {
	var entries []string
	number := func(keyword, label string, nonNegativeInteger bool) {
		v := s.get(keyword)
		if v == nil || v.kind != kindNumber {
			return
		}
		text, finite := jsNumber(v.lit())
		if !finite {
			return
		}
		if nonNegativeInteger {
			f, _ := strconv.ParseFloat(v.lit(), 64)
			if f != math.Trunc(f) || f < 0 {
				return
			}
		}
		entries = append(entries, label+" "+text)
	}
	number("minimum", ">=", false)
	number("exclusiveMinimum", ">", false)
	number("maximum", "<=", false)
	number("exclusiveMaximum", "<", false)
	number("multipleOf", "multiple of", false)
	number("minLength", "length >=", true)
	number("maxLength", "length <=", true)
	if f := s.get("format"); f.isString() {
		entries = append(entries, "format "+safeConstraintValue(f))
	}
	if p := s.get("pattern"); p.isString() {
		entries = append(entries, "pattern "+safeConstraintValue(p))
	}
	return entries
}

// renderConstraints appends `/* >= 1; length <= 5 */`, skipping any entry
// that would push the comment past the limit (and marking the shape).
func renderConstraints(base string, s *value, limit int, w *work) string {
	entries := constraintEntries(s)
	if len(entries) == 0 {
		return base
	}
	var kept []string
	size := len(" /*  */")
	for _, e := range entries {
		add := len(e)
		if len(kept) > 0 {
			add += len("; ")
		}
		if size+add > limit {
			w.truncated = true
			continue
		}
		kept = append(kept, e)
		size += add
	}
	if len(kept) == 0 {
		return base
	}
	return grouped(base) + " /* " + strings.Join(kept, "; ") + " */"
}

func propertyNames(props *value, w *work) []string {
	keys, _ := props.members()
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		w.visit()
		names = append(names, w.text(k))
	}
	return names
}

func schemaRequired(s *value, w *work) []string {
	req := s.get("required")
	if !req.isArray() {
		return nil
	}
	var names []string
	for _, it := range req.elems() {
		w.visit()
		if it.isString() {
			names = append(names, w.str(it))
		}
	}
	return names
}

// quotedLen is len(JSON.stringify(s)).
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}
