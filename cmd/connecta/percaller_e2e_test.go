package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// subjectDownstream is a go-sdk HTTP server protected by per-user API keys:
// whoami answers the subject the key belongs to (never the key), and a
// request without a known key is 401.
func subjectDownstream(t *testing.T, keys map[string]string) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "keys", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "subject=" + keys[req.Extra.Header.Get("X-Key")]}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := keys[r.Header.Get("X-Key")]; !ok {
			http.Error(w, "unknown key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestPerCallerCredential_EndToEnd: a `credential.per: caller` connector in
// a real `connecta serve`; operators set each token actor's own value with
// `connecta credential set … --actor`; each static token's call_tool and
// program reach the downstream as its own subject; a token without one gets
// auth_required (recovery credential) while the other keeps working;
// deleting one actor's value ends that actor's access only; the CLI refuses
// a per-caller connector without --actor, --actor on a connector-wide one,
// and an actor that is not in activity's form. No output — tool answers,
// /activity, /health, /metrics, the log, the store's rows outside the vault —
// holds a credential's bytes.
func TestPerCallerCredential_EndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const laptopKey, ciKey = "laptop-key-4f1c9a7e3b2d", "ci-key-8e2a6c0f9d1b"
	url := subjectDownstream(t, map[string]string{laptopKey: "laptop-user", ciKey: "ci-user"})
	dir := t.TempDir()
	t.Setenv("PC_VAULT_KEY", vaultKey(3))
	t.Setenv("PC_LAPTOP", "laptop-inbound-token-0123456789abcdef")
	t.Setenv("PC_CI", "ci-inbound-token-0123456789abcdef0123")
	t.Setenv("PC_OPS", "ops-inbound-token-0123456789abcdef012")
	dbPath := filepath.Join(dir, "state.db")
	yaml := fmt.Sprintf(`store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:PC_VAULT_KEY}"}], active: k1}
auth:
  tokens:
    - {name: laptop, token: "${env:PC_LAPTOP}"}
    - {name: ci, token: "${env:PC_CI}"}
    - {name: ops, token: "${env:PC_OPS}", operator: true}
connectors:
  - id: keys
    url: %s
    credential: {header: X-Key, scheme: "", per: caller}
  - id: team
    url: %s
    credential: {header: X-Key, scheme: ""}
`, dbPath, url, url)
	cfg := writeConfig(t, yaml)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"credential", "set", "keys", "value", "--config", cfg}, "name whose with --actor"},
		{[]string{"credential", "set", "team", "value", "--actor", "laptop", "--config", cfg}, "--actor does not apply"},
		{[]string{"credential", "set", "keys", "value", "--actor", "not a name", "--config", cfg}, "not an actor as activity writes it"},
		{[]string{"credential", "set", "keys", "value#x", "--actor", "laptop", "--config", cfg}, "without"},
	} {
		if code, _, errOut := runCLIStdin("v", c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Fatalf("%v: exit %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if code, out, errOut := runCLIStdin(laptopKey+"\n", "credential", "set", "keys", "value", "--actor", "laptop", "--config", cfg); code != 0 || !strings.Contains(out, "keys/value of laptop set") {
		t.Fatalf("set laptop: %d %q %q", code, out, errOut)
	}

	p := startServer(t, yaml)
	laptop, ci := p.client(t, ctx, "laptop-inbound-token-0123456789abcdef"), p.client(t, ctx, "ci-inbound-token-0123456789abcdef0123")
	var outputs []string
	whoami := func(cs *mcp.ClientSession) (string, string) {
		t.Helper()
		text, _ := callJSON(t, ctx, cs, "call_tool", map[string]any{"address": "keys.whoami"})
		prog, _ := callJSON(t, ctx, cs, "execute_code", map[string]any{"code": `async () => { try { return await connecta.call("keys.whoami", {}) } catch (e) { return {code: e.code, recovery: e.details && e.details.recovery} } }`})
		outputs = append(outputs, text, prog)
		return text, prog
	}
	if text, prog := whoami(laptop); !strings.Contains(text, "subject=laptop-user") || !strings.Contains(prog, "subject=laptop-user") {
		t.Fatalf("laptop: %s / %s", text, prog)
	}
	if text, prog := whoami(ci); !strings.Contains(text, `"auth_required"`) || !strings.Contains(text, `"recovery":"credential"`) || !strings.Contains(prog, `"recovery":"credential"`) {
		t.Fatalf("ci without its own: %s / %s", text, prog)
	}
	if text, _ := whoami(laptop); !strings.Contains(text, "subject=laptop-user") {
		t.Fatalf("laptop after ci's refusal: %s", text)
	}
	if code, _, errOut := runCLIStdin(ciKey, "credential", "set", "keys", "value", "--actor", "ci", "--config", cfg); code != 0 {
		t.Fatalf("set ci: %d %s", code, errOut)
	}
	if text, prog := whoami(ci); !strings.Contains(text, "subject=ci-user") || !strings.Contains(prog, "subject=ci-user") {
		t.Fatalf("ci with its own: %s / %s", text, prog)
	}
	if code, out, errOut := runCLI("credential", "delete", "keys", "value", "--actor", "laptop", "--config", cfg); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete laptop: %d %q %q", code, out, errOut)
	}
	if text, _ := whoami(laptop); !strings.Contains(text, `"recovery":"credential"`) || !strings.Contains(text, "has none set") {
		t.Fatalf("laptop after delete: %s", text)
	}
	if text, _ := whoami(ci); !strings.Contains(text, "subject=ci-user") {
		t.Fatalf("ci after laptop's delete: %s", text)
	}

	// Nothing anywhere holds a credential's bytes.
	get := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
		req.Header.Set("Authorization", "Bearer ops-inbound-token-0123456789abcdef012")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	activity := get("/activity")
	if !strings.Contains(activity, "keys.whoami") {
		t.Fatalf("/activity shows no call: %.300s", activity)
	}
	outputs = append(outputs, activity, get("/health"), get("/metrics"), p.stderr.String())
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := storeRowsOutsideVault(t, db)
	if !strings.Contains(rows, "credential.set") || !strings.Contains(rows, "actor:laptop") {
		t.Fatalf("the audit does not name whose credential was set: %.500s", rows)
	}
	outputs = append(outputs, rows)
	for i, out := range outputs {
		for _, secret := range []string{laptopKey, ciKey, "laptop-key", "ci-key-"} {
			if strings.Contains(out, secret) {
				t.Fatalf("output %d holds credential bytes %q: %.300s", i, secret, out)
			}
		}
	}
}

// storeRowsOutsideVault dumps every table but secrets as text.
func storeRowsOutsideVault(t *testing.T, db *sql.DB) string {
	t.Helper()
	return testkit.RowsOutsideVault(t, context.Background(), db)
}

// TestOAuthRevoke_ActorNamesWhoseGrant: on a `grants: caller` connector
// `oauth revoke` needs --actor (whose grant), and on a connector-wide one it
// refuses --actor; an actor with no grant is told so and nothing changes.
func TestOAuthRevoke_ActorNamesWhoseGrant(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PC_VAULT_KEY", vaultKey(4))
	cfg := writeConfig(t, fmt.Sprintf(`publicUrl: https://connecta.example.com
store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:PC_VAULT_KEY}"}], active: k1}
connectors:
  - {id: mine, url: "https://mcp.example.com/mcp", oauth: {grants: caller}}
  - {id: team, url: "https://mcp.example.com/mcp", oauth: {}}
`, filepath.Join(dir, "state.db")))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"oauth", "revoke", "mine", "--config", cfg}, 2, "--actor oidc:<sub>"},
		{[]string{"oauth", "revoke", "team", "--actor", "oidc:alice", "--config", cfg}, 2, "--actor does not apply"},
		{[]string{"oauth", "revoke", "mine", "--actor", "token:", "--config", cfg}, 2, "not an actor as activity writes it"},
		{[]string{"oauth", "revoke", "mine", "--actor", "oidc:alice", "--config", cfg}, 0, "no grant of oidc:alice"},
		{[]string{"oauth", "revoke", "mine", "--actor=oidc:bob", "--config", cfg}, 0, "no grant of oidc:bob"},
	} {
		code, out, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Fatalf("%v: exit %d %q %q, want %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

// TestDoctor_PerCallerConnectorNotChecked: doctor is nobody, so it cannot
// list a connector whose calls carry each caller's own credential; it says
// so and does not fail.
func TestDoctor_PerCallerConnectorNotChecked(t *testing.T) {
	t.Setenv("PC_VAULT_KEY", vaultKey(5))
	cfg := writeConfig(t, fmt.Sprintf(`store: {url: "sqlite:%s"}
executor: {spares: 0}
vault: {keys: [{id: k1, key: "${env:PC_VAULT_KEY}"}], active: k1}
connectors:
  - id: keys
    url: http://127.0.0.1:9/mcp
    credential: {header: X-Key, per: caller}
`, filepath.Join(t.TempDir(), "state.db")))
	code, out, errOut := runCLI("doctor", "--config", cfg)
	if code != 0 || !strings.Contains(out, "connector keys: not checked: it uses each caller's own") {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
}
