package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/test/testkit"
)

func TestSurface_ToolsRegisteredWithHandWrittenSchemas(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(schema), "additionalProperties") {
			t.Errorf("%s: schema must not forbid unknown keys: %s", tool.Name, schema)
		}
	}
	slices.Sort(names)
	want := []string{"authorize_connector", "call_destructive_tool", "call_tool", "get_result", "search_tools", "skills"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v (execute_code is added by the code tool)", names, want)
	}
	init := cs.InitializeResult()
	if n := len([]rune(init.Instructions)); n == 0 || n > server.MaxInstructionsChars {
		t.Fatalf("instructions are %d characters", n)
	}
	for _, removed := range []string{"list_connectors", "describe_tools", "batch_call"} {
		if strings.Contains(init.Instructions, removed) {
			t.Errorf("instructions name removed tool %s", removed)
		}
	}
}

func TestSurface_RemovedToolFailsNamingIt(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "batch_call", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "batch_call") {
		t.Fatalf("err = %v, want one naming batch_call", err)
	}
}

func TestSurface_UnknownKeysIgnoredAndTypeErrorsNameTheField(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	res := call(t, cs, "call_tool", `{"address":"down.echo","args":{"x":1},"maxRetries":2,"bogus":true}`)
	if res.IsError {
		t.Fatalf("unknown keys must be ignored: %s", textOf(t, res))
	}
	res = call(t, cs, "call_tool", `{"address":42}`)
	if e := failureOf(t, res); e["code"] != "invalid_args" || !strings.Contains(e["message"].(string), `"address"`) {
		t.Fatalf("want invalid_args naming address, got %+v", textOf(t, res))
	}
	res = call(t, cs, "get_result", `{"id":"x","maxBytes":0}`)
	if e := failureOf(t, res); e["code"] != "invalid_args" || !strings.Contains(e["message"].(string), `"maxBytes"`) {
		t.Fatalf("want invalid_args naming maxBytes, got %s", textOf(t, res))
	}
}

func TestAuth_MissingWrongRightToken(t *testing.T) {
	h := newHarness(t, harnessOptions{tokens: []server.Token{{Name: "laptop", Value: "s3cret-token-value-0123456789"}, {Name: "ci", Value: "another-token-value-abcdefghij"}}})
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong", "s3cret-token-value-012345678X", http.StatusUnauthorized},
		{"prefix", "s3cret", http.StatusUnauthorized},
		{"right", "s3cret-token-value-0123456789", http.StatusOK},
		{"second", "another-token-value-abcdefghij", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), tc.token)
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// The actor is the token's name.
	cs := h.connect(t, "another-token-value-abcdefghij")
	call(t, cs, "call_tool", `{"address":"down.echo","args":{}}`)
	ev := h.activity.Recent(1)
	if len(ev) != 1 || ev[0].Actor != "ci" {
		t.Fatalf("activity = %+v, want actor ci", ev)
	}
	// /activity needs the token too.
	resp, _ := h.get(t, "/activity")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/activity without token: %d", resp.StatusCode)
	}
}

// holdSlowCall starts a call_tool of down.slow on cs and returns once the
// downstream runs it; release cancels it and waits for it to end (so does
// the test's end).
func holdSlowCall(t *testing.T, h *harness, cs *mcp.ClientSession) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": "down.slow"}})
	}()
	<-h.down.slowStarted
	var once sync.Once
	release = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(release)
	return release
}

func TestAdmission_OverloadIs503WithServerOverloaded(t *testing.T) {
	h := newHarness(t, harnessOptions{requests: server.RequestLimits{MaxActive: 1, MaxQueue: 0, RetryAfter: 1500 * time.Millisecond}})
	cs := h.connect(t, "")
	release := holdSlowCall(t, h, cs)
	resp := h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After = %q, want 2 (ceil of 1.5 s)", got)
	}
	const want = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Server overloaded; retry later.","data":{"code":"server_overloaded","retryable":true,"retryAfterMs":1500}}}`
	if strings.TrimSpace(string(body)) != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
	release()
	snap := h.srv.Health().Admission.Requests
	if snap.Totals.Rejected < 1 {
		t.Fatalf("snapshot %+v", snap)
	}
}

func TestAdmission_BeforeAuth(t *testing.T) {
	h := newHarness(t, harnessOptions{tokens: []server.Token{{Name: "a", Value: "token-aaaaaaaaaaaaaaaa"}}, requests: server.RequestLimits{MaxActive: 1, MaxQueue: 0}})
	cs := h.connect(t, "token-aaaaaaaaaaaaaaaa")
	release := holdSlowCall(t, h, cs)
	// Unauthenticated while the pool is full: refused by admission, not auth.
	resp := h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 (admission before auth)", resp.StatusCode)
	}
	release()
}

func TestBodyCap_RefusedBeforeTheSDKReads(t *testing.T) {
	h := newHarness(t, harnessOptions{requests: server.RequestLimits{MaxBodyBytes: 1024}})
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	// Declared length over the cap.
	resp := h.rawPost(t, strings.NewReader(big), int64(len(big)), "")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared: status %d", resp.StatusCode)
	}
	// Chunked (no declared length): the read is bounded.
	resp = h.rawPost(t, io.MultiReader(strings.NewReader(big)), -1, "")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: status %d", resp.StatusCode)
	}
	// The server stays up.
	resp = h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after: status %d", resp.StatusCode)
	}
}

func TestDisconnect_CancelsTheRequestsWork(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": "down.slow", "timeoutMs": 60000}})
		errc <- err
	}()
	<-h.down.slowStarted
	cancel() // the client goes away
	select {
	case <-h.down.slowCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the downstream call was not cancelled by the client disconnect")
	}
	<-errc
	// The activity event records the cancellation.
	var outcome string
	testkit.Eventually(t, 5*time.Second, func() bool {
		ev := h.activity.Recent(1)
		if len(ev) == 1 {
			outcome = ev[0].Outcome
		}
		return len(ev) == 1
	}, "no activity event")
	if outcome != "cancelled" {
		t.Fatalf("outcome %q, want cancelled", outcome)
	}
}

func TestHealth_OpenAndPayloadFree(t *testing.T) {
	h := newHarness(t, harnessOptions{tokens: []server.Token{{Name: "laptop", Value: "health-secret-token-123456"}}})
	resp, body := h.get(t, "/health")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	m := decode(t, string(body))
	if m["status"] != "ok" || m["connectors"] != float64(1) {
		t.Fatalf("health %s", body)
	}
	// The policy names the fair-between-callers queue the server runs.
	if adm, _ := m["admission"].(map[string]any); adm["policy"] != server.AdmissionPolicy || server.AdmissionPolicy != "per-caller-fair" {
		t.Fatalf("admission.policy %v", adm["policy"])
	}
	for _, leak := range []string{"health-secret-token", "laptop", h.down.url, "127.0.0.1"} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("health leaks %q: %s", leak, body)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatal("security headers missing")
	}
	// /metrics is served from the server's own registry.
	_, mb := h.get(t, "/metrics")
	if !strings.Contains(string(mb), "connecta_requests_admitted_total") {
		t.Fatalf("metrics missing admission counters")
	}
}

func TestOrigin_CrossOriginBrowserRequestRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	req := h.mcpRequest(t, strings.NewReader(toolsListBody))
	req.Header.Set("Origin", "https://evil.example")
	resp := send(t, req)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	// DNS rebinding: a loopback listener asked with a foreign Host.
	req = h.mcpRequest(t, strings.NewReader(toolsListBody))
	req.Host = "evil.example"
	resp = send(t, req)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebinding: status %d, want 403", resp.StatusCode)
	}
}

// DNS rebinding: every route of a loopback listener, not only /mcp, refuses
// a foreign Host — a page rebound to 127.0.0.1 cannot read the activity
// history — and still answers its own loopback names.
func TestRebinding_EveryRouteOfALoopbackListenerChecksHost(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, path := range []string{"/activity", "/health", "/metrics", "/.well-known/oauth-protected-resource", "/operator"} {
		for _, host := range []string{"evil.example", "evil.example:80", "10.0.0.1"} {
			req, err := http.NewRequest(http.MethodGet, h.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			resp := send(t, req)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "invalid_host") {
				t.Fatalf("%s with Host %s: status %d %s", path, host, resp.StatusCode, body)
			}
		}
	}
	if resp, body := h.get(t, "/activity"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/activity on its own host: status %d %s", resp.StatusCode, body)
	}
}

func TestShutdown_StopsAdmittingWithServerShuttingDown(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.srv.BeginShutdown()
	resp := h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":-32002`) ||
		!strings.Contains(string(body), `"server_shutting_down"`) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	hr, _ := h.get(t, "/health")
	if hr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/health while draining: %d", hr.StatusCode)
	}
}

func TestStdio_ServesTheSameTools(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	clientToServerR, clientToServerW := io.Pipe()
	serverToClientR, serverToClientW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.ServeStdio(ctx, clientToServerR, serverToClientW) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: serverToClientR, Writer: clientToServerW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "call_tool", `{"address":"down.echo","args":{"a":1}}`)
	if res.IsError || textOf(t, res) != `{"a":1}` {
		t.Fatalf("stdio call: %s", textOf(t, res))
	}
	if ev := h.activity.Recent(1); ev[0].Actor != "stdio" || ev[0].RequestID == "" {
		t.Fatalf("activity %+v", ev[0])
	}
	_ = cs.Close()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for goroutines to settle")
	}
	http.DefaultClient.CloseIdleConnections()
	base := runtime.NumGoroutine()
	t.Run("work", func(t *testing.T) {
		h := newHarness(t, harnessOptions{})
		cs := h.connect(t, "")
		for i := 0; i < 5; i++ {
			call(t, cs, "call_tool", `{"address":"down.echo"}`)
			call(t, cs, "search_tools", `{"query":"echo"}`)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-h.down.slowStarted; cancel() }()
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": "down.slow"}})
		<-h.down.slowCancelled
	})
	// An idle keep-alive connection holds goroutines until it is closed.
	settled := testkit.Poll(10*time.Second, func() bool {
		http.DefaultClient.CloseIdleConnections()
		return runtime.NumGoroutine() <= base+2
	})
	if !settled {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after\n%s", base, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

func TestToolsList_CacheHintPrivateOneHour(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	resp := h.rawPost(t, strings.NewReader(toolsListBody), int64(len(toolsListBody)), "")
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"ttlMs":3600000`) || !strings.Contains(string(body), `"cacheScope":"private"`) {
		t.Fatalf("tools/list lacks the cache hint: %.300s", body)
	}
}

func TestRebinding_PublicURLHostAdmitted(t *testing.T) {
	h := newHarness(t, harnessOptions{publicURL: "https://connecta.example.com"})
	req := h.mcpRequest(t, strings.NewReader(toolsListBody))
	req.Host = "connecta.example.com"
	req.Header.Set("Origin", "https://connecta.example.com")
	resp := send(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("public host through a local proxy: %d", resp.StatusCode)
	}
}

// One MCP server serves every request: the identity of each request (actor,
// request id) travels with that request, never with the server, so
// concurrent callers with different tokens are recorded as themselves.
func TestSharedServer_EachRequestCarriesItsOwnIdentity(t *testing.T) {
	tokens := []server.Token{{Name: "laptop", Value: "s3cret-token-value-0123456789"}, {Name: "ci", Value: "another-token-value-abcdefghij"}}
	h := newHarness(t, harnessOptions{tokens: tokens})
	const perToken = 8
	var wg sync.WaitGroup
	for _, tok := range tokens {
		cs := h.connect(t, tok.Value)
		for range perToken {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool", Arguments: json.RawMessage(`{"address":"down.echo","args":{}}`)})
				if err != nil || res.IsError {
					t.Errorf("call_tool: %v %+v", err, res)
				}
			}()
		}
	}
	wg.Wait()
	actors := map[string]int{}
	ids := map[string]bool{}
	for _, ev := range h.activity.Recent(100) {
		actors[ev.Actor]++
		ids[ev.RequestID] = true
	}
	if actors["laptop"] != perToken || actors["ci"] != perToken || len(ids) != 2*perToken {
		t.Fatalf("actors %v, %d distinct request ids; want %d each and %d ids", actors, len(ids), perToken, 2*perToken)
	}
}

// On a loopback listener a page served as http://localhost:PORT and one
// served as http://127.0.0.1:PORT are the same server: both pass, with or
// without the browser's Sec-Fetch-Site; a page on another local port does
// not.
func TestOrigin_LocalhostAndLoopbackIPAlikeOnLoopback(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	_, port, _ := strings.Cut(strings.TrimPrefix(h.url, "http://"), ":")
	for _, tc := range []struct {
		origin, fetchSite string
		want              int
	}{
		{"http://localhost:" + port, "", http.StatusOK},
		{"http://localhost:" + port, "cross-site", http.StatusOK},
		{"http://127.0.0.1:" + port, "", http.StatusOK},
		{"http://127.0.0.1:" + port, "same-origin", http.StatusOK},
		{"http://[::1]:" + port, "cross-site", http.StatusOK},
		{"http://localhost:1", "cross-site", http.StatusForbidden},
		{"http://localhost:1", "", http.StatusForbidden},
		{"https://evil.example:" + port, "cross-site", http.StatusForbidden},
	} {
		req := h.mcpRequest(t, strings.NewReader(initializeBody))
		req.Header.Set("Origin", tc.origin)
		if tc.fetchSite != "" {
			req.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		if resp := send(t, req); resp.StatusCode != tc.want {
			t.Errorf("Origin %s (Sec-Fetch-Site %q): status %d, want %d", tc.origin, tc.fetchSite, resp.StatusCode, tc.want)
		}
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
