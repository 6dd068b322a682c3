package guest

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Syntax errors read "SyntaxError: <message> (line L, column C)", counted in
// the code as the caller sent it: leading blank lines, a markdown fence and
// the bare-body wrapper connecta adds are not counted; columns count code
// points from 1.
func TestSyntaxError_LineAndColumnInTheCallersCode(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, tc := range []struct{ name, code, want string }{
		{"arrow", "async () => {\n  let a = 1;\n  a = = 2;\n}", "SyntaxError: unexpected token in expression: '=' (line 3, column 7)"},
		{"leading blank lines kept", "\n\n  async () => {\n  a = = 2;\n}", "SyntaxError: unexpected token in expression: '=' (line 4, column 7)"},
		{"bare body, not the wrapper", "const x: number = 1;\nreturn x;", "SyntaxError: missing initializer for const variable (line 1, column 8)"},
		{"fence line counted", "```js\nlet é = 1;\n  é = = 2\n```", "SyntaxError: unexpected token in expression: '=' (line 3, column 7)"},
		{"code points, not bytes", "async () => { const s = '😀é'; return s + ; }", "SyntaxError: unexpected token in expression: ';' (line 1, column 42)"},
		{"end of input maps to the end of the code", "async () => {{{", "SyntaxError: unexpected token in expression: ')' (line 1, column 16)"},
		{"second line of a bare body", "return 1;\nreturn 2 +", "SyntaxError: unexpected token in expression: '}' (line 2, column 11)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := runProgram(t, e, nil, Program{Code: tc.code, Limits: testLimits()})
			if out.Err == nil || out.Err.Kind != ErrSyntax || out.Err.Message != tc.want {
				t.Fatalf("got %+v, want syntax %q", out.Err, tc.want)
			}
		})
	}
	// SyntaxErrors raised while running have no position: they are the
	// program's own failures, text unchanged.
	for code, want := range map[string]string{
		"async () => { throw new SyntaxError('mine') }": "SyntaxError: mine",
		"async () => JSON.parse('{')":                   "SyntaxError: expecting property name",
		"async () => { new Function('a b') }":           "SyntaxError: ",
	} {
		out := runProgram(t, e, nil, Program{Code: code, Limits: testLimits()})
		if out.Err == nil || out.Err.Kind != ErrThrown || !strings.HasPrefix(out.Err.Message, want) || strings.Contains(out.Err.Message, "line") {
			t.Errorf("%s: got %+v, want thrown %q…", code, out.Err, want)
		}
	}
	assertHealthy(t, e)
}

// FuzzSyntaxPosition: every parser position maps inside the caller's code.
func FuzzSyntaxPosition(f *testing.F) {
	f.Add("async () => {{{", 1, 16)
	f.Add("```js\nlet é = 1;\n```", 3, 2)
	f.Add("\n\n return", 9, 99)
	f.Fuzz(func(t *testing.T, code string, line, col int) {
		if !utf8.ValidString(code) {
			return
		}
		_, o := normalize(code)
		l, c := o.position(line, col)
		if l < 1 || c < 1 || l > strings.Count(code, "\n")+1 || c > utf8.RuneCountInString(code)+1 {
			t.Fatalf("position(%d, %d) in %q = %d, %d", line, col, code, l, c)
		}
	})
}
