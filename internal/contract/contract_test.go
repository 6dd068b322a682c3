package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/test/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A case is one row of the clause-tagged table; its name carries its
// clauses. Every case runs end to end: go-sdk client → HTTP /mcp →
// contract → supervisor → a real sandbox child → gateway → fixture MCP
// server on loopback.
type contractCase struct {
	name        string
	ep          string // "" = epDefault
	code        string
	diagnostics bool
	check       func(t *testing.T, c *check)
}

type check struct {
	res    *mcp.CallToolResult
	text   string
	env    *env
	before snapshot
}

type snapshot struct {
	hits   map[string]int
	lists  int64
	events int
}

func (e *env) snapshot() snapshot {
	e.fixture.mu.Lock()
	hits := map[string]int{}
	for k, v := range e.fixture.hits {
		hits[k] = v
	}
	e.fixture.mu.Unlock()
	return snapshot{hits: hits, lists: e.fixture.lists.Load(), events: len(e.activity.Recent(100000))}
}

func (c *check) hits(tool string) int { return c.env.fixture.count(tool) - c.before.hits[tool] }

// events returns the activity events recorded since the case began.
func (c *check) events() []activity.Event {
	all := c.env.activity.Recent(100000)
	if len(all) <= c.before.events {
		return nil
	}
	// Recent returns newest first or oldest first depending on the recorder;
	// normalise to the new ones by ID set difference on count.
	if len(all) > 0 && len(all) > c.before.events {
		if all[0].OccurredAt.After(all[len(all)-1].OccurredAt) {
			return all[:len(all)-c.before.events]
		}
		return all[c.before.events:]
	}
	return nil
}

func (c *check) success(t *testing.T) json.RawMessage {
	t.Helper()
	if c.res.IsError {
		t.Fatalf("unexpected failure: %s", c.text)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(c.text), &env); err != nil {
		t.Fatalf("not JSON: %s", c.text)
	}
	sc, _ := json.Marshal(c.res.StructuredContent)
	if !jsonEqual(sc, []byte(c.text)) {
		t.Fatalf("structuredContent %s differs from text %s", sc, c.text)
	}
	return env.Result
}

func (c *check) result(t *testing.T, want string) {
	t.Helper()
	if got := c.success(t); !jsonEqual(got, []byte(want)) {
		t.Fatalf("result %s, want %s", got, want)
	}
}

type typedErr struct {
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Retryable    bool            `json:"retryable"`
	RetryAfterMs *int64          `json:"retryAfterMs"`
	NextAction   json.RawMessage `json:"nextAction"`
	Recovery     string          `json:"recovery"`
	Validation   json.RawMessage `json:"validation"`
}

func (c *check) typed(t *testing.T, code string, retryable bool) typedErr {
	t.Helper()
	if !c.res.IsError {
		t.Fatalf("expected typed failure, got %s", c.text)
	}
	var env struct {
		Error *typedErr `json:"error"`
	}
	if err := json.Unmarshal([]byte(c.text), &env); err != nil || env.Error == nil {
		t.Fatalf("not a typed failure: %s", c.text)
	}
	if env.Error.Code != code || env.Error.Retryable != retryable {
		t.Fatalf("got %s retryable=%v, want %s retryable=%v: %s", env.Error.Code, env.Error.Retryable, code, retryable, c.text)
	}
	if c.res.StructuredContent == nil {
		t.Fatal("typed failure without structuredContent")
	}
	return *env.Error
}

func (c *check) untyped(t *testing.T, contains ...string) {
	t.Helper()
	if !c.res.IsError || !strings.HasPrefix(c.text, "Error: ") || c.res.StructuredContent != nil {
		t.Fatalf("expected untyped failure, got isError=%v %s", c.res.IsError, c.text)
	}
	for _, s := range contains {
		if !strings.Contains(c.text, s) {
			t.Fatalf("%q lacks %q", c.text, s)
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func resultAs(t *testing.T, c *check, v any) {
	t.Helper()
	if err := json.Unmarshal(c.success(t), v); err != nil {
		t.Fatalf("%v: %s", err, c.text)
	}
}

var contractCases = []contractCase{
	{name: "P1_R1_OnePlusOneExactly", code: `async () => 1 + 1`, check: func(t *testing.T, c *check) {
		if c.text != `{"result":2}` || c.res.IsError {
			t.Fatalf("%s", c.text)
		}
	}},
	{name: "P1_BareBodyAndFenceAreCourtesy", code: "```js\nreturn 40 + 2;\n```", check: func(t *testing.T, c *check) { c.result(t, `42`) }},
	{name: "P5_TypeScriptIsSyntaxError", code: `async (): Promise<number> => 1`, check: func(t *testing.T, c *check) { c.untyped(t, "SyntaxError") }},
	{name: "P2_X5_NoAmbientAuthority", code: `async () => [typeof fetch, typeof setTimeout, typeof setInterval, typeof process, typeof require, typeof crypto, typeof WebSocket, typeof XMLHttpRequest]`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined"]`)
		}},
	{name: "P2_X5_ImportsBlocked", code: `async () => { try { await import("fs"); return "imported" } catch (e) { return "blocked" } }`,
		check: func(t *testing.T, c *check) { c.result(t, `"blocked"`) }},
	{name: "P3_X9_CycleBecomesObjectString", code: `async () => { const a = {}; a.self = a; return a }`,
		check: func(t *testing.T, c *check) { c.result(t, `"[object Object]"`) }},
	{name: "P3_X9_BigIntNotSerializable", code: `async () => { console.log("kept"); return 10n }`,
		check: func(t *testing.T, c *check) { c.untyped(t, "not JSON-serializable", "Logs:\nkept") }},
	{name: "P3_ArgumentsCrossAsJSON", code: `async () => connecta.call("reader.echo", { d: new Date(0), u: undefined, n: [1, "x", null] })`,
		check: func(t *testing.T, c *check) { c.result(t, `{"d":"1970-01-01T00:00:00.000Z","n":[1,"x",null]}`) }},
	{name: "P4_OneCatalogLoadPerExecution", code: `async () => { for (let i = 0; i < 5; i++) await connecta.call("reader.echo", { i }); return "ok" }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `"ok"`)
			if n := c.env.fixture.lists.Load() - c.before.lists; n != 1 {
				t.Fatalf("%d catalog loads for one execution", n)
			}
			if c.hits("echo") != 5 {
				t.Fatal("echo not called 5 times")
			}
		}},
	{name: "A1_CanonicalAddressPunctuationPreserved", code: `async () => connecta.call("svc-503.echo", { a: 1 })`,
		check: func(t *testing.T, c *check) { c.result(t, `{"a":1}`) }},
	{name: "A2_P2_NoConnectorGlobals", code: `async () => [typeof reader, typeof globalThis["svc-503"], Object.keys(connecta).length, typeof connecta.toString]`,
		check: func(t *testing.T, c *check) { c.result(t, `["undefined","undefined",0,"function"]`) }},
	{name: "S1_S1a_SearchFlatPage", code: `async () => { const p = await connecta.search({ query: "echo", connector: "reader", safety: "readOnly" }); return { keys: Object.keys(p).filter((k) => ["tools","total","offset","limit","hasMore"].includes(k)).sort(), first: p.tools[0].address, title: p.tools[0].connectorTitle } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `{"keys":["hasMore","limit","offset","tools","total"],"first":"reader.echo","title":"Reader fixture"}`)
		}},
	{name: "S1_S2_SchemaKeys", code: `async () => { const p = await connecta.search({ query: "add", connector: "reader", includeSchemas: "compact" }); const t = p.tools.find((t) => t.address === "reader.add"); return [t.inputKeys, t.requiredInputKeys] }`,
		check: func(t *testing.T, c *check) { c.result(t, `[["a","b"],["a","b"]]`) }},
	{name: "S3_E1_LimitOutOfRangeTypedUncaught", code: `async () => connecta.search({ limit: 0 })`,
		check: func(t *testing.T, c *check) { c.typed(t, "invalid_args", false) }},
	{name: "S4_DescribeOrderedMixedEntries", code: `async () => { const d = await connecta.describe({ addresses: ["reader.echo", "nope.x", "reader.nope"] }); return d.tools.map((e) => [e.address, e.error ? e.errorDetails.code : "ok"]) }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `[["reader.echo","ok"],["nope.x","unknown_address"],["reader.nope","unknown_tool"]]`)
		}},
	{name: "S5_UnwrapStructuredTextJSONAndRawText", code: `async () => [await connecta.call("reader.echo", { a: 1 }), await connecta.call("reader.add", { a: 1, b: 2 }), await connecta.call("reader.big", { n: 3 }), await connecta.call("reader.echo")]`,
		check: func(t *testing.T, c *check) { c.result(t, `[{"a":1},3,"xxx",{}]`) }},
	{name: "S5_E2_IsErrorThrowsConnectorCallFailed", code: `async () => { try { await connecta.call("reader.fail") } catch (e) { return [e.code, e.message.includes("downstream exploded"), typeof e.retryable] } }`,
		check: func(t *testing.T, c *check) { c.result(t, `["connector_call_failed",true,"boolean"]`) }},
	{name: "S7_S8_ParallelAllSettledKeepsTypes", code: `async () => { const r = await Promise.allSettled([connecta.call("reader.echo", { i: 1 }), connecta.call("reader.nope"), connecta.call("reader.add", { a: 2, b: 2 })]); return r.map((o) => o.status === "fulfilled" ? o.value : o.reason.code) }`,
		check: func(t *testing.T, c *check) { c.result(t, `[{"i":1},"unknown_tool",4]`) }},
	{name: "S8_E1_X11_CaughtErrorTyped", code: `async () => { try { await connecta.call("reader.nope") } catch (e) { return { keys: Object.keys(e), code: e.code, retryable: e.retryable, detailsCode: e.details.code, next: e.details.nextAction.function, isError: e instanceof Error } } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `{"keys":["code","retryable","details"],"code":"unknown_tool","retryable":false,"detailsCode":"unknown_tool","next":"connecta.search","isError":true}`)
		}},
	{name: "E1_E6_UncaughtToolFailureTyped", code: `async () => { console.log("before"); await connecta.call("reader.fail") }`,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "connector_call_failed", e2Retryable(c))
			if !strings.Contains(e.Message, "downstream exploded") || !strings.Contains(c.text, `"logs":"before"`) {
				t.Fatal(c.text)
			}
		}},
	{name: "E6_WrappedMessageKeepsType", code: `async () => { try { await connecta.call("reader.nope") } catch (e) { throw new TypeError("while fetching: " + e.message) } }`,
		check: func(t *testing.T, c *check) { c.typed(t, "unknown_tool", false) }},
	{name: "E6_ProgramErrorUntyped", code: `async () => { throw new Error("guest sad") }`,
		check: func(t *testing.T, c *check) {
			if c.text != "Error: guest sad" {
				t.Fatalf("%q", c.text)
			}
		}},
	{name: "E6_X8_UnknownMemberUntypedNoBudget", code: `async () => { for (let i = 0; i < 25; i++) { try { await connecta.nope() } catch (_) {} } await connecta.toString() }`, diagnostics: true,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "executor_failed", false)
			if e.Message != "Error: Unknown function connecta.toString" || !strings.Contains(c.text, `"operations":[]`) {
				t.Fatal(c.text)
			}
		}},
	{name: "E5_EmptyErrorIsExecutorFailedFixedText", code: `async () => { throw "" }`,
		check: func(t *testing.T, c *check) {
			if c.text != "Error: Execution failed without an error message." || !c.res.IsError {
				t.Fatalf("%q", c.text)
			}
		}},
	{name: "E2_Y2_Y4_RateLimitedRetryableWithRetryAfter", code: `async () => { try { await connecta.call("reader.http429") } catch (e) { return [e.code, e.retryable, e.details.retryAfterMs] } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["rate_limited",true,2000]`)
			if c.hits("http429") != 1 {
				t.Fatal("Y1: not exactly one attempt")
			}
		}},
	{name: "E2_Y1_UnavailableOneAttempt", code: `async () => { const r = []; for (const t of ["http500", "reset"]) { try { await connecta.call("reader." + t) } catch (e) { r.push([e.code, e.retryable]) } } return r }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `[["unavailable",true],["unavailable",true]]`)
			if c.hits("http500") != 1 || c.hits("reset") != 1 {
				t.Fatal("Y1: not exactly one attempt each")
			}
		}},
	{name: "E3_AuthRequiredEnvelope", code: `async () => { try { await connecta.call("reader.http401") } catch (e) { return [e.code, e.retryable, e.details.recovery, e.details.nextAction.tool || e.details.nextAction.function] } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["auth_required",false,"unavailable","authorize_connector"]`)
		}},
	{name: "E3_MissingCredentialOperatorConfig", code: `async () => connecta.call("locked.echo")`,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "auth_required", false)
			if e.Recovery != "operator_config" {
				t.Fatal(c.text)
			}
		}},
	{name: "E4_DestructiveRefusedNeverDispatched", code: `async () => { const r = []; for (const t of ["write", "destroy"]) { try { await connecta.call("reader." + t) } catch (e) { r.push([e.code, e.retryable, e.details.nextAction.tool]) } } return r }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `[["destructive_tool_requires_approval",false,"call_destructive_tool"],["destructive_tool_requires_approval",false,"call_destructive_tool"]]`)
			if c.hits("write")+c.hits("destroy") != 0 {
				t.Fatal("refused tool reached the downstream")
			}
		}},
	{name: "E7_503NamedConnectorRefusalsNotRetryable", code: `async () => { const r = []; for (const a of ["svc-503.nope", "svc-503.write", "svc-503x.echo"]) { try { await connecta.call(a) } catch (e) { r.push([e.code, e.retryable]) } } return r }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `[["unknown_tool",false],["destructive_tool_requires_approval",false],["unknown_address",false]]`)
		}},
	{name: "E7_HugeUnknownAddressClamped", code: `async () => connecta.call("x".repeat(50000) + ".y")`,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "unknown_address", false)
			if len(c.text) >= 4000 || !strings.Contains(e.Message, "…") || !strings.Contains(string(e.NextAction), `"function":"connecta.search"`) {
				t.Fatalf("%d: %s", len(c.text), c.text)
			}
		}},
	{name: "E8_SchemaRejectsBeforeDispatch", code: `async () => connecta.call("reader.add", { a: "x" })`,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "invalid_args", false)
			if !strings.Contains(string(e.Validation), `"path":"/a"`) || strings.Contains(string(e.Validation), `"x"`) || c.hits("add") != 0 {
				t.Fatal(c.text)
			}
		}},
	{name: "L4_Y2_BudgetSpentOnEntryRefusalsIncluded", code: `async () => { const r = []; for (let i = 0; i < 21; i++) { try { await (i % 3 === 0 ? connecta.search({ query: "x", connector: "reader" }) : i % 3 === 1 ? connecta.describe({ address: "nope.x" }) : connecta.call("nope.x")) } catch (e) { r.push(e.code) } } await connecta.call("reader.echo") }`,
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "budget_exceeded", false)
			if e.Message != "execute_code host-call budget exceeded (20 calls maximum)" || c.hits("echo") != 0 {
				t.Fatal(c.text)
			}
		}},
	{name: "L4_M7_EmitSpendsNoBudget", code: `async () => { for (let i = 0; i < 30; i++) await connecta.emit({ type: "text", text: "b" + i }); for (let i = 0; i < 20; i++) await connecta.call("reader.echo", { i }); return "ok" }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `"ok"`)
			if len(c.res.Content) != 31 {
				t.Fatalf("%d content blocks", len(c.res.Content))
			}
		}},
	{name: "L4_L8_TightBudgetIsConfiguration", ep: epTight, code: `async () => { await connecta.call("reader.echo"); await connecta.call("reader.echo"); try { await connecta.call("reader.echo") } catch (e) { return [e.code, e.message] } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["budget_exceeded","execute_code host-call budget exceeded (2 calls maximum)"]`)
			if c.hits("echo") != 2 {
				t.Fatal("connector hit more than the budget")
			}
		}},
	{name: "L4_E2_HostCallDeadlineTimeout", ep: epDeadline, code: `async () => { try { await connecta.call("reader.hang") } catch (e) { return [e.code, e.retryable] } }`,
		check: func(t *testing.T, c *check) { c.result(t, `["timeout",true]`) }},
	{name: "L6_X10_OverBoundResultNamesAddress", code: `async () => { let m; try { await connecta.call("reader.big", { n: 400000 }) } catch (e) { m = [e.message, e.code] } return [m, await connecta.call("reader.big", { n: 2 })] }`,
		check: func(t *testing.T, c *check) {
			var got [2]json.RawMessage
			resultAs(t, c, &got)
			if !strings.Contains(string(got[0]), `serialized bridge limit`) || !strings.Contains(string(got[0]), `connecta.call(\"reader.big\")`) || strings.Contains(string(got[0]), "connecta-error") || string(got[1]) != `"xx"` {
				t.Fatal(c.text)
			}
		}},
	{name: "L6_OverBoundArgumentNamesNoAddress", code: `async () => { try { await connecta.call("reader.echo", { s: "y".repeat(300000) }) } catch (e) { return [e.message.includes("IPC limit"), e.message.includes("reader.echo"), e.code] } }`,
		check: func(t *testing.T, c *check) { c.result(t, `[true,false,null]`) }},
	{name: "L6_UncaughtOverBoundIsUntyped", code: `async () => connecta.call("reader.big", { n: 400000 })`,
		check: func(t *testing.T, c *check) { c.untyped(t, "serialized bridge limit", `connecta.call("reader.big")`) }},
	{name: "L3_X1_WallDeadlineNoPartialResult", code: `async () => { console.log("waiting"); await connecta.call("reader.hang") }`,
		check: func(t *testing.T, c *check) { c.untyped(t, "timed out", "Logs:\nwaiting") }},
	{name: "X6_StallFailsFast", code: `async () => { await new Promise(() => {}) }`,
		check: func(t *testing.T, c *check) { c.untyped(t, "stalled") }},
	{name: "L5_X2_CPUBudget", code: `async () => { for (;;) {} }`,
		check: func(t *testing.T, c *check) { c.untyped(t, "guest CPU budget") }},
	// A builtin that never polls the engine is ended by the parent's CPU
	// watch: the same text as the engine's, never the wall deadline.
	{name: "L5_X2_CPUBudgetBindsOnBuiltinThatNeverPolls", code: `async () => { console.log("before"); return Array.prototype.indexOf.call({length: 2**53-1}, 1) }`,
		check: func(t *testing.T, c *check) {
			c.untyped(t)
			if want := "Error: Execution exceeded the 250ms guest CPU budget.\n\nLogs:\nbefore"; c.text != want {
				t.Fatalf("%q, want %q", c.text, want)
			}
		}},
	{name: "L5_X2_HeapBound", code: `async () => { const a = []; for (;;) a.push(new ArrayBuffer(1 << 24)) }`,
		check: func(t *testing.T, c *check) {
			if !c.res.IsError || !strings.Contains(strings.ToLower(c.text), "memory") {
				t.Fatal(c.text)
			}
		}},
	{name: "R2_R3_TruncationIsSuccess", code: `async () => "x".repeat(100000)`,
		check: func(t *testing.T, c *check) {
			var r struct {
				Truncated  bool   `json:"truncated"`
				Preview    string `json:"preview"`
				TotalChars int    `json:"totalChars"`
				Hint       string `json:"hint"`
			}
			resultAs(t, c, &r)
			if !r.Truncated || r.TotalChars != 100002 || r.Hint != "filter/map/slice data inside execute_code and return only what you need" || len(c.text) > 24100 || len(r.Preview) < 20000 {
				t.Fatalf("%+v len %d", r.TotalChars, len(c.text))
			}
		}},
	{name: "R5_LogsSurviveFailure", code: `async () => { console.log("step", 1, { a: 1 }); console.warn("warned"); console.error("erred"); throw new Error("kaboom") }`,
		check: func(t *testing.T, c *check) {
			if c.text != "Error: kaboom\n\nLogs:\nstep 1 {\"a\":1}\nwarned\nerred" {
				t.Fatalf("%q", c.text)
			}
		}},
	{name: "R5_X4_LogsCappedWithMarker", code: `async () => { for (let i = 0; i < 10; i++) console.log(String(i).repeat(1000)); return 1 }`,
		check: func(t *testing.T, c *check) {
			var env struct{ Logs string }
			_ = json.Unmarshal([]byte(c.text), &env)
			if jstext.Len(env.Logs) > 4200 || !strings.Contains(env.Logs, "TRUNCATED (10009 chars total)") {
				t.Fatalf("%d %q", len(env.Logs), env.Logs)
			}
		}},
	{name: "R6_NoDiagnosticsByteIdentical", code: `async () => ({ ok: true })`,
		check: func(t *testing.T, c *check) {
			if c.text != `{"result":{"ok":true}}` {
				t.Fatal(c.text)
			}
		}},
	{name: "R6_R7_R8_DiagnosticsAggregatesPayloadFree", diagnostics: true,
		code: `async () => { await connecta.search({ query: "echo", connector: "reader" }); await connecta.call("reader.echo", { secretArg: "s3cr3t" }); try { await connecta.call("reader.fail") } catch (_) {} return 1 }`,
		check: func(t *testing.T, c *check) {
			var env struct {
				Result      int
				Diagnostics struct {
					Timing     map[string]float64
					Operations []struct {
						Operation                          string
						Count, Failures, ResultBytes       int
						DurationMs, CatalogMs, ConnectorMs float64
					}
					Emitted *struct{} `json:"emitted"`
				}
			}
			if err := json.Unmarshal([]byte(c.text), &env); err != nil {
				t.Fatal(err)
			}
			d := env.Diagnostics
			for _, k := range []string{"totalMs", "admissionMs", "setupMs", "executorWallMs", "catalogMs", "connectorMs"} {
				if _, ok := d.Timing[k]; !ok {
					t.Errorf("timing lacks %s", k)
				}
			}
			if len(d.Operations) != 2 || d.Operations[0].Operation != "search" || d.Operations[1].Operation != "call" ||
				d.Operations[1].Count != 2 || d.Operations[1].Failures != 1 || d.Operations[1].ResultBytes == 0 || d.Emitted != nil {
				t.Fatal(c.text)
			}
			if strings.Contains(c.text, "s3cr3t") || strings.Contains(c.text, "reader.") || strings.Contains(c.text, "exploded") {
				t.Fatal("payload in diagnostics: " + c.text)
			}
		}},
	{name: "R6_DiagnosticsKeptOnDiscoveryFailure", diagnostics: true, code: `async () => connecta.search({ limit: 1000 })`,
		check: func(t *testing.T, c *check) {
			c.typed(t, "invalid_args", false)
			if !strings.Contains(c.text, `"diagnostics":{"timing"`) || !strings.Contains(c.text, `"failures":1`) {
				t.Fatal(c.text)
			}
		}},
	{name: "M1_InvalidEmitThrowsCatchablyNothingAccepted", code: `async () => { const r = []; for (const b of [{ type: "resource_link", uri: "https://x" }, { type: "text", text: "a", annotations: {} }, { type: "image", data: 1, mimeType: "image/png" }, "text"]) { try { await connecta.emit(b) } catch (e) { r.push(e.code) } } return r }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["invalid_args","invalid_args","invalid_args","invalid_args"]`)
			if len(c.res.Content) != 1 || strings.Contains(c.text, "emitted") {
				t.Fatal("a block was accepted")
			}
		}},
	{name: "M2_M3_EmittedAfterEnvelopeStructuredStaysEnvelope", code: `async () => { await connecta.emit({ type: "text", text: "first" }); await connecta.emit({ type: "image", data: "UE5H", mimeType: "image/png" }); return "x".repeat(30000) }`,
		check: func(t *testing.T, c *check) {
			var env struct {
				Result  struct{ Truncated bool }
				Emitted int
			}
			_ = json.Unmarshal([]byte(c.text), &env)
			if !env.Result.Truncated || env.Emitted != 2 || len(c.res.Content) != 3 {
				t.Fatal(c.text)
			}
			if tc, ok := c.res.Content[1].(*mcp.TextContent); !ok || tc.Text != "first" {
				t.Fatal("block order")
			}
			if ic, ok := c.res.Content[2].(*mcp.ImageContent); !ok || string(ic.Data) != "PNG" || ic.MIMEType != "image/png" {
				t.Fatal("image block")
			}
			sc, _ := json.Marshal(c.res.StructuredContent)
			if strings.Contains(string(sc), "first") {
				t.Fatal("blocks leaked into structuredContent")
			}
		}},
	{name: "M4_FailureDiscardsVisiblyPlain", code: `async () => { await connecta.emit({ type: "text", text: "lost" }); throw new Error("after emit") }`,
		check: func(t *testing.T, c *check) {
			if c.text != "Error: after emit\n\nemittedDiscarded: 1" || len(c.res.Content) != 1 {
				t.Fatalf("%q", c.text)
			}
		}},
	{name: "M4_FailureDiscardsVisiblyStructured", code: `async () => { await connecta.emit({ type: "text", text: "lost" }); await connecta.call("reader.nope") }`,
		check: func(t *testing.T, c *check) {
			c.typed(t, "unknown_tool", false)
			if !strings.Contains(c.text, `"emittedDiscarded":1`) || strings.Contains(c.text, "lost") {
				t.Fatal(c.text)
			}
		}},
	{name: "M5_EmitBudgetsNameRoom", ep: epTight, code: `async () => { const r = []; try { await connecta.emit({ type: "text", text: "z".repeat(300) }) } catch (e) { r.push([e.code, e.message]) } await connecta.emit({ type: "text", text: "a" }); await connecta.emit({ type: "text", text: "b" }); try { await connecta.emit({ type: "text", text: "c" }) } catch (e) { r.push([e.code, e.message]) } return r }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `[["budget_exceeded","connecta.emit byte budget exceeded: block is 325 serialized bytes with 200 of 200 remaining"],["budget_exceeded","connecta.emit block-count budget exceeded: 2 block(s) maximum, 0 remaining"]]`)
			if len(c.res.Content) != 3 {
				t.Fatal("prior blocks must stand")
			}
		}},
	{name: "M10_EmittedAggregateOnlyWhenEmitted", diagnostics: true, code: `async () => { await connecta.emit({ type: "text", text: "hello" }); return 1 }`,
		check: func(t *testing.T, c *check) {
			if !strings.Contains(c.text, `"emitted":{"count":1,"bytes":30}`) {
				t.Fatal(c.text)
			}
		}},
	{name: "V1_V2_V4_OneEventPerAttemptedCall", code: `async () => { await connecta.call("reader.echo"); try { await connecta.call("reader.nope") } catch (_) {} try { await connecta.call("reader.write") } catch (_) {} await connecta.search({ query: "x" }); return 1 }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `1`)
			ev := c.events()
			if len(ev) != 3 {
				t.Fatalf("%d events: %+v", len(ev), ev)
			}
			friction := map[string]string{}
			for _, e := range ev {
				if e.Source != "execute_code" || e.ConnectorID != "reader" {
					t.Fatalf("%+v", e)
				}
				friction[e.ToolName] = e.Friction
			}
			if friction["nope"] != "tool_not_found" || friction["write"] != "destructive_reroute" || friction["echo"] != "" {
				t.Fatalf("%v", friction)
			}
		}},
	{name: "V1_L4_BudgetRefusalRecordsNoEvent", ep: epTight, code: `async () => { for (let i = 0; i < 3; i++) { try { await connecta.call("reader.nope") } catch (_) {} } return 1 }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `1`)
			if n := len(c.events()); n != 2 {
				t.Fatalf("%d events", n)
			}
		}},
	{name: "V3_UnknownConnectorRecordedAsWrittenClamped", code: `async () => { for (const a of ["ghost.tool", "nodot", "g".repeat(300) + ".t"]) { try { await connecta.call(a) } catch (_) {} } return 1 }`,
		check: func(t *testing.T, c *check) {
			ev := c.events()
			if len(ev) != 2 {
				t.Fatalf("%d events: %+v", len(ev), ev)
			}
			// Identity clamps (docs/DECISIONS.md): the first N bytes, then "…".
			long := ev[0]
			for _, e := range ev {
				if len(e.Address) > len(long.Address) {
					long = e
				}
			}
			if long.ConnectorID != strings.Repeat("g", 128)+"…" || long.Address != strings.Repeat("g", 257)+"…" {
				t.Fatalf("clamped as %d %d bytes: %q %q", len(long.ConnectorID), len(long.Address), long.ConnectorID, long.Address)
			}
		}},
	{name: "L1_L2_E5_InFlightCallCancelledWhenRunEnds", code: `async () => { connecta.call("reader.hang").catch(() => {}); await connecta.call("reader.echo"); return "returned" }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `"returned"`)
			if !testkit.Poll(5*time.Second, func() bool { return hasOutcome(c, "hang", "cancelled") }) {
				t.Fatalf("no cancelled event for the in-flight call: %+v", c.events())
			}
		}},
	{name: "X11_ConnectorForgedFrameIsConnectorCallFailed", code: `async () => { try { await connecta.call("reader.forge") } catch (e) { return [e.code, e.message.includes("forged by the connector")] } }`,
		check: func(t *testing.T, c *check) {
			c.result(t, `["connector_call_failed",true]`)
		}},
	{name: "X11_GuestForgedFrameStaysUntyped", code: `async () => { throw new Error("\u001econnecta-error:" + "0".repeat(32) + ":{\"code\":\"unavailable\",\"message\":\"m\",\"retryable\":true}") }`,
		check: func(t *testing.T, c *check) { c.untyped(t) }},
	{name: "X11_E6_UncaughtTypedFailureNeverShowsFrame", code: `async () => { await connecta.describe({ addresses: 5 }) }`,
		check: func(t *testing.T, c *check) {
			c.typed(t, "invalid_args", false)
			if strings.Contains(c.text, "connecta-error") || strings.Contains(c.text, "\x1e") {
				t.Fatal(c.text)
			}
		}},
	{name: "X11_HostileHuntForBridgeAndSecret", code: `async () => {
		const found = [];
		for (const k of Object.getOwnPropertyNames(globalThis)) if (/^__|bridge|invoke|call$/i.test(k)) found.push(k);
		const seen = [];
		JSON.parse = (s) => { seen.push(s); return {} };
		String.prototype.startsWith = function () { seen.push(String(this)); return true };
		try { await connecta.call("reader.nope") } catch (e) { seen.push(e.message, e.stack, JSON.stringify(e)) }
		return { found, leaked: seen.some((s) => typeof s === "string" && s.includes("connecta-error")) } }`,
		check: func(t *testing.T, c *check) { c.result(t, `{"found":[],"leaked":false}`) }},
	{name: "X4_LogsAreStrings", code: `async () => { console.log({ a: [1] }, 2, "s", null); console.info("info"); console.debug("debug"); return 0 }`,
		check: func(t *testing.T, c *check) {
			var env struct{ Logs string }
			_ = json.Unmarshal([]byte(c.text), &env)
			if !strings.HasPrefix(env.Logs, `{"a":[1]} 2 s null`) {
				t.Fatal(c.text)
			}
		}},
	{name: "S9_ObservedOutputSchemaLabelled", code: `async () => { await connecta.call("reader.echo", { field: "v" }); const p = await connecta.search({ query: "echo", connector: "reader", includeSchemas: "compact" }); const t = p.tools.find((t) => t.address === "reader.echo"); return t.outputSchemaSource || null }`,
		check: func(t *testing.T, c *check) { c.result(t, `"observed"`) }},
	{name: "L7_CodeOver128KiBRefusedBeforeAdmission", code: "async () => 1 // " + strings.Repeat("x", 128<<10),
		check: func(t *testing.T, c *check) {
			e := c.typed(t, "invalid_args", false)
			if !strings.Contains(e.Message, "131072-byte limit") {
				t.Fatal(c.text)
			}
		}},
}

// e2Retryable is whatever the gateway reports for connector_call_failed
// ("per message"): the case only pins the code.
func e2Retryable(c *check) bool {
	var env struct{ Error struct{ Retryable bool } }
	_ = json.Unmarshal([]byte(c.text), &env)
	return env.Error.Retryable
}

func TestContractCases(t *testing.T) {
	e := testEnv(t)
	clients := map[string]*mcp.ClientSession{}
	for _, ep := range []string{epDefault, epTight, epDeadline} {
		clients[ep] = e.client(t, ep)
	}
	// Cases share one fixture and one activity log: they run one at a time.
	for _, tc := range contractCases {
		t.Run(tc.name, func(t *testing.T) {
			ep := tc.ep
			if ep == "" {
				ep = epDefault
			}
			before := e.snapshot()
			res := exec(t, clients[ep], tc.code, tc.diagnostics)
			c := &check{res: res, text: textOf(res), env: e, before: before}
			tc.check(t, c)
			if !strings.Contains(tc.code, "connecta-error") && strings.Contains(c.text, "connecta-error") {
				t.Fatalf("X11: a frame reached the model: %s", c.text)
			}
		})
	}
}
