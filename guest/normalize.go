package guest

import (
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
	return "(\n" + NormalizeBody(code) + "\n)()"
}

// NormalizeBody is Normalize without the final call: the async function
// expression itself (spec-sandbox §6, scenarios N1–N3).
func NormalizeBody(code string) string {
	text := trimJS(code)
	if body, ok := unfence(text); ok {
		text = trimJS(body)
	}
	rest := skipCommentsAndSpace(text)
	if startsWithWord(rest, "async") || strings.HasPrefix(rest, "(") {
		return text
	}
	return "async () => {\n" + text + "\n}"
}

func isJSSpace(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' }

func trimJS(s string) string { return strings.TrimFunc(s, isJSSpace) }

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
