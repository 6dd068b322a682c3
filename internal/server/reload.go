package server

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/required"
)

// settings are what a reload may change in a running server. Each request
// reads them once, so it finishes on the settings it started with.
type settings struct {
	tokens          []tokenEntry
	inbound         *inbound.Authenticator // issued tokens and auth.oidc; nil = none
	requests        RequestLimits
	hostCallTimeout time.Duration
	code            CodeTool
	access          *access.Policy // nil: no access rules
}

// settingsNow returns the settings in force.
func (s *Server) settingsNow() *settings {
	if set := s.live.Load(); set != nil {
		return set
	}
	// A Server not built by New (unit tests of one method).
	return &settings{requests: s.opts.Requests, hostCallTimeout: s.opts.HostCallTimeout, code: s.opts.Code}
}

// requestLimits are the request limits in force.
func (s *Server) requestLimits() RequestLimits { return s.settingsNow().requests }

// Reloadable is what SIGHUP reloads into a running server (docs/DECISIONS.md:
// auth, execute.*, requests.* except listen). The limits and HostCallTimeout
// are required as in New; a nil Code keeps the current execute_code.
type Reloadable struct {
	Tokens          []Token
	Inbound         *inbound.Authenticator
	Requests        RequestLimits
	HostCallTimeout time.Duration
	Code            CodeTool
	// Access replaces the access rules (nil: none).
	Access *access.Policy
}

// Reload installs new settings atomically: requests already admitted keep
// theirs, the next request authenticates against the new tokens and is
// admitted under the new limits. An invalid set changes nothing.
func (s *Server) Reload(r Reloadable) error {
	tokens, err := hashTokens(r.Tokens)
	if err != nil {
		return err
	}
	if s.opts.Code == nil && r.Code != nil {
		return fmt.Errorf("server: execute_code cannot be added by a reload")
	}
	cur := s.settingsNow()
	requests, err := checkRequests(r.Requests, r.HostCallTimeout <= 0)
	if err != nil {
		return err
	}
	next := &settings{tokens: tokens, inbound: r.Inbound, requests: requests, hostCallTimeout: r.HostCallTimeout, code: r.Code, access: r.Access}
	if next.code == nil {
		next.code = cur.code
	}
	s.admission.resize(next.requests)
	s.live.Store(next)
	return nil
}

func hashTokens(ts []Token) ([]tokenEntry, error) {
	out := make([]tokenEntry, 0, len(ts))
	for _, t := range ts {
		if t.Value == "" {
			return nil, fmt.Errorf("server: token %q is empty", t.Name)
		}
		out = append(out, tokenEntry{name: t.Name, operator: t.Operator, hash: sha256.Sum256([]byte(t.Value))})
	}
	return out, nil
}

// checkRequests refuses zero request limits (and, with extra, the fields
// the caller checked itself), naming each with its configuration key, and
// clamps a negative MaxQueue to 0 (fail fast).
func checkRequests(r RequestLimits, hostCallTimeoutMissing bool, extra ...string) (RequestLimits, error) {
	if err := required.Check("server", "", []required.Field{
		{r.MaxActive <= 0, "Requests.MaxActive (requests.maxActive)"},
		{r.QueueTimeout <= 0, "Requests.QueueTimeout (requests.queueTimeoutMs)"},
		{r.RetryAfter <= 0, "Requests.RetryAfter (requests.retryAfterMs)"},
		{r.MaxBodyBytes <= 0, "Requests.MaxBodyBytes (requests.maxBodyBytes)"},
		{r.BodyTimeout <= 0, "Requests.BodyTimeout (requests.bodyTimeoutMs)"},
		{hostCallTimeoutMissing, "HostCallTimeout (execute.hostCallTimeoutMs)"},
	}, extra...); err != nil {
		return r, err
	}
	if r.MaxQueue < 0 {
		r.MaxQueue = 0
	}
	return r, nil
}
