package oauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Code is the call-facing failure class (the gateway's E2 codes).
type Code string

const (
	// CodeAuthRequired: there is no usable grant, or the authorization
	// server or the downstream refused; a human must (re)authorize.
	CodeAuthRequired Code = "auth_required"
	// CodeUnavailable: a server (the authorization server, or the store)
	// could not be reached; retrying later may work.
	CodeUnavailable Code = "unavailable"
)

// Error is every failure this package returns to a caller: a code the
// gateway maps onto E2, an honest message (never a token, code or
// verifier), and what was unreachable.
//
// Authorize and Revoke return it as *Error because their callers read its
// fields (the server maps Code, Host and Component onto E2; the console and
// the CLI show Message). Everything else returns error, so that no typed
// nil can pass for a failure; the transport's failures are found with
// errors.As. The constructors below (authRequired, storeFailed, reachFailed,
// refusedLocal, exchangeFailed, noGrant) return *Error and never nil.
type Error struct {
	Code      Code
	Message   string
	Host      string // origin of the unreachable server (CodeUnavailable)
	Component string // "store" when the store failed
	// NoGrant is set when the failure is simply that no grant exists.
	NoGrant bool
	// PersonNeeded: a per-caller connector was called by a token (or no
	// actor): only a signed-in person can connect an account of their own.
	PersonNeeded bool
	err          error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.err }

// asError is err as the *Error the exported calls return: nil for nil, the
// *Error it holds, or (a failure none of this package's paths makes) err
// as unavailable.
func asError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeUnavailable, Message: err.Error(), err: err}
}

func authRequired(format string, args ...any) *Error {
	return &Error{Code: CodeAuthRequired, Message: fmt.Sprintf(format, args...)}
}

func storeFailed(op string, err error) *Error {
	if errors.Is(err, ErrVaultNotConfigured) {
		return &Error{Code: CodeUnavailable, Component: "vault", Message: ErrVaultNotConfigured.Error(), err: err}
	}
	return &Error{Code: CodeUnavailable, Component: "store", Message: "the store could not " + op, err: err}
}

// reachFailed classifies an HTTP failure toward rawURL: a transport
// failure (refused, reset, timeout, DNS) is unavailable; anything else is
// what the server said, which a human must look at: auth_required.
func reachFailed(what, rawURL string, err error) *Error {
	var le *localAddrError
	if errors.As(err, &le) {
		return refusedLocal(what, rawURL, err)
	}
	var nerr net.Error
	var uerr *url.Error
	var operr *net.OpError
	if errors.As(err, &operr) || errors.As(err, &nerr) || (errors.As(err, &uerr) && uerr.Err != nil && isTransport(uerr.Err)) {
		return &Error{Code: CodeUnavailable, Host: origin(rawURL), Message: what + " could not be reached (" + origin(rawURL) + ")", err: err}
	}
	return &Error{Code: CodeAuthRequired, Message: what + ": " + clip(err.Error()), err: err}
}

func isTransport(err error) bool {
	var nerr net.Error
	var operr *net.OpError
	var dnserr *net.DNSError
	return errors.As(err, &nerr) || errors.As(err, &operr) || errors.As(err, &dnserr)
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// clip bounds server- or SDK-authored prose in messages.
func clip(s string) string { return jstext.Clamp(s, 300) }
