package gateway

import (
	"strings"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Address-miss refusals (E7), shared by discovery (describe) and invocation
// (call) so both front doors build the same unknown_address / unknown_tool
// record. Caller-authored text echoed back is clamped with jstext.Clamp:
// an address at jstext.MaxAddressBytes and a tool name at
// jstext.MaxIdentityBytes (the identity clamps), the derived recovery query
// at jstext.MaxEchoBytes.

// Recovery purposes, fixed text.
const (
	unknownAddressPurpose = "Find the configured canonical address before retrying."
	unknownToolPurpose    = "Find the connector's current canonical tool address."
)

// RecoveryQuery derives discovery search terms from an address or tool name
// the catalog could not resolve: the part after the first ".", runs of
// [._-] replaced by a space, trimmed, then clamped (E7). An empty result
// falls back to the whole input.
func RecoveryQuery(address string) string {
	candidate := address
	if i := strings.IndexByte(address, '.'); i >= 0 {
		candidate = address[i+1:]
	}
	var b strings.Builder
	b.Grow(len(candidate))
	inRun := false
	for i := 0; i < len(candidate); i++ {
		c := candidate[i]
		if c == '.' || c == '_' || c == '-' {
			if !inRun {
				b.WriteByte(' ')
			}
			inRun = true
			continue
		}
		inRun = false
		b.WriteByte(c)
	}
	q := strings.TrimFunc(b.String(), isJSWhitespace)
	if q == "" {
		q = address
	}
	return jstext.Clamp(q, jstext.MaxEchoBytes)
}

// SearchNextAction is the scoped-discovery recovery record, keyed to the
// surface the caller has: a program is sent to function "connecta.search"
// (it cannot call search_tools), the top level to tool "search_tools".
// connector is omitted when empty.
func SearchNextAction(front FrontDoor, query, connector, purpose string) Object {
	args := Object{{Key: "query", Value: query}}
	if connector != "" {
		args = append(args, Field{Key: "connector", Value: connector})
	}
	args = append(args, Field{Key: "includeSchemas", Value: "compact"})
	if front == FrontDoorProgram {
		return Object{{Key: "function", Value: "connecta.search"}, {Key: "arguments", Value: args}, {Key: "purpose", Value: purpose}}
	}
	return Object{{Key: "tool", Value: "search_tools"}, {Key: "arguments", Value: args}, {Key: "purpose", Value: purpose}}
}

// UnknownAddress is the E7 refusal for an address that names no configured
// connector (or has no tool part). retryable is pinned false.
func UnknownAddress(front FrontDoor, address string) *Error {
	return &Error{
		Code:      CodeUnknownAddress,
		Message:   `Unknown address "` + jstext.Clamp(address, jstext.MaxAddressBytes) + `"`,
		Retryable: false,
		Details: []Field{{Key: "nextAction", Value: SearchNextAction(front, RecoveryQuery(address), "",
			unknownAddressPurpose)}},
	}
}

// UnknownTool is the E7 refusal for a configured connector whose catalog
// has no tool of that name. retryable is pinned false.
func UnknownTool(front FrontDoor, connectorID, toolName string) *Error {
	return &Error{
		Code:      CodeUnknownTool,
		Message:   `Unknown tool "` + jstext.Clamp(toolName, jstext.MaxIdentityBytes) + `" on connector "` + connectorID + `"`,
		Retryable: false,
		Details: []Field{{Key: "nextAction", Value: SearchNextAction(front, RecoveryQuery(toolName), connectorID,
			unknownToolPurpose)}},
	}
}

// isJSWhitespace is the set String.prototype.trim removes (WhiteSpace and
// LineTerminator), which differs from unicode.IsSpace at U+0085 and U+FEFF.
func isJSWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
