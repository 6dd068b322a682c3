package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// marshalCompact encodes v as compact JSON without HTML escaping.
func marshalCompact(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return jstext.Marshal(v)
}

// jsonResult is docs/meta-tools.md §2's jsonResult: text is the compact JSON and, when the value
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

// textError is docs/meta-tools.md §2's errorResult: text only, isError.
func textError(message string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: message}}, IsError: true}
}

// failureResult is the one shape of every failure of call_tool,
// call_destructive_tool, get_result, search_tools and authorize_connector:
// isError, text and structuredContent both {ok: false, error: {code,
// message, retryable, retryAfterMs?, …}, …extra} (durationMs, attempts and
// timing for the call tools). The error object is the one a program sees.
func failureResult(e *gateway.Error, extra ...gateway.Field) *mcp.CallToolResult {
	fields := make([]gateway.Field, 0, 2+len(extra))
	fields = append(fields, gateway.Field{Key: "ok", Value: false}, gateway.Field{Key: "error", Value: e.Object()})
	fields = append(fields, extra...)
	b, err := gateway.Object(fields).MarshalJSON()
	if err != nil {
		// Only an extra can fail to marshal; the error object always does.
		b, _ = gateway.Object(fields[:2]).MarshalJSON()
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
