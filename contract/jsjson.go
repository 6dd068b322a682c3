package contract

import (
	"strconv"

	"github.com/connecta-dev/connecta/jstext"
)

// JSON as JavaScript's JSON.stringify writes it: the text and the
// structuredContent a model sees must be what the original produced, so no
// HTML escaping, no U+2028/U+2029 escaping, compact, keys in insertion order.

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
	o.b = jstext.AppendQuote(o.b, k)
	o.b = append(o.b, ':')
}

func (o *object) raw(k string, v []byte) *object { o.key(k); o.b = append(o.b, v...); return o }
func (o *object) str(k, v string) *object        { o.key(k); o.b = jstext.AppendQuote(o.b, v); return o }
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
