package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/console"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/vault"
)

// vaultCredentials reads connectors' `credential` values from the vault, on
// every request (a replaced value applies on the next one).
type vaultCredentials struct{ v *vault.Vault }

func (s vaultCredentials) Credential(ctx context.Context, id string, who actor.ID) (string, error) {
	b, err := s.v.Open(ctx, vault.KindCredential, id, vault.CallerName(console.CredentialName, who))
	if errors.Is(err, vault.ErrNotFound) || errors.Is(err, vault.ErrNotConfigured) {
		return "", gateway.ErrNoCredential
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// OperatorURL is the console's Credentials page, authorize_connector's
// operatorUrl for connectors with a `credential` ("" without a console:
// no publicUrl or no auth.oidc client).
func OperatorURL(cfg *config.Config) string {
	if cfg.PublicURL == "" || cfg.Auth.OIDC == nil || cfg.Auth.OIDC.ClientID == "" {
		return ""
	}
	return strings.TrimRight(cfg.PublicURL, "/") + console.Prefix + "/credentials"
}

// newConsole builds /operator over the application's parts.
func (a *App) newConsole(tokens *accesstoken.Manager, log *slog.Logger) (*console.Console, error) {
	return console.New(console.Options{
		Config:   func() *config.Config { return a.live.Load() },
		Store:    a.state.store,
		Gateway:  a.Gateway,
		Activity: a.Activity,
		Tokens:   tokens,
		Vault:    a.state.vault,
		OAuth:    a.oauth,
		Verifier: a.verifier.Load,
		Logger:   log.With("component", "console"),
	})
}
