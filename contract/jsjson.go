package contract

import (
	"strconv"

	"github.com/connecta-dev/connecta/jstext"
)

// JSON as JavaScript's JSON.stringify writes it (jstext does the escaping):
// the text and the structuredContent a model sees, keys in insertion order.

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
