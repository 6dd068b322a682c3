package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/vault"
	"github.com/connecta-dev/connecta/test/pgtest"
	"github.com/connecta-dev/connecta/test/testkit"
)

// replicaConfig is two replicas' shared configuration: one PostgreSQL, one
// vault key, a small inline cap so that a demo listing is stashed.
func replicaConfig(url string) string {
	return "store: {url: \"" + url + "\"}\n" +
		"vault: {keys: [{id: k1, key: \"" + vaultKey(7) + "\"}], active: k1}\n" +
		"results: {maxInlineBytes: 1024}\n" +
		"executor: {spares: 0}\n" +
		"connectors:\n  - id: demo\n    builtin: demo\n"
}

var resultIDPattern = regexp.MustCompile(`"resultId":"([0-9a-f-]{36})"`)

func callJSON(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return text, res.IsError
}

// stashBig makes a call whose result is over the inline cap and returns
// its get_result handle.
func stashBig(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	text, isErr := callJSON(t, ctx, cs, "call_tool", map[string]any{"address": "demo.search_issues", "args": map[string]any{"limit": 50}})
	m := resultIDPattern.FindStringSubmatch(text)
	if isErr || m == nil {
		t.Fatalf("want a stashed result, got (isError %v) %.300s", isErr, text)
	}
	return m[1]
}

// readAllPages pages a handle to its end through cs.
func readAllPages(t *testing.T, ctx context.Context, cs *mcp.ClientSession, id string) (string, int) {
	t.Helper()
	var b strings.Builder
	offset, total := 0, -1
	for range 1000 {
		text, isErr := callJSON(t, ctx, cs, "get_result", map[string]any{"id": id, "offset": offset, "maxBytes": 700})
		if isErr {
			t.Fatalf("get_result %s at %d: %s", id, offset, text)
		}
		var p struct {
			NextOffset *int   `json:"nextOffset"`
			TotalBytes int    `json:"totalBytes"`
			Text       string `json:"text"`
		}
		if err := json.Unmarshal([]byte(text), &p); err != nil {
			t.Fatal(err)
		}
		b.WriteString(p.Text)
		total = p.TotalBytes
		if p.NextOffset == nil {
			return b.String(), total
		}
		offset = *p.NextOffset
	}
	t.Fatal("paging did not end")
	return "", 0
}

func errorObject(t *testing.T, text string) map[string]any {
	t.Helper()
	var env struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &env); err != nil || env.Error == nil {
		t.Fatalf("not a typed failure: %.300s", text)
	}
	return env.Error
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: %v: %.200s", url, err, body)
	}
	return resp.StatusCode
}

// eventually is testkit.Eventually with the message first.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	testkit.Eventually(t, d, f, "%s", what)
}

// TestReplicas_ShareStashActivityAndVault: two real `connecta serve`
// processes on one PostgreSQL agree. A handle minted on A pages on B; the
// activity of both is visible from either; a value sealed by one opens on
// the other.
func TestReplicas_ShareStashActivityAndVault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two servers")
	}
	pg := pgtest.Start(t)
	url := pg.Database(t)
	cfg := replicaConfig(url)
	a, b := startServer(t, cfg), startServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	csA, csB := a.client(t, ctx, ""), b.client(t, ctx, "")

	id := stashBig(t, ctx, csA)
	full, total := readAllPages(t, ctx, csB, id)
	if len(full) != total || !json.Valid([]byte(full)) {
		t.Fatalf("B paged %d of %d bytes (valid JSON %v)", len(full), total, json.Valid([]byte(full)))
	}

	callJSON(t, ctx, csB, "call_tool", map[string]any{"address": "demo.list_projects", "args": map[string]any{}})
	for _, p := range []*serverProcess{a, b} {
		eventually(t, 10*time.Second, "activity of both replicas on "+p.addr, func() bool {
			var page struct {
				Events []struct{ ToolName string } `json:"events"`
			}
			getJSON(t, "http://"+p.addr+"/activity?connector=demo", &page)
			seen := map[string]bool{}
			for _, e := range page.Events {
				seen[e.ToolName] = true
			}
			return seen["search_issues"] && seen["list_projects"]
		})
	}

	// The vault API on two handles, as two replicas use it.
	open := func() *vault.Vault {
		st, err := store.Open(ctx, url, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		v, err := vault.New(st, []vault.Key{{ID: "k1", Key: []byte(strings.Repeat("\x07", 32))}}, "k1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := open().Seal(ctx, vault.KindOAuthGrant, "demo", "grant", []byte("tok")); err != nil {
		t.Fatal(err)
	}
	if got, err := open().Open(ctx, vault.KindOAuthGrant, "demo", "grant"); err != nil || string(got) != "tok" {
		t.Fatalf("opened on the other handle: %q, %v", got, err)
	}
}

// TestReplicas_StoreDownFailsOnlyWhatNeedsItAndRecovers: with PostgreSQL
// stopped, a stashing call and get_result fail unavailable with component
// store and /health is degraded, while a program that needs no state runs;
// when PostgreSQL returns, everything recovers by itself.
func TestReplicas_StoreDownFailsOnlyWhatNeedsItAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and a server")
	}
	pg := pgtest.Start(t)
	a := startServer(t, replicaConfig(pg.Database(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := a.client(t, ctx, "")
	id := stashBig(t, ctx, cs)

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	text, isErr := callJSON(t, ctx, cs, "get_result", map[string]any{"id": id})
	if e := errorObject(t, text); !isErr || e["code"] != "unavailable" || e["component"] != "store" {
		t.Fatalf("get_result with the store down: %s", text)
	}
	text, isErr = callJSON(t, ctx, cs, "call_tool", map[string]any{"address": "demo.search_issues", "args": map[string]any{"limit": 50}})
	if e := errorObject(t, text); !isErr || e["code"] != "unavailable" || e["component"] != "store" {
		t.Fatalf("stashing call with the store down: %s", text)
	}
	text, isErr = callJSON(t, ctx, cs, "execute_code", map[string]any{"code": `async () => 1 + 1`})
	if isErr || text != `{"result":2}` {
		t.Fatalf("a program needing no state: %s", text)
	}
	var h struct {
		Status string `json:"status"`
		Store  struct {
			State string `json:"state"`
		} `json:"store"`
	}
	if code := getJSON(t, "http://"+a.addr+"/health", &h); code != 200 || h.Status != "degraded" || h.Store.State != "failed" {
		t.Fatalf("/health with the store down: %d %+v", code, h)
	}
	var act struct {
		Error map[string]any `json:"error"`
	}
	if code := getJSON(t, "http://"+a.addr+"/activity", &act); code != http.StatusServiceUnavailable ||
		act.Error["code"] != "unavailable" || act.Error["component"] != "store" {
		t.Fatalf("/activity with the store down: %d %+v", code, act)
	}
	resp, err := http.Get("http://" + a.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`connecta_store_errors_total\{op="get_result"\} [1-9]`).Match(metrics) ||
		!strings.Contains(string(metrics), `connecta_store_operation_duration_seconds_count{op="put_result"}`) {
		t.Fatalf("store metrics after the failures:\n%s", grepLines(string(metrics), "connecta_store_"))
	}

	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "/health ok again", func() bool {
		getJSON(t, "http://"+a.addr+"/health", &h)
		return h.Status == "ok" && h.Store.State == "ok"
	})
	if full, total := readAllPages(t, ctx, cs, id); len(full) != total {
		t.Fatalf("after recovery: %d of %d bytes", len(full), total)
	}
}

// TestReplicas_KilledMidWriteLeavesNoCorruptRow: a replica killed while it
// stashes leaves only whole rows; the other pages every handle it minted.
func TestReplicas_KilledMidWriteLeavesNoCorruptRow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two servers")
	}
	pg := pgtest.Start(t)
	url := pg.Database(t)
	a, b := startServer(t, replicaConfig(url)), startServer(t, replicaConfig(url))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	csA, csB := a.client(t, ctx, ""), b.client(t, ctx, "")

	ids := make(chan string, 1000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := csA.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool",
				Arguments: map[string]any{"address": "demo.search_issues", "args": map[string]any{"limit": 50}}})
			if err != nil {
				return // the replica is gone
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				if m := resultIDPattern.FindStringSubmatch(tc.Text); m != nil {
					ids <- m[1]
				}
			}
		}
	}()
	// Kill A while it writes: once it has minted handles (the last ten are
	// checked), with more on the way.
	eventually(t, 60*time.Second, "A minted fewer than ten handles", func() bool { return len(ids) >= 10 })
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	close(stop)
	<-done
	close(ids)
	var minted []string
	for id := range ids {
		minted = append(minted, id)
	}
	n := len(minted)
	// The last handles were written as the kill landed: they page whole.
	for _, id := range minted[max(0, n-10):] {
		if full, total := readAllPages(t, ctx, csB, id); len(full) != total {
			t.Fatalf("%s: %d of %d bytes", id, len(full), total)
		}
	}
	if n == 0 {
		t.Fatal("no handle was minted before the kill")
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var bad int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM results WHERE length(data) <> size`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d rows whose bytes disagree with their size (%v)", bad, err)
	}
	t.Logf("%d handles minted on the killed replica; the last ones page whole on the other", n)
}

// slowReplicas starts PostgreSQL and two replicas on one database of it,
// each with the connector slow (waitServer); it returns the database's URL.
func slowReplicas(t *testing.T) (url string, a, b *serverProcess) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL and two servers")
	}
	url = pgtest.Start(t).Database(t)
	cfg := replicaConfig(url) + "  - id: slow\n    url: " + waitServer(t) + "\n"
	return url, startServer(t, cfg), startServer(t, cfg)
}

// waitServer is an MCP server whose one tool, wait, blocks until its
// request is cancelled (or a minute passes).
func waitServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "wait", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"waited":true}`}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func postRPC(ctx context.Context, addr, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestReplicas_CancelReachingTheOtherReplicaStillCancels: a
// notifications/cancelled posted to B names a request running on A; the
// one match across both replicas is found and A's call ends cancelled.
func TestReplicas_CancelReachingTheOtherReplicaStillCancels(t *testing.T) {
	_, a, b := slowReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type answer struct {
		body string
		took time.Duration
		err  error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		_, body, err := postRPC(ctx, a.addr, `{"jsonrpc":"2.0","id":"cancel-me-7","method":"tools/call","params":{"name":"call_tool","arguments":{"address":"slow.wait","args":{},"timeoutMs":60000}}}`)
		done <- answer{body, time.Since(start), err}
	}()
	// Cancel through B until it matches (A's row lands within ~50 ms).
	var got string
	eventually(t, 15*time.Second, "the cancel matched on B", func() bool {
		code, _, err := postRPC(ctx, b.addr, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"cancel-me-7"}}`)
		if err != nil || code != http.StatusAccepted {
			t.Fatalf("cancel on B: %d %v", code, err)
		}
		resp, err := http.Get("http://" + b.addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		got = string(m)
		return strings.Contains(got, `connecta_cancellations_total{result="matched"} 1`)
	})
	select {
	case ans := <-done:
		if ans.err != nil || !strings.Contains(ans.body, "cancel") || ans.took > 30*time.Second {
			t.Fatalf("A's call after the cancel on B (%s): %v %.400s", ans.took, ans.err, ans.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("A's call did not end after the cancel reached B")
	}
	// A request id nobody runs is unknown on both.
	code, _, _ := postRPC(ctx, a.addr, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody"}}`)
	if code != http.StatusAccepted {
		t.Fatalf("unknown cancel: %d", code)
	}
}

// TestReplicas_SameRequestIDOnTwoReplicasIsAmbiguous: "exactly one match"
// counts every replica's requests: the same (actor, id) running on A and on
// B makes a cancel ambiguous, and neither is cancelled.
func TestReplicas_SameRequestIDOnTwoReplicasIsAmbiguous(t *testing.T) {
	url, a, b := slowReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	callCtx, stopCalls := context.WithCancel(ctx)
	ended := make(chan struct{}, 2)
	for _, p := range []*serverProcess{a, b} {
		go func() {
			_, _, _ = postRPC(callCtx, p.addr, `{"jsonrpc":"2.0","id":"dup-1","method":"tools/call","params":{"name":"call_tool","arguments":{"address":"slow.wait","args":{},"timeoutMs":60000}}}`)
			ended <- struct{}{}
		}()
	}
	eventually(t, 15*time.Second, "both requests in flight", func() bool {
		var n int
		_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM inflight WHERE request_id = '"dup-1"'`).Scan(&n)
		return n == 2
	})
	eventually(t, 15*time.Second, "the cancel found both", func() bool {
		if code, _, err := postRPC(ctx, a.addr, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"dup-1"}}`); err != nil || code != http.StatusAccepted {
			t.Fatalf("cancel: %d %v", code, err)
		}
		resp, err := http.Get("http://" + a.addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(m), `connecta_cancellations_total{result="ambiguous"} 1`)
	})
	select {
	case <-ended:
		t.Fatal("an ambiguous cancel ended a call")
	case <-time.After(time.Second):
	}
	stopCalls()
	<-ended
	<-ended
}
