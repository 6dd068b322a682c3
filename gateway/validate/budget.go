package validate

import (
	"net/url"
	"strings"
)

// MaxEvaluations bounds how many (subschema, value) evaluations one check
// may cost. The validator does not share work between paths, so a 1.5 KB
// schema whose $defs chain anyOf: [{$ref: next}, {$ref: next}] twenty levels
// deep costs 2^20 evaluations of one value (seconds of CPU, doubling with
// every further level); a schema
// that needs more than this for the given arguments is unsupported and
// passes through, like any other schema connecta cannot evaluate.
const MaxEvaluations = 100_000

// maxWalkDepth bounds the walk's recursion (a $ref cycle recurses until the
// budget is spent; the stack need not grow that far).
const maxWalkDepth = 4096

// withinBudget walks the schema document over the instance the way an
// evaluator would, counting every applicable subschema (an upper bound: it
// never short-circuits anyOf or applies only matching patterns), and
// reports whether the count stays within MaxEvaluations. A reference it
// cannot follow inside this document, or an embedded $id (which rebases
// the fragments below it), makes the schema unsupported.
func withinBudget(doc, inst any) bool {
	w := &budgetWalk{root: doc, left: MaxEvaluations}
	if obj, ok := doc.(map[string]any); ok {
		// Before draft-06 the rebasing keyword was "id".
		draft, _ := obj["$schema"].(string)
		w.legacyID = strings.Contains(draft, "draft-04") || strings.Contains(draft, "draft-03")
	}
	return w.visit(doc, inst, true)
}

type budgetWalk struct {
	root     any
	left     int
	depth    int
	legacyID bool
}

func (w *budgetWalk) visit(s, v any, isRoot bool) bool {
	w.left--
	if w.left < 0 || w.depth >= maxWalkDepth {
		return false
	}
	w.depth++
	defer func() { w.depth-- }()
	obj, ok := s.(map[string]any)
	if !ok {
		return true // a boolean schema, or a malformed one the compiler refused
	}
	if _, has := obj["$id"]; has && !isRoot {
		return false
	}
	if _, has := obj["id"].(string); has && w.legacyID && !isRoot {
		return false
	}
	for _, k := range [...]string{"$ref", "$dynamicRef", "$recursiveRef"} {
		if ref, has := obj[k]; has {
			target, ok := w.resolve(ref)
			if !ok || !w.visit(target, v, false) {
				return false
			}
		}
	}
	// Applicators to the value itself, then to its members or items.
	for _, k := range [...]string{"allOf", "anyOf", "oneOf"} {
		if list, ok := obj[k].([]any); ok {
			for _, sub := range list {
				if !w.visit(sub, v, false) {
					return false
				}
			}
		}
	}
	for _, k := range [...]string{"not", "if", "then", "else"} {
		if sub, has := obj[k]; has && !w.visit(sub, v, false) {
			return false
		}
	}
	switch val := v.(type) {
	case map[string]any:
		for _, k := range [...]string{"dependentSchemas", "dependencies"} {
			if m, ok := obj[k].(map[string]any); ok {
				for _, sub := range m {
					if !w.visit(sub, v, false) {
						return false
					}
				}
			}
		}
		props, _ := obj["properties"].(map[string]any)
		patterns, _ := obj["patternProperties"].(map[string]any)
		for name, child := range val {
			if sub, has := props[name]; has && !w.visit(sub, child, false) {
				return false
			}
			for _, sub := range patterns {
				if !w.visit(sub, child, false) {
					return false
				}
			}
			for _, k := range [...]string{"additionalProperties", "unevaluatedProperties"} {
				if sub, has := obj[k]; has && !w.visit(sub, child, false) {
					return false
				}
			}
			if sub, has := obj["propertyNames"]; has && !w.visit(sub, name, false) {
				return false
			}
		}
	case []any:
		prefix, _ := obj["prefixItems"].([]any)
		if list, ok := obj["items"].([]any); ok { // draft-07 tuple form
			prefix = list
		}
		for i, child := range val {
			if i < len(prefix) && !w.visit(prefix[i], child, false) {
				return false
			}
			for _, k := range [...]string{"items", "additionalItems", "unevaluatedItems", "contains"} {
				sub, has := obj[k]
				if _, tuple := sub.([]any); has && !tuple && !w.visit(sub, child, false) {
					return false
				}
			}
		}
	}
	return true
}

// resolve follows a "#…" JSON-pointer reference inside the document.
func (w *budgetWalk) resolve(ref any) (any, bool) {
	s, ok := ref.(string)
	if !ok || !strings.HasPrefix(s, "#") {
		return nil, false
	}
	if s == "#" {
		return w.root, true
	}
	if !strings.HasPrefix(s, "#/") {
		return nil, false // an anchor
	}
	frag, err := url.PathUnescape(s[1:])
	if err != nil {
		return nil, false
	}
	target := resolve(w.root, schemaURL+"#"+frag)
	return target, target != nil
}
