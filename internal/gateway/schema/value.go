package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// maxKept is how many elements of one array, or members of one object, are
// materialized. Every walk spends a visit per element or member it reads and
// has MaxWork visits, so nothing past maxKept can change a rendering; an
// array keeps its true length (the exact enum omitted count), an object the
// raw bytes of its remaining members for key lookups.
const maxKept = MaxWork + 1

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// value is one JSON value over the validated input bytes. Strings and
// container contents decode on first use, so a 10 MB description or a
// million-value enum costs a scan, not a tree. Objects keep member order; a
// duplicate key keeps its first position and its last value (JSON.parse).
type value struct {
	raw  []byte // exact bytes of this value
	kind kind

	decoded bool
	str     string // decoded string contents

	parsed bool
	items  []*value // array elements, at most maxKept
	count  int      // array length
	keys   []string // object keys, first occurrences of the first maxKept members
	vals   []*value
	index  map[string]int
	rest   []byte // object members past maxKept, "," included; nil when none
}

func newValue(raw []byte) *value {
	v := &value{raw: raw}
	switch raw[0] {
	case '{':
		v.kind = kindObject
	case '[':
		v.kind = kindArray
	case '"':
		v.kind = kindString
	case 't', 'f':
		v.kind = kindBool
	case 'n':
		v.kind = kindNull
	default:
		v.kind = kindNumber
	}
	return v
}

// boolean is the value of a bool.
func (v *value) boolean() bool { return v.kind == kindBool && v.raw[0] == 't' }

// lit is a number's literal text.
func (v *value) lit() string { return string(v.raw) }

// strMaxBytes bounds a string's decoded UTF-8 length from its raw length
// without decoding it (an escape is at most 6 raw bytes per decoded byte
// pair; an invalid byte becomes 3).
func (v *value) strMinBytes() int { return (len(v.raw) - 2) / 6 }

// s is a string's decoded contents.
func (v *value) s() string {
	if v.kind != kindString {
		return ""
	}
	if !v.decoded {
		v.decoded = true
		body := v.raw[1 : len(v.raw)-1]
		if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
			v.str = string(body)
		} else {
			_ = json.Unmarshal(v.raw, &v.str) // validated input
		}
	}
	return v.str
}

func (v *value) parse() {
	if v.parsed {
		return
	}
	v.parsed = true
	b := v.raw
	i := skipSpace(b, 1)
	switch v.kind {
	case kindArray:
		for b[i] != ']' {
			end := skipValue(b, i)
			if len(v.items) < maxKept {
				v.items = append(v.items, newValue(b[i:end]))
			}
			v.count++
			i = skipSpace(b, end)
			if b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
	case kindObject:
		members := 0
		for b[i] != '}' {
			if members == maxKept {
				v.rest = b[i : len(b)-1]
				return
			}
			keyEnd := skipValue(b, i)
			key := newValue(b[i:keyEnd]).s()
			i = skipSpace(b, keyEnd)
			i = skipSpace(b, i+1) // ':'
			end := skipValue(b, i)
			v.set(key, newValue(b[i:end]))
			members++
			i = skipSpace(b, end)
			if b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
	}
}

// elems are an array's elements (at most maxKept); nil for a non-array.
func (v *value) elems() []*value {
	if v == nil || v.kind != kindArray {
		return nil
	}
	v.parse()
	return v.items
}

// length is an array's true element count.
func (v *value) length() int {
	if v == nil || v.kind != kindArray {
		return 0
	}
	v.parse()
	return v.count
}

// members are an object's keys and values (at most maxKept).
func (v *value) members() ([]string, []*value) {
	if v == nil || v.kind != kindObject {
		return nil, nil
	}
	v.parse()
	return v.keys, v.vals
}

func (v *value) get(key string) *value {
	if v == nil || v.kind != kindObject {
		return nil
	}
	v.parse()
	if v.rest != nil {
		// A later duplicate wins, so look there first.
		if found := lookupRaw(v.rest, key); found != nil {
			return found
		}
	}
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			return v.vals[i]
		}
		return nil
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i]
		}
	}
	return nil
}

// lookupRaw scans raw members for the last occurrence of key.
func lookupRaw(b []byte, key string) *value {
	var found *value
	i := skipSpace(b, 0)
	for i < len(b) {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		keyEnd := skipValue(b, i)
		k := newValue(b[i:keyEnd])
		i = skipSpace(b, keyEnd)
		i = skipSpace(b, i+1)
		end := skipValue(b, i)
		if k.s() == key {
			found = newValue(b[i:end])
		}
		i = skipSpace(b, end)
	}
	return found
}

func (v *value) has(key string) bool { return v.get(key) != nil }

// set adds or replaces a member (objects built by the walk, and parsing).
func (v *value) set(key string, val *value) {
	v.parsed = true
	if v.index != nil {
		if i, ok := v.index[key]; ok {
			v.vals[i] = val
			return
		}
	} else {
		for i, k := range v.keys {
			if k == key {
				v.vals[i] = val
				return
			}
		}
	}
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, val)
	if v.index != nil {
		v.index[key] = len(v.keys) - 1
	} else if len(v.keys) > indexThreshold {
		v.index = make(map[string]int, len(v.keys)*2)
		for i, k := range v.keys {
			v.index[k] = i
		}
	}
}

// newObject is an empty object built by the walk (not from input bytes).
func newObject() *value { return &value{raw: []byte("{}"), kind: kindObject, parsed: true} }

// indexThreshold is the member count above which an object gets a lookup map.
const indexThreshold = 8

func (v *value) isArray() bool  { return v != nil && v.kind == kindArray }
func (v *value) isObject() bool { return v != nil && v.kind == kindObject }
func (v *value) isString() bool { return v != nil && v.kind == kindString }

// truthy is JavaScript truthiness of a JSON value (absent is falsy).
func (v *value) truthy() bool {
	if v == nil {
		return false
	}
	switch v.kind {
	case kindNull:
		return false
	case kindBool:
		return v.boolean()
	case kindString:
		return len(v.raw) > 2
	case kindNumber:
		f, _ := strconv.ParseFloat(v.lit(), 64)
		return f != 0
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the (valid) JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		i++
		for {
			j := bytes.IndexAny(b[i:], "\"\\")
			i += j
			if b[i] == '"' {
				return i + 1
			}
			i += 2
		}
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// parse validates raw as one JSON value (nesting ≤ 10,000, as encoding/json)
// and wraps it; contents decode lazily.
func parse(raw []byte) (*value, error) {
	if !json.Valid(raw) {
		return nil, errors.New("schema is not valid JSON")
	}
	b := raw[skipSpace(raw, 0):]
	end := skipValue(b, 0)
	return newValue(b[:end]), nil
}

// jsNumber formats a JSON number literal the way JavaScript's
// Number.prototype.toString would after JSON.parse, except that a plain
// integer literal keeps its digits (no precision loss above 2^53). ok is false
// for a literal that overflows to ±Infinity (JSON.stringify writes null).
func jsNumber(lit string) (string, bool) {
	if isPlainInteger(lit) {
		if lit == "-0" {
			return "0", true
		}
		return lit, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "null", false
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "null", false
	}
	return formatJSFloat(f), true
}

func isPlainInteger(lit string) bool {
	s := strings.TrimPrefix(lit, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// formatJSFloat implements Number::toString (ECMA-262) over the shortest
// round-tripping digits.
func formatJSFloat(f float64) string {
	if f == 0 {
		return "0"
	}
	neg := f < 0
	if neg {
		f = -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k := len(digits)
	n := exp + 1
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		m := digits[:1]
		if k > 1 {
			m += "." + digits[1:]
		}
		out = m + "e" + sign + strconv.Itoa(abs(n-1))
	}
	if neg {
		return "-" + out
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// jsQuote is s as a JSON.stringify string literal.
func jsQuote(s string) string { return string(jstext.AppendQuote(nil, s)) }

// jsString is JavaScript's String(value) for a JSON value.
func jsString(v *value) string {
	if v == nil {
		return "undefined"
	}
	switch v.kind {
	case kindNull:
		return "null"
	case kindBool:
		if v.boolean() {
			return "true"
		}
		return "false"
	case kindNumber:
		s, ok := jsNumber(v.lit())
		if !ok {
			if strings.HasPrefix(v.lit(), "-") {
				return "-Infinity"
			}
			return "Infinity"
		}
		return s
	case kindString:
		return v.s()
	case kindArray:
		items := v.elems()
		parts := make([]string, len(items))
		for i, it := range items {
			if it.kind != kindNull {
				parts[i] = jsString(it)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}
