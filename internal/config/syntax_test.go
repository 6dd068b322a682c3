package config

import (
	"errors"
	"strings"
	"testing"
)

// A YAML syntax error names the line where the text stops being YAML, not
// the line before it nor the start of the construct yaml.v3 was reading
// (which said :3: for a tab on line 4, and nothing for line 1).
func TestSyntaxError_NamesTheLineOfTheProblem(t *testing.T) {
	for _, tc := range syntaxCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.text), Resolver{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want a *Error", err)
			}
			if e.Line != tc.line || !strings.HasPrefix(e.Message, "invalid YAML: ") {
				t.Fatalf("got %q, want line %d and an invalid YAML message", err, tc.line)
			}
		})
	}
}

// FuzzSyntaxLine: the line a syntax error names is in the file, and the
// text up to its end does not parse.
func FuzzSyntaxLine(f *testing.F) {
	for _, tc := range syntaxCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxConfigBytes || parses(data) {
			return
		}
		e, ok := (&decoder{file: "f.yaml"}).syntaxError(errors.New("yaml: x"), data).(*Error)
		if !ok {
			t.Fatal("untyped")
		}
		ends := lineEnds(data)
		if e.Line < 1 || e.Line > len(ends) {
			t.Fatalf("line %d outside the file (%d lines)", e.Line, len(ends))
		}
		if parses(data[:ends[e.Line-1]]) {
			t.Fatalf("line %d: the text up to it parses", e.Line)
		}
	})
}

var syntaxCases = []struct {
	name, text string
	line       int
}{
	{"tab indenting line 4", "listen: 127.0.0.1:8787\nrequests:\n  maxActive: 4\n\tmaxQueue: 8\n", 4},
	{"key misindented on line 4", "listen: 127.0.0.1:8787\nrequests:\n  maxActive: 4\n maxQueue: 8\n", 4},
	{"nested key misindented on line 5", "connectors:\n  - id: a\n    catalog:\n      pin: warn\n     x: 1\n", 5},
	{"list item after a mapping on line 2", "listen: 127.0.0.1:8787\n- x\n", 2},
	{"unclosed flow list opened on line 2", "listen: 127.0.0.1:8787\nconnectors: [{id: a\nexecutor: {}\n", 2},
	{"unclosed quote opened on line 3", "listen: 127.0.0.1:8787\nrequests: {}\npublicUrl: \"https://x\n", 3},
	{"tab on line 1", "\tlisten: x\n", 1},
	{"invalid UTF-8 on line 3", "listen: 127.0.0.1:8787\nrequests: {}\npublicUrl: \"\xff\"\n", 3},
	{"CRLF lines", "listen: 127.0.0.1:8787\r\nrequests:\r\n  maxActive: 4\r\n\tmaxQueue: 8\r\n", 4},
	{"CR lines", "listen: 127.0.0.1:8787\rrequests:\r  maxActive: 4\r\tmaxQueue: 8\r", 4},
	{"NEL lines", "listen: 127.0.0.1:8787\u0085requests:\u0085  maxActive: 4\u0085\tmaxQueue: 8\n", 4},
	{"no final newline", "listen: 127.0.0.1:8787\nrequests:\n  maxActive: 4\n\tmaxQueue: 8", 4},
	{"second document", "listen: 127.0.0.1:8787\n---\na: [\n", 3},
	// A prefix cut inside a scalar spanning lines fails for being cut, not
	// for the problem below it.
	{"key misindented on line 8, after a quoted scalar over lines 4-6", "connectors:\n  - id: a\n    title: t\n    description: \"x\n      y\n      z\"\n    url: http://a\n   x: 1\n", 8},
	{"key misindented on line 8, after a block scalar over lines 4-6", "connectors:\n  - id: a\n    title: t\n    description: |\n      y\n      z\n    url: http://a\n   x: 1\n", 8},
}
