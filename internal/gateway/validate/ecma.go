package validate

import (
	"strconv"
	"strings"
	"unicode/utf16"
)

// ECMA-262's white space and line terminators: what \s matches there (Go's
// \s is ASCII only, so "^\S+$" would refuse a no-break space that every
// JavaScript validator accepts, and "\s" would not match it).
const ecmaSpace = `\t\n\v\f\r\x{2028}\x{2029}\x{feff}\p{Zs}`

// ecmaToRE2 rewrites the ECMA-262 regular-expression forms whose meaning
// differs in Go's RE2 syntax — \s, \S, the dot (which excludes every line
// terminator), \cX, \uHHHH, [] and [^] — and leaves the rest to RE2,
// which refuses what it cannot do (lookaround, backreferences): the schema
// is then unsupported. ok is false for a form with no RE2 equivalent here
// (\S inside a class, a lone surrogate).
func ecmaToRE2(src string) (string, bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\' && i+1 < len(src):
			i++
			e := src[i]
			switch e {
			case 's':
				if inClass {
					b.WriteString(ecmaSpace)
				} else {
					b.WriteString("[" + ecmaSpace + "]")
				}
			case 'S':
				if inClass {
					return "", false
				}
				b.WriteString("[^" + ecmaSpace + "]")
			case 'c':
				if i+1 >= len(src) || !isASCIILetter(src[i+1]) {
					return "", false
				}
				i++
				b.WriteString(`\x{` + strconv.FormatInt(int64(src[i]%32), 16) + `}`)
			case 'u':
				r, n, ok := ecmaUnicodeEscape(src[i+1:])
				if !ok {
					return "", false
				}
				i += n
				b.WriteString(`\x{` + strconv.FormatInt(int64(r), 16) + `}`)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			switch {
			case strings.HasPrefix(src[i:], "[]"):
				b.WriteString(`[^\x00-\x{10FFFF}]`) // matches nothing
				i++
			case strings.HasPrefix(src[i:], "[^]"):
				b.WriteString(`[\x00-\x{10FFFF}]`) // matches anything
				i += 2
			default:
				inClass = true
				b.WriteByte(c)
				if strings.HasPrefix(src[i+1:], "^") {
					b.WriteByte('^')
					i++
				}
			}
		case c == '.':
			b.WriteString(`[^\n\r\x{2028}\x{2029}]`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// ecmaUnicodeEscape reads what follows \u: HHHH (a surrogate pair as
// \uHHHH\uHHHH) or {H…}; n is how many bytes it took.
func ecmaUnicodeEscape(s string) (r rune, n int, ok bool) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 2 {
			return 0, 0, false
		}
		v, err := strconv.ParseUint(s[1:end], 16, 32)
		if err != nil || v > 0x10FFFF {
			return 0, 0, false
		}
		return rune(v), end + 1, true
	}
	hex4 := func(s string) (rune, bool) {
		if len(s) < 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(s[:4], 16, 32)
		return rune(v), err == nil
	}
	r, ok = hex4(s)
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 4, true
	}
	if !strings.HasPrefix(s[4:], `\u`) {
		return 0, 0, false
	}
	r2, ok := hex4(s[6:])
	if !ok {
		return 0, 0, false
	}
	if pair := utf16.DecodeRune(r, r2); pair != 0xFFFD {
		return pair, 10, true
	}
	return 0, 0, false
}
