package server_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/test/testkit"
)

// closedURL is a loopback URL nothing listens on: its catalog cannot load.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + testkit.ClosedAddr(t) + "/mcp"
}

// TestTopLevelFailuresAreTypedAlways: every failure of the five top-level
// tools is isError with {ok:false, error:{code,message,retryable,…}} as both
// text and structuredContent; the call tools add durationMs and attempts.
func TestTopLevelFailuresAreTypedAlways(t *testing.T) {
	h := newHarness(t, harnessOptions{extra: []gateway.ConnectorSpec{{ID: "dead", URL: closedURL(t)}}})
	cs := h.connect(t, "")
	call(t, cs, "call_tool", `{"address":"down.echo"}`) // warm the catalog
	type tc struct {
		name, tool, args, mode, code string
	}
	cases := []tc{
		{"bad args", "call_tool", `{"address":42}`, "", "invalid_args"},
		{"unknown address", "call_tool", `{"address":"nowhere.tool"}`, "", "unknown_address"},
		{"unknown tool", "call_tool", `{"address":"down.nope"}`, "", "unknown_tool"},
		{"write via call_tool", "call_tool", `{"address":"down.delete_item"}`, "", "destructive_tool_requires_approval"},
		{"catalog cannot load", "call_tool", `{"address":"dead.anything"}`, "", "catalog_lookup_failed"},
		{"catalog cannot load, destructive", "call_destructive_tool", `{"address":"dead.anything"}`, "", "catalog_lookup_failed"},
		{"rate limited, mcp mode", "call_tool", `{"address":"down.echo"}`, "429", "rate_limited"},
		{"rate limited, value mode", "call_tool", `{"address":"down.echo","resultMode":"value"}`, "429", "rate_limited"},
		{"unavailable", "call_destructive_tool", `{"address":"down.echo"}`, "500", "unavailable"},
		{"auth", "call_tool", `{"address":"down.echo"}`, "401", "auth_required"},
		{"timeout", "call_tool", `{"address":"down.slow","timeoutMs":50}`, "", "timeout"},
		{"destructive bad reason", "call_destructive_tool", `{"address":"down.echo","reason":7}`, "", "invalid_args"},
		{"get_result unknown id", "get_result", `{"id":"nope"}`, "", "invalid_args"},
		{"get_result bad args", "get_result", `{}`, "", "invalid_args"},
		{"search bad args", "search_tools", `{"limit":0}`, "", "invalid_args"},
		{"authorize unknown", "authorize_connector", `{"connector":"ghost"}`, "", "invalid_args"},
		{"authorize bad args", "authorize_connector", `{"connector":1}`, "", "invalid_args"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.down.mode.Store(c.mode)
			defer h.down.mode.Store("")
			res := call(t, cs, c.tool, c.args)
			e := failureOf(t, res)
			if e["code"] != c.code {
				t.Fatalf("code %v, want %s: %s", e["code"], c.code, textOf(t, res))
			}
			m := decode(t, textOf(t, res))
			isCall := strings.HasPrefix(c.tool, "call_")
			_, hasDuration := m["durationMs"]
			_, hasAttempts := m["attempts"]
			if isCall != hasDuration || isCall != hasAttempts {
				t.Fatalf("durationMs/attempts present %v/%v for %s: %s", hasDuration, hasAttempts, c.tool, textOf(t, res))
			}
		})
	}
}

// TestTopLevelAndProgramShareOneErrorObject: the error object a program's
// escaped connecta.call failure carries is the one call_tool answers,
// except the recovery key (function "connecta.search" vs tool "search_tools").
func TestTopLevelAndProgramShareOneErrorObject(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	call(t, cs, "call_tool", `{"address":"down.echo"}`)
	for _, address := range []string{"down.no_such_tool", "nowhere.x", "down.delete_item"} {
		top := failureOf(t, call(t, cs, "call_tool", `{"address":"`+address+`"}`))
		code, _ := json.Marshal(map[string]string{"code": `async () => connecta.call("` + address + `", {})`})
		res := call(t, cs, "execute_code", string(code))
		prog, ok := decode(t, textOf(t, res))["error"].(map[string]any)
		if !res.IsError || !ok {
			t.Fatalf("%s: program failure not typed: %s", address, textOf(t, res))
		}
		if next, ok := prog["nextAction"].(map[string]any); ok && next["function"] != nil {
			if next["function"] != "connecta.search" {
				t.Fatalf("%s: program recovery %v", address, next)
			}
			delete(next, "function")
			next["tool"] = "search_tools"
		}
		if !reflect.DeepEqual(top, prog) {
			t.Fatalf("%s: error objects differ\ntop:     %v\nprogram: %v", address, top, prog)
		}
	}
}

// TestSyntaxErrorNamesLineAndColumnOverMCP: through the real execute_code
// path a syntax error reads "SyntaxError: <message> (line L, column C)" in
// the code as sent (the bare body is wrapped before it is evaluated).
func TestSyntaxErrorNamesLineAndColumnOverMCP(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	code, _ := json.Marshal(map[string]string{"code": "const a = 1;\nconst b = a +;\nreturn b;"})
	res := call(t, cs, "execute_code", string(code))
	want := "Error: SyntaxError: unexpected token in expression: ';' (line 2, column 14)"
	if !res.IsError || textOf(t, res) != want {
		t.Fatalf("got %q, want %q", textOf(t, res), want)
	}
}

// TestRecoveryEchoesUseTheIdentityClamps: a caller-authored address or tool
// name echoed in a refusal keeps its first 257 / 128 bytes on a character
// boundary, then "…" (docs/DECISIONS.md "Identity clamps"); the derived recovery
// query keeps 512.
func TestRecoveryEchoesUseTheIdentityClamps(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	long := strings.Repeat("é", 400) // 800 bytes, 2 per character
	e := failureOf(t, call(t, cs, "call_tool", `{"address":"down.`+long+`"}`))
	if want := `Unknown tool "` + strings.Repeat("é", 64) + `…" on connector "down"`; e["code"] != "unknown_tool" || e["message"] != want {
		t.Fatalf("unknown_tool message %q", e["message"])
	}
	q := e["nextAction"].(map[string]any)["arguments"].(map[string]any)["query"].(string)
	if q != strings.Repeat("é", 256)+"…" {
		t.Fatalf("recovery query is %d bytes", len(q))
	}
	e = failureOf(t, call(t, cs, "call_tool", `{"address":"x`+long+`.y"}`))
	if want := `Unknown address "x` + strings.Repeat("é", 128) + `…"`; e["code"] != "unknown_address" || e["message"] != want {
		t.Fatalf("unknown_address message %q", e["message"])
	}
	e = failureOf(t, call(t, cs, "authorize_connector", `{"connector":"`+long+`"}`))
	if want := `Unknown connector "` + strings.Repeat("é", 64) + `…"`; e["message"] != want {
		t.Fatalf("authorize message %q", e["message"])
	}
}
