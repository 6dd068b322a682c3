package contract

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/test/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestE1_MessageClippedTo2000SerializedChars(t *testing.T) {
	cases := []struct {
		name string
		msg  string
	}{
		{"ascii", strings.Repeat("a", 5000)},
		{"escapes", strings.Repeat("\"\n", 3000)},
		{"controls", strings.Repeat("\x01", 3000)},
		{"astral", strings.Repeat("😀", 3000)},
		{"exact", strings.Repeat("b", 1998)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := clipMessage(c.msg, MaxFrameMessageChars)
			n := jstext.Len(jstext.Quote(got))
			if n > MaxFrameMessageChars {
				t.Fatalf("serialized %d > %d", n, MaxFrameMessageChars)
			}
			if got == c.msg {
				if c.name != "exact" {
					t.Fatal("not clipped")
				}
				return
			}
			if !strings.HasSuffix(got, "…") || !strings.HasPrefix(c.msg, strings.TrimSuffix(got, "…")) {
				t.Fatalf("clip is not a marked prefix: %q", got[len(got)-10:])
			}
			if n < MaxFrameMessageChars-6 {
				t.Fatalf("clipped too much: %d", n)
			}
		})
	}
}

func TestE1_DetailsDropOptionalMetadataWhole(t *testing.T) {
	retry := int64(1500)
	e := &gateway.Error{
		Code: gateway.CodeRateLimited, Message: strings.Repeat("m", 1900), Retryable: true, RetryAfterMs: &retry,
		Details: []gateway.Field{
			{Key: "connector", Value: "ci"},
			{Key: "nextAction", Value: gateway.Object{{Key: "function", Value: "connecta.search"}, {Key: "arguments", Value: gateway.Object{{Key: "query", Value: strings.Repeat("q", 3000)}}}}},
			{Key: "retry", Value: "Try again later."},
		},
	}
	b, obj, ok := boundError(e)
	if !ok {
		t.Fatal("refused")
	}
	if n := jstext.Len(string(obj)); n > MaxFrameDetailsChars {
		t.Fatalf("details %d chars", n)
	}
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "message", "retryable", "retryAfterMs", "connector", "retry"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %s in %s", k, obj)
		}
	}
	if _, ok := m["nextAction"]; ok {
		t.Error("oversized recovery metadata kept (must be dropped whole)")
	}
	if b.Message != e.Message {
		t.Error("short message changed")
	}
}

func TestX11_FrameRefusedWholeWhenUnboundable(t *testing.T) {
	f := newFramer("00000000000000000000000000000000")
	got := f.reject(&gateway.Error{Code: gateway.Code(strings.Repeat("c", 4000)), Message: "x"})
	if got != textFrameRefused {
		t.Fatalf("got %q", got)
	}
	ok := f.reject(gateway.Errorf(gateway.CodeUnknownTool, false, "No tool"))
	if !strings.HasPrefix(ok, FrameMark+"00000000000000000000000000000000:{") {
		t.Fatalf("frame %q", ok)
	}
}

func TestX11_SecretIs128BitHexPerRun(t *testing.T) {
	a, _ := newSecret()
	b, _ := newSecret()
	if len(a) != 32 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("%q %q", a, b)
	}
	p := Prelude(a)
	if strings.Count(p, a) != 1 || !strings.HasSuffix(p, `("\u001econnecta-error:`+a+`:");`+"\n") {
		t.Fatalf("secret must appear once, as the outer call's argument: %q", p[len(p)-80:])
	}
}

func TestE6_MatchExactThenContainmentNewestFirst(t *testing.T) {
	f := newFramer("s")
	f.reject(gateway.Errorf(gateway.CodeUnavailable, true, "downstream is down"))
	f.reject(gateway.Errorf(gateway.CodeTimeout, true, "down"))
	f.reject(gateway.Errorf(gateway.CodeNotFound, false, "issue 42 not found"))
	cases := []struct {
		text, code string
	}{
		{"down", "timeout"},                             // exact beats the newer containment candidates
		{"wrapped: downstream is down!", "unavailable"}, // containment
		{"issue 42 not found", "not_found"},             // exact
		{"TypeError: issue 42 not found", "not_found"},  // named wrapper
		{"dow", ""},      // nothing
		{"", ""},         // empty never matches
		{"x down x", ""}, // "down" is under 8 chars: no containment
	}
	for _, c := range cases {
		obj, ok := f.failures.match(c.text)
		code := ""
		if ok {
			var m struct{ Code string }
			_ = json.Unmarshal(obj, &m)
			code = m.Code
		}
		if code != c.code {
			t.Errorf("%q → %q, want %q", c.text, code, c.code)
		}
	}
}

func TestE6_OnlyTheLast64FailuresCount(t *testing.T) {
	f := newFramer("s")
	f.reject(gateway.Errorf(gateway.CodeNotFound, false, "oldest failure message"))
	for i := range MaxRecordedFailures {
		f.reject(gateway.Errorf(gateway.CodeTimeout, true, "filler failure %d", i))
	}
	if _, ok := f.failures.match("oldest failure message"); ok {
		t.Fatal("65th-newest failure still matched")
	}
	if _, ok := f.failures.match("filler failure 0"); !ok {
		t.Fatal("64th-newest failure not matched")
	}
}

func TestM1_EmitRejectsEveryInvalidShape(t *testing.T) {
	cases := []struct {
		args, want string
	}{
		{`[]`, "accepts exactly one content block"},
		{`[1]`, "accepts exactly one content block"},
		{`[[]]`, "accepts exactly one content block"},
		{`[null]`, "accepts exactly one content block"},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "accepts exactly one content block"},
		{`[{"text":"a"}]`, `got undefined`},
		{`[{"type":"resource_link","uri":"x"}]`, `supports content types "text", "image", and "audio"; got "resource_link"`},
		{`[{"type":"text"}]`, `block field "text" must be a string`},
		{`[{"type":"text","text":1}]`, `block field "text" must be a string`},
		{`[{"type":"image","data":"AA==","mimeType":5}]`, `block field "mimeType" must be a string`},
		{`[{"type":"text","text":"a","annotations":{}}]`, `carries unsupported field(s) "annotations"; a "text" block is exactly { type, text }`},
		{`[{"type":"audio","data":"AA==","mimeType":"audio/wav","_meta":{},"x":1}]`, `unsupported field(s) "_meta", "x"; a "audio" block is exactly { type, data, mimeType }`},
		{`[{"type":"image","data":"not base64!","mimeType":"image/png"}]`, `block field "data" must be a base64 string`},
		// The media type must match the block: a client renders by it.
		{`[{"type":"image","data":"AA==","mimeType":"text/html"}]`, `image block field "mimeType" must be an image/* media type; got "text/html"`},
		{`[{"type":"image","data":"AA==","mimeType":"audio/wav"}]`, `must be an image/* media type`},
		{`[{"type":"audio","data":"AA==","mimeType":"image/png"}]`, `audio block field "mimeType" must be an audio/* media type`},
		{`[{"type":"image","data":"AA==","mimeType":"image/"}]`, `must be an image/* media type`},
		{`[{"type":"image","data":"AA==","mimeType":"image"}]`, `must be an image/* media type`},
		{`[{"type":"image","data":"AA==","mimeType":""}]`, `must be an image/* media type`},
		{`[{"type":"image","data":"AA==","mimeType":"image/png/x"}]`, `must be an image/* media type`},
		{`[{"type":"image","data":"AA==","mimeType":"image/png\r\nX: y"}]`, `must be an image/* media type`},
	}
	for _, c := range cases {
		col := &emitCollector{maxBytes: config.DefaultExecuteMaxEmittedBytes, maxBlocks: config.DefaultExecuteMaxEmittedBlocks}
		e := col.add(json.RawMessage(c.args))
		if e == nil || e.Code != gateway.CodeInvalidArgs || e.Retryable || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s → %+v, want invalid_args containing %q", c.args, e, c.want)
		}
		if b, _ := col.snapshot(); len(b) != 0 {
			t.Errorf("%s: a block was accepted", c.args)
		}
	}
	col := &emitCollector{maxBytes: config.DefaultExecuteMaxEmittedBytes, maxBlocks: config.DefaultExecuteMaxEmittedBlocks}
	for _, ok := range []string{`[{"type":"text","text":"hi"}]`, `[{"type":"image","data":"iVBORw==","mimeType":"image/png"}]`, `[{"mimeType":"audio/wav","data":"UklGRg==","type":"audio"}]`, `[{"type":"image","data":"AA==","mimeType":"IMAGE/SVG+XML"}]`, `[{"type":"audio","data":"AA==","mimeType":"audio/ogg; codecs=opus"}]`} {
		if e := col.add(json.RawMessage(ok)); e != nil {
			t.Errorf("%s refused: %v", ok, e)
		}
	}
	if b, _ := col.snapshot(); len(b) != 5 {
		t.Fatalf("accepted %d", len(b))
	}
}

func TestM5_EmitBudgetsFailTheCrossingBlock(t *testing.T) {
	col := &emitCollector{maxBytes: 100, maxBlocks: 2}
	block := `[{"type":"text","text":"aaaaaaaaaa"}]` // 35 serialized bytes
	if e := col.add(json.RawMessage(block)); e != nil {
		t.Fatal(e)
	}
	big := `[{"type":"text","text":"` + strings.Repeat("b", 60) + `"}]`
	e := col.add(json.RawMessage(big))
	if e == nil || e.Code != gateway.CodeBudgetExceeded || e.Retryable ||
		e.Message != "connecta.emit byte budget exceeded: block is 85 serialized bytes with 65 of 100 remaining" {
		t.Fatalf("byte budget: %+v", e)
	}
	if e := col.add(json.RawMessage(block)); e != nil {
		t.Fatal(e)
	}
	e = col.add(json.RawMessage(block))
	if e == nil || e.Code != gateway.CodeBudgetExceeded || e.Message != "connecta.emit block-count budget exceeded: 2 block(s) maximum, 0 remaining" {
		t.Fatalf("count budget: %+v", e)
	}
	if b, n := col.snapshot(); len(b) != 2 || n != 70 {
		t.Fatalf("prior blocks must stand: %d blocks, %d bytes", len(b), n)
	}
}

func TestR5_LogsCappedWithTruncatedMarker(t *testing.T) {
	short := "a\nb"
	if got := presentLogs(short, 3); got != short {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("x", 3999) + "😀" // 4,001 units: the pair must not split
	got := presentLogs(long, 9000)
	if !strings.HasPrefix(got, strings.Repeat("x", 3999)+"\n--- TRUNCATED (9000 chars total)") || strings.Contains(got, "😀") {
		t.Fatalf("%q", got[3990:])
	}
}

func TestA2_InventoryBoundedWholeEntries(t *testing.T) {
	if got := Inventory(nil); got != "Connectors: none." {
		t.Fatal(got)
	}
	var cs []gateway.ConnectorInfo
	for i := range 30 {
		cs = append(cs, gateway.ConnectorInfo{ID: fmt.Sprintf("conn%02d", i), Title: "  Title\n of   " + fmt.Sprint(i)})
	}
	got := Inventory(cs)
	if len(got) > MaxInventoryBytes || !strings.HasPrefix(got, "Connectors: conn00 (Title of 0), conn01 (Title of 1)") || !strings.HasSuffix(got, " more.") {
		t.Fatalf("%d %q", len(got), got)
	}
	long := Inventory([]gateway.ConnectorInfo{{ID: "x", Title: strings.Repeat("é", 200)}})
	if !strings.Contains(long, "…") || len(long) > MaxInventoryBytes {
		t.Fatalf("%q", long)
	}
	if got := Inventory([]gateway.ConnectorInfo{{ID: "constructor"}, {ID: "a.b-c"}}); got != "Connectors: constructor, a.b-c." {
		t.Fatal(got) // A2: canonical ids, builtin-like ones included
	}
}

func TestL8_X5_DescriptionStatesBudgetsAndMissingAuthority(t *testing.T) {
	d := Description(20, 15*time.Second, []gateway.ConnectorInfo{{ID: "demo", Title: "Demo"}})
	for _, want := range []string{"20 host calls per execution", "15 s deadline per host call", "no timers", "no fetch", "no crypto", "Connectors: demo (Demo).", "connecta.search", "connecta.describe", "connecta.call", "connecta.emit", "retryable"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q", want)
		}
	}
	if strings.Contains(d, "batch") || jstext.Len(d) >= 1800 {
		t.Errorf("description too long (%d) or names a retired feature", jstext.Len(d))
	}
	if d2 := Description(7, 1500*time.Millisecond, nil); !strings.Contains(d2, "7 host calls") || !strings.Contains(d2, "1500 ms deadline") {
		t.Error("description does not follow configuration")
	}
}

// golden compares got with testdata/<name>.golden.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// render is a CallToolResult as the model receives it.
func render(t *testing.T, r *mcp.CallToolResult) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "isError: %v\n", r.IsError)
	for i, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			fmt.Fprintf(&out, "content[%d] text: %s\n", i, tc.Text)
		} else {
			cb, _ := json.Marshal(c)
			fmt.Fprintf(&out, "content[%d]: %s\n", i, cb)
		}
	}
	if r.StructuredContent != nil {
		sc, _ := json.Marshal(r.StructuredContent)
		fmt.Fprintf(&out, "structuredContent: %s\n", sc)
		if tc := r.Content[0].(*mcp.TextContent); string(r.StructuredContent.(json.RawMessage)) != tc.Text {
			t.Errorf("structuredContent differs from the text")
		}
	}
	_ = b
	return []byte(out.String())
}

func TestR1_R6_M2_M4_E5_ResponseShapesGolden(t *testing.T) {
	diag := &diagnostics{totalMs: 3.25, admissionMs: 0.5, setupMs: 0.125, executorWallMs: 2}
	diag.record(opSearch, false, 1500*time.Microsecond, 1500*time.Microsecond, 0, 120)
	diag.record(opCall, true, time.Millisecond, 200*time.Microsecond, 700*time.Microsecond, 0)
	diag.record(opCall, false, 2*time.Millisecond, 0, 1800*time.Microsecond, 33)
	withDiag := diag.json(2, 80)
	noEmitDiag := (&diagnostics{}).json(0, 0)
	boom := programErrorText("kaboom")
	empty := programErrorText("")
	exec := "Executor failed: pipe broke"
	typed := typedObject(gateway.Errorf(gateway.CodeUnknownTool, false, "No tool named ci.x; search for it."))
	retry := int64(5000)
	overloaded := typedObject(&gateway.Error{Code: gateway.CodeExecutorOverloaded, Message: "Executor queue is full.", Retryable: true, RetryAfterMs: &retry})
	blocks := []mcp.Content{&mcp.TextContent{Text: "chart below"}, &mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}
	cases := []struct {
		name string
		r    reply
	}{
		{"success_number", reply{hasResult: true, result: json.RawMessage(`2`)}},
		{"success_undefined", reply{}},
		{"success_null", reply{hasResult: true, result: json.RawMessage(`null`)}},
		{"success_logs_escapes", reply{hasResult: true, result: json.RawMessage(`{"ok":true}`), logs: "a <b> & \u2028\n\"q\"\x01"}},
		{"success_emitted", reply{hasResult: true, result: json.RawMessage(`"x"`), emitted: blocks}},
		{"success_diagnostics", reply{hasResult: true, result: json.RawMessage(`{"ok":true}`), emitted: blocks, diag: withDiag}},
		{"success_diagnostics_nothing_used", reply{hasResult: true, result: json.RawMessage(`1`), diag: noEmitDiag}},
		{"typed_escaped", reply{errObject: typed, logs: "step 1", discarded: 2}},
		{"typed_admission", reply{errObject: overloaded}},
		{"untyped", reply{untyped: &boom, logs: "step 1\nstep 2", discarded: 1}},
		{"untyped_empty", reply{untyped: &empty}},
		{"untyped_diagnostics", reply{untyped: &boom, logs: "step 1", discarded: 1, diag: noEmitDiag}},
		{"executor_failed", reply{untyped: &exec}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			golden(t, c.name, render(t, c.r.toolResult()))
		})
	}
}

func TestR6_NoDiagnosticsIsByteForByteOrdinary(t *testing.T) {
	in, _ := (&Service{opts: Options{MaxCodeBytes: config.ExecuteMaxCodeBytes}}).decodeInput(json.RawMessage(`{"code":"async () => 1","diagnostics":false}`))
	if in.diagnostics {
		t.Fatal("false parsed as true")
	}
	a := (&reply{hasResult: true, result: json.RawMessage(`{"ok":true}`)}).toolResult()
	if tc := a.Content[0].(*mcp.TextContent); tc.Text != `{"result":{"ok":true}}` {
		t.Fatal(tc.Text)
	}
}

func TestL4_CodeOver128KiBIsInvalidArgs(t *testing.T) {
	s := &Service{opts: Options{MaxCodeBytes: config.ExecuteMaxCodeBytes}}
	code, _ := json.Marshal(strings.Repeat("x", config.ExecuteMaxCodeBytes+1))
	_, e := s.decodeInput(json.RawMessage(`{"code":` + string(code) + `}`))
	if e == nil || e.Code != gateway.CodeInvalidArgs || !strings.Contains(e.Message, "131073 UTF-8 bytes, over the 131072-byte limit") {
		t.Fatalf("%+v", e)
	}
	for _, bad := range []string{`{}`, `{"code":1}`, `{"code":null}`, `{"code" :  null }`, `[]`, `{"code":"x","diagnostics":"yes"}`} {
		if _, e := s.decodeInput(json.RawMessage(bad)); e == nil || e.Code != gateway.CodeInvalidArgs {
			t.Errorf("%s accepted", bad)
		}
	}
	if _, e := s.decodeInput(json.RawMessage(`{"code":"async () => 1","extra":1}`)); e != nil {
		t.Error("unknown keys must be ignored")
	}
}

func FuzzEmitBlock(f *testing.F) {
	for _, s := range []string{`[{"type":"text","text":"a"}]`, `[{"type":"image","data":"AA==","mimeType":"x"}]`, `[{"type":"x"}]`, `[`, `[{"type":"text","text":"a","type":"image"}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		col := &emitCollector{maxBytes: 1000, maxBlocks: 3}
		if e := col.add(json.RawMessage(s)); e != nil {
			if e.Code != gateway.CodeInvalidArgs && e.Code != gateway.CodeBudgetExceeded {
				t.Fatalf("code %s", e.Code)
			}
			if b, _ := col.snapshot(); len(b) != 0 {
				t.Fatal("refused block kept")
			}
		}
	})
}

func FuzzDecodeInput(f *testing.F) {
	for _, s := range []string{`{"code":"1"}`, `{"code":"1","diagnostics":true}`, `null`, `{"code":null}`, `"x"`} {
		f.Add(s)
	}
	s := &Service{opts: Options{MaxCodeBytes: 64}}
	f.Fuzz(func(t *testing.T, raw string) {
		in, e := s.decodeInput(json.RawMessage(raw))
		if e == nil && len(in.code) > 64 {
			t.Fatal("oversized code accepted")
		}
	})
}

func FuzzFailureMatch(f *testing.F) {
	f.Add("issue 42 not found", "wrapped issue 42 not found")
	f.Fuzz(func(t *testing.T, msg, text string) {
		fr := newFramer("0123456789abcdef0123456789abcdef")
		frame := fr.reject(gateway.Errorf(gateway.CodeNotFound, false, "%s", msg))
		obj, ok := fr.failures.match(text)
		if ok && !json.Valid(obj) {
			t.Fatal("invalid object")
		}
		if frame != textFrameRefused && !strings.HasPrefix(frame, FrameMark) {
			t.Fatal("frame without mark")
		}
	})
}
