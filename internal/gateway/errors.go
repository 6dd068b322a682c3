package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Code is a stable error code (E2). Callers branch on it, never on prose.
type Code string

// Call and discovery codes (E2), and execution codes (E5).
const (
	CodeUnknownAddress           Code = "unknown_address"
	CodeUnknownTool              Code = "unknown_tool"
	CodeDestructiveNeedsApproval Code = "destructive_tool_requires_approval"
	CodeAuthRequired             Code = "auth_required"
	CodeInvalidArgs              Code = "invalid_args"
	CodeNotFound                 Code = "not_found"
	CodeInputRequiredUnsupported Code = "input_required_unsupported"
	CodeRateLimited              Code = "rate_limited"
	CodeUnavailable              Code = "unavailable"
	CodeTimeout                  Code = "timeout"
	CodeCancelled                Code = "cancelled"
	CodeConnectorCallFailed      Code = "connector_call_failed"
	CodeBudgetExceeded           Code = "budget_exceeded"
	CodeCatalogLookupFailed      Code = "catalog_lookup_failed"
	CodeResultProcessingFailed   Code = "result_processing_failed"
	CodeResultTooLarge           Code = "result_too_large"
	CodeExecutorOverloaded       Code = "executor_overloaded"
	CodeExecutorCancelled        Code = "executor_cancelled"
	CodeExecutorClosed           Code = "executor_closed"
	CodeExecutorFailed           Code = "executor_failed"
)

// FrontDoor says which surface a request came through; recovery hints differ
// (a program is told function "connecta.search", the top level tool
// "search_tools") and so does the page shape of discovery.
type FrontDoor int

const (
	FrontDoorTopLevel FrontDoor = iota // the MCP tools: search_tools, call_tool, …
	FrontDoorProgram                   // connecta.* inside execute_code
)

// Error is a typed failure as callers see it: the E1 fields plus the
// classification details. It marshals to the `error` object of a result:
// {code, message, retryable, retryAfterMs?, ...Details}.
type Error struct {
	Code         Code
	Message      string
	Retryable    bool
	RetryAfterMs *int64
	// Details are further fields in a fixed order (connector, operation,
	// recovery, nextAction, retry, host, findings, …). Values must marshal
	// deterministically (no maps with unordered keys where order matters).
	Details []Field
}

// Field is one ordered key of an Error's details; Object is an ordered JSON
// object usable inside Details. Both are jstext's, the one JSON writer for
// what the model reads.
type (
	Field  = jstext.Field
	Object = jstext.Object
)

func (e *Error) Error() string { return e.Message }

// Detail returns the value of a details field, or nil.
func (e *Error) Detail(key string) any {
	for _, f := range e.Details {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// MarshalJSON writes {code, message, retryable, retryAfterMs?, details…} in
// that order, without HTML escaping.
func (e *Error) MarshalJSON() ([]byte, error) {
	fields := make([]Field, 0, 4+len(e.Details))
	fields = append(fields, Field{Key: "code", Value: e.Code}, Field{Key: "message", Value: e.Message}, Field{Key: "retryable", Value: e.Retryable})
	if e.RetryAfterMs != nil {
		fields = append(fields, Field{Key: "retryAfterMs", Value: *e.RetryAfterMs})
	}
	fields = append(fields, e.Details...)
	return jstext.Object(fields).MarshalJSON()
}

// Object is the `error` object both front doors show the model: a
// program's typed failure and every top-level tool's failure envelope go
// through it. Details that cannot marshal are dropped rather than failing
// the answer; code, message and retryable always stay.
func (e *Error) Object() json.RawMessage {
	b, err := e.MarshalJSON()
	if err != nil {
		b, _ = (&Error{Code: e.Code, Message: e.Message, Retryable: e.Retryable, RetryAfterMs: e.RetryAfterMs}).MarshalJSON()
	}
	return b
}

// Errorf builds an Error with no details.
func Errorf(code Code, retryable bool, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: retryable}
}
