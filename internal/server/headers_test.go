package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/test/testkit"
)

// rpcPost sends one JSON-RPC body to /mcp with the given MCP headers and
// returns the status, content type and decoded body.
func rpcPost(t *testing.T, h *harness, body string, headers map[string]string) (int, string, map[string]any) {
	t.Helper()
	req := testkit.MCPRequest(t, h.url+"/mcp", strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return res.StatusCode, res.Header.Get("Content-Type"), out
}

func rpcErrorCode(out map[string]any) float64 {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

const stateless2026Meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// A 2026-07-28 request whose Mcp-Method / Mcp-Name disagree with the body,
// or lacks one it must carry, is refused 400 with JSON-RPC -32020 (the SDK's
// check, which connecta's middleware leaves in place); matching headers pass.
func TestHeaders_MismatchOrMissingIs32020(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + stateless2026Meta + `}}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"skills","arguments":{},` + stateless2026Meta + `}}`
	v := "2026-07-28"
	for name, tc := range map[string]struct {
		body    string
		headers map[string]string
	}{
		"method mismatch": {list, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": "tools/call"}},
		"method missing":  {list, map[string]string{"Mcp-Protocol-Version": v}},
		"name missing":    {call, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": "tools/call"}},
		"name mismatch":   {call, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": "tools/call", "Mcp-Name": "execute_code"}},
	} {
		status, ct, out := rpcPost(t, h, tc.body, tc.headers)
		if status != http.StatusBadRequest || !strings.HasPrefix(ct, "application/json") || rpcErrorCode(out) != -32020 {
			t.Errorf("%s: HTTP %d %s %v, want 400 with -32020", name, status, ct, out)
		}
	}
	if status, _, out := rpcPost(t, h, list, map[string]string{"Mcp-Protocol-Version": v, "Mcp-Method": "tools/list"}); status != 200 || out["result"] == nil {
		t.Fatalf("matching headers: HTTP %d %v", status, out)
	}
}

// An unknown method is a JSON-RPC -32601 in a JSON body under every
// protocol version (the SDK wrote a text/plain 400 before 2026-07-28), and
// every method servedMethod lets through is one the SDK routes.
func TestUnknownMethod_JSONRPCErrorInAJSONBody(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, v := range []string{"", "2025-03-26", "2025-11-25", "2026-07-28"} {
		headers := map[string]string{}
		params := `{}`
		if v != "" {
			headers["Mcp-Protocol-Version"] = v
		}
		if v == "2026-07-28" {
			headers["Mcp-Method"] = "foo/bar"
			params = `{` + stateless2026Meta + `}`
		}
		status, ct, out := rpcPost(t, h, `{"jsonrpc":"2.0","id":7,"method":"foo/bar","params":`+params+`}`, headers)
		if !strings.HasPrefix(ct, "application/json") || rpcErrorCode(out) != -32601 || out["id"] != float64(7) {
			t.Errorf("version %q: HTTP %d %s %v, want a JSON-RPC -32601 for id 7", v, status, ct, out)
		}
	}
	for _, m := range []string{"initialize", "ping", "server/discover", "subscriptions/listen", "tools/list", "tools/call",
		"logging/setLevel", "completion/complete", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
		"resources/read", "resources/subscribe", "resources/unsubscribe"} {
		req := testkit.MCPRequest(t, h.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{}}`))
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		if strings.Contains(string(b), "not handled") || strings.Contains(string(b), "Method not found") {
			t.Errorf("%s: the SDK does not route it: %s", m, b)
		}
	}
}

// server/discover and tools/list results are per caller: cacheScope private.
func TestDiscover_CacheScopePrivate(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, m := range []string{"server/discover", "tools/list"} {
		status, _, out := rpcPost(t, h, `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{`+stateless2026Meta+`}}`,
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": m})
		res, _ := out["result"].(map[string]any)
		if status != 200 || res["cacheScope"] != "private" {
			t.Errorf("%s: HTTP %d %v, want cacheScope private", m, status, out)
		}
	}
}
