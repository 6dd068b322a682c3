package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/store"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/pgtest"
	"github.com/connecta-dev/connecta/test/testkit"
)

// TestDownstreamOAuth_EndToEnd runs connecta in front of a go-sdk MCP server
// protected by the real oidc-provider (StartAuthServer) and plays the human with a cookie
// jar: a call without a grant is auth_required with recovery "oauth" (top
// level and in a program), authorize_connector gives the link, the login
// and consent land on connecta's callback, then the connector works through
// call_tool and a program, an expired access token is refreshed, and a 401
// is answered by one refresh and one re-send (attempts 1, the tool ran
// once). Finally every byte the run produced — answers, logs, activity,
// metrics, health, pages — is searched for the tokens and the code.
func TestDownstreamOAuth_EndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the executor pool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{AccessTokenTTL: 2 * time.Second})
	rs := oidctest.NewProtectedServer(t, p)

	addr := testkit.FreeAddr(t)
	dir := t.TempDir()
	activityFile := filepath.Join(dir, "activity.jsonl")
	yaml := fmt.Sprintf(`listen: %s
publicUrl: http://%s
executor: {spares: 1, cacheDir: %s}
activity: {file: %s}
connectors:
  - id: tracker
    title: Tracker
    url: %s
    oauth: {}
`, addr, addr, filepath.Join(os.TempDir(), "connecta-cmd-test-cache"), activityFile, rs.URL)
	cfg, err := config.Parse(filepath.Join(dir, "connecta.yaml"), []byte(yaml), resolver(""))
	if err != nil {
		t.Fatal(err)
	}
	store := oauth.NewMemoryStore()
	logs := &testkit.Buffer{}
	serveCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- serve(serveCtx, cfg, serveOptions{log: newLogger(logs), oauthStore: store}) }()
	defer func() {
		stop()
		select {
		case <-errc:
		case <-time.After(60 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	base := "http://" + addr
	waitHealthy(t, base)

	var produced strings.Builder // everything a client, operator or log saw
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (text string, isError bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		produced.WriteString(b.String() + "\n")
		return b.String(), res.IsError
	}
	const program = `async () => { try { return { ok: true, v: await connecta.call("tracker.whoami", {}) } } catch (e) { return { ok: false, code: e.code, recovery: e.details && e.details.recovery, next: e.details && e.details.nextAction && e.details.nextAction.tool } } }`

	// Without a grant: auth_required, recovery oauth, nextAction authorize_connector.
	text, isErr := call("call_tool", map[string]any{"address": "tracker.whoami"})
	var failure struct {
		Error struct {
			Code       string `json:"code"`
			Recovery   string `json:"recovery"`
			NextAction struct {
				Tool string `json:"tool"`
			} `json:"nextAction"`
		} `json:"error"`
	}
	if !isErr || json.Unmarshal([]byte(text), &failure) != nil || failure.Error.Code != "auth_required" ||
		failure.Error.Recovery != "oauth" || failure.Error.NextAction.Tool != "authorize_connector" {
		t.Fatalf("call_tool without a grant: %s", text)
	}
	text, _ = call("execute_code", map[string]any{"code": program})
	if !strings.Contains(text, `"code":"auth_required"`) || !strings.Contains(text, `"recovery":"oauth"`) || !strings.Contains(text, `"next":"authorize_connector"`) {
		t.Fatalf("program without a grant: %s", text)
	}

	// authorize_connector, then the human.
	text, isErr = call("authorize_connector", map[string]any{"connector": "tracker"})
	var st struct {
		Connector, Recovery, Status, AuthorizationURL, ExpiresAt, Instructions string
	}
	if isErr || json.Unmarshal([]byte(text), &st) != nil || st.Recovery != "oauth" || st.Status != "authorization_required" || st.AuthorizationURL == "" {
		t.Fatalf("authorize_connector: %s", text)
	}
	if _, err := time.Parse(time.RFC3339, st.ExpiresAt); err != nil || !strings.HasSuffix(st.ExpiresAt, "Z") {
		t.Fatalf("expiresAt %q is not RFC 3339 UTC", st.ExpiresAt)
	}
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	back, err := p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), base+"/oauth/callback/tracker?") {
		t.Fatalf("redirect %s", back)
	}
	code := back.Query().Get("code")
	res, err := human.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	produced.Write(page)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Connected Tracker") || res.Request.URL.String() != back.String() {
		t.Fatalf("callback page %d (at %s): %s", res.StatusCode, res.Request.URL, page)
	}
	tokens := grantTokens(t, ctx, store)

	// Works through call_tool and a program.
	text, isErr = call("call_tool", map[string]any{"address": "tracker.whoami"})
	if isErr || !strings.Contains(text, "subject=alice") {
		t.Fatalf("call_tool after authorization: %s", text)
	}
	text, _ = call("execute_code", map[string]any{"code": program})
	if !strings.Contains(text, `"ok":true`) || !strings.Contains(text, "subject=alice") {
		t.Fatalf("program after authorization: %s", text)
	}

	// The access token expires (2 s): the next call refreshes.
	time.Sleep(2100 * time.Millisecond) // the provider's and the server's clocks: real processes, no fake clock
	if text, isErr = call("call_tool", map[string]any{"address": "tracker.whoami"}); isErr || !strings.Contains(text, "subject=alice") {
		t.Fatalf("call_tool after expiry: %s", text)
	}
	if m := get(t, base+"/metrics"); okRefreshes(m) < 1 {
		t.Fatalf("metrics after expiry count no ok refresh:\n%s", grepLines(m, "oauth"))
	}

	// A 401 with a current token: one refresh, one re-send, attempts 1.
	ran := rs.Calls()
	rs.RejectNext(1)
	text, isErr = call("call_tool", map[string]any{"address": "tracker.whoami", "resultMode": "value"})
	if isErr || !strings.Contains(text, `"attempts":1`) || !strings.Contains(text, "subject=alice") || rs.Calls() != ran+1 {
		t.Fatalf("call after a 401: %s (tool ran %d times)", text, rs.Calls()-ran)
	}
	tokens = append(tokens, grantTokens(t, ctx, store)...)

	// Refused again after the refresh: auth_required, the tool never ran.
	ran = rs.Calls()
	rs.RejectNext(2)
	text, isErr = call("call_tool", map[string]any{"address": "tracker.whoami"})
	if !isErr || !strings.Contains(text, `"recovery":"oauth"`) || !strings.Contains(text, "even after a refresh") || rs.Calls() != ran {
		t.Fatalf("call refused twice: %s (tool ran %d times)", text, rs.Calls()-ran)
	}
	tokens = append(tokens, grantTokens(t, ctx, store)...)

	// Nothing anywhere shows a token or the code.
	produced.WriteString(get(t, base+"/metrics"))
	produced.WriteString(get(t, base+"/health"))
	produced.WriteString(get(t, base+"/activity"))
	if b, err := os.ReadFile(activityFile); err == nil {
		produced.Write(b)
	}
	produced.WriteString(logs.String())
	all := produced.String()
	for _, secret := range append(tokens, code) {
		if len(secret) < 8 {
			t.Fatalf("implausible secret %q", secret)
		}
		if strings.Contains(all, secret) {
			t.Fatalf("a token or code appears in what the run produced (%d bytes searched)", len(all))
		}
	}
	if !strings.Contains(logs.String(), "oauth audit") {
		t.Fatal("no audit record in the log")
	}
}

func grantTokens(t *testing.T, ctx context.Context, s *oauth.MemoryStore) []string {
	t.Helper()
	raw, err := s.Open(ctx, "tracker", "grant")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		AccessToken, RefreshToken, ClientID string
	}
	if err := json.Unmarshal(raw, &g); err != nil || g.AccessToken == "" || g.RefreshToken == "" {
		t.Fatalf("grant: %v", err)
	}
	return []string{g.AccessToken, g.RefreshToken}
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	testkit.Eventually(t, 90*time.Second, func() bool { return answersHealth(base) }, "server at %s did not come up", base)
}

func get(t *testing.T, u string) string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDownstreamOAuth_DurableGrantAndRevoke: with a sqlite store and a
// vault, the grant survives a restart (sealed in the store), and `connecta
// oauth revoke` revokes it at the authorization server (RFC 7009) and
// deletes it.
func TestDownstreamOAuth_DurableGrantAndRevoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{})
	rs := oidctest.NewProtectedServer(t, p)
	addr := testkit.FreeAddr(t)
	dir := t.TempDir()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	t.Setenv("CONNECTA_TEST_VAULT_KEY", base64.StdEncoding.EncodeToString(key))
	cfgPath := filepath.Join(dir, "connecta.yaml")
	yaml := fmt.Sprintf(`listen: %s
publicUrl: http://%s
store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:CONNECTA_TEST_VAULT_KEY}"}], active: k1}
connectors:
  - id: tracker
    url: %s
    oauth: {}
`, addr, addr, filepath.Join(dir, "state.db"), rs.URL)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("oauth", "revoke", "tracker", "--config", cfgPath); code != 0 || errOut != "" {
		t.Fatalf("revoke with no grant: %d %s", code, errOut)
	}

	run := func(body func(base string, cs *mcp.ClientSession)) {
		t.Helper()
		cfg, err := config.Load(cfgPath, resolver(""))
		if err != nil {
			t.Fatal(err)
		}
		serveCtx, stop := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- serve(serveCtx, cfg, serveOptions{log: newLogger(&testkit.Buffer{})}) }()
		base := "http://" + addr
		waitHealthy(t, base)
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		body(base, cs)
		cs.Close()
		stop()
		if err := <-errc; err != nil {
			t.Fatalf("serve: %v", err)
		}
	}
	whoami := func(cs *mcp.ClientSession) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": "tracker.whoami"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	run(func(base string, cs *mcp.ClientSession) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "authorize_connector", Arguments: map[string]any{"connector": "tracker"}})
		if err != nil || res.IsError {
			t.Fatalf("authorize_connector: %v %+v", err, res)
		}
		var st struct{ AuthorizationURL string }
		_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &st)
		jar, _ := cookiejar.New(nil)
		human := &http.Client{Jar: jar}
		back, err := p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
		if err != nil {
			t.Fatal(err)
		}
		if page := get(t, back.String()); !strings.Contains(page, "Connected") {
			t.Fatalf("callback: %s", page)
		}
		if text, isErr := whoami(cs); isErr || !strings.Contains(text, "subject=alice") {
			t.Fatalf("whoami: %s", text)
		}
	})
	run(func(base string, cs *mcp.ClientSession) { // after a restart
		if text, isErr := whoami(cs); isErr || !strings.Contains(text, "subject=alice") {
			t.Fatalf("whoami after a restart: %s", text)
		}
	})
	code, out, errOut := runCLI("oauth", "revoke", "tracker", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "revoked the grant at "+p.IssuerURL()) {
		t.Fatalf("revoke: %d %q %q", code, out, errOut)
	}
	run(func(base string, cs *mcp.ClientSession) {
		if text, isErr := whoami(cs); !isErr || !strings.Contains(text, `"recovery":"oauth"`) {
			t.Fatalf("whoami after revoke: %s", text)
		}
	})
	// Every grant change is in the store's audit trail.
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.ListAudit(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		if r.Target == "connector:tracker" {
			actions = append(actions, r.Action)
		}
	}
	for _, want := range []string{"oauth.flow_started", "oauth.granted", "oauth.revoked"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit trail %v lacks %s", actions, want)
		}
	}
}

// TestOAuthRevoke_RefusesOnMemory: the CLI cannot reach a running server's
// in-memory grants.
func TestOAuthRevoke_RefusesOnMemory(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgPath, []byte("publicUrl: http://127.0.0.1:1\nconnectors:\n  - id: tracker\n    url: http://127.0.0.1:1/mcp\n    oauth: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("oauth", "revoke", "tracker", "--config", cfgPath)
	if code != 1 || !strings.Contains(errOut, "memory:") {
		t.Fatalf("%d %s", code, errOut)
	}
}

// TestDownstreamOAuth_Replicas: two connecta replicas on one PostgreSQL
// store behind one publicUrl. A flow started on replica A completes with
// the callback on replica B; both then use the same grant; when the access
// token expires under concurrent calls on both, exactly one refresh happens
// (advisory lock).
func TestDownstreamOAuth_Replicas(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers on a throwaway PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cluster := pgtest.Start(t)
	dbURL := cluster.Database(t)
	p := oidctest.StartAuthServer(t, oidctest.Options{AccessTokenTTL: 6 * time.Second})
	rs := oidctest.NewProtectedServer(t, p)
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(255 - i)
	}
	t.Setenv("CONNECTA_TEST_VAULT_KEY", base64.StdEncoding.EncodeToString(key))
	t.Setenv("CONNECTA_TEST_STORE_URL", dbURL)
	addrA, addrB := testkit.FreeAddr(t), testkit.FreeAddr(t)
	public := "http://" + addrB // the load balancer sends browsers to B
	sessions := map[string]*mcp.ClientSession{}
	for name, addr := range map[string]string{"A": addrA, "B": addrB} {
		yaml := fmt.Sprintf(`listen: %s
publicUrl: %s
executor: {spares: 0}
store: {url: "${env:CONNECTA_TEST_STORE_URL}"}
vault: {keys: [{id: k1, key: "${env:CONNECTA_TEST_VAULT_KEY}"}], active: k1}
connectors:
  - id: tracker
    url: %s
    oauth: {}
`, addr, public, rs.URL)
		cfg, err := config.Parse("replica-"+name+".yaml", []byte(yaml), resolver(""))
		if err != nil {
			t.Fatal(err)
		}
		serveUntilCleanup(t, ctx, cfg, addr, "replica "+name)
		client := mcp.NewClient(&mcp.Implementation{Name: "replica-" + name, Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[name] = cs
	}
	tool := func(name, tool string, args map[string]any) (string, bool) {
		res, err := sessions[name].CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Errorf("%s %s: %v", name, tool, err)
			return "", true
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	text, _ := tool("A", "authorize_connector", map[string]any{"connector": "tracker"})
	var st struct{ Status, AuthorizationURL string }
	if json.Unmarshal([]byte(text), &st) != nil || st.Status != "authorization_required" {
		t.Fatalf("A: %s", text)
	}
	text, _ = tool("B", "authorize_connector", map[string]any{"connector": "tracker"})
	var stB struct{ Status, AuthorizationURL string }
	if json.Unmarshal([]byte(text), &stB) != nil || stB.Status != "pending" || stB.AuthorizationURL != st.AuthorizationURL {
		t.Fatalf("B sees %s, want A's pending flow", text)
	}
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar}
	back, err := p.Authorize(ctx, human, st.AuthorizationURL, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.String(), public+"/oauth/callback/tracker?") {
		t.Fatalf("callback %s is not on B", back)
	}
	if page := get(t, back.String()); !strings.Contains(page, "Connected") {
		t.Fatalf("callback on B: %s", page)
	}
	for _, name := range []string{"A", "B"} {
		if text, isErr := tool(name, "call_tool", map[string]any{"address": "tracker.whoami"}); isErr || !strings.Contains(text, "subject=alice") {
			t.Fatalf("replica %s: %s", name, text)
		}
	}
	before := 0
	for _, addr := range []string{addrA, addrB} {
		before += okRefreshes(get(t, "http://"+addr+"/metrics"))
	}
	time.Sleep(6 * time.Second) // the access token expires on real processes' clocks: no fake clock
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		name := []string{"A", "B"}[i%2]
		wg.Go(func() {
			if text, isErr := tool(name, "call_tool", map[string]any{"address": "tracker.whoami"}); isErr || !strings.Contains(text, "subject=alice") {
				t.Errorf("replica %s after expiry: %s", name, text)
			}
		})
	}
	wg.Wait()
	refreshes := -before
	for _, addr := range []string{addrA, addrB} {
		refreshes += okRefreshes(get(t, "http://"+addr+"/metrics"))
	}
	if refreshes != 1 {
		t.Fatalf("refreshes across both replicas = %d, want exactly 1", refreshes)
	}
}

// TestDownstreamOAuth_OnlyOperatorsForce: any caller starts a flow when
// there is no grant; over a working grant only an operator token forces a
// new one, anyone else gets `authorized` with a message saying so.
func TestDownstreamOAuth_OnlyOperatorsForce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{})
	rs := oidctest.NewProtectedServer(t, p)
	addr := testkit.FreeAddr(t)
	t.Setenv("CONNECTA_TEST_OPS", "ops-token-0123456789abcdef")
	t.Setenv("CONNECTA_TEST_DEV", "dev-token-0123456789abcdef")
	yaml := fmt.Sprintf(`listen: %s
publicUrl: http://%s
executor: {spares: 0}
auth:
  tokens:
    - {name: ops, token: "${env:CONNECTA_TEST_OPS}", operator: true}
    - {name: dev, token: "${env:CONNECTA_TEST_DEV}"}
connectors:
  - id: tracker
    url: %s
    oauth: {}
`, addr, addr, rs.URL)
	cfg, err := config.Parse("force.yaml", []byte(yaml), resolver(""))
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- serve(serveCtx, cfg, serveOptions{log: newLogger(&testkit.Buffer{}), oauthStore: oauth.NewMemoryStore()})
	}()
	defer func() { stop(); <-errc }()
	base := "http://" + addr
	waitHealthy(t, base)
	authorize := func(token string, force bool) (status, url, message string) {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "force", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "authorize_connector", Arguments: map[string]any{"connector": "tracker", "force": force}})
		if err != nil || res.IsError {
			t.Fatalf("authorize_connector: %v %+v", err, res)
		}
		var st struct{ Status, AuthorizationURL, Message string }
		_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &st)
		return st.Status, st.AuthorizationURL, st.Message
	}
	status, link, _ := authorize("dev-token-0123456789abcdef", false)
	if status != "authorization_required" {
		t.Fatalf("dev without a grant: %s", status)
	}
	jar, _ := cookiejar.New(nil)
	back, err := p.Authorize(ctx, &http.Client{Jar: jar}, link, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if page := get(t, back.String()); !strings.Contains(page, "Connected") {
		t.Fatalf("callback: %s", page)
	}
	if status, link, msg := authorize("dev-token-0123456789abcdef", true); status != "authorized" || link != "" || !strings.Contains(msg, "only an operator") {
		t.Fatalf("dev forcing: %s %s %s", status, link, msg)
	}
	if status, link, _ := authorize("ops-token-0123456789abcdef", true); status != "authorization_required" || link == "" {
		t.Fatalf("operator forcing: %s %s", status, link)
	}
}

// okRefreshes reads connecta_oauth_refreshes_total{connector="tracker",outcome="ok"}.
func okRefreshes(metrics string) int {
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, `connecta_oauth_refreshes_total{connector="tracker",outcome="ok"} `) {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}
