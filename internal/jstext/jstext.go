// Package jstext measures, clips and quotes strings the way JavaScript sees
// them: lengths in UTF-16 code units, cuts that never split a surrogate pair
// or a UTF-8 sequence, and JSON as JSON.stringify writes it.
//
// It is the one home of clipping: Clamp (UTF-8 bytes kept, then Marker),
// ClampUnits (UTF-16 code units, Marker included) and ClampPoints (code
// points, Marker included). Every clipped text in the repository goes
// through one of them.
//
// It imports nothing of ours, so every layer (contract, server, config, the
// gateway leaves) may use it without breaking the dependency directions.
package jstext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Marker ends text that a clamp clipped.
const Marker = "…"

// Identity clamps (docs/DECISIONS.md "Identity clamps", V3 and S4): the UTF-8
// bytes Clamp keeps of a caller-influenced identity before Marker.
const (
	// MaxIdentityBytes is a connectorId or toolName.
	MaxIdentityBytes = 128
	// MaxAddressBytes is an address: two identities and the dot.
	MaxAddressBytes = 2*MaxIdentityBytes + 1
	// MaxEchoBytes is caller-authored text echoed back, such as a describe
	// address that did not resolve (S4) or a query (E7).
	MaxEchoBytes = 512
)

// Len is the JavaScript length of s: its UTF-16 code units.
func Len(s string) int {
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

// Prefix is the longest prefix of s of at most n UTF-16 code units that does
// not split a surrogate pair.
func Prefix(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// Clamp is the identity clamp: s as valid UTF-8 (each invalid byte becomes
// U+FFFD), and when that is longer than n bytes, its first n bytes cut back
// to a character boundary followed by Marker (so at most n+len(Marker)
// bytes). Short valid text comes back unchanged and unmarked. Work is bounded
// by n, not by len(s).
func Clamp(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	var b []byte
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:]) // an invalid byte decodes as U+FFFD, size 1
		if len(b)+utf8.RuneLen(r) > n {
			return string(b) + Marker
		}
		b = utf8.AppendRune(b, r)
		i += size
	}
	return string(b)
}

// ClampUnits bounds s to n UTF-16 code units, Marker included as the last
// one when it clipped; it never splits a surrogate pair. The bool reports a
// clip.
func ClampUnits(s string, n int) (string, bool) {
	if Len(s) <= n {
		return s, false
	}
	return Prefix(s, n-1) + Marker, true
}

// ClampPoints bounds s to n code points, Marker included as the last one
// when it clipped. The bool reports a clip.
func ClampPoints(s string, n int) (string, bool) {
	k := 0
	for i := range s {
		if k == n-1 && utf8.RuneCountInString(s[i:]) > 1 {
			return s[:i] + Marker, true
		}
		k++
	}
	return s, false
}

// JSON the model reads (docs/DECISIONS.md "JSON the model reads") is
// written here and only here, by JavaScript's JSON.stringify rules: compact,
// object keys in the order given (Object), no HTML escaping, U+2028 and
// U+2029 raw, lone surrogates as \uXXXX, other control characters escaped.
// Marshal is encoding/json with HTML escaping off followed by one pass that
// unescapes U+2028/U+2029 (encoding/json always escapes them); no
// GOEXPERIMENT is involved. A Go string holds a lone surrogate only as the
// WTF-8 bytes the engine hands over; AppendQuote writes those as \uXXXX,
// while encoding/json (and so Marshal) sees them as invalid UTF-8 and writes
// U+FFFD, as it does for every other invalid byte.

// AppendQuote appends s quoted the way JSON.stringify quotes a string: only
// '"', '\\' and control characters are escaped (no HTML escaping, U+2028
// and U+2029 raw); a WTF-8 encoded lone surrogate becomes \uXXXX; any other
// invalid UTF-8 byte becomes U+FFFD.
func AppendQuote(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				if u, ok := wtf8Surrogate(s[i:]); ok {
					dst = append(dst, '\\', 'u', hex[u>>12], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf])
					i += 3
				} else {
					dst = append(dst, "\ufffd"...)
					i++
				}
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// wtf8Surrogate decodes a surrogate code point (U+D800–U+DFFF) encoded as
// three bytes, which UTF-8 forbids and WTF-8 uses for a lone surrogate.
func wtf8Surrogate(s string) (uint16, bool) {
	if len(s) < 3 || s[0] != 0xED || s[1] < 0xA0 || s[1] > 0xBF || s[2] < 0x80 || s[2] > 0xBF {
		return 0, false
	}
	return 0xD000 | uint16(s[1]&0x3F)<<6 | uint16(s[2]&0x3F), true
}

// FromWTF8 is s as valid UTF-8 text: a WTF-8 encoded lone surrogate (three
// bytes, how the engine hands over a JavaScript string holding one) becomes
// exactly one U+FFFD, as TextEncoder does; any other invalid byte becomes one
// U+FFFD each. Text that is not JSON (a console entry) has no other way to
// carry a lone surrogate; decoding its three bytes one by one made three.
func FromWTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if _, ok := wtf8Surrogate(s[i:]); ok {
				size = 3
			}
			b = append(b, "\ufffd"...)
			i += size
			continue
		}
		b = append(b, s[i:i+size]...)
		i += size
	}
	return string(b)
}

// Quote is AppendQuote as a string.
func Quote(s string) string { return string(AppendQuote(nil, s)) }

// Marshal writes v as JSON.stringify would: compact, no HTML escaping,
// U+2028 and U+2029 raw, no trailing newline. Ordered objects are Object
// values; a json.RawMessage is copied as given.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeLineSeparators(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeLineSeparators rewrites encoding/json's \u2028 and \u2029 escapes
// to the raw characters, leaving an escaped backslash followed by "u2028"
// alone.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+5 < len(b) && b[i+2] == '2' && b[i+3] == '0' && b[i+4] == '2' && (b[i+5] == '8' || b[i+5] == '9') {
			if b[i+5] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++ // the escaped byte: `\\u2028` stays literal
	}
	return out
}

// Field is one key of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object whose keys keep the order given. Values are
// written by Marshal; a json.RawMessage value is copied as given.
type Object []Field

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	buf := make([]byte, 0, 128)
	buf = append(buf, '{')
	for i, f := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = AppendQuote(buf, f.Key)
		buf = append(buf, ':')
		if raw, ok := f.Value.(json.RawMessage); ok {
			buf = append(buf, raw...)
			continue
		}
		v, err := Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Key, err)
		}
		buf = append(buf, v...)
	}
	return append(buf, '}'), nil
}
