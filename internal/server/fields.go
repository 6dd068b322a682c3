package server

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway"
)

// fieldsHint tells the caller how to fix a projection that missed.
const fieldsHint = "fields are dot-paths into the result; x[] maps over an array (results[].id). Call without fields to see the shape."

type pathSeg struct {
	key      string
	mapArray bool
}

func parsePath(p string) []pathSeg {
	var segs []pathSeg
	for _, part := range strings.Split(p, ".") {
		seg := pathSeg{key: part}
		if k, ok := strings.CutSuffix(part, "[]"); ok {
			seg = pathSeg{key: k, mapArray: true}
		}
		segs = append(segs, seg)
	}
	return segs
}

// project applies call_tool's `fields` to a JSON value (docs/meta-tools.md §6): all paths
// matched fully → a flat {path: value} object in request order; otherwise
// {data, $connecta:{type:"field_projection", unmatchedFields, partialFields?, hint}}.
// Values pass through as raw JSON, so key order and numbers are untouched.
func project(value json.RawMessage, fields []string) (json.RawMessage, error) {
	flat := make([]gateway.Field, 0, len(fields))
	var unmatched, partial []string
	for _, f := range fields {
		if f == "$connecta" {
			unmatched = append(unmatched, f)
			continue
		}
		v, matched, part := evalPath(value, parsePath(f))
		switch {
		case !matched:
			unmatched = append(unmatched, f)
		default:
			flat = append(flat, gateway.Field{Key: f, Value: v})
			if part {
				partial = append(partial, f)
			}
		}
	}
	if len(unmatched) == 0 && len(partial) == 0 {
		return gateway.Object(flat).MarshalJSON()
	}
	meta := gateway.Object{{Key: "type", Value: "field_projection"}, {Key: "unmatchedFields", Value: nonNil(unmatched)}}
	if len(partial) > 0 {
		meta = append(meta, gateway.Field{Key: "partialFields", Value: partial})
	}
	meta = append(meta, gateway.Field{Key: "hint", Value: fieldsHint})
	return gateway.Object{{Key: "data", Value: gateway.Object(flat)}, {Key: "$connecta", Value: meta}}.MarshalJSON()
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// evalPath resolves segs in v. matched: the path exists (for mapped arrays,
// in at least one element, or the array is empty); partial: some mapped
// element lacked it.
func evalPath(v json.RawMessage, segs []pathSeg) (out json.RawMessage, matched, partial bool) {
	if len(segs) == 0 {
		return v, true, false
	}
	seg := segs[0]
	child, ok := objectGet(v, seg.key)
	if !ok {
		return nil, false, false
	}
	if !seg.mapArray {
		return evalPath(child, segs[1:])
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(child, &elems); err != nil {
		return nil, false, false
	}
	results := make([]json.RawMessage, 0, len(elems))
	for _, e := range elems {
		r, m, p := evalPath(e, segs[1:])
		if !m {
			partial = true
			continue
		}
		if p {
			partial = true
		}
		results = append(results, r)
	}
	if len(elems) > 0 && len(results) == 0 {
		return nil, false, false
	}
	b, err := marshalCompact(rawList(results))
	if err != nil {
		return nil, false, false
	}
	return b, true, partial
}

type rawList []json.RawMessage

func (l rawList) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, r := range l {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(r)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// objectGet returns the value of key in a JSON object (the last one when a
// key repeats, as JavaScript would).
func objectGet(v json.RawMessage, key string) (json.RawMessage, bool) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var found json.RawMessage
	ok := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		if k == key {
			found, ok = val, true
		}
	}
	return found, ok
}
