// Package inbound decides who may reach connecta beyond its static bearer
// tokens: operator-issued access tokens (package accesstoken) and JWT access
// tokens (RFC 9068) from the OpenID Connect provider of `auth.oidc`, for
// which connecta is an OAuth-protected resource (RFC 9728).
//
// Every refusal is a *Rejection: an HTTP status, a reason (the label of
// connecta_auth_rejections_total) and a secret-free message. Authenticate
// and Verify return the concrete type, not error, because the server writes
// those fields into the response and the metric. The server checks static
// tokens first and hands everything else to an Authenticator.
package inbound

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/store"
)

// Caller is an admitted caller.
type Caller struct {
	// Actor is the activity actor: "token:<id>" for an issued token,
	// "oidc:<sub>" for an OIDC caller (a static token's name elsewhere).
	Actor string
	// Who is the typed actor (Actor is Who.String()).
	Who actor.ID
	// Connectors narrows an issued token (nil: not narrowed).
	Connectors []string
	// Operator: an OIDC caller whose claims match auth.oidc.operators.
	// Issued tokens are never operators.
	Operator bool
	// Claims of an OIDC access token (nil for an issued token).
	Claims map[string]any
}

// Rejection reasons: the values of connecta_auth_rejections_total{reason}.
const (
	ReasonMissing             = "missing"              // no bearer credentials
	ReasonMalformed           = "malformed"            // not one "Bearer <token>"
	ReasonUnknownToken        = "unknown_token"        // matches no static or issued token
	ReasonRevokedToken        = "revoked_token"        // an issued token that was revoked
	ReasonOpaqueToken         = "opaque_token"         // not a JWT: connecta verifies JWTs only
	ReasonBadAlgorithm        = "bad_algorithm"        // alg none, HMAC or unsupported
	ReasonNotAccessToken      = "not_access_token"     // a JWT whose typ is not at+jwt (an ID token)
	ReasonWrongIssuer         = "wrong_issuer"         // iss is not auth.oidc.issuer
	ReasonWrongAudience       = "wrong_audience"       // aud does not name {publicUrl}/mcp
	ReasonExpired             = "expired"              // exp passed (beyond the clock skew)
	ReasonNotYetValid         = "not_yet_valid"        // nbf or iat in the future (beyond the skew)
	ReasonUnknownKey          = "unknown_key"          // kid not in the provider's JWKS, even after a refresh
	ReasonBadSignature        = "bad_signature"        // signature does not verify
	ReasonInvalidToken        = "invalid_token"        // claims unreadable, no sub
	ReasonCallerNotAllowed    = "caller_not_allowed"   // valid token, but auth.oidc.callers refuses it
	ReasonProviderUnavailable = "provider_unavailable" // keys cannot be fetched and none are cached
	ReasonStoreUnavailable    = "store_unavailable"    // issued tokens cannot be looked up
	ReasonNotLoopback         = "not_loopback"         // a loopback-only server refused a remote client
)

// Reasons lists every reason, so the metric exists at zero for each.
func Reasons() []string {
	return []string{ReasonMissing, ReasonMalformed, ReasonUnknownToken, ReasonRevokedToken, ReasonOpaqueToken,
		ReasonBadAlgorithm, ReasonNotAccessToken, ReasonWrongIssuer, ReasonWrongAudience, ReasonExpired,
		ReasonNotYetValid, ReasonUnknownKey, ReasonBadSignature, ReasonInvalidToken, ReasonCallerNotAllowed,
		ReasonProviderUnavailable, ReasonStoreUnavailable, ReasonNotLoopback}
}

// Rejection is a refused request. Message never contains the token.
type Rejection struct {
	Status  int    // 400, 401, 403 or 503
	Reason  string // one of the Reason constants
	Message string
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Message }

func reject(status int, reason, message string) *Rejection {
	return &Rejection{Status: status, Reason: reason, Message: message}
}

func unauthorized(reason, message string) *Rejection {
	return reject(http.StatusUnauthorized, reason, message)
}

// Options configure an Authenticator; either part may be nil.
type Options struct {
	Tokens *accesstoken.Manager // accessTokens
	OIDC   *Verifier            // auth.oidc
}

// Authenticator admits issued tokens and OIDC access tokens.
type Authenticator struct {
	tokens *accesstoken.Manager
	oidc   *Verifier
}

// New builds an Authenticator; nil when both parts are nil.
func New(o Options) *Authenticator {
	if o.Tokens == nil && o.OIDC == nil {
		return nil
	}
	return &Authenticator{tokens: o.Tokens, oidc: o.OIDC}
}

// Authenticate checks one bearer token (the static tokens were checked
// already): an issued token by its digest, anything else as a JWT access
// token of the configured provider.
func (a *Authenticator) Authenticate(ctx context.Context, bearer string) (Caller, *Rejection) {
	if strings.HasPrefix(bearer, accesstoken.SecretPrefix) || a.oidc == nil {
		if a.tokens == nil {
			return Caller{}, unauthorized(ReasonUnknownToken, "The bearer token is not valid for this server.")
		}
		t, err := a.tokens.Authenticate(ctx, bearer)
		switch {
		case err == nil:
			return Caller{Actor: t.Actor(), Who: t.Who(), Connectors: t.Connectors}, nil
		case errors.Is(err, accesstoken.ErrRevoked):
			return Caller{}, unauthorized(ReasonRevokedToken, "The access token was revoked; ask an operator for a new one.")
		case errors.Is(err, accesstoken.ErrUnknown):
			return Caller{}, unauthorized(ReasonUnknownToken, "The bearer token is not valid for this server.")
		case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
			return Caller{}, reject(http.StatusServiceUnavailable, ReasonStoreUnavailable, "Access tokens cannot be checked: the state store is unavailable; retry shortly.")
		default:
			return Caller{}, reject(http.StatusServiceUnavailable, ReasonStoreUnavailable, "Access tokens cannot be checked right now; retry shortly.")
		}
	}
	return a.oidc.Verify(ctx, bearer)
}

// Tokens is the issued-token manager (nil without accessTokens).
func (a *Authenticator) Tokens() *accesstoken.Manager {
	if a == nil {
		return nil
	}
	return a.tokens
}

// OIDC is the access-token verifier (nil without auth.oidc).
func (a *Authenticator) OIDC() *Verifier {
	if a == nil {
		return nil
	}
	return a.oidc
}

// MetadataPath and MetadataSuffixPath serve the protected resource metadata
// (RFC 9728: the well-known path, and the form with the resource's path
// appended, which the 401 challenge names).
const (
	MetadataPath       = "/.well-known/oauth-protected-resource"
	MetadataSuffixPath = MetadataPath + "/mcp"
)

// ResourceMetadata is the protected resource metadata document: resource =
// audience = {publicUrl}/mcp, the provider as the one authorization server.
func (v *Verifier) ResourceMetadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               v.audience,
		AuthorizationServers:   []string{v.issuer},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "connecta",
		ScopesSupported:        v.scopes, // omitted when empty
	}
}

// Scopes are auth.oidc.scopes, for the 401 challenge's scope= (nil: none).
func (v *Verifier) Scopes() []string { return v.scopes }

// ResourceMetadataURL is the document's URL named in the 401 challenge.
func (v *Verifier) ResourceMetadataURL() string {
	return strings.TrimSuffix(v.audience, "/mcp") + MetadataSuffixPath
}
