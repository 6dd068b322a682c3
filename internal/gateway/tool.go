// Package gateway is everything between the front doors and the downstream
// MCP servers: the connector registry, catalogs, discovery, invocation (one
// call end to end), the result stash and activity.
//
// A failure is an *Error all the way out, not an error: Invoke, Authorize,
// Errorf, UnknownConnector, UnknownAddress, UnknownTool and the catalog,
// classification and redaction helpers behind them return the concrete
// type because every caller reads its fields — the server renders Code,
// Message and Details as the tool result, package contract frames them for
// the guest, metrics and spans are labelled by Code. A nil *Error is never
// put in an error variable.
package gateway

import "encoding/json"

// Annotations are the MCP tool hints that the read-only predicate reads.
// Nil pointers mean the downstream did not say.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Tool is one catalog entry of one connector.
type Tool struct {
	ConnectorID  string
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage // exact bytes the downstream sent; nil when absent
	OutputSchema json.RawMessage // declared output schema; nil when absent
	Annotations  *Annotations
	// Definition is the exact serialized tool definition as listed; S9 keys
	// observations and validator caches by it.
	Definition json.RawMessage
}

// Address is the canonical `<connectorId>.<toolName>` (A1).
func (t *Tool) Address() string { return t.ConnectorID + "." + t.Name }

// ConnectorInfo is what discovery and the execute_code description show
// about a connector.
type ConnectorInfo struct {
	ID          string
	Title       string // normalized whitespace; ≤ 120 UTF-8 bytes when shown
	Description string
	Guide       string // Markdown usage guide, served as a skill
	Demo        bool   // the built-in demo connector
}
