package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// marshalCompact encodes v as compact JSON without HTML escaping.
func marshalCompact(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return jstext.Marshal(v)
}

// jsonResult is §2's jsonResult: text is the compact JSON and, when the value
// is an object, structuredContent carries the same bytes.
func jsonResult(v any) *mcp.CallToolResult {
	b, err := marshalCompact(v)
	if err != nil {
		return textError(fmt.Sprintf("Error: result could not be serialized: %v", err))
	}
	return rawJSONResult(b, false)
}

func rawJSONResult(b []byte, isError bool) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: isError}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		res.StructuredContent = json.RawMessage(b)
	}
	return res
}

// textError is §2's errorResult: text only, isError.
func textError(message string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: message}}, IsError: true}
}

// typedError is the discovery error shape {error:{code,message,retryable,…}}
// with isError; text and structuredContent carry the same object.
func typedError(e *gateway.Error) *mcp.CallToolResult {
	b, err := gateway.Object{{Key: "error", Value: e}}.MarshalJSON()
	if err != nil {
		return textError(e.Message)
	}
	return rawJSONResult(b, true)
}

// resultSize is the serialized size of a complete tool result, both copies
// and JSON escaping included (S3 at the top level).
func resultSize(res *mcp.CallToolResult) (int, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// headBytes returns at most n bytes of b, cut back to a character start.
func headBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

func quote(s string) string { return strconv.Quote(s) }
