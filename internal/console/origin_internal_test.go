package console

import (
	"net/http/httptest"
	"testing"

	"github.com/connecta-dev/connecta/internal/config"
)

// A console mutation is admitted only from the console's own pages: the
// standard library's cross-origin check with publicUrl's origin trusted
// (so a proxy that rewrites Host changes nothing), no request without
// Origin and Sec-Fetch-Site, and no Origin other than publicUrl's.
func TestSameOrigin_StandardCheckWithPublicURLTrusted(t *testing.T) {
	c := &Console{o: Options{Config: func() *config.Config { return &config.Config{PublicURL: "https://connecta.example"} }}}
	for _, tc := range []struct {
		name, host, origin, site string
		want                     bool
	}{
		{"same-origin fetch metadata", "connecta.example", "", "same-origin", true},
		{"publicUrl's origin, no fetch metadata, Host rewritten by a proxy", "10.0.0.7:8080", "https://connecta.example", "", true},
		{"publicUrl's origin and same-origin", "connecta.example", "https://connecta.example", "same-origin", true},
		{"Origin null and same-origin", "connecta.example", "null", "same-origin", true},
		{"a cross-site post", "connecta.example", "https://evil.example", "cross-site", false},
		{"a cross-site post claiming nothing", "connecta.example", "", "cross-site", false},
		{"a same-site sibling", "connecta.example", "https://a.connecta.example", "same-site", false},
		{"another origin matching Host", "evil.example", "https://evil.example", "", false},
		{"neither header", "connecta.example", "", "", false},
		{"Origin null alone", "connecta.example", "null", "", false},
	} {
		r := httptest.NewRequest("POST", "http://"+tc.host+"/operator/tokens", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if got := c.sameOrigin(r); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
}
