package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/jstext"
)

func TestP1_NormalizeBody(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"N1 fence", "```js\nasync () => 1\n```", "async () => 1"},
		{"N1 fence without lang", "```\nasync () => 1\n```", "async () => 1"},
		{"N2 bare body", "return 1;", "async () => {\nreturn 1;\n}"},
		{"N3 async arrow", "async () => 1", "async () => 1"},
		{"N3 line comment", "// note\nasync () => 1", "// note\nasync () => 1"},
		{"N3 block comment paren", "/* setup */\n(async () => 1)", "/* setup */\n(async () => 1)"},
		{"trimmed", "  \n async () => 1 \n\t", "async () => 1"},
		{"async-prefixed identifier is a body", "asyncThing()", "async () => {\nasyncThing()\n}"},
		{"fenced body", "```javascript\nconst a = 1;\nreturn a;\n```", "async () => {\nconst a = 1;\nreturn a;\n}"},
		{"two fences left alone", "```js\na\n```\n```js\nb\n```", "async () => {\n```js\na\n```\n```js\nb\n```\n}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NormalizeBody(tc.in); got != tc.want {
				t.Fatalf("NormalizeBody(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestP1_ProgramForms(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ name, code, want string }{
		{"async arrow evaluated and awaited", "async () => 1 + 1", "2"},
		{"parenthesized async arrow", "(async () => { return 'x'; })", `"x"`},
		{"fenced", "```js\nasync () => ({a: 1})\n```", `{"a":1}`},
		{"bare statement body", "const a = await Promise.resolve(20);\nreturn a + 1;", "21"},
		{"bare expression body returns nothing", "1 + 1", ""},
		{"comment before arrow", "// helper\nasync () => [1, 2]", "[1,2]"},
		{"sync arrow", "() => 5", "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runProgram(t, e, nil, Program{Code: tc.code, Limits: testLimits()})
			wantValue(t, out, tc.want)
		})
	}
}

func TestP5_TypeScriptIsSyntaxError(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: "const x: number = 1;\nreturn x;", Limits: testLimits()})
	wantError(t, out, ErrSyntax, "SyntaxError")
	out = runProgram(t, e, nil, Program{Code: "async () => {{{", Limits: testLimits()})
	wantError(t, out, ErrSyntax, "SyntaxError")
	assertHealthy(t, e)
}

func TestP2_NoAmbientAuthority(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: `async () => [typeof fetch, typeof setTimeout, typeof setInterval,
		typeof process, typeof require, typeof os, typeof std, typeof WebSocket, typeof XMLHttpRequest,
		typeof __invoke, typeof __call, typeof __log, typeof host, typeof Atomics]`, Limits: testLimits()})
	wantValue(t, out, `["undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined"]`)

	out = runProgram(t, e, nil, Program{Code: `async () => { try { await import("fs"); return "imported"; } catch (e) { return "refused"; } }`, Limits: testLimits()})
	wantValue(t, out, `"refused"`)
	out = runProgram(t, e, nil, Program{Code: "import fs from 'fs';\nreturn 1;", Limits: testLimits()})
	wantError(t, out, ErrSyntax, "SyntaxError")
}

func TestP2_RealClocks(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	before := time.Now().UnixMilli()
	out := runProgram(t, e, nil, Program{Code: "async () => Date.now()", Limits: testLimits()})
	after := time.Now().UnixMilli()
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	got, err := strconv.ParseInt(string(out.Value), 10, 64)
	if err != nil || got < before-1000 || got > after+1000 {
		t.Fatalf("Date.now() = %s, want between %d and %d", out.Value, before, after)
	}
	// Math.random is seeded from the real clock: two runs differ.
	a := runProgram(t, e, nil, Program{Code: "async () => Math.random()", Limits: testLimits()})
	b := runProgram(t, e, nil, Program{Code: "async () => Math.random()", Limits: testLimits()})
	if string(a.Value) == string(b.Value) {
		t.Fatalf("Math.random repeated across runs: %s", a.Value)
	}
}

func TestP4_FreshInstancePerRun(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: "async () => { globalThis.leak = 1; Array.prototype.evil = 1; return typeof leak; }", Limits: testLimits()})
	wantValue(t, out, `"number"`)
	out = runProgram(t, e, nil, Program{Code: "async () => [typeof leak, typeof [].evil]", Limits: testLimits()})
	wantValue(t, out, `["undefined","undefined"]`)
}

func TestP3_ResultsAreGuestJSON(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ code, want string }{
		{"async () => null", "null"},
		{"async () => undefined", ""},
		{"async () => {}", ""},
		{"async () => () => 1", ""},
		{"async () => ({b: 1, a: [true, 'é', 1e-7, 1e21, -0]})", `{"b":1,"a":[true,"é",1e-7,1e+21,0]}`},
		{"async () => '<&>'", `"<&>"`},
		{"async () => '\\ud800'", `"\ud800"`},
		{"async () => new Date(0)", `"1970-01-01T00:00:00.000Z"`},
		{"async () => ({toJSON() { return 7; }})", "7"},
		{"async () => 2n ** 3n > 1n", "true"},
	} {
		out := runProgram(t, e, nil, Program{Code: tc.code, Limits: testLimits()})
		wantValue(t, out, tc.want)
	}
}

func TestX9_CycleAndBigInt(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: "async () => { const a = {}; a.self = a; return a; }", Limits: testLimits()})
	wantValue(t, out, `"[object Object]"`)
	out = runProgram(t, e, nil, Program{Code: "async () => 10n", Limits: testLimits()})
	wantError(t, out, ErrResult, "not JSON-serializable")
	out = runProgram(t, e, nil, Program{Code: "async () => ({n: 1n})", Limits: testLimits()})
	wantError(t, out, ErrResult, "not JSON-serializable")
	out = runProgram(t, e, nil, Program{Code: "async () => { const a = Object.create(null); a.self = a; return a; }", Limits: testLimits()})
	wantError(t, out, ErrResult, "not JSON-serializable")
	assertHealthy(t, e)
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

func TestR2_TruncationEnvelope(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	type envelope struct {
		Truncated  bool   `json:"truncated"`
		Preview    string `json:"preview"`
		TotalChars int    `json:"totalChars"`
		Hint       string `json:"hint"`
	}
	for _, tc := range []struct {
		name, code string
		total      int
		heap       uint64
	}{
		{"100k chars", "async () => 'x'.repeat(100000)", 100002, 0},
		{"exactly at the cap is untouched", "async () => 'x'.repeat(23998)", -1, 0},
		{"escapes expand the preview", "async () => '\"'.repeat(30000)", 60002, 0},
		{"astral characters", "async () => '😀'.repeat(20000)", 40002, 0},
		{"5 MiB string in a 16 MiB heap", "async () => 'x'.repeat(5 * 1024 * 1024)", 5*1024*1024 + 2, 16 << 20},
		{"large array", "async () => Array.from({length: 20000}, (_, i) => ({i}))", -2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := Limits{CPUTime: 5 * time.Second, Wall: time.Minute, HeapBytes: tc.heap}
			out := runProgram(t, e, nil, Program{Code: tc.code, Limits: lim})
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			if n := utf16Len(string(out.Value)); n > ipc.MaxResultChars {
				t.Fatalf("result is %d UTF-16 units, over %d", n, ipc.MaxResultChars)
			}
			if tc.total == -1 {
				if strings.Contains(string(out.Value), "truncated") {
					t.Fatalf("value at the cap was truncated")
				}
				return
			}
			var env envelope
			if err := json.Unmarshal(out.Value, &env); err != nil {
				t.Fatalf("not an envelope: %v: %.200s", err, out.Value)
			}
			if !env.Truncated || env.Hint != "filter/map/slice data inside execute_code and return only what you need" {
				t.Fatalf("bad envelope %+v", env)
			}
			if tc.total > 0 && env.TotalChars != tc.total {
				t.Fatalf("totalChars %d, want %d", env.TotalChars, tc.total)
			}
			if len(env.Preview) == 0 || utf16Len(env.Preview) > ipc.MaxResultChars {
				t.Fatalf("preview length %d", utf16Len(env.Preview))
			}
			if !strings.Contains(string(out.Value), `{"truncated":true,"preview":`) {
				t.Fatalf("field order: %.80s", out.Value)
			}
		})
	}
}

func TestX8_ProviderProxy(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{}
	code := `async () => {
		const out = {};
		out.typeofToString = typeof connecta.toString;
		out.keys = Object.keys(connecta);
		try { await connecta.nope(); } catch (e) { out.nope = e.message; out.nopeIsError = e instanceof Error; }
		try { await connecta.toString(); } catch (e) { out.inherited = e.message; }
		try { await connecta.hasOwnProperty("search"); } catch (e) { out.hasOwn = e.message; }
		try { connecta.search = 1; } catch (e) { out.assign = e.constructor.name; }
		out.search = await connecta.search("q", {limit: 2});
		out.sym = connecta[Symbol.iterator];
		return out;
	}`
	out := runProgram(t, e, h, Program{Code: code, Limits: testLimits()})
	wantValue(t, out, `{"typeofToString":"function","keys":[],"nope":"Unknown function connecta.nope","nopeIsError":true,"inherited":"Unknown function connecta.toString","hasOwn":"Unknown function connecta.hasOwnProperty","search":["q",{"limit":2}]}`)
	if n := h.callCount(); n != 1 {
		t.Fatalf("host saw %d calls, want only the search", n)
	}
	if c := h.calls[0]; c.Provider != "connecta" || c.Function != "search" || string(c.Args) != `["q",{"limit":2}]` {
		t.Fatalf("call %+v", c)
	}
}

func TestX8_BridgeIsPrivate(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	// Only standard globals plus console and the provider exist, and none of
	// the engine's closures leak through what the guest can touch.
	code := `async () => {
		const std = new Set(["globalThis","Object","Function","Error","EvalError","RangeError","ReferenceError",
			"SyntaxError","TypeError","URIError","InternalError","AggregateError","Array","parseInt","parseFloat",
			"isNaN","isFinite","decodeURI","decodeURIComponent","encodeURI","encodeURIComponent","escape","unescape",
			"Infinity","NaN","undefined","Number","Boolean","String","Math","Reflect","Symbol","eval","JSON","Proxy",
			"Map","Set","WeakMap","WeakSet","WeakRef","FinalizationRegistry","Iterator","ArrayBuffer","SharedArrayBuffer",
			"Uint8ClampedArray","Int8Array","Uint8Array","Int16Array","Uint16Array","Int32Array","Uint32Array",
			"BigInt64Array","BigUint64Array","Float16Array","Float32Array","Float64Array","DataView","Date","RegExp",
			"Promise","BigInt","console","connecta","performance","queueMicrotask"]);
		const extra = Object.getOwnPropertyNames(globalThis).filter(n => !std.has(n));
		const fnSrc = String(connecta.search);
		return {extra, leaks: /bridge|call\(/.test(Object.getOwnPropertyNames(console.log).join())};
	}`
	out := runProgram(t, e, nil, Program{Code: code, Limits: testLimits()})
	wantValue(t, out, `{"extra":[],"leaks":false}`)
}

func TestX11_PreludeRunsFirstAndRejectionsUseIntrinsicError(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		if c.Function == "call" {
			settle(Reply{Err: "\u001econnecta-error:secret:{\"code\":\"not_found\"}"})
			return
		}
		settle(Reply{Value: json.RawMessage(`"ok"`)})
	}}
	prelude := `(() => {
		const raw = globalThis.connecta;
		const NativeError = Error;
		const proto = Error.prototype;
		globalThis.Error = function FakeError() { throw new NativeError("global Error was used"); };
		globalThis.preludeRan = true;
		globalThis.connecta = new Proxy({}, { get(_, k) {
			return async (...a) => {
				try { return await raw[k](...a); }
				catch (e) {
					return {typed: Object.getPrototypeOf(e) === proto, frame: e.message.startsWith("\u001econnecta-error:")};
				}
			};
		}});
	})();`
	out := runProgram(t, e, h, Program{Code: "async () => [preludeRan, await connecta.search('x'), await connecta.call('a.b', {})]", Prelude: prelude, Limits: testLimits()})
	wantValue(t, out, `[true,"ok",{"typed":true,"frame":true}]`)

	out = runProgram(t, e, h, Program{Code: "async () => 1", Prelude: "throw new Error('bad prelude')", Limits: testLimits()})
	wantError(t, out, ErrInternal, "Sandbox setup failed: bad prelude")
}

func TestX6_StallDetected(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, code := range []string{
		"async () => { await new Promise(() => {}); }",
		"async () => { await connecta.search('x'); await new Promise(() => {}); }",
		"async () => { return connecta; }", // a thenable that never settles
	} {
		out := runProgram(t, e, nil, Program{Code: code, Limits: Limits{Wall: time.Minute, CPUTime: time.Second}})
		wantError(t, out, ErrStall, "Execution stalled: code awaits something that can never settle.")
	}
}

func TestX6_ConcurrentHostCalls(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	// Replies arrive from other goroutines in reverse order: call k of the
	// three concurrent ones settles once call k+1 has.
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	settled := make([]chan struct{}, 5)
	for i := range settled {
		settled[i] = make(chan struct{})
	}
	close(settled[4]) // call 3 waits for nothing
	h := &testHost{reply: func(ctx context.Context, c Call, settle func(Reply)) {
		var args []int
		json.Unmarshal(c.Args, &args)
		k := args[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if k > 0 {
				select {
				case <-settled[k+1]:
				case <-ctx.Done():
				}
			}
			settle(Reply{Value: json.RawMessage(strconv.Itoa(k * 10))})
			close(settled[k])
		}()
	}}
	out := runProgram(t, e, h, Program{Code: `async () => {
		const first = await connecta.call(0);
		const sums = await Promise.all([connecta.call(1), connecta.call(2), connecta.call(3)]);
		return {first, sums};
	}`, Limits: testLimits()})
	wantValue(t, out, `{"first":0,"sums":[10,20,30]}`)
	if out.HostCalls != 4 {
		t.Fatalf("HostCalls %d", out.HostCalls)
	}
}

func TestX6_TenThousandConcurrentHostCalls(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		wg.Add(1)
		go func() { defer wg.Done(); settle(Reply{Value: json.RawMessage(`1`)}) }()
	}}
	out := runProgram(t, e, h, Program{Code: `async () => {
		const ps = [];
		for (let i = 0; i < 10000; i++) ps.push(connecta.call(i));
		return (await Promise.all(ps)).reduce((a, b) => a + b, 0);
	}`, Limits: Limits{Wall: time.Minute, CPUTime: 5 * time.Second}})
	wantValue(t, out, "10000")
	assertHealthy(t, e)
}

func TestX6_EachCallSettledExactlyOnce(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		settle(Reply{Value: json.RawMessage(`"first"`)})
		settle(Reply{Value: json.RawMessage(`"second"`)})
		settle(Reply{Err: "third"})
	}}
	out := runProgram(t, e, h, Program{Code: "async () => [await connecta.search(), await connecta.search()]", Limits: testLimits()})
	wantValue(t, out, `["first","first"]`)
}

func TestE1_HostRejectionsAndReplies(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		switch c.Function {
		case "call":
			settle(Reply{Err: "downstream exploded"})
		case "search":
			settle(Reply{Value: json.RawMessage(`{not json`)})
		case "describe":
			settle(Reply{}) // undefined
		default:
			settle(Reply{Value: json.RawMessage(`{"big":12345678901234567890}`)})
		}
	}}
	out := runProgram(t, e, h, Program{Code: `async () => {
		const r = {};
		try { await connecta.call("x"); } catch (e) { r.caught = "caught: " + e.message; r.name = e.name; }
		try { await connecta.search(); } catch (e) { r.invalid = e.message; }
		r.undef = typeof (await connecta.describe());
		r.emit = await connecta.emit();
		return r;
	}`, Limits: testLimits()})
	wantValue(t, out, `{"caught":"caught: downstream exploded","name":"Error","invalid":"Invalid host result: not JSON.","undef":"undefined","emit":{"big":12345678901234567000}}`)

	out = runProgram(t, e, h, Program{Code: "async () => connecta.call('x')", Limits: testLimits()})
	wantError(t, out, ErrThrown, "downstream exploded")
}

func TestE5_ThrownValueTexts(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ code, want string }{
		{"throw new Error('guest sad')", "guest sad"},
		{"throw new TypeError('bad type')", "TypeError: bad type"},
		{"throw 'plain string'", "plain string"},
		{"throw {a: 1}", `{"a":1}`},
		{"throw 42", "42"},
		{"throw null", "null"},
		{"throw undefined", ""},
		{"throw Symbol('s')", "Symbol(s)"},
		{"throw {message: 'like an error', name: 'Custom'}", "Custom: like an error"},
		{"throw Object.assign(new Error('x'), {name: ''})", "x"},
		{"await Promise.reject(new RangeError('r'))", "RangeError: r"},
		{"null.x", "TypeError: cannot read property 'x' of null"},
		{"throw {get message() { throw 1; }}", "[object Object]"},
	} {
		out := runProgram(t, e, nil, Program{Code: tc.code, Limits: testLimits()})
		if out.Err == nil || out.Err.Kind != ErrThrown || out.Err.Message != tc.want {
			t.Errorf("%s: got %+v value %s, want thrown %q", tc.code, out.Err, out.Value, tc.want)
		}
	}
}

func TestL6_ArgumentBoundInGuest(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{}
	out := runProgram(t, e, h, Program{Code: `async () => {
		const r = [];
		try { await connecta.call("x".repeat(2 * 1024 * 1024)); } catch (e) { r.push(e.message); }
		try { await connecta.call("reader.big", {data: "y".repeat(2 * 1024 * 1024)}); } catch (e) { r.push(e.message); }
		try { await connecta.call(1n); } catch (e) { r.push(e.message); }
		return r;
	}`, Limits: Limits{CPUTime: 5 * time.Second, Wall: time.Minute}})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	var msgs []string
	json.Unmarshal(out.Value, &msgs)
	if len(msgs) != 3 {
		t.Fatalf("got %s", out.Value)
	}
	for _, m := range msgs[:2] {
		if !strings.Contains(m, "IPC limit") || strings.Contains(m, "reader.big") {
			t.Fatalf("message %q: want IPC limit, no address", m)
		}
	}
	if !strings.Contains(msgs[2], "not JSON-serializable") {
		t.Fatalf("BigInt argument: %q", msgs[2])
	}
	if h.callCount() != 0 {
		t.Fatalf("host saw %d calls", h.callCount())
	}

	// Exactly at the bound passes: ["<n x>"] is n+4 bytes.
	n := ipc.MaxPayloadBytes - 4
	out = runProgram(t, e, h, Program{Code: fmt.Sprintf("async () => (await connecta.call('x'.repeat(%d)))[0].length", n), Limits: testLimits()})
	wantValue(t, out, strconv.Itoa(n))
	out = runProgram(t, e, h, Program{Code: fmt.Sprintf("async () => (await connecta.call('é'.repeat(%d)))[0].length", n/2+1), Limits: testLimits()})
	wantError(t, out, ErrThrown, "IPC limit")
}

func TestL2_InFlightCallsCancelledWhenRunEnds(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	ctxs := make(chan context.Context, 1)
	settles := make(chan func(Reply), 1)
	h := &testHost{reply: func(ctx context.Context, c Call, settle func(Reply)) {
		ctxs <- ctx
		settles <- settle
	}}
	out := runProgram(t, e, h, Program{Code: "async () => { connecta.call('slow'); return 'returned'; }", Limits: testLimits()})
	wantValue(t, out, `"returned"`)
	ctx := <-ctxs
	select {
	case <-ctx.Done():
	default:
		t.Fatal("host call context still live after Run returned")
	}
	(<-settles)(Reply{Value: json.RawMessage(`1`)}) // a settle after Run is ignored
	assertHealthy(t, e)
}

func TestX4_ConsoleCapture(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	var order []string
	var mu sync.Mutex
	h := &testHost{}
	h.reply = func(_ context.Context, c Call, settle func(Reply)) {
		mu.Lock()
		order = append(order, "call")
		mu.Unlock()
		settle(Reply{Value: json.RawMessage(`1`)})
	}
	logHost := &orderHost{testHost: h, order: &order, mu: &mu}
	out := runProgram(t, e, logHost, Program{Code: `async () => {
		console.log("hello", {a: 1});
		console.warn("warned");
		await connecta.search();
		console.info(1, "two", [3], null, undefined, true);
		console.error(new Error("e"));
		console.debug(10n, Symbol("s"));
		const c = {}; c.c = c; console.log(c);
	}`, Limits: testLimits()})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	want := []string{`hello {"a":1}`, "warned", `1 two [3] null undefined true`, "{}", "10 Symbol(s)", "[object Object]"}
	if mustJSON(t, out.Logs) != mustJSON(t, want) {
		t.Fatalf("logs %q, want %q", out.Logs, want)
	}
	levels := []string{}
	for _, l := range h.logs {
		levels = append(levels, l.Level)
	}
	if strings.Join(levels, ",") != "log,warn,info,error,debug,log" {
		t.Fatalf("levels %v", levels)
	}
	if strings.Join(order, ",") != "log,log,call,log,log,log,log" {
		t.Fatalf("host saw %v: entries must reach Log as they happen", order)
	}
}

type orderHost struct {
	*testHost
	order *[]string
	mu    *sync.Mutex
}

func (h *orderHost) Log(e LogEntry) {
	h.mu.Lock()
	*h.order = append(*h.order, "log")
	h.mu.Unlock()
	h.testHost.Log(e)
}

func TestX4_ConsoleCaps(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	t.Run("entry cap", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: `async () => { console.log("x".repeat(25e6)); return 1; }`, Limits: Limits{Wall: time.Minute, CPUTime: 5 * time.Second}})
		wantValue(t, out, "1")
		if len(out.Logs) != 1 || out.Logs[0] != strings.Repeat("x", 8000)+LogEntryTruncatedMarker {
			t.Fatalf("logs %d entries, first %d chars", len(out.Logs), len(out.Logs[0]))
		}
	})
	t.Run("entry count cap", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: `async () => { for (let i = 0; i < 500; i++) console.log(i); return 1; }`, Limits: testLimits()})
		wantValue(t, out, "1")
		if len(out.Logs) != 201 || out.Logs[199] != "199" || out.Logs[200] != "[log TRUNCATED after 200 entries]" {
			t.Fatalf("%d logs, last %q", len(out.Logs), out.Logs[len(out.Logs)-1])
		}
	})
	t.Run("cumulative cap", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: `async () => { const big = "y".repeat(25e6); for (let i = 0; i < 200; i++) console.log(big); return 1; }`, Limits: Limits{Wall: time.Minute, CPUTime: 5 * time.Second}})
		wantValue(t, out, "1")
		total := 0
		for _, l := range out.Logs {
			total += utf16Len(l)
		}
		last := out.Logs[len(out.Logs)-1]
		if total >= 264128 || last != LogSizeMarker {
			t.Fatalf("total %d chars, last %q", total, last)
		}
	})
	t.Run("weight cap", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: `async () => { for (let i = 0; i < 200; i++) console.log("\x01".repeat(8000)); return {ok: true}; }`, Limits: Limits{Wall: time.Minute, CPUTime: 5 * time.Second}})
		wantValue(t, out, `{"ok":true}`)
		weight := 0
		for _, l := range out.Logs {
			b1, _ := json.Marshal(l)
			b2, _ := json.Marshal(string(b1))
			weight += len(b2)
		}
		if out.Logs[len(out.Logs)-1] != LogSizeMarker || weight > 512*1024 {
			t.Fatalf("%d entries, weight %d", len(out.Logs), weight)
		}
	})
}

func TestL5_GuestCPUBudget(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	t.Run("default budget text", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: "async () => { while (true) {} }", Limits: Limits{Wall: time.Minute}})
		if out.Err == nil || out.Err.Kind != ErrCPU || out.Err.Message != "Execution exceeded the 250ms guest CPU budget." {
			t.Fatalf("got %+v", out.Err)
		}
		if out.CPUTime < DefaultCPUTime {
			t.Fatalf("CPUTime %v below the budget", out.CPUTime)
		}
	})
	for _, tc := range []struct{ name, code string }{
		{"infinite loop", "for (;;) {}"},
		{"loop inside try/catch", "for (;;) { try { for (;;) {} } catch (e) {} }"},
		{"catch and retry in finally", "for (;;) { try { while (true) {} } finally { continue; } }"},
		{"catastrophic regexp", "return /(a+)+b/.test('a'.repeat(40));"},
		{"spin after host call", "await connecta.search(); for (;;) {}"},
		{"spin in a promise job", "await Promise.resolve().then(() => { for (;;) {} });"},
		{"rejection handler spin", "const p = Promise.reject(1); p.catch(() => { for (;;) {} }); await new Promise(() => {});"},
		{"expensive builtin in a short loop", "for (let i = 0; i < 1000; i++) 'y'.repeat(25e6);"},
		{"catching the interrupted allocation", "for (let i = 0; i < 1000; i++) { try { 'y'.repeat(25e6); } catch (e) {} }"},
		{"sort then spin", "const a = Array.from({length: 300000}, (_, i) => (i * 7919) % 300007); a.sort((x, y) => x - y); for (;;) {}"},
		// Each retry overflows the stack again and builds a stack-deep
		// backtrace; the refused allocations that follow the trip used to
		// turn the interrupt into a catchable out of memory (9-16 s of CPU).
		{"recursion that catches and retries", "const f = n => { try { return f(n+1) } catch (e) { return f(n+1) } }; return f(0);"},
		{"recursion that retries in finally", "const f = n => { try { return f(n+1) } finally { return f(n+1) } }; return f(0);"},
		{"catching everything in a loop", "for (;;) { try { const f = () => f(); f(); } catch (e) {} }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const budget = 50 * time.Millisecond
			out := runProgram(t, e, nil, Program{Code: tc.code, Limits: Limits{CPUTime: budget, Wall: time.Minute}})
			wantError(t, out, ErrCPU, "Execution exceeded the 50ms guest CPU budget.")
			if out.CPUTime > budget+250*time.Millisecond {
				t.Errorf("guest CPU %v: the budget bound %v late", out.CPUTime, out.CPUTime-budget)
			}
			assertHealthy(t, e)
		})
	}
}

func TestL5_HostWaitsDoNotCountAsCPU(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(300 * time.Millisecond) // the host's wait is the point: it must not count as CPU
			settle(Reply{Value: json.RawMessage(`"done"`)})
		}()
	}}
	out := runProgram(t, e, h, Program{Code: "async () => await connecta.call('slow')", Limits: Limits{CPUTime: 100 * time.Millisecond, Wall: 5 * time.Second}})
	wantValue(t, out, `"done"`)
	if out.CPUTime >= 100*time.Millisecond {
		t.Fatalf("CPUTime %v counts the host wait", out.CPUTime)
	}
}

func TestL3_WallDeadline(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	t.Run("host reply never comes", func(t *testing.T) {
		h := &testHost{reply: func(context.Context, Call, func(Reply)) {}}
		out := runProgram(t, e, h, Program{Code: "async () => await connecta.call('hang')", Limits: Limits{Wall: 300 * time.Millisecond}})
		if out.Err == nil || out.Err.Kind != ErrDeadline || out.Err.Message != "Execution timed out after 300ms." {
			t.Fatalf("got %+v", out.Err)
		}
		assertHealthy(t, e)
	})
	t.Run("guest loop under a large CPU budget", func(t *testing.T) {
		out := runProgram(t, e, nil, Program{Code: "for (;;) {}", Limits: Limits{Wall: 200 * time.Millisecond, CPUTime: time.Hour}})
		wantError(t, out, ErrDeadline, "Execution timed out after 200ms.")
	})
	t.Run("stragglers after the deadline are ignored", func(t *testing.T) {
		var wg sync.WaitGroup
		defer wg.Wait()
		ended := make(chan struct{}) // the reply settles once the run has ended
		h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ended
				settle(Reply{Value: json.RawMessage(`1`)})
			}()
		}}
		out := runProgram(t, e, h, Program{Code: "async () => await connecta.call('slow')", Limits: Limits{Wall: 100 * time.Millisecond}})
		close(ended)
		wantError(t, out, ErrDeadline, "timed out")
	})
}

func TestL1_Cancellation(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ name, code string }{
		{"runaway guest", "for (;;) {}"},
		{"waiting on the host", "await connecta.call('hang')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			h := &testHost{reply: func(context.Context, Call, func(Reply)) {}}
			time.AfterFunc(50*time.Millisecond, cancel)
			out, err := e.Run(ctx, Program{Code: tc.code, Providers: connectaProvider, Limits: Limits{CPUTime: time.Hour, Wall: time.Minute}}, h)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, out, ErrCancelled, "Execution was cancelled.")
			assertHealthy(t, e)
		})
	}
}

func TestL1_CancelledBeforeStart(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, err := e.Run(ctx, Program{Code: "async () => 1"}, &testHost{})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, out, ErrCancelled, "Execution was cancelled.")
}

func TestL5_ReplyLargerThanGuestMemory(t *testing.T) {
	e := newTestEngine(t, EngineOptions{MemoryLimitBytes: 16 << 20})
	big := json.RawMessage(`"` + strings.Repeat("x", 32<<20) + `"`)
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) { settle(Reply{Value: big}) }}
	out := runProgram(t, e, h, Program{Code: "async () => { try { await connecta.call('x'); return 'delivered'; } catch (e) { return e.message; } }", Limits: testLimits()})
	wantValue(t, out, `"Host result could not be delivered: the sandbox is out of memory."`)
}

// TestL5_BadInput is the bad-input table: each row ends with a clear
// error and the same Engine then runs a program normally. The QuickJS builtins
// that never poll the interrupt handler are deliberately absent (see the
// package documentation): they can only be stopped by killing the process.
func TestL5_BadInput(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct {
		name, code string
		kind       ErrorKind
		substr     string
		lim        Limits
	}{
		{"infinite loop", "for (;;) {}", ErrCPU, "guest CPU budget", Limits{CPUTime: 100 * time.Millisecond}},
		{"loop inside try/catch", "for (;;) { try { for (;;) {} } catch (e) {} }", ErrCPU, "guest CPU budget", Limits{CPUTime: 100 * time.Millisecond}},
		{"catastrophic regexp", "/(a+)+b/.test('a'.repeat(40))", ErrCPU, "guest CPU budget", Limits{CPUTime: 100 * time.Millisecond}},
		{"unbounded allocation", "const a = []; for (;;) a.push(new Array(1e5).fill(1.5));", ErrOutOfMemory, "out of memory", Limits{CPUTime: 5 * time.Second}},
		{"unbounded allocation, heap 4 MiB", "const a = []; for (;;) a.push(new Array(1e4).fill(1.5));", ErrOutOfMemory, "out of memory", Limits{HeapBytes: 4 << 20, CPUTime: 5 * time.Second}},
		{"single 128 MiB ArrayBuffer", "new ArrayBuffer(128 * 1024 * 1024)", ErrThrown, "", Limits{}},
		{"string doubling", "let s = 'x'; for (;;) s += s;", ErrThrown, "", Limits{}},
		{"infinite recursion", "function f() { return f() + 1; } f();", ErrThrown, "stack overflow", Limits{}},
		{"deeply nested JSON.parse", "JSON.parse('['.repeat(1e6))", ErrThrown, "", Limits{}},
		{"deeply nested source", "eval('('.repeat(1e5))", ErrThrown, "stack overflow", Limits{}},
		{"syntax error", "async () => {{{", ErrSyntax, "SyntaxError", Limits{}},
		{"throw a number", "throw 7", ErrThrown, "7", Limits{}},
		{"throw an object", "throw {code: 1}", ErrThrown, `{"code":1}`, Limits{}},
		{"never-settling await", "await new Promise(() => {})", ErrStall, "Execution stalled", Limits{}},
		{"host reply never comes", "await connecta.call('hang')", ErrDeadline, "Execution timed out after 300ms.", Limits{Wall: 300 * time.Millisecond}},
		{"huge result", "return 'x'.repeat(1 << 29)", ErrThrown, "", Limits{}},
		{"typed array fill", "new Float64Array(1 << 24).fill(1)", ErrThrown, "", Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &testHost{reply: func(context.Context, Call, func(Reply)) {}}
			lim := tc.lim
			if lim.CPUTime == 0 {
				lim.CPUTime = time.Second // generous: only the CPU rows may end by CPU
			}
			if lim.Wall == 0 {
				lim.Wall = time.Minute
			}
			out := runProgram(t, e, h, Program{Code: tc.code, Limits: lim})
			if out.Err == nil {
				t.Fatalf("succeeded with %.100s", out.Value)
			}
			if tc.kind == ErrThrown && out.Err.Kind == ErrOutOfMemory {
				// allocation failures may surface either way
			} else if out.Err.Kind != tc.kind {
				t.Fatalf("error %s: %q, want %s", out.Err.Kind, out.Err.Message, tc.kind)
			}
			if !strings.Contains(out.Err.Message, tc.substr) || (tc.substr == "" && out.Err.Message == "") {
				t.Fatalf("message %q, want it to contain %q", out.Err.Message, tc.substr)
			}
			assertHealthy(t, e)
		})
	}
}

func TestL5_OutOfMemoryIsCatchable(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: `async () => {
		let a = [];
		try { for (;;) a.push(new Array(1e4).fill(1.5)); } catch (e) { a = null; return String(e); }
	}`, Limits: Limits{HeapBytes: 8 << 20, CPUTime: 5 * time.Second, Wall: time.Minute}})
	wantValue(t, out, `"InternalError: out of memory"`)
	if out.PeakHeapBytes < 7<<20 || out.PeakHeapBytes > 9<<20 {
		t.Fatalf("PeakHeapBytes %d, want about 8 MiB", out.PeakHeapBytes)
	}
}

func TestL5_WasmPageCapBackstop(t *testing.T) {
	// The JS heap limit is above the wasm memory cap: the cap stops the
	// allocation, as an ordinary out of memory.
	e := newTestEngine(t, EngineOptions{MemoryLimitBytes: 24 << 20})
	out := runProgram(t, e, nil, Program{Code: "const a = []; for (;;) a.push(new Array(1e4).fill(1.5));", Limits: Limits{HeapBytes: 1 << 30, CPUTime: 10 * time.Second, Wall: time.Minute}})
	if out.Err == nil || out.Err.Kind != ErrOutOfMemory {
		t.Fatalf("got %+v", out.Err)
	}
	assertHealthy(t, e)
}

func TestL5_StackLimit(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: "async () => { let d = 0; function f() { d++; f(); } try { f(); } catch (e) { return [String(e), d > 1000]; } }", Limits: testLimits()})
	wantValue(t, out, `["InternalError: stack overflow",true]`)
	small := runProgram(t, e, nil, Program{Code: "async () => { let d = 0; function f() { d++; f(); } try { f(); } catch (e) { return d; } }", Limits: Limits{StackBytes: 64 << 10, CPUTime: 5 * time.Second, Wall: time.Minute}})
	big := runProgram(t, e, nil, Program{Code: "async () => { let d = 0; function f() { d++; f(); } try { f(); } catch (e) { return d; } }", Limits: Limits{StackBytes: MaxStackBytes, CPUTime: 5 * time.Second, Wall: time.Minute}})
	s, _ := strconv.Atoi(string(small.Value))
	b, _ := strconv.Atoi(string(big.Value))
	if s == 0 || b <= s {
		t.Fatalf("recursion depth with 64 KiB %d, with %d: %d", s, MaxStackBytes, b)
	}
	if _, err := e.Run(context.Background(), Program{Code: "1", Limits: Limits{StackBytes: MaxStackBytes + 1}}, &testHost{}); err == nil {
		t.Fatal("a stack limit above the link-time shadow stack was accepted")
	}
}

func TestOutcome_Measurements(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: "async () => { const a = new Array(1e6).fill(0); let s = 0; for (const x of a) s += x; await connecta.search(); return s; }", Limits: Limits{CPUTime: 10 * time.Second, Wall: time.Minute}})
	wantValue(t, out, "0")
	if out.CPUTime <= 0 || out.PeakHeapBytes < 8<<20 || out.HostCalls != 1 {
		t.Fatalf("CPUTime %v PeakHeapBytes %d HostCalls %d", out.CPUTime, out.PeakHeapBytes, out.HostCalls)
	}
}

func TestEngine_CloseAndConcurrentRuns(t *testing.T) {
	e, err := NewEngine(context.Background(), EngineOptions{CacheDir: testCacheDir, MaxArgBytes: ipc.MaxPayloadBytes, MaxResultChars: ipc.MaxResultChars})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out, err := e.Run(context.Background(), Program{Code: fmt.Sprintf("async () => %d * 2", i), Limits: testLimits()}, &testHost{})
			if err != nil {
				errs <- err
				return
			}
			if string(out.Value) != strconv.Itoa(i*2) {
				errs <- fmt.Errorf("run %d: %s %+v", i, out.Value, out.Err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), Program{Code: "1"}, &testHost{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestEngine_InvalidLimits(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, lim := range []Limits{{CPUTime: -1}, {Wall: -1}, {MaxResultChars: 10}, {MaxLogChars: -1}, {MaxArgBytes: ipc.MaxPayloadBytes + 1}} {
		if _, err := e.Run(context.Background(), Program{Code: "1", Limits: lim}, &testHost{}); err == nil {
			t.Errorf("limits %+v accepted", lim)
		}
	}
}

// The L6 and R2 bounds have one definition (package ipc): the engine refuses
// to start without them rather than carry a default of its own.
func TestEngine_BoundsAreRequired(t *testing.T) {
	for _, opts := range []EngineOptions{{}, {MaxArgBytes: ipc.MaxPayloadBytes}, {MaxResultChars: ipc.MaxResultChars}, {MaxArgBytes: 1, MaxResultChars: 199}} {
		if e, err := NewEngine(context.Background(), opts); err == nil {
			e.Close()
			t.Errorf("NewEngine(%+v) accepted", opts)
		}
	}
}

// A Host that panics is a bug in the caller; the run ends as an internal
// error instead of taking the process down, and the engine keeps working.
func TestEngine_HostPanicIsInternalError(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{reply: func(context.Context, Call, func(Reply)) { panic("host bug") }}
	out := runProgram(t, e, h, Program{Code: "async () => await connecta.call('x')", Limits: testLimits()})
	wantError(t, out, ErrInternal, "host bug")
	assertHealthy(t, e)
}

// A lone surrogate in a console entry is one U+FFFD in the entry the host
// gets (streamed) and in Outcome.Logs, never three (one per WTF-8 byte), and
// it counts one UTF-16 unit, as in JavaScript.
func TestConsole_LoneSurrogateIsOneReplacementCharacter(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	h := &testHost{}
	out := runProgram(t, e, h, Program{Code: `async () => { console.log("a\uD800b", "\uDC00"); console.log(["\uD800"]); }`, Limits: testLimits()})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	want := []string{"a\ufffdb \ufffd", `["\ud800"]`}
	if mustJSON(t, out.Logs) != mustJSON(t, want) || len(h.logs) != 2 || h.logs[0].Text != want[0] {
		t.Fatalf("logs %q, streamed %+v, want %q", out.Logs, h.logs, want)
	}
	if n := jstext.Len(out.Logs[0]); n != 5 {
		t.Fatalf("entry is %d UTF-16 units, want 5", n)
	}
}

// The same for a thrown error's message: text the model reads.
func TestThrown_LoneSurrogateIsOneReplacementCharacter(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	out := runProgram(t, e, nil, Program{Code: `async () => { throw new Error("x\uD800y") }`, Limits: testLimits()})
	if out.Err == nil || !utf8.ValidString(out.Err.Message) || strings.Count(out.Err.Message, "\ufffd") != 1 || !strings.Contains(out.Err.Message, "x\ufffdy") {
		t.Fatalf("thrown %+v", out.Err)
	}
}

// Math.random is seeded per run from Program.RandomSeed (the parent's
// CSPRNG): the same seed gives the same sequence, different seeds different
// ones, and two runs started in the same microsecond (same clock) differ.
// It used to follow the microsecond clock, which a program can read.
func TestMathRandom_SeededPerRunNotFromTheClock(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	seq := func(seed uint64) string {
		out := runProgram(t, e, nil, Program{Code: `async () => [Math.random(), Math.random(), Math.random()]`, Limits: testLimits(), RandomSeed: seed})
		if out.Err != nil {
			t.Fatal(out.Err)
		}
		return string(out.Value)
	}
	a, b, c := seq(0x0123456789abcdef), seq(0x0123456789abcdef), seq(0xfedcba9876543210)
	if a != b || a == c {
		t.Fatalf("seed 1 twice: %s %s; seed 2: %s", a, b, c)
	}
	// Unseeded runs draw their own seed: no two alike.
	if x, y := seq(0), seq(0); x == y {
		t.Fatal("two unseeded runs repeated a sequence")
	}
}

// The engine's count and size markers reach the host flagged as markers; a
// program that logs the very same text gets a plain entry. The flag, not the
// text, is what keeps a marker out of the stream (contract, supervisor).
func TestX4_MarkersAreFlaggedNotRecognizedByText(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ name, code, marker string }{
		{"count", `async () => { console.log(` + strconv.Quote(LogCountMarker(200)) + `); for (let i = 0; i < 500; i++) console.log(i); return 1; }`, LogCountMarker(200)},
		{"size", `async () => { console.log(` + strconv.Quote(LogSizeMarker) + `); const big = "y".repeat(25e6); for (let i = 0; i < 200; i++) console.log(big); return 1; }`, LogSizeMarker},
	} {
		h := &testHost{}
		out := runProgram(t, e, h, Program{Code: tc.code, Limits: Limits{Wall: time.Minute, CPUTime: 5 * time.Second}})
		wantValue(t, out, "1")
		h.mu.Lock()
		logs := h.logs
		h.mu.Unlock()
		if len(logs) < 2 {
			t.Fatalf("%s: %d entries", tc.name, len(logs))
		}
		first, last := logs[0], logs[len(logs)-1]
		if first.Text != tc.marker || first.Marker {
			t.Errorf("%s: the program's own entry %q came flagged %v, want its text unflagged", tc.name, first.Text, first.Marker)
		}
		if last.Text != tc.marker || !last.Marker {
			t.Errorf("%s: the last entry %q flagged %v, want the marker, flagged", tc.name, last.Text, last.Marker)
		}
		for _, l := range logs[1 : len(logs)-1] {
			if l.Marker {
				t.Fatalf("%s: a program entry came flagged as a marker", tc.name)
			}
		}
	}
}
