// Package jcs writes the RFC 8785 (JSON Canonicalization Scheme) form of a
// JSON text: object members sorted by the UTF-16 code units of their names,
// no insignificant whitespace, strings with the minimal escapes and numbers
// in ECMAScript's Number.prototype.toString form. Tool fingerprints hash it,
// so two listings that differ only in key order or spacing pin alike.
// It imports nothing of ours.
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// MaxDepth bounds nesting, so a hostile definition cannot exhaust the stack.
const MaxDepth = 256

// ErrDepth: the text nests deeper than MaxDepth.
var ErrDepth = errors.New("jcs: nesting deeper than the bound")

// Canonical returns the canonical form of one JSON text. Invalid JSON, a
// number outside IEEE 754 double range or nesting past MaxDepth is an error.
func Canonical(text []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var b bytes.Buffer
	if err := write(&b, dec, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("jcs: more than one JSON value")
	}
	return b.Bytes(), nil
}

// Append writes the canonical form of an already decoded value (nil, bool,
// string, json.Number, float64, []any, map[string]any, json.RawMessage).
func Append(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeString(b, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return fmt.Errorf("jcs: number %q: %w", string(x), err)
		}
		return writeNumber(b, f)
	case float64:
		return writeNumber(b, x)
	case json.RawMessage:
		c, err := Canonical(x)
		if err != nil {
			return err
		}
		b.Write(c)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := Append(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := Append(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("jcs: unsupported type %T", v)
	}
	return nil
}

// write streams one value from dec, buffering only each object's members
// (they must be sorted before they are written).
func write(b *bytes.Buffer, dec *json.Decoder, depth int) error {
	if depth > MaxDepth {
		return ErrDepth
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("jcs: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				if err := write(b, dec, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("jcs: %w", err)
			}
			b.WriteByte(']')
		case '{':
			type member struct {
				key string
				val []byte
			}
			var ms []member
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("jcs: %w", err)
				}
				key, _ := kt.(string)
				var vb bytes.Buffer
				if err := write(&vb, dec, depth+1); err != nil {
					return err
				}
				ms = append(ms, member{key, vb.Bytes()})
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("jcs: %w", err)
			}
			slices.SortStableFunc(ms, func(a, c member) int { return compareUTF16(a.key, c.key) })
			b.WriteByte('{')
			for i, m := range ms {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(b, m.key)
				b.WriteByte(':')
				b.Write(m.val)
			}
			b.WriteByte('}')
		}
		return nil
	default:
		return Append(b, tok)
	}
}

func sortKeys(keys []string) { slices.SortFunc(keys, compareUTF16) }

// compareUTF16 orders by UTF-16 code units (RFC 8785 §3.2.3), which differs
// from byte order above U+FFFF against U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// writeString escapes only what RFC 8785 §3.2.2.2 requires.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[r>>4])
				b.WriteByte(hexDigits[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// writeNumber is ECMAScript's Number::toString for finite doubles
// (RFC 8785 §3.2.2.3).
func writeNumber(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("jcs: number is not finite")
	}
	if f == 0 {
		b.WriteByte('0') // -0 too
		return nil
	}
	if f < 0 {
		b.WriteByte('-')
		f = -f
	}
	// Shortest round-trip digits and the decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		b.WriteString(digits[:n])
		b.WriteByte('.')
		b.WriteString(digits[n:])
	case -6 < n && n <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -n))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if n-1 >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(n - 1))
	}
	return nil
}
