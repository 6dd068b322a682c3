package gateway

import (
	"context"
	"encoding/json"
	"github.com/connecta-dev/connecta/internal/actor"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// passOAuth is an OAuthTransport that sends requests as they are (the
// grant's token is oauth's business, tested there).
type passOAuth struct{}

func (passOAuth) Transport(_ string, _ actor.ID, base http.RoundTripper) http.RoundTripper {
	return base
}

// A 403 insufficient_scope challenge on a call fails it auth_required,
// naming the scope the downstream asked for and authorize_connector as the
// way to get it (the step-up itself is oauth's: TestStepUp_*). The message
// says nothing of whether the grant holds the scope: a downstream also
// refuses a scope the grant holds (the account lacks the permission), and
// only oauth knows which.
func TestStepUp_CallFailsAuthRequiredNamingTheScope(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "scoped", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "write", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="files:write", resource_metadata="https://x.example/.well-known/oauth-protected-resource"`)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "docs", URL: srv.URL, OAuth: true}}, OAuth: passOAuth{}, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	_, gerr := g.Invoke(context.Background(), nil, CallRequest{Address: "docs.write", Front: FrontDoorTopLevel, Source: "call_tool"})
	if gerr == nil || gerr.Code != CodeAuthRequired || !strings.Contains(gerr.Message, `"files:write"`) || !strings.Contains(gerr.Message, "authorize_connector") {
		t.Fatalf("got %+v", gerr)
	}
	if strings.Contains(gerr.Message, "its grant lacks") || !strings.Contains(gerr.Message, "when the grant holds it") {
		t.Fatalf("the message claims what the grant holds, which the gateway does not know: %s", gerr.Message)
	}
}
