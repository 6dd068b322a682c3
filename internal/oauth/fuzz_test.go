package oauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/oauth"
)

// FuzzCallback feeds the callback arbitrary paths and query strings (what
// any browser or attacker can send): it never panics, never redirects,
// never answers 200, and never writes a grant, since no fuzzed state
// matches the pending flow.
func FuzzCallback(f *testing.F) {
	for _, seed := range []string{
		"code=abc&state=xyz",
		"error=access_denied&state=xyz",
		"error=access_denied&error_description=%3Cscript%3E&state=",
		"code=&state=&iss=https%3A%2F%2Fevil",
		"state=" + strings.Repeat("a", 5000),
		"%zz=1&code=1",
	} {
		f.Add("tracker", seed)
	}
	f.Add("../../etc", "code=1&state=1")
	st := oauth.NewMemoryStore()
	m, err := oauth.New(oauth.Options{PublicURL: "https://connecta.example.com", Store: st, HTTPClient: &http.Client{Timeout: time.Second}},
		[]oauth.Connector{{ID: "tracker", URL: "http://127.0.0.1:9/mcp"}})
	if err != nil {
		f.Fatal(err)
	}
	// A pending flow whose state no input knows.
	if err := st.Seal(context.Background(), "tracker", "flow", []byte(`{"stateHash":"00","verifier":"v","expiresAt":"2999-01-01T00:00:00Z","tokenUrl":"http://127.0.0.1:9/token"}`)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, connector, query string) {
		target := "/oauth/callback/" + url.PathEscape(connector) + "?" + query
		req, err := http.NewRequest(http.MethodGet, "http://connecta.example.com"+target, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		m.Callback(rec, req)
		if rec.Code == http.StatusOK || rec.Header().Get("Location") != "" {
			t.Fatalf("%s: %d, Location %q", target, rec.Code, rec.Header().Get("Location"))
		}
		if strings.Contains(rec.Body.String(), "<script") {
			t.Fatalf("%s: unescaped markup in the page", target)
		}
		if _, err := st.Open(context.Background(), "tracker", "grant"); err == nil {
			t.Fatalf("%s: a grant was written", target)
		}
	})
}
