// Package observe learns observed output schemas (S9): from the unwrapped
// result of a successful read-only call whose provider declared no
// outputSchema, it keeps field names and broad JSON types only — never a
// value — merges observations, and serves the shape to discovery labelled as
// observed. Callers decide admission (read-only, no declared schema,
// successful call); this package only bounds, merges and caches.
package observe

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Contract bounds (S9).
const (
	DefaultEntries        = 256
	DefaultTTL            = 24 * time.Hour
	MaxDefinitionBytes    = 64 * 1024
	MaxSchemaBytes        = 16 * 1024
	MaxSchemaDepth        = 6
	MaxSchemaNodes        = 128
	MaxObjectProperties   = 48
	MaxArrayItems         = 32
	MaxPropertyNameBytes  = 128
	maxUnionBranches      = 6 // one per broad type
	typeNull, typeBoolean = "null", "boolean"
	typeNumber, typeStr   = "number", "string"
	typeArray, typeObject = "array", "object"
)

// unsafeNames are property names discarded because JavaScript consumers of
// the schema could turn them into prototype pollution.
func unsafeName(name string) bool {
	return name == "__proto__" || name == "constructor" || name == "prototype"
}

func safeName(name string) bool {
	return !unsafeName(name) && len(name) <= MaxPropertyNameBytes
}

// Options configure an Observer. Zero values take the S9 defaults.
type Options struct {
	Entries int           // LRU capacity
	TTL     time.Duration // lifetime of an entry since its last observation
	Now     func() time.Time
	// Logger receives a recovered panic in Learn (an observation bug): the
	// call is unaffected, the panic is logged and counted (Panics). nil
	// discards the log line; the count is kept either way.
	Logger *slog.Logger
}

// Observer is the process-local S9 cache. Safe for concurrent use; it owns no
// goroutine and does no work outside Learn and Schema.
type Observer struct {
	entries int
	ttl     time.Duration
	now     func() time.Time
	logger  *slog.Logger
	panics  atomic.Uint64

	mu    sync.Mutex
	lru   *list.List // of *entry, most recently used first
	byDef map[string]*list.Element
}

type entry struct {
	definition string // the exact serialized tool definition (the key)
	schema     *node
	serialized []byte
	expiresAt  time.Time
}

// New builds an Observer.
func New(opts Options) *Observer {
	o := &Observer{entries: opts.Entries, ttl: opts.TTL, now: opts.Now, logger: opts.Logger,
		lru: list.New(), byDef: make(map[string]*list.Element)}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.entries <= 0 {
		o.entries = DefaultEntries
	}
	if o.ttl <= 0 {
		o.ttl = DefaultTTL
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// Panics is how many panics Learn recovered from.
func (o *Observer) Panics() uint64 {
	if o == nil {
		return 0
	}
	return o.panics.Load()
}

// Learn merges the shape of result (an unwrapped successful result) into the
// observation for definition. Any failure — invalid JSON, a definition over
// 64 KiB, a schema over 16 KiB — is discarded silently: observation never
// changes a successful call.
func (o *Observer) Learn(definition, result json.RawMessage) {
	defer func() {
		if r := recover(); r != nil { // an observation bug must not fail a call
			o.panics.Add(1)
			o.logger.Error("output observation panicked; result not observed", "panic", fmt.Sprint(r))
		}
	}()
	if len(definition) == 0 || len(definition) > MaxDefinitionBytes {
		return
	}
	inferred, err := infer(result)
	if err != nil || inferred == nil {
		return
	}
	key := string(definition)
	now := o.now()

	o.mu.Lock()
	defer o.mu.Unlock()
	merged := inferred
	if el, ok := o.byDef[key]; ok {
		e := el.Value.(*entry)
		if now.Before(e.expiresAt) {
			merged = merge(e.schema, inferred)
		}
	}
	merged = bound(merged, &budget{}, 0)
	if merged == nil {
		return
	}
	serialized := merged.marshal(nil)
	if len(serialized) > MaxSchemaBytes {
		return // keep the earlier observation rather than a truncated one
	}
	e := &entry{definition: key, schema: merged, serialized: serialized, expiresAt: now.Add(o.ttl)}
	if el, ok := o.byDef[key]; ok {
		el.Value = e
		o.lru.MoveToFront(el)
	} else {
		o.byDef[key] = o.lru.PushFront(e)
	}
	for o.lru.Len() > o.entries {
		oldest := o.lru.Back()
		o.lru.Remove(oldest)
		delete(o.byDef, oldest.Value.(*entry).definition)
	}
}

// Schema returns a fresh copy of the observed schema for exactly this
// definition, or nil when there is none (never observed, expired, evicted,
// or the definition changed).
func (o *Observer) Schema(definition json.RawMessage) json.RawMessage {
	if len(definition) == 0 || len(definition) > MaxDefinitionBytes {
		return nil
	}
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	el, ok := o.byDef[string(definition)]
	if !ok {
		return nil
	}
	e := el.Value.(*entry)
	if !now.Before(e.expiresAt) {
		o.lru.Remove(el)
		delete(o.byDef, e.definition)
		return nil
	}
	o.lru.MoveToFront(el)
	return bytes.Clone(e.serialized)
}

// Len reports how many observations are cached (expired ones included until
// touched).
func (o *Observer) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lru.Len()
}

// node is one observed schema node: a broad type, or a union of them.
type node struct {
	typ   string           // "" for a union
	props map[string]*node // objects: always non-nil
	items *node            // arrays: nil when no item was inspected
	anyOf []*node          // unions: sorted by branchOrder, distinct types
}

func branchOrder(typ string) int {
	return slices.Index([]string{typeNull, typeBoolean, typeNumber, typeStr, typeArray, typeObject}, typ)
}

type budget struct{ nodes int }

var errTrailingData = errors.New("observe: data after the JSON value")

// infer returns the bounded observed schema of one JSON value as JSON, or an
// error when value is not a single valid JSON value. It keeps no value.
func infer(value json.RawMessage) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber() // numbers are never converted, only typed
	n, err := inferValue(dec, &budget{}, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailingData
	}
	return bound(n, &budget{}, 0), nil
}

// InferSchema is infer serialized: the observed schema of one value alone.
func InferSchema(value json.RawMessage) json.RawMessage {
	n, err := infer(value)
	if err != nil || n == nil {
		return nil
	}
	out := n.marshal(nil)
	if len(out) > MaxSchemaBytes {
		return nil
	}
	return out
}

// inferValue reads one value from dec. It always consumes the whole value;
// it returns nil for a value beyond the depth or node budget.
func inferValue(dec *json.Decoder, b *budget, depth int) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	keep := depth <= MaxSchemaDepth && b.nodes < MaxSchemaNodes
	if keep {
		b.nodes++
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{typ: typeObject, props: map[string]*node{}}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				name, _ := keyTok.(string)
				_, dup := n.props[name]
				take := keep && safeName(name) && !dup && len(n.props) < MaxObjectProperties && b.nodes < MaxSchemaNodes
				child, err := inferOrSkip(dec, b, depth+1, take)
				if err != nil {
					return nil, err
				}
				if child != nil {
					n.props[name] = child
				}
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			if !keep {
				return nil, nil
			}
			return n, nil
		case '[':
			n := &node{typ: typeArray}
			for i := 0; dec.More(); i++ {
				take := keep && i < MaxArrayItems && b.nodes < MaxSchemaNodes
				child, err := inferOrSkip(dec, b, depth+1, take)
				if err != nil {
					return nil, err
				}
				if child != nil {
					if n.items == nil {
						n.items = child
					} else {
						n.items = merge(n.items, child)
					}
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			if !keep {
				return nil, nil
			}
			return n, nil
		default:
			return nil, errors.New("observe: unexpected delimiter")
		}
	case nil:
		return scalar(keep, typeNull), nil
	case bool:
		return scalar(keep, typeBoolean), nil
	case json.Number:
		return scalar(keep, typeNumber), nil
	case string:
		return scalar(keep, typeStr), nil
	default:
		return nil, errors.New("observe: unexpected token")
	}
}

func scalar(keep bool, typ string) *node {
	if !keep {
		return nil
	}
	return &node{typ: typ}
}

func inferOrSkip(dec *json.Decoder, b *budget, depth int, take bool) (*node, error) {
	if take {
		return inferValue(dec, b, depth)
	}
	var skipped json.RawMessage // validates and discards the value
	return nil, dec.Decode(&skipped)
}

func branches(n *node) []*node {
	if n.typ == "" {
		return n.anyOf
	}
	return []*node{n}
}

// merge combines two observations: object properties union (each stays
// optional), array items merge, different types become a union.
func merge(a, b *node) *node {
	switch {
	case a.typ == typeObject && b.typ == typeObject:
		props := make(map[string]*node, len(a.props)+len(b.props))
		for k, v := range a.props {
			props[k] = v
		}
		for k, v := range b.props {
			if prev, ok := props[k]; ok {
				props[k] = merge(prev, v)
			} else {
				props[k] = v
			}
		}
		return &node{typ: typeObject, props: props}
	case a.typ == typeArray && b.typ == typeArray:
		switch {
		case a.items == nil:
			return &node{typ: typeArray, items: b.items}
		case b.items == nil:
			return &node{typ: typeArray, items: a.items}
		default:
			return &node{typ: typeArray, items: merge(a.items, b.items)}
		}
	case a.typ != "" && a.typ == b.typ:
		return a
	}
	byType := map[string]*node{}
	for _, br := range append(branches(a), branches(b)...) {
		if br.typ == "" {
			continue // unions never nest
		}
		if prev, ok := byType[br.typ]; ok {
			byType[br.typ] = merge(prev, br)
		} else {
			byType[br.typ] = br
		}
	}
	out := make([]*node, 0, len(byType))
	for _, v := range byType {
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y *node) int { return branchOrder(x.typ) - branchOrder(y.typ) })
	if len(out) == 1 {
		return out[0]
	}
	return &node{anyOf: out}
}

// bound re-applies every S9 bound to a (merged) schema and returns a fresh
// tree: depth, node count, properties per object, safe names, union width.
func bound(n *node, b *budget, depth int) *node {
	if n == nil || depth > MaxSchemaDepth || b.nodes >= MaxSchemaNodes {
		return nil
	}
	b.nodes++
	if n.typ == "" {
		var out []*node
		for _, br := range n.anyOf {
			if len(out) >= maxUnionBranches {
				break
			}
			if c := bound(br, b, depth+1); c != nil {
				out = append(out, c)
			}
		}
		switch len(out) {
		case 0:
			return nil
		case 1:
			return out[0]
		}
		return &node{anyOf: out}
	}
	switch n.typ {
	case typeArray:
		return &node{typ: typeArray, items: bound(n.items, b, depth+1)}
	case typeObject:
		props := map[string]*node{}
		for _, k := range sortedKeys(n.props) {
			if len(props) >= MaxObjectProperties || b.nodes >= MaxSchemaNodes {
				break
			}
			if !safeName(k) {
				continue
			}
			if c := bound(n.props[k], b, depth+1); c != nil {
				props[k] = c
			}
		}
		return &node{typ: typeObject, props: props}
	}
	return &node{typ: n.typ}
}

func sortedKeys(m map[string]*node) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// marshal appends the node's JSON with properties sorted: deterministic
// bytes for equal observations.
func (n *node) marshal(buf []byte) []byte {
	if n.typ == "" {
		buf = append(buf, `{"anyOf":[`...)
		for i, br := range n.anyOf {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = br.marshal(buf)
		}
		return append(buf, "]}"...)
	}
	buf = append(buf, `{"type":`...)
	buf = strconv.AppendQuote(buf, n.typ)
	switch n.typ {
	case typeObject:
		buf = append(buf, `,"properties":{`...)
		for i, k := range sortedKeys(n.props) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, k)
			buf = append(buf, ':')
			buf = n.props[k].marshal(buf)
		}
		buf = append(buf, '}')
	case typeArray:
		if n.items != nil {
			buf = append(buf, `,"items":`...)
			buf = n.items.marshal(buf)
		}
	}
	return append(buf, '}')
}

func appendJSONString(buf []byte, s string) []byte {
	b, _ := jstext.Marshal(s) // a string always encodes
	return append(buf, b...)
}
