// Package secheader is the one writer of the security headers connecta's
// HTTP answers carry. Each kind of answer has its values pinned here (the
// table in kinds), every header named for every kind, so a handler that
// sets its own kind over the server's default replaces the whole set and
// keeps nothing of the other kind by accident.
//
// It imports nothing of ours.
package secheader

import "net/http"

// Kind is a kind of answer.
type Kind int

const (
	// API is every answer that is not a page (/mcp, /metrics, /health, the
	// resource metadata): nothing loads, nothing frames it, no referrer.
	API Kind = iota
	// Console is an operator console page: same-origin styles, images and
	// form posts, no script. Referrer-Policy is same-origin, not
	// no-referrer: under no-referrer a browser sends "Origin: null" on the
	// console's own form posts, and the console's origin check needs the
	// real one; other origins still get no Referer.
	Console
	// Callback is the one-off page an OAuth redirect lands on: only the
	// same-origin stylesheet loads, no form posts, and no referrer (its URL
	// held an authorization code).
	Callback
)

// ConsoleCSP is the Content-Security-Policy of every console page.
const ConsoleCSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"

// names are the headers Set writes, in order.
var names = []string{
	"Content-Security-Policy", "Referrer-Policy", "X-Frame-Options", "X-Content-Type-Options",
	"Cache-Control", "Cross-Origin-Resource-Policy", "Cross-Origin-Opener-Policy",
}

// kinds pins each kind's value of each header in names ("" = absent).
var kinds = map[Kind][]string{
	API: {"default-src 'none'; frame-ancestors 'none'", "no-referrer", "DENY", "nosniff",
		"no-store", "same-origin", ""},
	Console: {ConsoleCSP, "same-origin", "DENY", "nosniff",
		"no-store", "same-origin", "same-origin"},
	Callback: {"default-src 'none'; style-src 'self'; frame-ancestors 'none'; form-action 'none'", "no-referrer", "DENY", "nosniff",
		"no-store", "same-origin", "same-origin"},
}

// Set writes kind k's security headers on h, replacing any other kind's.
// A handler may still loosen Cache-Control afterwards for an answer that is
// public (a stylesheet, the client metadata document).
func Set(h http.Header, k Kind) {
	for i, v := range kinds[k] {
		if v == "" {
			h.Del(names[i])
		} else {
			h.Set(names[i], v)
		}
	}
}

// Handler sets kind k's headers on every answer of next.
func Handler(k Kind, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Set(w.Header(), k)
		next.ServeHTTP(w, r)
	})
}
