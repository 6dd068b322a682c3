package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"slices"
	"strings"
	"sync"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// emitHint is the shape M1 accepts, quoted in every shape refusal.
const emitHint = `pass { type: "text", text } or { type: "image" | "audio", data /* base64 */, mimeType }`

// emitFields are the exact keys of each block type, in the order the
// refusal names them; nil for an unknown type.
func emitFields(typ string) []string {
	switch typ {
	case "text":
		return []string{"type", "text"}
	case "image", "audio":
		return []string{"type", "data", "mimeType"}
	}
	return nil
}

// emitCollector holds one run's accepted blocks (M2, M5, M9).
type emitCollector struct {
	maxBytes, maxBlocks int

	mu     sync.Mutex
	blocks []mcp.Content
	bytes  int
}

// add validates one emit call's arguments (a JSON array as the guest
// serialized it) and accepts the block whole or not at all.
func (c *emitCollector) add(args json.RawMessage) *gateway.Error {
	block, content, gerr := parseBlock(args)
	if gerr != nil {
		return gerr
	}
	size := len(block) // UTF-8 bytes of JSON.stringify(block): the guest's own serialization
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.blocks) >= c.maxBlocks {
		return gateway.Errorf(gateway.CodeBudgetExceeded, false,
			"connecta.emit block-count budget exceeded: %d block(s) maximum, 0 remaining", c.maxBlocks)
	}
	if left := c.maxBytes - c.bytes; size > left {
		return gateway.Errorf(gateway.CodeBudgetExceeded, false,
			"connecta.emit byte budget exceeded: block is %d serialized bytes with %d of %d remaining", size, left, c.maxBytes)
	}
	c.blocks = append(c.blocks, content)
	c.bytes += size
	return nil
}

// snapshot returns the accepted blocks and their serialized bytes.
func (c *emitCollector) snapshot() ([]mcp.Content, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]mcp.Content(nil), c.blocks...), c.bytes
}

func invalidEmit(format string, a ...any) *gateway.Error {
	return gateway.Errorf(gateway.CodeInvalidArgs, false, format, a...)
}

// parseBlock applies M1: exactly one plain object, a known type, string
// fields, no extra keys. It returns the block's serialized bytes.
func parseBlock(args json.RawMessage) (json.RawMessage, mcp.Content, *gateway.Error) {
	var list []json.RawMessage
	if err := json.Unmarshal(args, &list); err != nil || len(list) != 1 {
		return nil, nil, invalidEmit("connecta.emit accepts exactly one content block: %s", emitHint)
	}
	raw := bytes.TrimSpace(list[0])
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil, invalidEmit("connecta.emit accepts exactly one content block: %s", emitHint)
	}
	keys, fields, err := objectFields(raw)
	if err != nil {
		return nil, nil, invalidEmit("connecta.emit accepts exactly one content block: %s", emitHint)
	}
	var typ string
	if t, ok := fields["type"]; !ok || json.Unmarshal(t, &typ) != nil || emitFields(typ) == nil {
		got := "undefined"
		if ok {
			got = string(clipRaw(t, 64))
		}
		return nil, nil, invalidEmit(`connecta.emit supports content types "text", "image", and "audio"; got %s`, got)
	}
	want := emitFields(typ)
	values := map[string]string{}
	for _, f := range want[1:] {
		v, ok := fields[f]
		var s string
		if !ok || json.Unmarshal(v, &s) != nil {
			return nil, nil, invalidEmit(`connecta.emit block field "%s" must be a string: %s`, f, emitHint)
		}
		values[f] = s
	}
	var extra []string
	for _, k := range keys {
		if !slices.Contains(want, k) {
			extra = append(extra, jstext.Quote(jstext.Clamp(k, 64)))
		}
	}
	if len(extra) > 0 {
		return nil, nil, invalidEmit(`connecta.emit block carries unsupported field(s) %s; a "%s" block is exactly { %s }`,
			strings.Join(extra, ", "), typ, strings.Join(want, ", "))
	}
	if typ == "text" {
		return raw, &mcp.TextContent{Text: values["text"]}, nil
	}
	if !mimeTypeOf(typ, values["mimeType"]) {
		return nil, nil, invalidEmit(`connecta.emit %s block field "mimeType" must be an %s/* media type; got %s`,
			typ, typ, jstext.Quote(jstext.Clamp(values["mimeType"], 64)))
	}
	data, derr := base64.StdEncoding.DecodeString(values["data"])
	if derr != nil {
		return nil, nil, invalidEmit(`connecta.emit block field "data" must be a base64 string: %s`, emitHint)
	}
	if typ == "image" {
		return raw, &mcp.ImageContent{Data: data, MIMEType: values["mimeType"]}, nil
	}
	return raw, &mcp.AudioContent{Data: data, MIMEType: values["mimeType"]}, nil
}

// mimeTypeOf reports whether mt is a well-formed media type of top-level
// type typ ("image/png" for an image block, "audio/wav" for audio): a client
// renders the block by it, so "text/html" on an image must not pass.
func mimeTypeOf(typ, mt string) bool {
	full, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return false
	}
	sub, ok := strings.CutPrefix(full, typ+"/") // ParseMediaType lowercases
	return ok && sub != "" && !strings.Contains(sub, "/")
}

// objectFields decodes one JSON object into its keys in order and their raw
// values. A duplicate key is refused (JSON.stringify never writes one).
func objectFields(raw []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	var keys []string
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, ok := t.(string)
		if !ok {
			return nil, nil, fmt.Errorf("key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := fields[k]; dup {
			return nil, nil, fmt.Errorf("duplicate key")
		}
		keys = append(keys, k)
		fields[k] = v
	}
	return keys, fields, nil
}

func clipRaw(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return []byte(jstext.Clamp(string(b), n))
}
