package secheader

import (
	"net/http"
	"strings"
	"testing"
)

// The pinned values of each kind, all of them: a change here is a change of
// policy, made on purpose.
func TestSet_PinnedValuesPerKind(t *testing.T) {
	want := map[Kind]string{
		API: `Cache-Control: no-store
Content-Security-Policy: default-src 'none'; frame-ancestors 'none'
Cross-Origin-Resource-Policy: same-origin
Referrer-Policy: no-referrer
X-Content-Type-Options: nosniff
X-Frame-Options: DENY
`,
		Console: `Cache-Control: no-store
Content-Security-Policy: default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'
Cross-Origin-Opener-Policy: same-origin
Cross-Origin-Resource-Policy: same-origin
Referrer-Policy: same-origin
X-Content-Type-Options: nosniff
X-Frame-Options: DENY
`,
		Callback: `Cache-Control: no-store
Content-Security-Policy: default-src 'none'; style-src 'self'; frame-ancestors 'none'; form-action 'none'
Cross-Origin-Opener-Policy: same-origin
Cross-Origin-Resource-Policy: same-origin
Referrer-Policy: no-referrer
X-Content-Type-Options: nosniff
X-Frame-Options: DENY
`,
	}
	for k, w := range want {
		h := http.Header{}
		Set(h, k)
		var b strings.Builder
		if err := h.Write(&b); err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(b.String(), "\r\n", "\n"); got != w {
			t.Errorf("kind %d:\n%s\nwant\n%s", k, got, w)
		}
	}
}

// A kind set over another (the console's pages inside the server's API
// default) keeps nothing of the first.
func TestSet_ReplacesAnotherKind(t *testing.T) {
	for _, pair := range [][2]Kind{{API, Console}, {Console, API}, {API, Callback}, {Callback, API}, {Console, Callback}} {
		over, alone := http.Header{}, http.Header{}
		Set(over, pair[0])
		Set(over, pair[1])
		Set(alone, pair[1])
		for _, name := range names {
			if over.Get(name) != alone.Get(name) {
				t.Errorf("kind %d over %d: %s is %q, want %q", pair[1], pair[0], name, over.Get(name), alone.Get(name))
			}
		}
	}
}
