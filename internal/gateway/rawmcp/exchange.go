package rawmcp

import (
	"context"
	"sync"
)

// An Exchange is what one call (or one catalog refresh) learned about its
// HTTP requests; the gateway's round tripper records into the one the
// request's context carries (WithExchange). The first failure wins: it is
// the one the SDK reacted to. The zero value is ready to use.
type Exchange struct {
	mu sync.Mutex
	s  ExchangeSnapshot
}

// ExchangeSnapshot is a copy of an Exchange, safe to read without its lock.
type ExchangeSnapshot struct {
	Failed     bool
	Status     int    // the first status ≥ 300
	RetryAfter string // its Retry-After header
	Transport  error  // error from the base RoundTripper, nil when a response came
	BodyCapped bool   // a response body went past the size cap
	// Scope is what the first failure's 403 insufficient_scope challenge
	// asked for (space-separated), "" for any other failure.
	Scope string
}

type exchangeKey struct{}

// WithExchange returns ctx carrying ex.
func WithExchange(ctx context.Context, ex *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// ExchangeFrom returns the Exchange ctx carries, or nil.
func ExchangeFrom(ctx context.Context) *Exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return ex
}

// RecordResponse records a response's status and Retry-After when it is the
// first failure (status ≥ 300).
func (ex *Exchange) RecordResponse(status int, retryAfter string) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.s.Failed || status < 300 {
		return
	}
	ex.s.Failed, ex.s.Status, ex.s.RetryAfter = true, status, retryAfter
}

// RecordScope records the step-up scope of the recorded failure's challenge.
func (ex *Exchange) RecordScope(scope string) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.s.Failed && ex.s.Status == 403 && ex.s.Scope == "" {
		ex.s.Scope = scope
	}
}

// RecordTransport records a round-trip error when it is the first failure.
func (ex *Exchange) RecordTransport(err error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.s.Failed {
		return
	}
	ex.s.Failed, ex.s.Transport = true, err
}

// RecordCapped records that a response body went past the size cap.
func (ex *Exchange) RecordCapped() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.s.BodyCapped = true
}

// Reset forgets what was recorded (before the one reconnect after a 404
// session expiry, whose failure is not the call's).
func (ex *Exchange) Reset() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.s = ExchangeSnapshot{}
}

// Snapshot returns a copy of what was recorded; a nil Exchange has nothing.
func (ex *Exchange) Snapshot() ExchangeSnapshot {
	if ex == nil {
		return ExchangeSnapshot{}
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.s
}
