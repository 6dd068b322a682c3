package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/gateway/rawmcp"
	"github.com/connecta-dev/connecta/oauth"
)

// TestOAuthFailuresMapOntoE2: the OAuth transport's refusals reach the
// caller as auth_required with recovery "oauth" and nextAction
// authorize_connector, or unavailable with details.host / details.component.
func TestOAuthFailuresMapOntoE2(t *testing.T) {
	c := &connector{spec: ConnectorSpec{ID: "docs", URL: "https://mcp.docs.example.com/mcp", OAuth: true}}
	ctx := context.Background()
	for _, tc := range []struct {
		err  *oauth.Error
		want []string
	}{
		{&oauth.Error{Code: oauth.CodeAuthRequired, NoGrant: true, Message: `Connector "docs" is not authorized yet`},
			[]string{`"code":"auth_required"`, `"recovery":"oauth"`, `"tool":"authorize_connector"`, `is not authorized yet. Call authorize_connector`}},
		{&oauth.Error{Code: oauth.CodeUnavailable, Host: "https://as.example.com", Message: "refreshing the access token failed"},
			[]string{`"code":"unavailable"`, `"retryable":true`, `"host":"https://as.example.com"`}},
		{&oauth.Error{Code: oauth.CodeUnavailable, Component: "store", Message: "the store could not read the grant"},
			[]string{`"code":"unavailable"`, `"component":"store"`}},
	} {
		f := c.classify(ctx, tc.err, rawmcp.ExchangeSnapshot{Failed: true, Transport: tc.err})
		e := c.callError(f, "docs.search", 0)
		b, err := json.Marshal(e.Object())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %s", b, w)
			}
		}
	}
}
