package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/server"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/pgtest"
	"github.com/connecta-dev/connecta/test/testkit"
)

// Access rules (docs/DECISIONS.md "Access rules"): what a caller cannot reach
// does not exist for it. Each door's answer to a caller is compared byte for
// byte with the answer of a reference server configured without what the
// caller cannot reach (and without access rules), through the real go-sdk
// client and real programs.

const (
	tokLaptop = "laptop-token-0123456789abcdef0123"
	tokCI     = "ci-token-0123456789abcdef01234567"
	tokOps    = "ops-token-0123456789abcdef0123456"
)

// accessServer is connecta from a YAML configuration (app.New, as serve
// builds it) over real HTTP, with the executor on the shared pool.
type accessServer struct {
	url string
	app *app.App
	reg *prometheus.Registry
}

func accessConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	env := map[string]string{"LAPTOP": tokLaptop, "CI": tokCI, "OPS": tokOps}
	cfg, err := config.Parse("access.yaml", []byte(yaml), config.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("configuration: %v\n%s", err, yaml)
	}
	return cfg
}

func newAccessServer(t *testing.T, yaml string) *accessServer { return newAccessServerB(t, yaml) }

func newAccessServerB(t testing.TB, yaml string) *accessServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveAccess(t, ln, yaml)
}

// serveAccess serves yaml on ln ("{url}" in yaml is ln's URL: publicUrl).
func serveAccess(t testing.TB, ln net.Listener, yaml string) *accessServer {
	t.Helper()
	cfg := accessConfig(t, strings.ReplaceAll(yaml, "{url}", "http://"+ln.Addr().String()))
	s := &accessServer{reg: prometheus.NewRegistry()}
	a, err := app.New(context.Background(), app.Options{Config: cfg, Version: "test", Registry: s.reg, Executor: true, Pool: sharedPool(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	s.app = a
	hs := a.Server.HTTPServer(ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	s.url = "http://" + ln.Addr().String()
	return s
}

func (s *accessServer) connect(t *testing.T, token string) *mcp.ClientSession {
	return s.connectB(t, token)
}

func (s *accessServer) connectB(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	h := &harness{url: s.url}
	return h.connect(t, token)
}

func (s *accessServer) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const accessAuth = `listen: 127.0.0.1:0
auth:
  tokens:
    - {name: laptop, token: "${env:LAPTOP}"}
    - {name: ci, token: "${env:CI}"}
    - {name: ops, token: "${env:OPS}", operator: true}
accessTokens: {maxActive: 10}
`

func demoConnector(id, title string, guide bool) string {
	s := fmt.Sprintf("  - id: %s\n    title: %s\n    builtin: demo\n", id, title)
	if guide {
		s += fmt.Sprintf("    guide: \"# %s guide\\n\\nUse search_issues first.\"\n", title)
	}
	return s
}

// The configuration under test: three connectors (each with a write tool),
// laptop on tracker and docs, ci on payments' list/get tools,
// ops everywhere with writes, issued tokens on tracker and payments.
var accessFull = accessAuth + "connectors:\n" + demoConnector("tracker", "Tracker", false) +
	demoConnector("docs", "Docs", false) + demoConnector("payments", "Payments", true) + `access:
  - callers: {tokens: [laptop]}
    connectors: [tracker, docs]
    writes: true
  - callers: {tokens: [ci]}
    connectors: [payments]
    tools: ["payments.list_*", "payments.get_*"]
  - callers: {tokens: [ops]}
    connectors: ["*"]
    writes: true
  - callers: {issuedTokens: true}
    connectors: [tracker, payments]
    writes: true
`

// laptop's reference: a server with only tracker and docs and no rules.
var accessLaptopRef = accessAuth + "connectors:\n" + demoConnector("tracker", "Tracker", false) + demoConnector("docs", "Docs", false)

// callText is the exact text of a tool call's answer.
func callText(t *testing.T, cs *mcp.ClientSession, tool, args string) string {
	t.Helper()
	res := call(t, cs, tool, args)
	b, err := json.Marshal(res.Content)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	return fmt.Sprintf("isError=%v content=%s structured=%s", res.IsError, b, sc)
}

func toolsListed(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Tools)
	return string(b)
}

// Every door a hidden connector could show through answers laptop exactly
// as a server without it answers.
func TestAccess_HiddenConnectorAnswersAsOneNotConfigured(t *testing.T) {
	full, ref := newAccessServer(t, accessFull), newAccessServer(t, accessLaptopRef)
	got, want := full.connect(t, tokLaptop), ref.connect(t, tokLaptop)

	if g, w := toolsListed(t, got), toolsListed(t, want); g != w {
		t.Errorf("tools/list differs from the server without payments:\n got %s\nwant %s", g, w)
	}
	if !strings.Contains(toolsListed(t, got), "Connectors: tracker (Tracker), docs (Docs).") {
		t.Errorf("execute_code's inventory is not laptop's: %s", toolsListed(t, got))
	}
	doors := []struct{ tool, args string }{
		{server.ToolSearchTools, `{}`},
		{server.ToolSearchTools, `{"query":"comment issues","limit":100}`},
		{server.ToolSearchTools, `{"connector":"payments"}`},
		{server.ToolSearchTools, `{"query":"payments"}`},
		{server.ToolSearchTools, `{"safety":"approvalRequired"}`},
		{server.ToolCallTool, `{"address":"payments.list_projects"}`},
		{server.ToolCallTool, `{"address":"tracker.list_projects","resultMode":"value"}`},
		{server.ToolCallDestructiveTool, `{"address":"payments.add_comment","args":{"id":"x"}}`},
		{server.ToolAuthorizeConnector, `{"connector":"payments"}`},
		{server.ToolSkills, `{}`},
		{server.ToolSkills, `{"name":"connector:payments"}`},
		{server.ToolSkills, `{"name":"payments"}`},
		{server.ToolExecuteCode, `{"code":"async () => { const s = await connecta.search({ query: \"list\", limit: 100 }); let c; try { await connecta.call(\"payments.list_projects\", {}); } catch (e) { c = { code: e.code, message: e.message, details: e.details }; } const d = await connecta.describe({ addresses: [\"payments.list_projects\", \"tracker.list_projects\"] }); const p = await connecta.search({ connector: \"payments\" }); return { s, c, d, p }; }"}`},
	}
	for _, d := range doors {
		g, w := stripTimings(callText(t, got, d.tool, d.args)), stripTimings(callText(t, want, d.tool, d.args))
		if g != w {
			t.Errorf("%s(%s) differs from the server without payments:\n got %s\nwant %s", d.tool, d.args, g, w)
		}
	}
	if g, w := activityAsSeen(t, full, tokLaptop), activityAsSeen(t, ref, tokLaptop); g != w || !strings.Contains(g, "payments.list_projects") {
		t.Errorf("laptop's /activity differs from the server without payments:\n got %s\nwant %s", g, w)
	}
}

// activityAsSeen is the caller's /activity without what differs run to
// run (ids, times, durations).
func activityAsSeen(t *testing.T, s *accessServer, token string) string {
	t.Helper()
	_, body := s.get(t, "/activity?limit=100", token)
	var page struct{ Events []map[string]any }
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatalf("/activity: %v: %s", err, body)
	}
	for _, e := range page.Events {
		for _, k := range []string{"id", "occurredAt", "requestId", "durationMs"} {
			delete(e, k)
		}
	}
	b, _ := json.Marshal(page.Events)
	return string(b)
}

var timings = regexp.MustCompile(`([a-zA-Z]+Ms)(\\?)":\d+`)

func stripTimings(s string) string { return timings.ReplaceAllString(s, `$1$2":0`) }

// A tool hidden by a glob, or a write without writes: true, answers as a
// tool the connector does not have.
func TestAccess_HiddenToolAnswersAsUnknownTool(t *testing.T) {
	full := newAccessServer(t, accessFull)
	ci, laptop := full.connect(t, tokCI), full.connect(t, tokLaptop)
	same := func(cs *mcp.ClientSession, tool, hidden, missing string) {
		t.Helper()
		h := stripTimings(callText(t, cs, tool, `{"address":"`+hidden+`","args":{}}`))
		m := stripTimings(callText(t, cs, tool, `{"address":"`+missing+`","args":{}}`))
		if h != strings.ReplaceAll(m, "zz", "") {
			t.Errorf("%s %s is not answered as an unknown tool:\n hidden  %s\n missing %s", tool, hidden, h, m)
		}
		if !strings.Contains(h, "unknown_tool") {
			t.Errorf("%s %s: %s", tool, hidden, h)
		}
	}
	same(ci, server.ToolCallTool, "payments.search_issues", "payments.zzsearch_issues")
	same(ci, server.ToolCallDestructiveTool, "payments.add_comment", "payments.zzadd_comment")
	same(ci, server.ToolCallTool, "payments.add_comment", "payments.zzadd_comment")
	if r := callText(t, laptop, server.ToolCallDestructiveTool, `{"address":"tracker.add_comment","args":{}}`); strings.Contains(r, "unknown_tool") {
		t.Errorf("laptop's rule says writes: true, yet: %s", r)
	}
	if r := callText(t, ci, server.ToolCallTool, `{"address":"payments.list_projects","resultMode":"value"}`); strings.Contains(r, "isError=true") {
		t.Errorf("ci's own tool refused: %s", r)
	}
	page := callText(t, ci, server.ToolSearchTools, `{"limit":100}`)
	for _, name := range []string{`\"payments.search_issues\"`, "add_comment", "tracker.", "docs."} {
		if strings.Contains(page, name) {
			t.Errorf("ci's search shows %s: %s", name, page)
		}
	}
	if !strings.Contains(page, `\"total\":5`) {
		t.Errorf("ci's total is not its 5 list/get tools: %s", page)
	}
	// ops reaches the write through the rule that says writes: true.
	ops := full.connect(t, tokOps)
	if r := callText(t, ops, server.ToolCallDestructiveTool, `{"address":"payments.add_comment","args":{"issueId":"PAY-1","body":"ok"}}`); strings.Contains(r, "unknown_tool") {
		t.Errorf("ops refused: %s", r)
	}
}

// Denials are recorded for operators (outcome denied, the metric) and shown
// to the caller as the unknown-address event; a caller sees only its own
// events; /health and /metrics are operator surfaces.
func TestAccess_DenialsActivityHealthMetrics(t *testing.T) {
	full := newAccessServer(t, accessFull)
	if _, m := full.get(t, "/metrics", tokOps); !strings.Contains(m, `connecta_access_denied_total{connector="payments"} 0`) {
		t.Fatalf("the denial counter does not exist at zero")
	}
	laptop, ci := full.connect(t, tokLaptop), full.connect(t, tokCI)
	callText(t, laptop, server.ToolCallTool, `{"address":"payments.list_projects"}`)
	callText(t, ci, server.ToolCallTool, `{"address":"payments.list_projects"}`)

	_, mine := full.get(t, "/activity", tokLaptop)
	if strings.Contains(mine, `"actor":"ci"`) || !strings.Contains(mine, `"actor":"laptop"`) {
		t.Errorf("laptop's /activity is not its own: %s", mine)
	}
	if strings.Contains(mine, "denied") || !strings.Contains(mine, `"outcome":"error"`) || !strings.Contains(mine, `"errorCode":"unknown_address"`) {
		t.Errorf("laptop's view of its denial is not the unknown-address event: %s", mine)
	}
	if _, other := full.get(t, "/activity?actor=ci", tokLaptop); strings.Contains(other, `"actor":"ci"`) {
		t.Errorf("laptop read ci's events: %s", other)
	}
	_, all := full.get(t, "/activity?outcome=denied", tokOps)
	if !strings.Contains(all, `"actor":"laptop"`) || !strings.Contains(all, `"outcome":"denied"`) {
		t.Errorf("operators do not see the denial: %s", all)
	}
	if _, m := full.get(t, "/metrics", tokOps); !strings.Contains(m, `connecta_access_denied_total{connector="payments"} 1`) {
		t.Errorf("the denial was not counted")
	}
	if code, _ := full.get(t, "/metrics", tokLaptop); code != http.StatusUnauthorized {
		t.Errorf("/metrics for a non-operator: %d", code)
	}
	if code, _ := full.get(t, "/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d", code)
	}
	for _, tok := range []string{"", tokLaptop, "junk"} {
		if code, h := full.get(t, "/health", tok); code != http.StatusOK || h != "{\"status\":\"ok\",\"version\":\"test\"}\n" {
			t.Errorf("/health for %q: %d %s", tok, code, h)
		}
	}
	if _, h := full.get(t, "/health", tokOps); !strings.Contains(h, "connectorStates") {
		t.Errorf("/health for an operator is not the full report: %s", h)
	}
}

// An issued token narrowed at creation reaches the intersection of its
// list and the rules (and its list is stored with the token).
func TestAccess_NarrowedIssuedToken(t *testing.T) {
	full := newAccessServer(t, accessFull)
	m := full.app.AccessTokens()
	secret, tok, err := m.CreateNarrowed(context.Background(), "agent", "test", []string{"payments", "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Get(context.Background(), tok.ID); !slices.Equal(got.Connectors, []string{"payments", "docs"}) {
		t.Fatalf("narrowing not stored: %+v", got)
	}
	wide, _, err := m.Create(context.Background(), "wide", "test")
	if err != nil {
		t.Fatal(err)
	}
	narrow, all := full.connect(t, secret), full.connect(t, wide)
	page := callText(t, narrow, server.ToolSearchTools, `{"limit":100}`)
	if !strings.Contains(page, "payments.") || strings.Contains(page, "tracker.") || strings.Contains(page, "docs.") {
		t.Errorf("narrowed token's search (payments ∩ {tracker,payments}): %s", page)
	}
	if r := callText(t, narrow, server.ToolCallTool, `{"address":"tracker.list_projects"}`); !strings.Contains(r, "unknown_address") {
		t.Errorf("narrowed token reached tracker: %s", r)
	}
	if r := callText(t, all, server.ToolCallTool, `{"address":"tracker.list_projects"}`); strings.Contains(r, "isError=true") {
		t.Errorf("a token without narrowing lost tracker: %s", r)
	}
	if l := toolsListed(t, narrow); !strings.Contains(l, "Connectors: payments (Payments).") {
		t.Errorf("narrowed inventory: %s", l)
	}
}

// get_result ids belong to the caller whose call stashed them: another
// caller gets exactly the unknown-id answer.
func TestAccess_GetResultIsTheCallersOwn(t *testing.T) {
	h := newHarness(t, harnessOptions{tokens: []server.Token{{Name: "laptop", Value: tokLaptop}, {Name: "ci", Value: tokCI}}, maxInlineBytes: 1024})
	owner, other := h.connect(t, tokLaptop), h.connect(t, tokCI)
	res := call(t, owner, server.ToolCallTool, `{"address":"down.big","args":{"bytes":5000}}`)
	raw, _ := json.Marshal(res.Content)
	id := regexp.MustCompile(`resultId\\?":\\?"([0-9a-f-]+)`).FindStringSubmatch(string(raw))
	if id == nil {
		t.Fatalf("no resultId: %s", raw)
	}
	if r := call(t, owner, server.ToolGetResult, `{"id":"`+id[1]+`"}`); r.IsError {
		t.Fatalf("owner's page: %s", textOf(t, r))
	}
	theirs := textOf(t, call(t, other, server.ToolGetResult, `{"id":"`+id[1]+`"}`))
	fake := "00000000-0000-4000-8000-000000000000"
	never := textOf(t, call(t, other, server.ToolGetResult, `{"id":"`+fake+`"}`))
	if strings.ReplaceAll(theirs, id[1], fake) != never {
		t.Errorf("another caller's page is not the unknown-id answer:\n got %s\nwant %s", theirs, never)
	}
}

// SIGHUP's reload replaces the rules atomically: the next request runs
// under the new ones, while a program already running keeps the rules it
// started with.
func TestAccess_ReloadNextRequestNewRulesRunningProgramOld(t *testing.T) {
	down := newDownstream(t)
	conf := func(connectors string) string {
		return accessAuth + "connectors:\n" + demoConnector("tracker", "Tracker", false) +
			"  - id: down\n    url: \"" + down.url + "/mcp\"\n" +
			"access:\n  - callers: {tokens: [laptop]}\n    connectors: [" + connectors + "]\n"
	}
	s := newAccessServer(t, conf("tracker, down"))
	laptop := s.connect(t, tokLaptop)
	program := make(chan string, 1)
	go func() {
		res, err := laptop.CallTool(context.Background(), &mcp.CallToolParams{Name: server.ToolExecuteCode, Arguments: map[string]any{
			"code": `async () => { await connecta.call("down.sleep", { ms: 3000 }); return await connecta.call("down.echo", { after: "reload" }); }`}})
		if err != nil {
			program <- err.Error()
			return
		}
		b, _ := json.Marshal(res.Content)
		program <- string(b)
	}()
	<-down.sleepStarted
	s.app.Reload(accessConfig(t, conf("tracker")), slog.New(slog.DiscardHandler))
	if r := callText(t, laptop, server.ToolCallTool, `{"address":"down.echo","args":{}}`); !strings.Contains(r, "unknown_address") {
		t.Errorf("the next request still reaches the removed connector: %s", r)
	}
	if l := toolsListed(t, laptop); !strings.Contains(l, "Connectors: tracker (Tracker).") {
		t.Errorf("tools/list still lists the removed connector: %s", l)
	}
	if got := <-program; !strings.Contains(got, `after`) || strings.Contains(got, "unknown_address") {
		t.Errorf("the running program lost its start rules: %s", got)
	}
}

// Two replicas on one PostgreSQL agree on an issued token's narrowing: it
// is created through one and enforced by the other.
func TestAccess_ReplicasOnOnePostgresAgreeOnNarrowing(t *testing.T) {
	db := pgtest.Start(t).Database(t)
	conf := strings.Replace(accessFull, "accessTokens: {maxActive: 10}\n", "accessTokens: {maxActive: 10}\nstore: {url: \""+db+"\"}\n", 1)
	a, b := newAccessServer(t, conf), newAccessServer(t, conf)
	secret, _, err := a.app.AccessTokens().CreateNarrowed(context.Background(), "agent", "test", []string{"tracker"})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*accessServer{"creating replica": a, "other replica": b} {
		cs := s.connect(t, secret)
		if r := callText(t, cs, server.ToolCallTool, `{"address":"payments.list_projects"}`); !strings.Contains(r, "unknown_address") {
			t.Errorf("%s: the narrowed token reached payments: %s", name, r)
		}
		if r := callText(t, cs, server.ToolCallTool, `{"address":"tracker.list_projects"}`); strings.Contains(r, "isError=true") {
			t.Errorf("%s: the narrowed token lost tracker: %s", name, r)
		}
	}
}

// tsAccess runs the TypeScript client's access scenario: tools/list and
// each call, as exact texts.
func tsAccess(t *testing.T, url, token string, calls [][2]any) map[string]any {
	t.Helper()
	node := testkit.TSClientNode(t, tsClientDir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec, _ := json.Marshal(calls)
	cmd := exec.CommandContext(ctx, node, "client.mjs", "access", url+"/mcp")
	cmd.Dir = tsClientDir
	cmd.Env = append(os.Environ(), "CONNECTA_TS_TOKEN="+token, "CONNECTA_TS_CALLS="+string(spec))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs access: %v\n%s", err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("client.mjs access printed %q: %v", out, err)
	}
	return m
}

// OIDC users with different groups claims (of the hermetic twin under
// -short, the real oidc-provider otherwise), through the official
// TypeScript client: each sees at every door exactly what a server
// configured with only its connectors shows.
func TestAccess_OIDCGroupsThroughTheTypeScriptClient(t *testing.T) {
	p := oidctest.StartAuthServer(t, oidctest.Options{Accounts: map[string]oidctest.Account{
		"fin": {Email: "fin@example.com", EmailVerified: true, Groups: []string{"finance"}},
		"eng": {Email: "eng@example.com", EmailVerified: true, Groups: []string{"eng", "staff"}},
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := serveAccess(t, ln, "publicUrl: \"{url}\"\n"+strings.Replace(accessFull, "accessTokens:",
		"  oidc: {issuer: \""+p.IssuerURL()+"\", callers: {any: true}}\naccessTokens:", 1)+`  - callers: {oidc: {claim: {name: groups, value: finance}}}
    connectors: [payments]
    writes: true
  - callers: {oidc: {claim: {name: groups, value: eng}}}
    connectors: [tracker, docs]
    writes: true
`)
	_ = full
	resource := "http://" + ln.Addr().String() + "/mcp"
	calls := [][2]any{
		{server.ToolSearchTools, map[string]any{"limit": 100}},
		{server.ToolSearchTools, map[string]any{"query": "comment"}},
		{server.ToolCallTool, map[string]any{"address": "payments.list_projects"}},
		{server.ToolCallTool, map[string]any{"address": "tracker.list_projects"}},
		{server.ToolCallDestructiveTool, map[string]any{"address": "docs.add_comment", "args": map[string]any{}}},
		{server.ToolAuthorizeConnector, map[string]any{"connector": "tracker"}},
		{server.ToolAuthorizeConnector, map[string]any{"connector": "payments"}},
		{server.ToolSkills, map[string]any{}},
		{server.ToolSkills, map[string]any{"name": "connector:payments"}},
		{server.ToolExecuteCode, map[string]any{"code": `async () => { const s = await connecta.search({ limit: 100 }); const d = await connecta.describe({ addresses: ["payments.get_issue", "docs.get_issue"] }); let e; try { await connecta.call("docs.list_labels", {}); } catch (x) { e = x.code; } return { s: s.tools.map((t) => t.address), total: s.total, d, e }; }`}},
	}
	for _, tc := range []struct{ account, ref string }{
		{"fin", accessAuth + "connectors:\n" + demoConnector("payments", "Payments", true)},
		{"eng", accessAuth + "connectors:\n" + demoConnector("tracker", "Tracker", false) + demoConnector("docs", "Docs", false)},
	} {
		token, err := p.AccessToken(context.Background(), resource, tc.account)
		if err != nil {
			t.Fatal(err)
		}
		ref := newAccessServer(t, tc.ref)
		got, want := tsAccess(t, "http://"+ln.Addr().String(), token, calls), tsAccess(t, ref.url, tokLaptop, calls)
		if len(want) != len(calls)+1 || len(got) != len(want) {
			t.Fatalf("%s: the client answered %d and %d doors, want %d", tc.account, len(got), len(want), len(calls)+1)
		}
		if s := fmt.Sprint(got[server.ToolSearchTools+` {"limit":100}`]); !strings.Contains(s, `total\":`) {
			t.Fatalf("%s: no search page: %s", tc.account, s)
		}
		for k, w := range want {
			if g := got[k]; stripTimings(fmt.Sprint(g)) != stripTimings(fmt.Sprint(w)) {
				t.Errorf("%s: %s differs from the server with only its connectors:\n got %v\nwant %v", tc.account, k, g, w)
			}
		}
	}
}

// A tool hidden by a glob takes the catalog path of an unknown tool: with
// the downstream down both fail the same way (no failure mode tells them
// apart), and a hidden connector fails before any catalog work.
func TestAccess_HiddenToolSameCatalogFailureWhenDown(t *testing.T) {
	down := newDownstream(t)
	s := newAccessServer(t, accessAuth+"connectors:\n  - id: down\n    url: \""+down.url+"/mcp\"\n"+demoConnector("tracker", "Tracker", false)+
		"access:\n  - callers: {tokens: [laptop]}\n    connectors: [down]\n    tools: [\"down.echo\"]\n")
	laptop := s.connect(t, tokLaptop)
	down.mode.Store("500")
	hidden := stripTimings(callText(t, laptop, server.ToolCallTool, `{"address":"down.list_items","args":{}}`))
	unknown := stripTimings(callText(t, laptop, server.ToolCallTool, `{"address":"down.zzlist_items","args":{}}`))
	if !strings.Contains(hidden, "isError=true") || strings.Contains(hidden, "unknown_tool") || hidden != strings.ReplaceAll(unknown, "zz", "") {
		t.Errorf("with the downstream down, hidden and unknown tools differ:\n hidden  %s\n unknown %s", hidden, unknown)
	}
	if r := callText(t, laptop, server.ToolCallTool, `{"address":"tracker.list_projects","args":{}}`); !strings.Contains(r, "unknown_address") {
		t.Errorf("a hidden connector: %s", r)
	}
}

// With access rules tools/list is per caller: private to it, and short-lived
// so a reloaded rule shows within a minute.
func TestAccess_ToolsListIsPrivateAndShortLived(t *testing.T) {
	s := newAccessServer(t, accessFull)
	req := testkit.MCPRequest(t, s.url+"/mcp", strings.NewReader(toolsListBody))
	req.Header.Set("Authorization", "Bearer "+tokLaptop)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"ttlMs":30000`) || !strings.Contains(string(body), `"cacheScope":"private"`) || !strings.Contains(string(body), `Connectors: tracker (Tracker), docs (Docs).`) {
		t.Errorf("tools/list: %s", body)
	}
}
