package app

import (
	"github.com/connecta-dev/connecta/internal/access"
	"log/slog"
	"reflect"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/server"
)

// restartOnly names the top-level keys a reload does not apply
// (docs/DECISIONS.md "Health, versions, reload": listen, store, executor.*,
// vault — and every key not listed as reloadable), with the Config field
// that holds each.
var restartOnly = []struct{ key, field string }{
	{"listen", "Listen"}, {"publicUrl", "PublicURL"}, {"executor", "Executor"},
	{"catalog", "Catalog"}, {"results", "Results"}, {"activity", "Activity"}, {"runtime", "Runtime"},
	{"store", "Store"}, {"vault", "Vault"}, {"accessTokens", "AccessTokens"},
	{"telemetry", "Telemetry"}, // the tracer provider every component holds is built once
}

// ignoredChanges lists the restart-only keys whose values differ.
func ignoredChanges(running, next *config.Config) []string {
	var keys []string
	a, b := reflect.ValueOf(running).Elem(), reflect.ValueOf(next).Elem()
	for _, k := range restartOnly {
		if !reflect.DeepEqual(a.FieldByName(k.field).Interface(), b.FieldByName(k.field).Interface()) {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// Reload applies a validated configuration (SIGHUP): auth, connectors,
// execute.* and requests.* take effect for new work at once (work in flight
// finishes on what it started with); other changed keys are logged as
// needing a restart. A refusal keeps the running configuration.
func (a *App) Reload(next *config.Config, log *slog.Logger) {
	var code server.CodeTool
	if a.Pool != nil {
		var err error
		if code, err = a.codeTool(next, log); err != nil {
			log.Error("configuration reload refused; the running configuration stays", "reason", err.Error())
			return
		}
	}
	in, err := a.inboundFor(next, log)
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "reason", err.Error())
		return
	}
	a.inbound = in
	a.verifier.Store(in.OIDC())
	changed, err := a.Gateway.Reload(ConnectorSpecs(next))
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "reason", err.Error())
		return
	}
	if a.oauth != nil {
		// Validated by config.Load (url and id present): cannot fail here.
		if err := a.oauth.SetConnectors(OAuthConnectors(next)); err != nil {
			log.Error("configuration reload: oauth connectors refused", "reason", err.Error())
		}
	}
	if err := a.Server.Reload(server.Reloadable{
		Tokens: serverTokens(next), Inbound: in, Requests: requestLimits(next),
		HostCallTimeout: next.Execute.HostCallTimeout, Code: code, Access: access.New(next.Access),
	}); err != nil {
		// Tokens were validated by config.Load; this is a programming error.
		log.Error("configuration reload: server settings refused", "reason", err.Error())
	}
	for _, key := range ignoredChanges(a.cfg, next) {
		log.Warn("configuration key changed but needs a restart; ignored until then", "key", key)
	}
	// What runs now: the reloaded sections, the rest as started.
	running := *a.cfg
	running.Auth, running.Requests, running.Execute, running.Connectors = next.Auth, next.Requests, next.Execute, next.Connectors
	running.Access = next.Access
	a.cfg = &running
	a.live.Store(a.cfg)
	log.Info("configuration reloaded", "tokens", len(next.Auth.Tokens), "connectors", len(next.Connectors),
		"added", changed.Added, "removed", changed.Removed, "changed", changed.Changed)
}

func serverTokens(cfg *config.Config) []server.Token {
	tokens := make([]server.Token, 0, len(cfg.Auth.Tokens))
	for _, t := range cfg.Auth.Tokens {
		tokens = append(tokens, server.Token{Name: t.Name, Value: t.Token.Reveal(), Operator: t.Operator})
	}
	return tokens
}

func requestLimits(cfg *config.Config) server.RequestLimits {
	r := cfg.Requests
	return server.RequestLimits{
		MaxActive: r.MaxActive, MaxActivePerCaller: r.MaxActivePerCaller, MaxQueue: r.MaxQueue, QueueTimeout: r.QueueTimeout, RetryAfter: r.RetryAfter,
		MaxBodyBytes: r.MaxBodyBytes, BodyTimeout: r.BodyTimeout,
	}
}
