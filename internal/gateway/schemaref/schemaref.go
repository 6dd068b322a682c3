// Package schemaref is the one rule for JSON Schema references, shared by
// describe's rendering (internal/gateway/schema) and validation (internal/gateway/validate),
// so that what describe shows is what validation checks: a $ref is resolved
// by its full URI against the base URI of the schema resource it sits in —
// the document, or an embedded $id — and its fragment is a JSON pointer
// inside the resource it names, or an anchor of it. Never by the last path
// segment. Nothing is ever loaded: a URI that names no resource of the
// document is another document. The package imports nothing of ours.
package schemaref

import (
	"net/url"
	"strconv"
	"strings"
)

// RootBase is the base URI of a document whose root has no $id: a
// relative reference against it names a document that is never loaded.
const RootBase = "https://root.connecta.invalid/schema.json"

// Resolve resolves ref against base (RFC 3986): the absolute URI without
// its fragment, and the decoded fragment. ok is false for a reference that
// is not a URI reference.
func Resolve(base, ref string) (uri, fragment string, ok bool) {
	b, err := url.Parse(base)
	if err != nil {
		return "", "", false
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", "", false
	}
	u := b.ResolveReference(r)
	fragment = u.Fragment
	u.Fragment, u.RawFragment = "", ""
	return u.String(), fragment, true
}

// IsPointer reports whether a fragment is a JSON pointer ("" or "/…"); any
// other fragment is an anchor name.
func IsPointer(fragment string) bool { return fragment == "" || fragment[0] == '/' }

// Tokens are a JSON pointer's reference tokens, unescaped (~1 is /, ~0 is
// ~); none for "".
func Tokens(pointer string) []string {
	if pointer == "" {
		return nil
	}
	toks := strings.Split(pointer[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// Escape is one reference token escaped for a JSON pointer.
func Escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// Index is a pointer token as an array index: digits without a leading
// zero.
func Index(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.IndexFunc(tok, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	i, err := strconv.Atoi(tok)
	return i, err == nil
}

// IDKeyword is the keyword that gives a schema its own base URI: "id" in
// draft-04, "$id" since draft-06.
func IDKeyword(draft4 bool) string {
	if draft4 {
		return "id"
	}
	return "$id"
}

// PlainNameID reports whether an $id is the draft-04..07 spelling of an
// anchor ("#name"), which names the schema without starting a resource.
func PlainNameID(id string) bool { return strings.HasPrefix(id, "#") }
