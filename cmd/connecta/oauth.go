package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/config"
	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/oauth"
	"github.com/connecta-dev/connecta/oauth/oauthstore"
	"github.com/connecta-dev/connecta/server"
	"github.com/connecta-dev/connecta/store"
)

// newOAuthStore keeps OAuth state in the configured store, sealed by the
// vault; on PostgreSQL a second handle on the same database holds the
// advisory locks that make one replica at a time refresh a grant (db, to
// close with the app; nil otherwise).
func newOAuthStore(cfg *config.Config, st *state) (oauth.Store, *sql.DB, error) {
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

// oauthConnectors are the configuration's connectors with `oauth`.
func oauthConnectors(cfg *config.Config) []oauth.Connector {
	var conns []oauth.Connector
	for _, c := range cfg.Connectors {
		if c.OAuth == nil {
			continue
		}
		conns = append(conns, oauth.Connector{
			ID: c.ID, Title: c.Title, URL: c.URL,
			ClientID: c.OAuth.ClientID, ClientSecret: c.OAuth.ClientSecret.Reveal(), Scopes: c.OAuth.Scopes,
		})
	}
	return conns
}

// newOAuth builds the downstream OAuth manager when publicUrl is set (a
// reload may add OAuth connectors later; config refuses oauth without
// publicUrl); nil otherwise. A changed grant invalidates that connector's
// catalog; every grant change is an audit record in the log.
func newOAuth(cfg *config.Config, a *app, log *slog.Logger, flows oauth.Store) (*oauth.Manager, error) {
	conns := oauthConnectors(cfg)
	if cfg.PublicURL == "" {
		return nil, nil
	}
	if len(conns) > 0 && len(cfg.Vault.Keys) == 0 {
		log.Warn("connectors use oauth but vault.keys is not configured: authorize_connector refuses to start a flow until it is", "connectors", len(conns))
	}
	var reg prometheus.Registerer
	if a.registry != nil { // not a typed nil
		reg = a.registry
	}
	m, err := oauth.New(oauth.Options{
		PublicURL: cfg.PublicURL,
		Store:     flows,
		Logger:    log.With("component", "oauth"),
		Metrics:   reg,
		OnGrantChange: func(id string) {
			if a.gateway != nil {
				a.gateway.InvalidateCatalog(id)
			}
		},
		Audit: func(ctx context.Context, rec oauth.AuditRecord) {
			if a.state == nil {
				return
			}
			detail := strings.TrimSpace(strings.Join([]string{rec.Outcome, rec.Message}, " "))
			if rec.Issuer != "" {
				detail = strings.TrimSpace(detail + " issuer " + rec.Issuer)
			}
			// An audit write never fails the flow; the log has the record too.
			_ = a.state.store.AppendAudit(context.WithoutCancel(ctx), store.AuditRecord{
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

// cmdOAuth is `connecta oauth revoke CONNECTOR --config FILE`: it revokes
// the connector's grant at the authorization server (RFC 7009, when
// advertised) and deletes it from the store. Grants in memory: die with
// the process that holds them, so there is nothing for this one to act on.
func cmdOAuth(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("oauth", stdout, stderr)
	configPath := fs.String("config", "", "configuration file")
	credentialsDir := fs.String("credentials-dir", "", credentialsDirUsage)
	revoke := len(args) > 0 && args[0] == "revoke"
	rest := args
	if revoke {
		rest = args[1:]
	}
	var id string
	if len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		id, rest = rest[0], rest[1:]
	}
	if code, done := fs.parse(rest); done {
		return code
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	if !revoke || id == "" || *configPath == "" {
		fmt.Fprintln(stderr, "usage: connecta oauth revoke CONNECTOR --config FILE")
		return 2
	}
	cfg, err := config.Load(*configPath, resolver(*credentialsDir))
	if err != nil {
		printRefusals(stderr, err)
		return 1
	}
	c := cfg.Connector(id)
	if c == nil || c.OAuth == nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: connector %q is not an OAuth connector in %s\n", id, *configPath)
		return 1
	}
	if !cfg.Store.Given || cfg.Store.URL.Reveal() == "memory:" {
		fmt.Fprintf(stderr, "connecta oauth revoke: the store is memory:, so grants live only inside the running server; restarting it drops them (configure store.url to revoke from the command line)\n")
		return 1
	}
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := openState(ctx, cfg, log, nil)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	defer st.close()
	flows, db, err := newOAuthStore(cfg, st)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	if db != nil {
		defer db.Close()
	}
	m, err := newOAuth(cfg, &app{state: st}, log, flows)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	done, oerr := m.Revoke(ctx, id, "cli")
	if oerr != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %s\n", oerr.Message)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", id, done)
	return 0
}
