package traces_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTrace_EveryRequestMethodHasARequestSpan: not only tools/call — an
// authenticated caller's server/discover, tools/list, initialize and ping
// are each a server span named "{method}" (no target: the conventions'
// "{mcp.method.name} {target}" without one), parented by its traceparent;
// its notifications are none.
func TestTrace_EveryRequestMethodHasARequestSpan(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a collector")
	}
	const (
		methodsTrace = "cccccccccccccccccccccccccccccccc"
		methodsSpan  = "cccccccccccccccc"
	)
	be := newBackend(t)
	down := newDownstream(t)
	auth := "auth:\n  tokens:\n    - {name: tracer, token: \"${credential:caller-token}\"}\n"
	rt := headerTransport{traceparent: "00-" + methodsTrace + "-" + methodsSpan + "-01", token: callerToken}
	l := startWith(t, be.endpoint(), down.srv.URL, setup{extra: auth, rt: rt}) // Connect: server/discover (2026-07-28)
	if _, err := l.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// initialize and ping as 2025-11-25 has them (2026-07-28, which the
	// SDK's client negotiates, has neither), and its notification.
	post(t, l.url, rt, 7, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	post(t, l.url, rt, 0, "notifications/initialized", `{}`)
	post(t, l.url, rt, 8, "ping", `{}`)
	l.close()
	want := []string{"server/discover", "tools/list", "initialize", "ping"}
	spans := be.trace(t, methodsTrace, len(want))
	byName := map[string]span{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "notifications/") {
			t.Errorf("a notification has a span: %s", dump(spans))
		}
		byName[s.Name] = s
	}
	for _, name := range want {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no %q span: %s", name, dump(spans))
			continue
		}
		if s.Parent != methodsSpan || s.Kind != "server" || s.Attrs["mcp.method.name"] != name ||
			s.Attrs["connecta.actor"] != "tracer" || s.Attrs["connecta.outcome"] != "success" || s.Attrs["connecta.request_id"] == "" {
			t.Errorf("%s span %+v", name, s)
		}
	}
	if s := byName["ping"]; s.Attrs["jsonrpc.request.id"] != "8" {
		t.Errorf("ping span's jsonrpc.request.id %q, want 8", s.Attrs["jsonrpc.request.id"])
	}
}

// post sends one message of 2025-11-25 (id 0: a notification, answered
// 202) and wants its JSON-RPC result.
func post(t *testing.T, url string, rt http.RoundTripper, id int, method, params string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	if id == 0 {
		body = fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s}`, method, params)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if id == 0 && resp.StatusCode == http.StatusAccepted {
		return
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"result"`) {
		t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, out)
	}
}

// TestTrace_StdioMetaParentsTheRequestSpan: over stdio there are no
// headers; a tools/call's params._meta.traceparent (SEP-414) parents its
// request span, and a tools/list's its own.
func TestTrace_StdioMetaParentsTheRequestSpan(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a collector")
	}
	const (
		stdioTrace = "dddddddddddddddddddddddddddddddd"
		stdioSpan  = "dddddddddddddddd"
		listTrace  = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
		listSpan   = "eeeeeeeeeeeeeeee"
	)
	be := newBackend(t)
	down := newDownstream(t)
	l := start(t, be.endpoint(), down.srv.URL)
	// The client's stdout is the server's stdin and the other way round.
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- l.a.Server.ServeStdio(ctx, toServer, fromServer) }()
	defer func() {
		cancel()
		_ = fromClient.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio", Version: "0"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": "00-" + stdioTrace + "-" + stdioSpan + "-01"},
		Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, &mcp.ListToolsParams{Meta: mcp.Meta{"traceparent": "00-" + listTrace + "-" + listSpan + "-01"}}); err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	l.close()
	spans := be.trace(t, stdioTrace, 2)
	root, disc := searchSpans(spans)
	if root == nil || root.Parent != stdioSpan || root.Attrs["connecta.actor"] != "stdio" || root.Attrs["connecta.request_id"] == "" {
		t.Fatalf("no stdio request span parented by the _meta traceparent: %s", dump(spans))
	}
	if disc == nil || disc.Parent != root.ID {
		t.Errorf("no discovery span under the stdio request: %s", dump(spans))
	}
	list := be.trace(t, listTrace, 1)
	if len(list) != 1 || list[0].Name != "tools/list" || list[0].Parent != listSpan {
		t.Errorf("stdio tools/list: %s", dump(list))
	}
}
