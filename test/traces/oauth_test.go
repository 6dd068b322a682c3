package traces_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/oauth"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

// TestTrace_OAuthCallbackRefreshAndConsole: against a real authorization
// server (oidc-provider, test/oidc) guarding a real MCP server, the
// browser's return to /oauth/callback/{connector} is a connecta.oauth.callback
// span and a console page a connecta.console span — each a new root
// whatever traceparent the browser sent, with the method and status only —
// and an expired access token's refresh is a connecta.oauth.refresh span
// inside the trace of the call that needed it.
func TestTrace_OAuthCallbackRefreshAndConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts an authorization server and a collector")
	}
	const (
		refreshTrace = "abababababababababababababababab"
		refreshSpan  = "abababababababab"
		browserTrace = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
	)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := oidctest.Start(t, oidctest.Options{AccessTokenTTL: 2 * time.Second})
	rs := oidctest.NewProtectedServer(t, p)
	be := newBackend(t)
	down := newDownstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	l := startWith(t, be.endpoint(), down.srv.URL, setup{
		extra:      "publicUrl: " + base + "\n",
		connectors: "  - id: tracker\n    title: Tracker\n    url: " + rs.URL + "\n    oauth: {}\n",
		ln:         ln,
		oauthStore: oauth.NewMemoryStore(),
		sampleAll:  true, // the callback and console spans are roots
	})
	call := func(meta mcp.Meta, name string, args map[string]any) string {
		t.Helper()
		res, err := l.cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}

	// The flow, and the human's browser (which sends a traceparent of its own).
	var st struct{ Status, AuthorizationURL string }
	if text := call(nil, "authorize_connector", map[string]any{"connector": "tracker"}); json.Unmarshal([]byte(text), &st) != nil || st.AuthorizationURL == "" {
		t.Fatalf("authorize_connector: %s", text)
	}
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	back, err := p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	browse := func(c *http.Client, u string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("traceparent", "00-"+browserTrace+"-"+refreshSpan+"-01")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(page), back.Query().Get("code")) {
			t.Fatalf("%s: the page shows the authorization code", u)
		}
		return res.StatusCode
	}
	if status := browse(human, back.String()); status != http.StatusOK {
		t.Fatalf("callback page: HTTP %d", status)
	}
	noFollow := *human // one console request: its answer, not where it leads
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	consoleStatus := browse(&noFollow, base+"/operator")

	// The access token expires (2 s): the next call refreshes it.
	if text := call(nil, "call_tool", map[string]any{"address": "tracker.whoami"}); !strings.Contains(text, "subject=alice") {
		t.Fatalf("call_tool after authorization: %s", text)
	}
	time.Sleep(2100 * time.Millisecond)
	if text := call(mcp.Meta{"traceparent": "00-" + refreshTrace + "-" + refreshSpan + "-01"}, "call_tool", map[string]any{"address": "tracker.whoami"}); !strings.Contains(text, "subject=alice") {
		t.Fatalf("call_tool after expiry: %s", text)
	}
	l.close()

	spans := be.trace(t, refreshTrace, 3)
	byID := map[string]span{}
	var refresh *span
	for i, s := range spans {
		byID[s.ID] = s
		if s.Name == "connecta.oauth.refresh" {
			refresh = &spans[i]
		}
	}
	if refresh == nil {
		t.Fatalf("no connecta.oauth.refresh span in the call's trace: %s", dump(spans))
	}
	if refresh.Attrs["connecta.connector"] != "tracker" || refresh.Attrs["connecta.outcome"] != "" {
		t.Errorf("refresh span %+v", *refresh)
	}
	// Its ancestors reach the request span, whose parent is the caller's.
	root := *refresh
	for root.Parent != refreshSpan {
		parent, ok := byID[root.Parent]
		if !ok {
			t.Fatalf("refresh span's ancestor %s is not in the trace: %s", root.Parent, dump(spans))
		}
		root = parent
	}
	if root.Name != "tools/call call_tool" {
		t.Errorf("refresh span's root %q, want the request tools/call call_tool: %s", root.Name, dump(spans))
	}

	for _, c := range []struct {
		name   string
		status int
	}{{"connecta.oauth.callback", http.StatusOK}, {"connecta.console", consoleStatus}} {
		got := be.named(t, c.name, 1)
		if len(got) != 1 {
			t.Errorf("%d %s spans, want 1", len(got), c.name)
			continue
		}
		s := got[0]
		if s.Parent != "" || s.Kind != "server" || s.Attrs["http.request.method"] != "GET" || s.Attrs["http.response.status_code"] != strconv.Itoa(c.status) {
			t.Errorf("%s span %+v: want a new root, GET, status %d", c.name, s, c.status)
		}
		for k, v := range s.Attrs {
			if strings.Contains(v, back.Query().Get("code")) || strings.Contains(v, back.Query().Get("state")) {
				t.Errorf("%s span attribute %s carries the callback's query", c.name, k)
			}
		}
	}
	if got := be.trace(t, browserTrace, 0); len(got) != 0 {
		t.Errorf("the browser's traceparent parented spans: %s", dump(got))
	}
}
