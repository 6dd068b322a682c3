package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
)

// cmdOAuth is `connecta oauth revoke CONNECTOR --config FILE`: it revokes
// the connector's grant at the authorization server (RFC 7009, when
// advertised) and deletes it from the store. Grants in memory: die with
// the process that holds them, so there is nothing for this one to act on.
func cmdOAuth(args []string, stdout, stderr io.Writer) int {
	args, who, code := actorFlag("oauth revoke", args, stderr)
	if code != 0 {
		return code
	}
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
		fmt.Fprintln(stderr, usageLine("oauth"))
		return 2
	}
	cfg, err := config.Load(*configPath, resolver(*credentialsDir))
	if err != nil {
		printRefusals(stderr, err)
		return 1
	}
	c := cfg.Connector(id)
	if c == nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: there is no connector %q in %s\n", id, *configPath)
		return 1
	}
	if c.OAuth == nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: connector %q is not an OAuth connector in %s\n", id, *configPath)
		return 1
	}
	switch perCaller := c.OAuth.Grants == config.PerCaller; {
	case perCaller && who.IsZero():
		fmt.Fprintf(stderr, "connecta oauth revoke: connector %q keeps each person's own grant (oauth.grants: caller): name whose with --actor oidc:<sub>\n", id)
		return 2
	case !perCaller && !who.IsZero():
		fmt.Fprintf(stderr, "connecta oauth revoke: connector %q has one grant for everyone (oauth.grants is not caller), so --actor does not apply\n", id)
		return 2
	}
	if !cfg.Store.Given || cfg.Store.URL.Reveal() == "memory:" {
		fmt.Fprintf(stderr, "connecta oauth revoke: the store is memory:, so grants live only inside the running server; restarting it drops them (configure store.url to revoke from the command line)\n")
		return 1
	}
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := app.OpenState(ctx, cfg, log, nil, nil)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	defer st.Close()
	flows, db, err := app.NewOAuthStore(cfg, st)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	if db != nil {
		defer db.Close()
	}
	m, err := app.NewOAuth(cfg, nil, st, nil, log, flows, nil)
	if err != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %v\n", err)
		return 1
	}
	done, oerr := m.Revoke(ctx, id, who, "cli")
	if oerr != nil {
		fmt.Fprintf(stderr, "connecta oauth revoke: %s\n", oerr.Message)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", id, done)
	return 0
}
