package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolArgs is a tool's arguments object, decoded leniently: unknown keys are
// ignored (docs/meta-tools.md §1), a present key of the wrong type is an error naming it.
type toolArgs map[string]json.RawMessage

// argErrorf is a schema violation; its text names the offending field. It
// is answered as an isError result, not a JSON-RPC error
// (docs/meta-tools.md §1). The decoders below return it as error: their
// callers only pass it on, to argFailure or to a text result.
func argErrorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// invalidArgs is an argument error as the model sees it: invalid_args, not
// retryable.
func invalidArgs(err error) *gateway.Error {
	return &gateway.Error{Code: gateway.CodeInvalidArgs, Message: err.Error()}
}

// argFailure answers a tool's argument error in the typed envelope.
func argFailure(err error) *mcp.CallToolResult { return failureResult(invalidArgs(err)) }

func parseArgs(raw json.RawMessage) (toolArgs, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return toolArgs{}, nil
	}
	if raw[0] != '{' {
		return nil, argErrorf("Invalid arguments: expected an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, argErrorf("Invalid arguments: %v", err)
	}
	return toolArgs(m), nil
}

// present reports whether key was given with a non-null value (null counts
// as absent, like an omitted optional field).
func (a toolArgs) present(key string) (json.RawMessage, bool) {
	v, ok := a[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

func (a toolArgs) str(key string) (string, bool, error) {
	v, ok := a.present(key)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, argErrorf("Invalid arguments: %q must be a string", key)
	}
	return s, true, nil
}

func (a toolArgs) requiredStr(key string) (string, error) {
	s, ok, err := a.str(key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", argErrorf("Invalid arguments: %q is required", key)
	}
	return s, nil
}

func (a toolArgs) boolean(key string) (bool, error) {
	v, ok := a.present(key)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, argErrorf("Invalid arguments: %q must be a boolean", key)
	}
	return b, nil
}

// integer decodes an integral JSON number within [lo, hi].
func (a toolArgs) integer(key string, lo, hi int64) (int64, bool, error) {
	v, ok := a.present(key)
	if !ok {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) || f != math.Trunc(f) {
		return 0, false, argErrorf("Invalid arguments: %q must be an integer", key)
	}
	if f < float64(lo) || f > float64(hi) {
		if hi == math.MaxInt64 {
			return 0, false, argErrorf("Invalid arguments: %q must be an integer >= %d", key, lo)
		}
		return 0, false, argErrorf("Invalid arguments: %q must be an integer between %d and %d", key, lo, hi)
	}
	return int64(f), true, nil
}

func (a toolArgs) object(key string) (json.RawMessage, error) {
	v, ok := a.present(key)
	if !ok {
		return nil, nil
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
		return nil, argErrorf("Invalid arguments: %q must be an object", key)
	}
	return v, nil
}

func (a toolArgs) strings(key string) ([]string, error) {
	v, ok := a.present(key)
	if !ok {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, argErrorf("Invalid arguments: %q must be an array of strings", key)
	}
	return out, nil
}

func (a toolArgs) enum(key string, allowed ...string) (string, bool, error) {
	s, ok, err := a.str(key)
	if err != nil || !ok {
		return "", ok, err
	}
	for _, x := range allowed {
		if s == x {
			return s, true, nil
		}
	}
	return "", false, argErrorf("Invalid arguments: %q must be one of %s", key, joinQuoted(allowed))
}

func joinQuoted(xs []string) string {
	var b bytes.Buffer
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", x)
	}
	return b.String()
}
