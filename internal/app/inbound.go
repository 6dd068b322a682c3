package app

import (
	"fmt"
	"log/slog"
	"reflect"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/store"
)

// NewAccessTokens is the issued-token manager of cfg (nil without
// accessTokens): the CLI and the console manage tokens through it.
func NewAccessTokens(cfg *config.Config, st store.Store, log *slog.Logger) (*accesstoken.Manager, error) {
	if !cfg.AccessTokens.Enabled {
		return nil, nil
	}
	return accesstoken.New(accesstoken.Options{Store: st, MaxActive: cfg.AccessTokens.MaxActive, Logger: log})
}

// NewVerifier is the auth.oidc access-token verifier (nil without
// auth.oidc). It contacts the provider only when a token arrives.
func NewVerifier(o *config.OIDC, log *slog.Logger) (*inbound.Verifier, error) {
	if o == nil {
		return nil, nil
	}
	v, err := inbound.NewVerifier(inbound.VerifierOptions{Issuer: o.Issuer, Audience: o.Audience,
		Callers: o.Callers, Operators: o.Operators, Scopes: o.Scopes, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("auth.oidc: %w", err)
	}
	return v, nil
}

// inboundFor builds the authenticator of next, keeping the running
// verifier (and its cached keys) when auth.oidc did not change.
func (a *App) inboundFor(next *config.Config, log *slog.Logger) (*inbound.Authenticator, error) {
	var v *inbound.Verifier
	if cur := a.inbound.OIDC(); cur != nil && reflect.DeepEqual(a.cfg.Auth.OIDC, next.Auth.OIDC) {
		v = cur
	} else {
		var err error
		if v, err = NewVerifier(next.Auth.OIDC, log.With("component", "oidc")); err != nil {
			return nil, err
		}
	}
	return inbound.New(inbound.Options{Tokens: a.tokens, OIDC: v}), nil
}

// AccessTokens is the issued-token manager (nil without accessTokens).
func (a *App) AccessTokens() *accesstoken.Manager { return a.tokens }

// Inbound is the running authenticator of issued tokens and auth.oidc
// (nil without either); its OIDC() is the verifier, whose rules the
// console applies to its users with inbound.MatchRule.
func (a *App) Inbound() *inbound.Authenticator { return a.inbound }
