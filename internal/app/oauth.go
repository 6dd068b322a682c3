package app

import (
	"net/http"

	"context"
	"database/sql"
	"fmt"
	"github.com/connecta-dev/connecta/internal/actor"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/console"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/oauth/oauthstore"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/internal/store"

	"go.opentelemetry.io/otel/trace"
)

// NewOAuthStore keeps OAuth state in the configured store, sealed by the
// vault; on PostgreSQL a second handle on the same database holds the
// advisory locks that make one replica at a time refresh a grant (db, to
// close with the app; nil otherwise).
func NewOAuthStore(cfg *config.Config, st *State) (oauth.Store, *sql.DB, error) {
	var locks oauth.Locker
	var db *sql.DB
	if st.store.Kind() == "postgres" {
		var err error
		db, err = sql.Open("pgx", cfg.Store.URL.Reveal())
		if err != nil {
			return nil, nil, fmt.Errorf("oauth locks: %w", err)
		}
		db.SetMaxIdleConns(1)
		locks = oauthstore.NewPostgresLocks(db)
	}
	return oauthstore.NewVaultStore(st.vault, st.store, locks), db, nil
}

// OAuthConnectors are the configuration's connectors with `oauth`.
func OAuthConnectors(cfg *config.Config) []oauth.Connector {
	var conns []oauth.Connector
	for _, c := range cfg.Connectors {
		if c.OAuth == nil {
			continue
		}
		conns = append(conns, oauth.Connector{
			ID: c.ID, Title: c.Title, URL: c.URL,
			ClientID: c.OAuth.ClientID, ClientSecret: c.OAuth.ClientSecret.Reveal(), Scopes: c.OAuth.Scopes,
			PerCaller: c.OAuth.Grants == config.PerCaller,
		})
	}
	return conns
}

// NewOAuth builds the downstream OAuth manager when publicUrl is set (a
// reload may add OAuth connectors later; config refuses oauth without
// publicUrl); nil otherwise. A changed grant calls onGrantChange (which
// invalidates that connector's catalog; nil: nothing); every grant change
// is an audit record in the store (st may be nil) and in the log. reg may
// be nil.
func NewOAuth(cfg *config.Config, reg prometheus.Registerer, st *State, onGrantChange func(connector string), log *slog.Logger, flows oauth.Store, tracer trace.TracerProvider) (*oauth.Manager, error) {
	conns := OAuthConnectors(cfg)
	if cfg.PublicURL == "" {
		return nil, nil
	}
	if len(conns) > 0 && len(cfg.Vault.Keys) == 0 {
		log.Warn("connectors use oauth but vault.keys is not configured: authorize_connector refuses to start a flow until it is", "connectors", len(conns))
	}
	m, err := oauth.New(oauth.Options{
		PublicURL:  cfg.PublicURL,
		Stylesheet: console.StylesheetPath,
		Store:      flows,
		Logger:     log.With("component", "oauth"),
		Metrics:    reg,
		Tracer:     tracer,
		SessionActor: func(r *http.Request) (actor.ID, bool) {
			if st == nil {
				return actor.ID{}, false
			}
			return console.SessionActor(st.store, r)
		},
		OnGrantChange: func(id string) {
			if onGrantChange != nil {
				onGrantChange(id)
			}
		},
		Audit: func(ctx context.Context, rec oauth.AuditRecord) {
			if st == nil {
				return
			}
			detail := strings.TrimSpace(strings.Join([]string{rec.Outcome, rec.Message}, " "))
			if rec.Owner != "" { // a per-caller grant: whose it is
				detail = strings.TrimSpace("owner " + rec.Owner + " " + detail)
			}
			if rec.Issuer != "" {
				detail = strings.TrimSpace(detail + " issuer " + rec.Issuer)
			}
			// An audit write never fails the flow; the log has the record too.
			_ = st.store.AppendAudit(context.WithoutCancel(ctx), store.AuditRecord{
				Actor: rec.Actor, Action: "oauth." + rec.Action, Target: "connector:" + rec.Connector, Detail: detail,
			})
		},
	}, conns)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	return m, nil
}

// The interfaces take nil, not a typed nil pointer.
func oauthTransport(m *oauth.Manager) gateway.OAuthTransport {
	if m == nil {
		return nil
	}
	return m
}

func oauthFlows(m *oauth.Manager) server.OAuthFlows {
	if m == nil {
		return nil
	}
	return m
}
