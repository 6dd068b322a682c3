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

// AppendQuote appends s quoted the way JSON.stringify quotes a string: only
// '"', '\\' and control characters are escaped (no HTML escaping, U+2028
// and U+2029 raw). Invalid UTF-8 bytes become U+FFFD.
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
				dst = append(dst, "\ufffd"...)
				start = i + 1
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

// Marshal is json.Marshal as JSON.stringify writes: no HTML escaping ('<',
// '>' and '&' stay literal) and U+2028/U+2029 raw. The result is compact
// and has no trailing newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return JSStyle(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// JSStyle rewrites Go encoder output to JavaScript's: Go escapes U+2028 and
// U+2029 even with HTML escaping off, JSON.stringify does not.
func JSStyle(b []byte) []byte {
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
