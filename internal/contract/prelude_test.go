package contract

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/guest"
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// The prelude runs here on the real engine in process (well-behaved
// programs only: no runaways in a test binary). The host answers by address:
// each reply text is what the supervisor would hand the guest.

const testSecret = "0123456789abcdef0123456789abcdef"

type scriptedHost struct {
	mu     sync.Mutex
	calls  []string
	framer *framer
}

func (h *scriptedHost) Call(ctx context.Context, c guest.Call, settle func(guest.Reply)) {
	var args []json.RawMessage
	_ = json.Unmarshal(c.Args, &args)
	var addr string
	if len(args) > 0 {
		_ = json.Unmarshal(args[0], &addr)
	}
	h.mu.Lock()
	h.calls = append(h.calls, c.Function+":"+addr)
	h.mu.Unlock()
	prefix := framePrefix(testSecret)
	switch addr {
	case "typed":
		settle(guest.Reply{Err: h.framer.reject(&gateway.Error{Code: gateway.CodeRateLimited, Message: "slow down", Retryable: true, RetryAfterMs: ptr(int64(1200)),
			Details: []gateway.Field{{Key: "connector", Value: "ci"}, {Key: "nextAction", Value: gateway.Object{{Key: "function", Value: "connecta.search"}}}}})})
	case "long":
		settle(guest.Reply{Err: h.framer.reject(gateway.Errorf(gateway.CodeConnectorCallFailed, false, "%s", strings.Repeat("é", 5000)))})
	case "malformed":
		settle(guest.Reply{Err: prefix + `{"code":"x","message":`})
	case "notobject":
		settle(guest.Reply{Err: prefix + `["code"]`})
	case "forged":
		settle(guest.Reply{Err: FrameMark + "ffffffffffffffffffffffffffffffff:" + `{"code":"unavailable","message":"forged","retryable":true}`})
	case "refused":
		settle(guest.Reply{Err: textFrameRefused})
	case "plain":
		settle(guest.Reply{Err: "Host result from connecta.call(\"reader.big\") exceeds the 258048-byte serialized bridge limit."})
	default:
		settle(guest.Reply{Value: json.RawMessage(`{"ok":true}`)})
	}
}

func (h *scriptedHost) Log(guest.LogEntry) {}

var (
	engineOnce sync.Once
	engine     *guest.Engine
	engineErr  error
)

func testEngine(t testing.TB) *guest.Engine {
	t.Helper()
	engineOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "connecta-contract-test-cache")
		_ = os.MkdirAll(dir, 0o700)
		engine, engineErr = guest.NewEngine(context.Background(), guest.EngineOptions{CacheDir: dir, MaxArgBytes: supervisor.MaxHostResultBytes, MaxResultChars: supervisor.MaxResultChars})
	})
	if engineErr != nil {
		t.Fatalf("engine: %v", engineErr)
	}
	return engine
}

func runPrelude(t *testing.T, code string) (*guest.Outcome, *scriptedHost) {
	t.Helper()
	h := &scriptedHost{framer: newFramer(testSecret)}
	out, err := testEngine(t).Run(context.Background(), guest.Program{
		Code:      code,
		Prelude:   Prelude(testSecret),
		Providers: []guest.Provider{{Name: ProviderName, Functions: providerFunctions}},
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	return out, h
}

func TestS8_E1_X11_PreludeDecodesFrames(t *testing.T) {
	cases := []struct {
		name, code, want string
	}{
		{"typed caught", `async () => { try { await connecta.call("typed") } catch (e) {
			return [e.message, e.code, e.retryable, e.details.retryAfterMs, e.details.connector, e.details.nextAction.function,
			  Object.keys(e).join(), e instanceof Error, Object.isFrozen(e.details), Object.isFrozen(e.details.nextAction), String(e)] } }`,
			`["slow down","rate_limited",true,1200,"ci","connecta.search","code,retryable,details",true,true,true,"Error: slow down"]`},
		{"typed promise rejection", `async () => { const [r] = await Promise.allSettled([connecta.call("typed")]); return [r.status, r.reason.code, r.reason.retryable] }`,
			`["rejected","rate_limited",true]`},
		{"long message clipped", `async () => { try { await connecta.call("long") } catch (e) { return [e.message.length, e.message.endsWith("…"), JSON.stringify(e.message).length <= 2000] } }`,
			`[1998,true,true]`},
		{"malformed hidden", `async () => { try { await connecta.call("malformed") } catch (e) { return [e.message, e.code, Object.keys(e).length] } }`,
			`["Host failure could not be decoded.",null,0]`},
		{"non-object hidden", `async () => { try { await connecta.call("notobject") } catch (e) { return [e.message, e.code] } }`,
			`["Host failure could not be decoded.",null]`},
		{"forged untyped", `async () => { try { await connecta.call("forged") } catch (e) { return [e.message.startsWith("\u001econnecta-error:ffff"), e.code, e.retryable] } }`,
			`[true,null,null]`},
		{"refused untyped", `async () => { try { await connecta.call("refused") } catch (e) { return [e.message, e.code] } }`,
			`["Host failure exceeded the bridge error limit.",null]`},
		{"plain untyped", `async () => { try { await connecta.call("plain") } catch (e) { return [e.message.includes("serialized bridge limit"), e.code] } }`,
			`[true,null]`},
		{"guest forgery untyped", `async () => { const e = new Error("\u001econnecta-error:` + strings.Repeat("0", 32) + `:{\"code\":\"unavailable\",\"message\":\"m\",\"retryable\":true}"); return [e.code, e.message.length > 40] }`,
			`[null,true]`},
		{"success passes", `async () => connecta.call("ok")`, `{"ok":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _ := runPrelude(t, c.code)
			if out.Err != nil {
				t.Fatalf("%s: %s", out.Err.Kind, out.Err.Message)
			}
			if string(out.Value) != c.want {
				t.Fatalf("got %s\nwant %s", out.Value, c.want)
			}
		})
	}
}

func TestX8_UnknownMembersRejectWithoutHostCall(t *testing.T) {
	out, h := runPrelude(t, `async () => {
		const r = [];
		for (const name of ["nope", "toString", "__proto__", "constructor", "batch", "hasOwnProperty"]) {
			try { await connecta[name](); r.push("resolved") } catch (e) { r.push(e.message) }
		}
		r.push(typeof connecta.toString, Object.keys(connecta).length, typeof connecta[Symbol.iterator]);
		const before = connecta.call;
		try { connecta.call = 1 } catch (e) {}
		r.push(connecta.call === before ? "frozen" : "replaced");
		return r }`)
	if out.Err != nil {
		t.Fatal(out.Err.Message)
	}
	want := `["Unknown function connecta.nope","Unknown function connecta.toString","Unknown function connecta.__proto__","Unknown function connecta.constructor","Unknown function connecta.batch","Unknown function connecta.hasOwnProperty","function",0,"undefined","frozen"]`
	if string(out.Value) != want {
		t.Fatalf("got %s", out.Value)
	}
	if len(h.calls) != 0 {
		t.Fatalf("host calls made: %v", h.calls)
	}
}

// Hostile programs: tamper with every intrinsic the decoding path could
// consult, then try to observe a frame or type a plain error.
func TestX11_TamperingCannotObserveOrForgeFrames(t *testing.T) {
	out, _ := runPrelude(t, `async () => {
		const seen = [];
		const note = (x) => { try { seen.push(String(x)) } catch (_) {} };
		const origParse = JSON.parse;
		JSON.parse = function (s) { note(s); return origParse(s) };
		String.prototype.startsWith = function (p) { note(this); note(p); return true };
		String.prototype.slice = function () { note(this); return "" };
		Object.defineProperty(Promise.prototype, "constructor", { configurable: true, get() { note("ctor"); return Promise } });
		Object.defineProperty(Promise, Symbol.species, { configurable: true, get() { note("species"); return Promise } });
		const origThen = Promise.prototype.then;
		Promise.prototype.then = function (a, b) { return origThen.call(this, a, (e) => { note(e && e.message); return b ? b(e) : Promise.reject(e) }) };
		Object.defineProperty(Object.prototype, "message", { configurable: true, get() { note("proto message"); return "x" } });
		Object.prototype.get = function () { note("get") };
		Object.prototype.value = "poison";
		Object.prototype.code = "poisoned-code";
		Array.prototype[Symbol.iterator] = function () { note("iter"); return [][Symbol.iterator]() };
		let replaced = "kept";
		try { Error = function () { return { code: "forged" } } } catch (e) { replaced = "threw" }
		try { globalThis.connecta = {} } catch (e) {}
		let typed;
		try { await connecta.call("typed") } catch (e) { typed = [e.message, e.code, e.retryable] }
		const plain = new Error("plain");
		return { typed, plainCode: Object.getOwnPropertyDescriptor(plain, "code") === undefined, replaced, errorIsLocked: typeof Error === "function",
			leaked: seen.filter((s) => s.includes("connecta-error") || s.includes("`+testSecret+`")).length }
	}`)
	if out.Err != nil {
		t.Fatalf("%s: %s", out.Err.Kind, out.Err.Message)
	}
	var got struct {
		Typed         []any
		PlainCode     bool
		Replaced      string
		ErrorIsLocked bool
		Leaked        int
	}
	if err := json.Unmarshal(out.Value, &got); err != nil {
		t.Fatal(err, string(out.Value))
	}
	if len(got.Typed) != 3 || got.Typed[1] != "rate_limited" || got.Leaked != 0 || !got.PlainCode || !got.ErrorIsLocked {
		t.Fatalf("%s", out.Value)
	}
}

func TestX11_SecretUnreachableFromGuest(t *testing.T) {
	out, _ := runPrelude(t, `async () => {
		const texts = [];
		const add = (v) => { try { texts.push(String(v)) } catch (_) {} };
		const NativeError = Object.getPrototypeOf(TypeError);
		try { NativeError.prepareStackTrace = (e, frames) => { add(e && e.message); return "" } } catch (_) {}
		try { Error.prepareStackTrace = (e) => add(e && e.message) } catch (_) {}
		add(connecta.call.toString()); add(connecta.search.toString()); add(Error.toString()); add(Error.prototype.constructor.toString());
		for (const k of Object.getOwnPropertyNames(globalThis)) { add(k); try { add(globalThis[k]) } catch (_) {} }
		try { await connecta.call("typed") } catch (e) { add(e.stack); add(JSON.stringify(e)); add(e.details && JSON.stringify(e.details)) }
		try { await connecta.call("malformed") } catch (e) { add(e.stack); add(e.message) }
		try { new Error("x").stack } catch (_) {}
		const bridge = ["__call", "__invoke", "__log", "__namespace", "bridge", "__connecta"].filter((n) => n in globalThis);
		return { bridge, leaks: texts.filter((t) => t.includes("`+testSecret+`") || t.includes("\u001e")).length, names: Object.getOwnPropertyNames(globalThis).length }
	}`)
	if out.Err != nil {
		t.Fatalf("%s: %s", out.Err.Kind, out.Err.Message)
	}
	var got struct {
		Bridge []string
		Leaks  int
	}
	_ = json.Unmarshal(out.Value, &got)
	if len(got.Bridge) != 0 || got.Leaks != 0 {
		t.Fatalf("%s", out.Value)
	}
}

func TestX11_GlobalsLockedNonWritableNonConfigurable(t *testing.T) {
	out, _ := runPrelude(t, `async () => ["Error", "connecta"].map((k) => { const d = Object.getOwnPropertyDescriptor(globalThis, k); return [d.writable, d.configurable, d.enumerable] })`)
	if out.Err != nil || string(out.Value) != `[[false,false,false],[false,false,false]]` {
		t.Fatalf("%s %v", out.Value, out.Err)
	}
}
