package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/connecta-dev/connecta/internal/config"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
	"github.com/connecta-dev/connecta/test/pgtest"
	"github.com/connecta-dev/connecta/test/testkit"
)

var inboundAccounts = map[string]oidctest.Account{
	"alice": {Email: "alice@example.com", EmailVerified: true, Groups: []string{"connecta-operators"}},
	"bob":   {Email: "bob@example.com", EmailVerified: false},
}

// serveConfig writes yaml to a file, runs serve on it in this process until
// the test ends, and returns the file's path.
func serveConfig(t *testing.T, ctx context.Context, addr, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "connecta.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, resolver(""))
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, ctx, cfg, addr, "serve "+addr)
	return path
}

// serveUntilCleanup runs serve on cfg in this process until the test ends
// (its error, named by what, fails the test) and returns once addr answers
// /health.
func serveUntilCleanup(t *testing.T, ctx context.Context, cfg *config.Config, addr, what string) {
	t.Helper()
	serveCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- serve(serveCtx, cfg, serveOptions{log: newLogger(&testkit.Buffer{})}) }()
	t.Cleanup(func() {
		stop()
		if err := <-errc; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
	waitHealthy(t, "http://"+addr)
}

// post sends an initialize request with the given Authorization headers.
func post(t *testing.T, url string, authorization ...string) (*http.Response, map[string]any) {
	t.Helper()
	req := testkit.MCPRequest(t, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	for _, a := range authorization {
		req.Header.Add("Authorization", a)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &body)
	return res, body
}

func bearerSession(t *testing.T, ctx context.Context, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "inbound-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token: token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect with a bearer token: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func rejections(t *testing.T, base, reason string) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)^connecta_auth_rejections_total\{reason="` + reason + `"\} (\d+)$`)
	m := re.FindStringSubmatch(get(t, base+"/metrics"))
	if m == nil {
		t.Fatalf("no connecta_auth_rejections_total{reason=%q}", reason)
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}

// activityActors reads /activity with token and returns "actor|actorName"
// of each event.
func activityActors(t *testing.T, base, token string) []string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/activity", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var page struct {
		Events []struct{ Actor, ActorName string }
	}
	if err := json.NewDecoder(res.Body).Decode(&page); err != nil || res.StatusCode != 200 {
		t.Fatalf("/activity: HTTP %d %v", res.StatusCode, err)
	}
	var out []string
	for _, e := range page.Events {
		out = append(out, e.Actor+"|"+e.ActorName)
	}
	return out
}

// TestInboundOIDC_EndToEnd: connecta as an OAuth-protected MCP resource of
// an authorization server (the hermetic twin under -short, the real
// oidc-provider otherwise). The 401 challenge names the protected resource
// metadata, which names the provider; a go-sdk client and the TypeScript
// SDK client call /mcp with JWT access tokens the provider issued for
// {publicUrl}/mcp; the caller is the activity actor oidc:<sub>; static
// tokens keep working; refusals carry their status and are counted.
func TestInboundOIDC_EndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	p := oidctest.StartAuthServer(t, oidctest.Options{Accounts: inboundAccounts})
	other := oidctest.StartAuthServer(t, oidctest.Options{Accounts: inboundAccounts})
	issuer := p.IssuerURL()
	addr := testkit.FreeAddr(t)
	base := "http://" + addr
	resource := base + "/mcp"
	t.Setenv("CONNECTA_TEST_STATIC_TOKEN", "static-token-0123456789abcdef")
	path := serveConfig(t, ctx, addr, fmt.Sprintf(`listen: %s
publicUrl: %s
executor: {spares: 0}
auth:
  tokens: [{name: laptop, token: "${env:CONNECTA_TEST_STATIC_TOKEN}"}]
  oidc:
    issuer: %s
    callers: {emails: [alice@example.com, bob@example.com]}
    operators: {claim: {name: groups, value: connecta-operators}}
connectors:
  - {id: demo, builtin: demo}
`, addr, base, issuer))

	// The challenge and the metadata (RFC 9728) lead a client to the provider.
	res, body := post(t, resource)
	challenges, err := oauthex.ParseWWWAuthenticate(res.Header.Values("WWW-Authenticate"))
	if res.StatusCode != 401 || err != nil || len(challenges) != 1 || challenges[0].Params["resource_metadata"] != base+"/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("no token: HTTP %d, challenge %v (%v), body %v", res.StatusCode, res.Header.Values("WWW-Authenticate"), err, body)
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, challenges[0].Params["resource_metadata"], resource, nil)
	if err != nil || prm.Resource != resource || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != issuer {
		t.Fatalf("metadata %+v, %v", prm, err)
	}
	if plain := get(t, base+"/.well-known/oauth-protected-resource"); !strings.Contains(plain, `"authorization_servers":["`+issuer+`"]`) {
		t.Fatalf("well-known metadata: %s", plain)
	}

	// A JWT access token for this resource: a go-sdk client calls, and the
	// call is recorded under oidc:alice.
	alice, err := p.AccessToken(ctx, resource, "alice")
	if err != nil {
		t.Fatal(err)
	}
	cs := bearerSession(t, ctx, resource, alice)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 6 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	if text, isErr, err := callTool(ctx, cs, "demo.list_projects"); err != nil || isErr {
		t.Fatalf("call_tool: %v %s", err, text)
	}
	if !testkit.Poll(10*time.Second, func() bool {
		return strings.Contains(strings.Join(activityActors(t, base, alice), " "), "oidc:alice|")
	}) {
		t.Fatalf("activity actors %v, want oidc:alice", activityActors(t, base, alice))
	}
	// The static token is checked first and still works.
	if _, err := bearerSession(t, ctx, resource, "static-token-0123456789abcdef").ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}

	// doctor fetches the provider's discovery and keys.
	if code, out, errs := runCLI("doctor", "--config", path); !strings.Contains(out, "identity provider: ok ("+issuer) {
		t.Errorf("doctor: exit %d\n%s%s", code, out, errs)
	}

	// Refusals: status, a secret-free message, the counter.
	wrongIssuer, err := other.AccessToken(ctx, resource, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := p.AccessToken(ctx, resource, "bob")
	if err != nil {
		t.Fatal(err)
	}
	wrongAudience, err := p.AccessToken(ctx, "http://127.0.0.1:1/mcp", "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what   string
		auth   []string
		status int
		reason string
	}{
		{"opaque", []string{"Bearer 2YotnFZFEjr1zCsicMWpAA"}, 401, "opaque_token"},
		{"wrong issuer", []string{"Bearer " + wrongIssuer}, 401, "wrong_issuer"},
		{"wrong audience", []string{"Bearer " + wrongAudience}, 401, "wrong_audience"},
		{"unverified email", []string{"Bearer " + bob}, 403, "caller_not_allowed"},
		{"unknown issued token", []string{"Bearer cta_" + strings.Repeat("Q", 43)}, 401, "unknown_token"},
		{"two schemes in one header", []string{"Bearer " + alice + ", Basic YTpi"}, 400, "malformed"},
		{"two headers", []string{"Bearer " + alice, "Bearer " + alice}, 400, "malformed"},
		{"another scheme", []string{"Basic YTpi"}, 401, "missing"},
	} {
		before := rejections(t, base, tc.reason)
		res, body := post(t, resource, tc.auth...)
		msg := fmt.Sprint(body["error"])
		if res.StatusCode != tc.status || strings.Contains(msg, alice) || strings.Contains(msg, "2YotnFZFEjr1zCsicMWpAA") {
			t.Errorf("%s: HTTP %d %s, want %d", tc.what, res.StatusCode, msg, tc.status)
		}
		if tc.status == 401 && !strings.Contains(res.Header.Get("WWW-Authenticate"), `resource_metadata="`+base) {
			t.Errorf("%s: challenge %q", tc.what, res.Header.Get("WWW-Authenticate"))
		}
		if after := rejections(t, base, tc.reason); after != before+1 {
			t.Errorf("%s: connecta_auth_rejections_total{reason=%q} %d → %d", tc.what, tc.reason, before, after)
		}
	}

	// The TypeScript SDK client with the same token, and without one (a
	// subtest: it skips where node and the client are not installed).
	t.Run("TypeScriptClient", func(t *testing.T) {
		if out := tsBearer(t, resource, alice); out["tools"] == nil || out["isError"] != false {
			t.Fatalf("TypeScript client: %v", out)
		}
		if out := tsBearer(t, resource, ""); !strings.Contains(fmt.Sprint(out["connectError"]), "unauthorized") {
			t.Fatalf("TypeScript client without a token: %v", out)
		}
	})
}

// tsBearer runs client.mjs's bearer scenario with token.
func tsBearer(t *testing.T, url, token string) map[string]any {
	t.Helper()
	dir := filepath.Join("..", "..", "test", "tsclient", "testdata")
	node := testkit.TSClientNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", "bearer", url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONNECTA_TS_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs bearer: %v\n%s", err, stderr.String())
	}
	var m map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		_ = json.Unmarshal(sc.Bytes(), &m)
	}
	return m
}

var secretLine = regexp.MustCompile(`(?m)^(cta_[A-Za-z0-9_-]{43})$`)
var tokenIDLine = regexp.MustCompile(`token ([0-9a-f-]{36}) `)

// TestIssuedTokens_TwoReplicasSharePostgres: `connecta token create`
// prints the secret once; both replicas admit it; a rename shows in the
// activity of either; after `connecta token revoke` the next request on
// either replica is refused. Every change is an audit record.
func TestIssuedTokens_TwoReplicasSharePostgres(t *testing.T) {
	// Not skipped under -short: CI's `make test` must run it (about 4 s;
	// pgtest skips visibly without PostgreSQL unless CONNECTA_REQUIRE_POSTGRES).
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cluster := pgtest.Start(t)
	t.Setenv("CONNECTA_TEST_STORE_URL", cluster.Database(t))
	addrs := []string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
	var path string
	for _, addr := range addrs {
		path = serveConfig(t, ctx, addr, fmt.Sprintf(`listen: %s
executor: {spares: 0}
store: {url: "${env:CONNECTA_TEST_STORE_URL}"}
accessTokens: {maxActive: 5}
connectors:
  - {id: demo, builtin: demo}
`, addr))
	}
	// Auth is required before any token is issued, loopback clients too.
	if res, body := post(t, "http://"+addrs[0]+"/mcp"); res.StatusCode != 401 {
		t.Fatalf("no token issued yet, no credentials: HTTP %d %v", res.StatusCode, body)
	}
	code, out, errs := runCLI("token", "create", "Alice laptop", "--config", path)
	// The secret alone on stdout (so $(connecta token create …) is it), the
	// description on stderr.
	secret, id := secretLine.FindStringSubmatch(out), tokenIDLine.FindStringSubmatch(errs)
	if code != 0 || secret == nil || id == nil || out != secret[1]+"\n" {
		t.Fatalf("token create: exit %d\n%s%s", code, out, errs)
	}
	for _, addr := range addrs {
		cs := bearerSession(t, ctx, "http://"+addr+"/mcp", secret[1])
		if text, isErr, err := callTool(ctx, cs, "demo.list_projects"); err != nil || isErr {
			t.Fatalf("%s: call_tool: %v %s", addr, err, text)
		}
	}
	if code, out, errs := runCLI("token", "rename", id[1], "Alice old laptop", "--config", path); code != 0 {
		t.Fatalf("rename: %d %s%s", code, out, errs)
	}
	want := "token:" + id[1] + "|Alice old laptop"
	for _, addr := range addrs {
		if !testkit.Poll(10*time.Second, func() bool {
			return strings.Contains(strings.Join(activityActors(t, "http://"+addr, secret[1]), " "), want)
		}) {
			t.Fatalf("%s: activity %v, want %s", addr, activityActors(t, "http://"+addr, secret[1]), want)
		}
	}
	if code, out, _ := runCLI("token", "list", "--config", path); code != 0 || !strings.Contains(out, "Alice old laptop") || strings.Contains(out, secret[1]) {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if code, out, errs := runCLI("token", "revoke", id[1], "--config", path); code != 0 {
		t.Fatalf("revoke: %d %s%s", code, out, errs)
	}
	for _, addr := range addrs {
		res, body := post(t, "http://"+addr+"/mcp", "Bearer "+secret[1])
		if res.StatusCode != 401 || !strings.Contains(fmt.Sprint(body["error"]), "revoked") {
			t.Errorf("%s after revoke: HTTP %d %v", addr, res.StatusCode, body)
		}
		if n := rejections(t, "http://"+addr, "revoked_token"); n != 1 {
			t.Errorf("%s: revoked_token rejections %d", addr, n)
		}
	}

	// The store down: an issued token cannot be checked — 503, not 401.
	code, out, errs = runCLI("token", "create", "CI", "--config", path)
	second := secretLine.FindStringSubmatch(out)
	if code != 0 || second == nil {
		t.Fatalf("token create: exit %d\n%s%s", code, out, errs)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	res, body := post(t, "http://"+addrs[0]+"/mcp", "Bearer "+second[1])
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || rejections(t, "http://"+addrs[0], "store_unavailable") != 1 {
		t.Errorf("store down: HTTP %d %v (Retry-After %q)", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	status := 0
	if !testkit.Poll(30*time.Second, func() bool {
		res, _ := post(t, "http://"+addrs[0]+"/mcp", "Bearer "+second[1])
		status = res.StatusCode
		return status == http.StatusOK
	}) {
		t.Fatalf("after the store came back: HTTP %d", status)
	}
}

// TestTokenCLI_RefusesMemoryAndNeedsAccessTokens: the CLI writes only a
// durable store, and only for a config that issues tokens.
func TestTokenCLI_RefusesMemoryAndNeedsAccessTokens(t *testing.T) {
	dir := t.TempDir()
	mem := filepath.Join(dir, "mem.yaml")
	_ = os.WriteFile(mem, []byte("accessTokens: {}\n"), 0o600)
	if code, _, errs := runCLI("token", "list", "--config", mem); code != 1 || !strings.Contains(errs, "memory:") {
		t.Errorf("memory: exit %d %s", code, errs)
	}
	none := filepath.Join(dir, "none.yaml")
	_ = os.WriteFile(none, []byte("store: {url: \"sqlite:"+filepath.Join(dir, "s.db")+"\"}\n"), 0o600)
	if code, _, errs := runCLI("token", "create", "x", "--config", none); code != 1 || !strings.Contains(errs, "accessTokens") {
		t.Errorf("no accessTokens: exit %d %s", code, errs)
	}
	// Refused for its configuration: the sqlite: file was never created.
	if _, err := os.Stat(filepath.Join(dir, "s.db")); !os.IsNotExist(err) {
		t.Errorf("a refused command created the store file: %v", err)
	}
	// A name with markup says that markup is the problem, before any file.
	some := filepath.Join(dir, "some.yaml")
	_ = os.WriteFile(some, []byte("accessTokens: {}\nstore: {url: \"sqlite:"+filepath.Join(dir, "t.db")+"\"}\n"), 0o600)
	if code, out, errs := runCLI("token", "create", "<b>x</b>", "--config", some); code != 2 || out != "" || !strings.Contains(errs, "markup") {
		t.Errorf("markup name: exit %d %q %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "t.db")); !os.IsNotExist(err) {
		t.Errorf("a refused name created the store file: %v", err)
	}
	if code, _, errs := runCLI("credential", "set", "nope", "k", "--config", some); code != 1 || !strings.Contains(errs, `no connector "nope"`) {
		t.Errorf("credential set nope: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI("oauth", "revoke", "nope", "--config", some); code != 1 || !strings.Contains(errs, `no connector "nope"`) {
		t.Errorf("oauth revoke nope: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI("vault", "reseal", "--config", some); code != 1 || !strings.Contains(errs, "vault is not configured") {
		t.Errorf("vault reseal without keys: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "t.db")); !os.IsNotExist(err) {
		t.Errorf("a refused command created the store file: %v", err)
	}
	if code, _, _ := runCLI("token", "frobnicate", "--config", none); code != 2 {
		t.Errorf("unknown verb: exit %d", code)
	}
}
