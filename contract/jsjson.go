package contract

import (
	"strconv"
	"unicode/utf8"
)

// JSON as JavaScript's JSON.stringify writes it: the text and the
// structuredContent a model sees must be what the original produced, so no
// HTML escaping, no U+2028/U+2029 escaping, compact, keys in insertion order.

// appendJSString appends s quoted the way JSON.stringify quotes a string.
// Invalid UTF-8 (which IPC refuses anyway) becomes U+FFFD.
func appendJSString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				if c < 0x20 {
					b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				} else {
					b = append(b, c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// jsString is appendJSString into a fresh slice.
func jsString(s string) []byte { return appendJSString(make([]byte, 0, len(s)+2), s) }

// utf16Len is the JavaScript length of s (UTF-16 code units).
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// utf16Prefix returns the longest prefix of s of at most max UTF-16 units
// that does not split a surrogate pair.
func utf16Prefix(s string, max int) string {
	n := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > max {
			return s[:i]
		}
		n += w
	}
	return s
}

// jsStyle rewrites Go encoder output to JavaScript's: Go escapes U+2028 and
// U+2029 even with HTML escaping off, JSON.stringify does not.
func jsStyle(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			if out != nil {
				out = append(out, b[i])
			}
			continue
		}
		if b[i+1] == 'u' && i+5 < len(b) && b[i+2] == '2' && b[i+3] == '0' && b[i+4] == '2' && (b[i+5] == '8' || b[i+5] == '9') {
			if out == nil {
				out = append(make([]byte, 0, len(b)), b[:i]...)
			}
			if b[i+5] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		if out != nil {
			out = append(out, b[i], b[i+1])
		}
		i++ // skip the escaped byte so `\\u2028` stays literal
	}
	if out == nil {
		return b
	}
	return out
}

// object writes one JSON object with keys in call order.
type object struct{ b []byte }

func newObject() *object { return &object{b: []byte{'{'}} }

func (o *object) key(k string) {
	if len(o.b) > 1 {
		o.b = append(o.b, ',')
	}
	o.b = appendJSString(o.b, k)
	o.b = append(o.b, ':')
}

func (o *object) raw(k string, v []byte) *object { o.key(k); o.b = append(o.b, v...); return o }
func (o *object) str(k, v string) *object        { o.key(k); o.b = appendJSString(o.b, v); return o }
func (o *object) num(k string, v int64) *object {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
	return o
}
func (o *object) boolean(k string, v bool) *object {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
	return o
}
func (o *object) bytes() []byte { return append(o.b, '}') }
