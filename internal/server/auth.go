package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/inbound"
)

// retryAfterAuth is the Retry-After of a 503 refusal (provider or store
// down): long enough not to hammer, short enough for a blip.
const retryAfterAuth = 5 * time.Second

type tokenEntry struct {
	name     string
	operator bool
	hash     [sha256.Size]byte
}

// authenticated admits a request or refuses it. Without any inbound auth
// (no static tokens, no issued tokens, no auth.oidc) the server serves
// loopback clients only. Otherwise every request needs one bearer token:
// the go-sdk's auth.RequireBearerToken parses it and calls verifyBearer,
// which checks the static tokens first (constant time), then issued tokens
// and OIDC access tokens (package inbound). The caller becomes the actor.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		set := s.settingsNow()
		info := infoFrom(r.Context())
		if len(set.tokens) == 0 && set.inbound == nil {
			if !isLoopbackRemote(r.RemoteAddr) {
				s.metrics.authRejections.WithLabelValues(inbound.ReasonNotLoopback).Inc()
				writeJSONError(w, http.StatusForbidden, "forbidden", "This server accepts loopback clients only.")
				return
			}
			if info != nil {
				info.setCaller(set, inbound.Caller{Who: actor.LocalUser, Operator: true})
			}
			next.ServeHTTP(w, r)
			return
		}
		if rej := checkAuthorizationShape(r.Header.Values("Authorization")); rej != nil {
			s.refuse(w, set, rej)
			return
		}
		var rej *inbound.Rejection
		verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			caller, info2, bad := s.verifyBearer(ctx, set, token)
			if bad != nil {
				rej = bad
				return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, bad.Message)
			}
			if info != nil {
				info.setCaller(set, caller)
			}
			return info2, nil
		}
		// The SDK writes its own plain-text refusal; ours (JSON, the
		// challenge, 403/503 where they apply) replaces it.
		protect := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: inbound.DefaultClockSkew})
		admitted := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) })
		protect(admitted).ServeHTTP(&refusalWriter{ResponseWriter: w, refuse: func(code int) {
			if rej == nil { // the SDK refused on its own (e.g. token expired by its check)
				rej = &inbound.Rejection{Status: code, Reason: inbound.ReasonInvalidToken, Message: "A valid bearer token is required."}
			}
			s.refuse(w, set, rej)
		}}, r)
	})
}

// setCaller makes the admitted caller the request's actor and fixes its
// view under the access rules in force (set).
func (info *requestInfo) setCaller(set *settings, c inbound.Caller) {
	info.who, info.actor, info.operator = c.Who, c.Who.String(), c.Operator
	info.accessOn = set.access.Configured()
	info.view = set.access.View(access.Caller{Who: c.Who, Claims: c.Claims, Connectors: c.Connectors})
}

// checkAuthorizationShape refuses what is not one "Bearer <token>": two
// Authorization headers or two schemes in one are a malformed request
// (400); no header or another scheme asks for credentials (401).
func checkAuthorizationShape(values []string) *inbound.Rejection {
	switch {
	case len(values) == 0 || strings.TrimSpace(values[0]) == "":
		return &inbound.Rejection{Status: http.StatusUnauthorized, Reason: inbound.ReasonMissing, Message: "A bearer token is required (Authorization: Bearer <token>)."}
	case len(values) > 1:
		return &inbound.Rejection{Status: http.StatusBadRequest, Reason: inbound.ReasonMalformed, Message: "Send one Authorization header with one bearer token."}
	}
	fields := strings.Fields(values[0])
	if !strings.EqualFold(fields[0], "Bearer") {
		return &inbound.Rejection{Status: http.StatusUnauthorized, Reason: inbound.ReasonMissing, Message: "Only the Bearer scheme is accepted (Authorization: Bearer <token>)."}
	}
	if len(fields) != 2 || strings.Contains(values[0], ",") {
		return &inbound.Rejection{Status: http.StatusBadRequest, Reason: inbound.ReasonMalformed, Message: "The Authorization header must be exactly one scheme and one token: Bearer <token>."}
	}
	return nil
}

// verifyBearer checks one token: static tokens first, then package inbound.
func (s *Server) verifyBearer(ctx context.Context, set *settings, token string) (inbound.Caller, *auth.TokenInfo, *inbound.Rejection) {
	// Hashing first makes the comparison independent of the token lengths;
	// every configured token is compared so timing reveals no index.
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range set.tokens {
		if subtle.ConstantTimeCompare(sum[:], set.tokens[i].hash[:]) == 1 {
			match = i
		}
	}
	if match >= 0 {
		t := set.tokens[match]
		return inbound.Caller{Actor: t.name, Who: actor.StaticToken(t.name), Operator: t.operator}, &auth.TokenInfo{UserID: t.name}, nil
	}
	if set.inbound == nil {
		return inbound.Caller{}, nil, &inbound.Rejection{Status: http.StatusUnauthorized, Reason: inbound.ReasonUnknownToken, Message: "The bearer token is not valid for this server."}
	}
	caller, rej := set.inbound.Authenticate(ctx, token)
	if rej != nil {
		return inbound.Caller{}, nil, rej
	}
	return caller, &auth.TokenInfo{UserID: caller.Actor, Expiration: inbound.Expiry(caller.Claims), Extra: caller.Claims}, nil
}

// refuse writes a refusal: JSON {error: {code, message}}, the Bearer
// challenge on 401 (naming the protected resource metadata with auth.oidc),
// Retry-After on 503; and counts it by reason.
func (s *Server) refuse(w http.ResponseWriter, set *settings, rej *inbound.Rejection) {
	s.metrics.authRejections.WithLabelValues(rej.Reason).Inc()
	h := w.Header()
	h.Del("WWW-Authenticate")
	var params []string
	switch rej.Status {
	case http.StatusUnauthorized:
		if rej.Reason != inbound.ReasonMissing {
			params = append(params, `error="invalid_token"`, fmt.Sprintf("error_description=%q", rej.Message))
		}
	case http.StatusBadRequest:
		params = append(params, `error="invalid_request"`, fmt.Sprintf("error_description=%q", rej.Message))
	case http.StatusForbidden:
		params = append(params, `error="insufficient_scope"`, fmt.Sprintf("error_description=%q", rej.Message))
	}
	if rej.Status != http.StatusServiceUnavailable {
		if v := set.inbound.OIDC(); v != nil {
			params = append(params, fmt.Sprintf("resource_metadata=%q", v.ResourceMetadataURL()))
			if sc := v.Scopes(); len(sc) > 0 && rej.Status == http.StatusUnauthorized {
				// What to ask the provider for (MCP 2025-11-25 authorization:
				// the client uses the challenge's scope first).
				params = append(params, fmt.Sprintf("scope=%q", strings.Join(sc, " ")))
			}
		} else {
			params = append([]string{`realm="connecta"`}, params...)
		}
		h.Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	}
	code := map[int]string{http.StatusBadRequest: "invalid_request", http.StatusUnauthorized: "unauthorized",
		http.StatusForbidden: "forbidden", http.StatusServiceUnavailable: "unavailable"}[rej.Status]
	if code == "" {
		code = "unauthorized"
	}
	if rej.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(int(retryAfterAuth/time.Second)))
	}
	writeJSONError(w, rej.Status, code, rej.Message)
}

// refusalWriter stands between auth.RequireBearerToken and the client only
// while it refuses: an error status is handed to refuse, and the SDK's own
// text body is dropped. An admitted request is served on the original
// writer, never through this one.
type refusalWriter struct {
	http.ResponseWriter
	refuse  func(code int)
	refused bool
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.refused {
		return
	}
	w.refused = true
	w.refuse(code)
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	if !w.refused {
		w.WriteHeader(http.StatusUnauthorized)
	}
	return len(b), nil
}

// serveResourceMetadata serves the protected resource metadata while
// auth.oidc is configured (CORS open: it is public discovery data).
func (s *Server) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	v := s.settingsNow().inbound.OIDC()
	if v == nil {
		writeJSONError(w, http.StatusNotFound, "not_found", "This server is not an OAuth-protected resource (auth.oidc is not configured).")
		return
	}
	auth.ProtectedResourceMetadataHandler(v.ResourceMetadata()).ServeHTTP(w, r)
}
