package guest

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Normalize applies P1 to a program's text and returns the source the engine
// evaluates: an expression whose value is the program's (async) call.
//
// As a courtesy a whole-text markdown fence is unwrapped, and a text that
// does not start (after comments) with the word async or with "(" is taken
// as a statement body and wrapped in an async arrow. TypeScript is not
// stripped: its syntax is a syntax error (P5).
func Normalize(code string) string {
	src, _ := normalize(code)
	return src
}

// NormalizeBody is Normalize without the final call: the async function
// expression itself (docs/sandbox.md §6, scenarios N1–N3).
func NormalizeBody(code string) string {
	a, b, wrap := bodySpan(code)
	if wrap {
		return bodyWrapOpen + code[a:b] + bodyWrapClose
	}
	return code[a:b]
}

// The text around the caller's code in the evaluated source.
const (
	callOpen      = "(\n"
	callClose     = "\n)()"
	bodyWrapOpen  = "async () => {\n"
	bodyWrapClose = "\n}"
)

// origin places the evaluated source back in the code as the caller sent
// it: the source is open + code[start:end] + close.
type origin struct {
	code        string
	start, end  int
	open, close string
}

// normalize is Normalize with the origin of the result.
func normalize(code string) (string, origin) {
	a, b, wrap := bodySpan(code)
	open, close := callOpen, callClose
	if wrap {
		open, close = callOpen+bodyWrapOpen, bodyWrapClose+callClose
	}
	return open + code[a:b] + close, origin{code: code, start: a, end: b, open: open, close: close}
}

// bodySpan finds the program text inside code (P1's courtesies only ever
// cut a prefix and a suffix) and whether it is a bare body to wrap.
func bodySpan(code string) (a, b int, wrap bool) {
	a, b = trimSpan(code, 0, len(code))
	if _, ok := unfence(code[a:b]); ok {
		nl := strings.IndexByte(code[a:b], '\n')
		a, b = trimSpan(code, a+nl+1, b-3)
	}
	rest := skipCommentsAndSpace(code[a:b])
	return a, b, !(startsWithWord(rest, "async") || strings.HasPrefix(rest, "("))
}

func trimSpan(s string, a, b int) (int, int) {
	t := strings.TrimLeftFunc(s[a:b], isJSSpace)
	a = b - len(t)
	return a, a + len(strings.TrimRightFunc(t, isJSSpace))
}

// position maps QuickJS's 1-based line and column in the evaluated source
// (lines end at '\n', columns count code points) to the same measure in the
// code as the caller sent it. A position in the text connecta added maps to
// the nearest end of the caller's program.
func (o origin) position(line, col int) (int, int) {
	off := offsetOf(o.open+o.code[o.start:o.end]+o.close, line, col) - len(o.open)
	pos := o.start + min(max(off, 0), o.end-o.start)
	head := o.code[:pos]
	lineStart := strings.LastIndexByte(head, '\n') + 1
	return 1 + strings.Count(head, "\n"), 1 + utf8.RuneCountInString(head[lineStart:])
}

// offsetOf is the byte offset of a 1-based (line, column) in s.
func offsetOf(s string, line, col int) int {
	i := 0
	for ; line > 1; line-- {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s)
		}
		i += j + 1
	}
	for ; col > 1 && i < len(s) && s[i] != '\n'; col-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// syntaxMessage rewrites the guest's syntax error text, which ends in the
// parser's position as "\n<program>:LINE:COLUMN" (setup.js), to the pinned
// "SyntaxError: <message> (line L, column C)" in the caller's code.
func (o origin) syntaxMessage(text string) string {
	i := strings.LastIndex(text, syntaxPositionMark)
	if i < 0 {
		return text
	}
	var line, col int
	if _, err := fmt.Sscanf(text[i+len(syntaxPositionMark):], "%d:%d", &line, &col); err != nil {
		return text
	}
	line, col = o.position(line, col)
	return fmt.Sprintf("%s (line %d, column %d)", text[:i], line, col)
}

// syntaxPositionMark precedes the parser's position in a syntax error's text.
const syntaxPositionMark = "\n<program>:"

func isJSSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

// unfence returns the body of a text that is exactly one markdown code
// fence: ```lang\n…\n```.
func unfence(text string) (string, bool) {
	if len(text) < 6 || !strings.HasPrefix(text, "```") || !strings.HasSuffix(text, "```") {
		return "", false
	}
	nl := strings.IndexByte(text, '\n')
	if nl < 0 {
		return "", false
	}
	lang := strings.TrimSpace(text[3:nl])
	if strings.ContainsAny(lang, "` \t") {
		return "", false
	}
	body := text[nl+1 : len(text)-3]
	if strings.Contains(body, "```") {
		return "", false // more than one fence: leave the text alone
	}
	return body, true
}

func skipCommentsAndSpace(s string) string {
	for {
		s = strings.TrimLeftFunc(s, isJSSpace)
		switch {
		case strings.HasPrefix(s, "//"):
			nl := strings.IndexAny(s, "\n\r\u2028\u2029")
			if nl < 0 {
				return ""
			}
			s = s[nl:]
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return ""
			}
			s = s[2+end+2:]
		default:
			return s
		}
	}
}

func startsWithWord(s, word string) bool {
	if !strings.HasPrefix(s, word) {
		return false
	}
	next, _ := utf8.DecodeRuneInString(s[len(word):])
	return len(s) == len(word) || !(next == '_' || next == '$' || unicode.IsLetter(next) || unicode.IsDigit(next))
}
