package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/stdioshim"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// failure is a classified downstream failure before it becomes the
// caller-facing *Error (which needs the address and front door).
type failure struct {
	code              Code
	message           string // complete sentence fragment, already bounded
	retryable         bool
	retryAfterMs      *int64
	host, errno       string // unavailable details
	component         string // unavailable details: "store" when the store failed
	status            int    // HTTP status when one was seen
	missingCredential bool
	oauth             bool   // the OAuth layer refused (its message says why)
	scope             string // a 403 insufficient_scope: the scope the downstream asked for
}

func (f *failure) Error() string { return string(f.code) + ": " + f.message }

// retryableText is the original message heuristic; it applies only to
// connector_call_failed prose a downstream wrote, never to refusals
// connecta frames itself (E7).
var retryableText = regexp.MustCompile(`(?i)timeout|timed out|econnreset|econnrefused|temporar|rate.?limit|429|502|503|504`)

func looksRetryable(text string) bool { return retryableText.MatchString(text) }

// JSON-RPC error codes the classification reads.
const (
	rpcInvalidParams          = jsonrpc.CodeInvalidParams // -32602
	rpcURLElicitationRequired = mcp.CodeURLElicitationRequired
)

func isRPCError(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc)
}

// classify maps a failed catalog load or call onto E2 by what the caller
// should do next, from what the transport saw (status, Retry-After, errno)
// and what the SDK returned. It never invents a cause: what it cannot name
// is connector_call_failed.
func (c *connector) classify(ctx context.Context, err error, ex rawmcp.ExchangeSnapshot) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	if f := oauthFailure(err, ex); f != nil {
		return f
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &failure{code: CodeTimeout, message: "timed out", retryable: true}
		}
		return &failure{code: CodeCancelled, message: "cancelled"}
	}
	if errors.Is(err, errGatewayClosed) {
		return &failure{code: CodeCancelled, message: "connecta is shutting down"}
	}
	if ex.BodyCapped {
		return &failure{code: CodeConnectorCallFailed, message: fmt.Sprintf("the downstream response exceeded %d bytes", c.g.maxBody)}
	}
	if ex.Failed && ex.Transport == nil {
		st := ex.Status
		switch {
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return &failure{code: CodeAuthRequired, status: st, message: httpStatusText(st), scope: jstext.Clamp(ex.Scope, MaxDownstreamTextBytes)}
		case st == http.StatusTooManyRequests:
			// The downstream's own limit: its Retry-After, else the rule's hint.
			ms, ok := parseRetryAfter(ex.RetryAfter, c.g.now())
			if !ok {
				ms = c.gate.retryHint()
			}
			return &failure{code: CodeRateLimited, status: st, retryable: true, message: httpStatusText(st), retryAfterMs: &ms}
		case st == http.StatusServiceUnavailable:
			// A 503 that says when to come back is a limit, not an outage.
			if ms, ok := parseRetryAfter(ex.RetryAfter, c.g.now()); ok {
				return &failure{code: CodeRateLimited, status: st, retryable: true, message: httpStatusText(st), retryAfterMs: &ms}
			}
			return &failure{code: CodeUnavailable, status: st, retryable: true, host: c.origin, message: httpStatusText(st)}
		case st >= 500:
			return &failure{code: CodeUnavailable, status: st, retryable: true, host: c.origin, message: httpStatusText(st)}
		default:
			return &failure{code: CodeConnectorCallFailed, status: st, message: "the downstream answered " + httpStatusText(st)}
		}
	}
	if ex.Transport != nil {
		code := transportCode(ex.Transport)
		msg := "the downstream could not be reached"
		if code != "" {
			msg += " (" + code + ")"
		}
		return &failure{code: CodeUnavailable, retryable: true, host: c.origin, errno: code, message: msg}
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		text := c.boundText(rpc.Message)
		switch rpc.Code {
		case rpcInvalidParams:
			return &failure{code: CodeInvalidArgs, message: text}
		case rpcURLElicitationRequired:
			return &failure{code: CodeInputRequiredUnsupported, message: text}
		default:
			return &failure{code: CodeConnectorCallFailed, message: text, retryable: looksRetryable(text)}
		}
	}
	var start *stdioshim.StartError
	if errors.As(err, &start) {
		return &failure{code: CodeUnavailable, retryable: true, message: c.boundText("the stdio server could not be started: " + start.Reason)}
	}
	var exited *stdioExited
	if errors.As(err, &exited) {
		return &failure{code: CodeUnavailable, retryable: true, message: c.boundText(exited.Error())}
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return &failure{code: CodeUnavailable, retryable: true, message: c.boundText("the stdio server could not be started: " + err.Error())}
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if c.kind == kindStdio {
			if x := c.exitOf(); x != nil {
				return &failure{code: CodeUnavailable, retryable: true, message: c.boundText(x.Error())}
			}
		}
		return &failure{code: CodeUnavailable, retryable: true, host: c.origin, message: "the downstream connection closed"}
	}
	text := c.boundText(err.Error())
	return &failure{code: CodeConnectorCallFailed, message: text, retryable: looksRetryable(text)}
}

// oauthFailure maps the OAuth transport's refusal (recorded as the
// exchange's transport error, or returned through the SDK) onto E2:
// auth_required with its message, or unavailable naming the server (or
// the store) that could not be reached.
func oauthFailure(err error, ex rawmcp.ExchangeSnapshot) *failure {
	var oe *oauth.Error
	if !errors.As(ex.Transport, &oe) && !errors.As(err, &oe) {
		return nil
	}
	if oe.Code == oauth.CodeUnavailable {
		return &failure{code: CodeUnavailable, retryable: true, host: oe.Host, component: oe.Component, message: oe.Message}
	}
	return &failure{code: CodeAuthRequired, oauth: true, message: oe.Message}
}

// boundText clamps downstream or SDK prose and strips the configured URL
// (which may carry a credential in its query) down to its origin.
func (c *connector) boundText(s string) string {
	if c.spec.URL != "" && c.origin != "" {
		s = strings.ReplaceAll(s, c.spec.URL, c.origin)
	}
	return jstext.Clamp(s, MaxDownstreamTextBytes)
}

// authRecovery is E3's recovery class: operator_config when there is a
// credential an operator can set, otherwise unavailable.
func (c *connector) authRecovery() string {
	s := c.spec
	if s.OAuth {
		return "oauth"
	}
	if s.PerCaller && s.Credential != nil {
		return "credential" // the caller sets its own (/me), not an operator
	}
	if s.Credential != nil || s.MissingCredential != "" || len(s.CredentialRefs) > 0 || len(s.Headers) > 0 || (c.kind == kindStdio && len(s.Env) > 0) {
		return "operator_config"
	}
	return "unavailable"
}

// authError is auth_required with E3's envelope. operation is the address
// the caller may retry after recovery (canonical where it resolved).
func (c *connector) authError(f *failure, operation string) *Error {
	id := c.spec.ID
	var msg string
	switch {
	case f.oauth && c.spec.PerCaller:
		msg = fmt.Sprintf("%s. Call authorize_connector({ connector: %q }): the person opens the link it returns in a browser signed in to connecta (its /me page) as themselves.", strings.TrimSuffix(f.message, "."), id)
	case f.oauth:
		msg = fmt.Sprintf("%s. Call authorize_connector({ connector: %q }) and give the link it returns to a person who can sign in.", strings.TrimSuffix(f.message, "."), id)
	case c.spec.OAuth && f.scope != "":
		// Whether the grant already holds the scope is oauth's to know, not
		// the gateway's: the message claims neither, authorize_connector
		// answers for the grant it finds.
		msg = fmt.Sprintf("Connector %q refused the call asking for the OAuth scope %s (403 insufficient_scope). Call authorize_connector({ connector: %q }): when the grant lacks the scope it starts a sign-in asking for the granted scopes and this one; when the grant holds it, it says why signing in again will not help.", id, quote(f.scope), id)
	case c.spec.OAuth:
		msg = fmt.Sprintf("Connector %q refused the OAuth access token (%s) even after a refresh. Call authorize_connector({ connector: %q }).", id, f.message, id)
	case f.missingCredential && c.spec.PerCaller && c.spec.Credential != nil:
		msg = fmt.Sprintf("Connector %q needs the caller's own %s, and this caller has none set: the person sets it on connecta's /me page (or an operator with connecta credential set %s value --actor ACTOR). Call authorize_connector({ connector: %q }).", id, c.spec.Credential.Label, id, id)
	case f.missingCredential && c.spec.Credential != nil:
		msg = fmt.Sprintf("Connector %q has no credential set: an operator must set its %s. Call authorize_connector({ connector: %q }).", id, c.spec.Credential.Label, id)
	case f.missingCredential:
		msg = fmt.Sprintf("Connector %q has no usable credential: the operator must provide %s. Call authorize_connector({ connector: %q }).", id, c.spec.MissingCredential, id)
	default:
		msg = fmt.Sprintf("Connector %q rejected the credential (%s). Call authorize_connector({ connector: %q }).", id, f.message, id)
	}
	op := jstext.Clamp(operation, jstext.MaxEchoBytes)
	return &Error{
		Code:      CodeAuthRequired,
		Message:   msg,
		Retryable: false,
		Details: []Field{
			{Key: "connector", Value: id},
			{Key: "operation", Value: op},
			{Key: "recovery", Value: c.authRecovery()},
			{Key: "nextAction", Value: Object{
				{Key: "tool", Value: "authorize_connector"},
				{Key: "arguments", Value: Object{{Key: "connector", Value: id}}},
				{Key: "operatorHandoff", Value: "Give the instructions it returns to the operator."},
			}},
			{Key: "retry", Value: "Retry " + op + " after the operator completes recovery."},
		},
	}
}

// catalogError turns a failed catalog load into the caller's *Error:
// auth_required keeps E3's envelope, a deadline or cancel is the call's,
// anything else is catalog_lookup_failed (retryable per cause, retryAfterMs
// when known).
func (c *connector) catalogError(ctx context.Context, err error, operation string) *Error {
	f := c.classify(ctx, err, rawmcp.ExchangeSnapshot{})
	switch f.code {
	case CodeAuthRequired:
		return c.authError(f, operation)
	case CodeTimeout:
		return &Error{Code: CodeTimeout, Message: fmt.Sprintf("The catalog of connector %q was not loaded before the deadline.", c.spec.ID), Retryable: true}
	case CodeCancelled:
		return cancelledError()
	}
	return &Error{
		Code:         CodeCatalogLookupFailed,
		Message:      fmt.Sprintf("The catalog of connector %q could not be loaded: %s.", c.spec.ID, strings.TrimSuffix(f.message, ".")),
		Retryable:    f.retryable,
		RetryAfterMs: f.retryAfterMs,
	}
}

// callError turns a failed call into the caller's *Error.
func (c *connector) callError(f *failure, address string, timeout time.Duration) *Error {
	id := c.spec.ID
	switch f.code {
	case CodeAuthRequired:
		return c.authError(f, address)
	case CodeTimeout:
		return timeoutError(timeout)
	case CodeCancelled:
		return cancelledError()
	case CodeRateLimited:
		return &Error{Code: CodeRateLimited, Message: fmt.Sprintf("Connector %q is rate limited (%s).", id, f.message), Retryable: true, RetryAfterMs: f.retryAfterMs}
	case CodeUnavailable:
		e := &Error{Code: CodeUnavailable, Message: fmt.Sprintf("Connector %q is unavailable: %s.", id, f.message), Retryable: true}
		// E1's details.host / details.code, nested: flattened beside the
		// error's own `code` the errno would collide with (and, parsed by
		// JS, overwrite) the branch field.
		var transport Object
		if f.host != "" {
			transport = append(transport, Field{Key: "host", Value: f.host})
		}
		if f.errno != "" {
			transport = append(transport, Field{Key: "code", Value: f.errno})
		}
		if f.component != "" {
			transport = append(transport, Field{Key: "component", Value: f.component})
		}
		if len(transport) > 0 {
			e.Details = append(e.Details, Field{Key: "details", Value: transport})
		}
		return e
	case CodeInvalidArgs:
		return &Error{Code: CodeInvalidArgs, Message: f.message, Retryable: false}
	case CodeInputRequiredUnsupported:
		return &Error{Code: CodeInputRequiredUnsupported, Message: fmt.Sprintf("Tool %q asked for mid-call input, which connecta does not support: %s", address, f.message), Retryable: false}
	case CodeCatalogLookupFailed:
		return &Error{Code: CodeCatalogLookupFailed, Message: f.message, Retryable: f.retryable, RetryAfterMs: f.retryAfterMs}
	}
	return &Error{Code: CodeConnectorCallFailed, Message: fmt.Sprintf("Connector %q call failed: %s", id, f.message), Retryable: f.retryable}
}

func timeoutError(timeout time.Duration) *Error {
	return &Error{Code: CodeTimeout, Message: fmt.Sprintf("Tool call timed out after %dms", timeout.Milliseconds()), Retryable: true}
}

func cancelledError() *Error {
	return &Error{Code: CodeCancelled, Message: "Tool call was cancelled by the caller.", Retryable: false}
}

// destructiveRefusal is E4: never dispatched, retryable pinned false (E7),
// nextAction to call_destructive_tool with the canonical address and the
// args echoed whole only when their JSON fits MaxArgsEchoBytes.
func destructiveRefusal(t *Tool, args []byte, echo bool) *Error {
	address := t.Address()
	arguments := Object{{Key: "address", Value: address}}
	purpose := "Ask the MCP host to approve this consequential call. Add a short reason for the human reviewer."
	if echo && len(args) <= MaxArgsEchoBytes {
		arguments = append(arguments, Field{Key: "args", Value: rawOrEmpty(args)})
	} else {
		purpose += " The arguments were too large to echo: re-send them in full."
	}
	return &Error{
		Code:      CodeDestructiveNeedsApproval,
		Message:   fmt.Sprintf("Tool %q is not explicitly read-only. Invoke it through call_destructive_tool so the MCP host can request explicit approval.", address),
		Retryable: false,
		Details: []Field{{Key: "nextAction", Value: Object{
			{Key: "tool", Value: "call_destructive_tool"},
			{Key: "arguments", Value: arguments},
			{Key: "purpose", Value: purpose},
		}}},
	}
}

// invalidArgs is E8: value-free findings (at most MaxValidationFindings,
// each bounded, `truncated` when more existed), scoped search recovery keyed
// to the caller's surface, and a retry sentence.
func invalidArgs(front FrontDoor, t *Tool, findings []validate.Finding, total int) *Error {
	truncated := len(findings) > MaxValidationFindings || total > len(findings)
	if truncated {
		findings = findings[:MaxValidationFindings]
	}
	issues := make([]Object, 0, len(findings))
	for _, f := range findings {
		// validate bounds each field (in UTF-16 units) and says when it cut.
		truncated = truncated || f.Clipped
		issues = append(issues, Object{{Key: "path", Value: f.Path}, {Key: "code", Value: f.Code}, {Key: "expected", Value: f.Expected}})
	}
	validation := Object{{Key: "issues", Value: issues}}
	if truncated {
		validation = append(validation, Field{Key: "truncated", Value: true})
	}
	address := t.Address()
	summary := "the arguments do not match the tool's input schema"
	if len(findings) > 0 {
		f := findings[0]
		summary = fmt.Sprintf("%s at %s (%s)", summary, pathOrRoot(f.Path), f.Code)
	}
	return &Error{
		Code:      CodeInvalidArgs,
		Message:   fmt.Sprintf("Invalid arguments for %s: %s.", address, summary),
		Retryable: false,
		Details: []Field{
			{Key: "validation", Value: validation},
			{Key: "connector", Value: t.ConnectorID},
			{Key: "operation", Value: address},
			{Key: "nextAction", Value: SearchNextAction(front, jstext.Clamp(t.Name, jstext.MaxEchoBytes), t.ConnectorID, "Inspect the current input shape if the validation findings are not sufficient.")},
			{Key: "retry", Value: "Correct the listed arguments and retry " + address + "."},
		},
	}
}

func pathOrRoot(p string) string {
	if p == "" || p == "/" {
		return "/"
	}
	return jstext.Clamp(p, 64)
}
