package contract

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// presentLogs applies R5's presentation cap to the retained prefix of the
// joined log text: at most MaxPresentedLogChars UTF-16 units, then a marker
// naming the true total. totalChars is the full joined length.
func presentLogs(prefix string, totalChars int) string {
	if totalChars <= MaxPresentedLogChars && jstext.Len(prefix) <= MaxPresentedLogChars {
		return prefix
	}
	if totalChars < jstext.Len(prefix) {
		totalChars = jstext.Len(prefix)
	}
	return jstext.Prefix(prefix, MaxPresentedLogChars) + fmt.Sprintf(logsTruncatedFormat, totalChars)
}

// reply is everything a response is built from. Exactly one of the three
// shapes applies: success (no error), typed (errObject) or untyped
// (untyped != nil).
type reply struct {
	hasResult bool
	result    json.RawMessage // the program's R2-bounded value

	errObject json.RawMessage // typed failure: the `error` object
	untyped   *string         // untyped failure: the whole first line, e.g. "Error: boom"

	logs      string // presented logs; "" = none
	emitted   []mcp.Content
	discarded int
	diag      []byte // diagnostics JSON; nil unless requested
}

// toolResult shapes the response the model sees (docs/DECISIONS.md "Results and
// errors as the model sees them").
func (r *reply) toolResult() *mcp.CallToolResult {
	switch {
	case r.untyped != nil && r.diag == nil:
		var b strings.Builder
		b.WriteString(*r.untyped)
		if r.logs != "" {
			b.WriteString("\n\nLogs:\n")
			b.WriteString(r.logs)
		}
		if r.discarded > 0 {
			fmt.Fprintf(&b, "\n\nemittedDiscarded: %d", r.discarded)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
	case r.untyped != nil:
		obj := objectJSON(jstext.Object{{Key: "code", Value: gateway.CodeExecutorFailed}, {Key: "message", Value: *r.untyped}, {Key: "retryable", Value: false}})
		return r.failure(obj)
	case r.errObject != nil:
		return r.failure(r.errObject)
	}
	var o jstext.Object
	if r.hasResult {
		o = append(o, jstext.Field{Key: "result", Value: raw(r.result)})
	}
	if len(r.emitted) > 0 {
		o = append(o, jstext.Field{Key: "emitted", Value: len(r.emitted)})
	}
	if r.logs != "" {
		o = append(o, jstext.Field{Key: "logs", Value: r.logs})
	}
	if r.diag != nil {
		o = append(o, jstext.Field{Key: "diagnostics", Value: raw(r.diag)})
	}
	text := objectJSON(o)
	content := make([]mcp.Content, 0, 1+len(r.emitted))
	content = append(content, &mcp.TextContent{Text: string(text)})
	content = append(content, r.emitted...)
	return &mcp.CallToolResult{Content: content, StructuredContent: json.RawMessage(text)}
}

func (r *reply) failure(errObject []byte) *mcp.CallToolResult {
	o := jstext.Object{{Key: "error", Value: raw(errObject)}}
	if r.logs != "" {
		o = append(o, jstext.Field{Key: "logs", Value: r.logs})
	}
	if r.discarded > 0 {
		o = append(o, jstext.Field{Key: "emittedDiscarded", Value: r.discarded})
	}
	if r.diag != nil {
		o = append(o, jstext.Field{Key: "diagnostics", Value: raw(r.diag)})
	}
	text := objectJSON(o)
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		StructuredContent: json.RawMessage(text),
	}
}

// typedObject renders a gateway error as the `error` object of a response
// (the same object the top-level tools answer).
func typedObject(e *gateway.Error) []byte { return e.Object() }

// programErrorText is the untyped line for a program's own failure: the
// guest's message after "Error: ", or the fixed text when it is empty (E5).
func programErrorText(message string) string {
	if message == "" {
		message = textEmptyError
	}
	return "Error: " + message
}
