// Package app builds connecta from its configuration: activity, OAuth, the
// gateway and its connectors, discovery, the stash, the executor pool,
// execute_code and the MCP server, wired as `connecta serve` runs them. It
// is the one constructor: the serve command and every test harness that
// needs the whole application use New, so a test exercises the wiring that
// ships. Secrets arrive resolved in the Config and are passed by value,
// never logged.
package app

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/connecta-dev/connecta/internal/access"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/childbin"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/contract"
	"github.com/connecta-dev/connecta/internal/demo"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/gateway/observe"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/inbound"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/internal/store"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"github.com/connecta-dev/connecta/internal/telemetry"
)

// Fixed sizes of the application's caches and its name.
const (
	ServerName       = "connecta"
	ExecutorName     = "quickjs-wasm"
	observeEntries   = 256 // S9 LRU
	observeTTL       = 24 * time.Hour
	validatorEntries = 256
)

// Options are what New needs beyond the Config. Only Config is required.
type Options struct {
	Config  *config.Config
	Version string       // reported by the server, /health and activity
	Logger  *slog.Logger // nil discards
	// Registry receives every metric; nil builds one with the Go and
	// process collectors.
	Registry *prometheus.Registry
	// Executor builds execute_code over a pool sized by Config.Executor
	// (or over Pool when set). Without it the server has six tools.
	Executor bool
	// Pool, when set, is the executor pool the application runs programs
	// on; the application does not close it. Test binaries share one: a
	// pool's start warms a child and keeps spares of its own.
	Pool *supervisor.Pool
	// Connectors are added after the configured ones: in-process servers
	// that a configuration file cannot name (tests, examples).
	Connectors []gateway.ConnectorSpec
	// OAuthStore holds downstream OAuth state; nil keeps it in memory.
	OAuthStore oauth.Store
}

// App is the built application. Close releases it.
type App struct {
	Registry  *prometheus.Registry
	Activity  *activity.Recorder
	Gateway   *gateway.Gateway
	Discovery *discovery.Service
	Pool      *supervisor.Pool // nil without Options.Executor
	Server    *server.Server

	// Tracing exports the spans (telemetry); off without
	// telemetry.otlp.endpoint. Close shuts it down last.
	Tracing *telemetry.Tracing

	state   *State
	tokens  *accesstoken.Manager   // nil without accessTokens
	inbound *inbound.Authenticator // nil without accessTokens and auth.oidc
	// verifier is inbound's OIDC verifier for the console's sign-in, read
	// by request goroutines while a reload replaces it.
	verifier atomic.Pointer[inbound.Verifier]
	oauth    *oauth.Manager                // nil without publicUrl
	oauthDB  *sql.DB                       // PostgreSQL advisory locks for OAuth refreshes; nil otherwise
	cfg      *config.Config                // what runs (Reload replaces its reloadable sections)
	live     atomic.Pointer[config.Config] // cfg, for readers on other goroutines (the console)
	ownsPool bool
}

// Store is the application's store (store.url).
func (a *App) Store() store.Store { return a.state.store }

// New builds the application. On error everything built so far is closed.
func New(ctx context.Context, o Options) (*App, error) {
	cfg := o.Config
	if cfg == nil {
		return nil, fmt.Errorf("app: Options.Config is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &App{Registry: o.Registry, cfg: cfg}
	a.live.Store(cfg)
	if a.Registry == nil {
		a.Registry = prometheus.NewRegistry()
		a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	var err error
	a.Tracing, err = telemetry.New(TelemetryConfig(cfg, o.Version), a.Registry)
	if err != nil {
		return nil, err
	}
	if a.Tracing.Enabled() { // every log line logged with a traced request's context names its trace
		log = slog.New(telemetry.LogHandler(log.Handler()))
	}
	tracer := a.Tracing.Provider()
	a.state, err = OpenState(ctx, cfg, log, a.Registry, tracer)
	if err != nil {
		return nil, err
	}
	a.Activity, err = activity.New(activity.Options{
		Store: a.state.store, File: cfg.Activity.File, Logger: log.With("component", "activity"),
		ServerName: ServerName, ServerVersion: o.Version, Registerer: a.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("activity: %w", err)
	}
	flowStore := o.OAuthStore
	if flowStore == nil {
		flowStore, a.oauthDB, err = NewOAuthStore(cfg, a.state)
		if err != nil {
			return nil, err
		}
	}
	flows, err := NewOAuth(cfg, a.Registry, a.state, func(id string) {
		if a.Gateway != nil {
			a.Gateway.InvalidateCatalog(id)
		}
	}, log, flowStore, tracer)
	if err != nil {
		return nil, err
	}
	a.oauth = flows
	a.Gateway, err = gateway.New(ctx, gateway.Options{
		Connectors: append(ConnectorSpecs(cfg), o.Connectors...),
		CatalogTTL: cfg.Catalog.TTL,
		// Catalogs persist in the configured store (memory: included, where
		// they last as long as the process).
		CatalogStale:    cfg.Catalog.Stale,
		Store:           a.state.store,
		NoFirstApproval: !cfg.Catalog.ApproveFirst,
		CallTimeout:     cfg.Execute.HostCallTimeout,
		Activity:        a.Activity,
		Observer:        observe.New(observe.Options{Entries: observeEntries, TTL: observeTTL, Logger: log.With("component", "observe")}),
		Validator:       validate.New(validate.Options{CacheEntries: validatorEntries, Logger: log.With("component", "validate")}),
		Logger:          log.With("component", "gateway"),
		Metrics:         a.Registry,
		Version:         o.Version,
		OAuth:           oauthTransport(flows),
		Credentials:     vaultCredentials{a.state.vault},
		OperatorURL:     OperatorURL(cfg),

		SharedBudgets: a.state.callBudgets(),
		Tracer:        tracer,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	a.Discovery, err = discovery.New(discovery.Options{Catalog: a.Gateway})
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}

	a.tokens, err = NewAccessTokens(cfg, a.state.store, log.With("component", "accesstoken"))
	if err != nil {
		return nil, err
	}
	if a.inbound, err = a.inboundFor(cfg, log); err != nil {
		return nil, err
	}
	a.verifier.Store(a.inbound.OIDC())

	var code server.CodeTool
	var codeAdmission func() server.AdmissionSnapshot
	executorName, executorChild := "", ""
	if o.Executor {
		a.Pool = o.Pool
		if a.Pool == nil {
			a.Pool, err = supervisor.New(ctx, SupervisorOptions(cfg, log, a.Registry))
			if err != nil {
				return nil, fmt.Errorf("executor: %w", err)
			}
			a.ownsPool = true
		}
		executorName, executorChild = ExecutorName, a.Pool.ChildKind()
		code, err = a.codeTool(cfg, log)
		if err != nil {
			return nil, fmt.Errorf("execute_code: %w", err)
		}
		pool := a.Pool
		codeAdmission = func() server.AdmissionSnapshot { return ExecutorAdmission(pool.Snapshot()) }
	}

	ops, err := a.newConsole(a.tokens, log)
	if err != nil {
		return nil, err
	}

	a.Server, err = server.New(server.Options{
		Operator:         ops.Handler(),
		MetricsElsewhere: cfg.MetricsListen != "",
		Name:             ServerName,
		Version:          o.Version,
		Gateway:          a.Gateway,
		Discovery:        a.Discovery,
		Stash:            a.state.stash,
		Activity:         a.Activity,
		Code:             code,

		ExecutorName:         executorName,
		ExecutorChild:        executorChild,
		CodeAdmission:        codeAdmission,
		StoreState:           a.state.health,
		Inflight:             a.state.inflight(),
		Tokens:               serverTokens(cfg),
		Access:               access.New(cfg.Access),
		Inbound:              a.inbound,
		PublicURL:            cfg.PublicURL,
		OAuth:                oauthFlows(flows),
		Requests:             requestLimits(cfg),
		MaxInlineBytes:       int(cfg.Results.MaxInlineBytes),
		HostCallTimeout:      cfg.Execute.HostCallTimeout,
		ExecutionTimeout:     cfg.Executor.Timeout,
		ExecutorQueueTimeout: cfg.Executor.QueueTimeout,
		Registry:             a.Registry,
		Tracer:               tracer,
		Logger:               log.With("component", "server"),
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// Close releases everything: the executor first (in-flight programs end
// executor_closed) unless it was given in Options, then connectors, then
// the OAuth refreshes and callbacks in flight (a rotated token, the grant
// for a spent code reach the store), then the activity (its queued events
// reach the store), then the store. Call it once.
func (a *App) Close() {
	if a.Pool != nil && a.ownsPool {
		_ = a.Pool.Close()
	}
	if a.Gateway != nil {
		_ = a.Gateway.Close()
	}
	if a.oauth != nil {
		a.oauth.Close()
	}
	if a.Activity != nil {
		_ = a.Activity.Close()
	}
	if a.oauthDB != nil {
		_ = a.oauthDB.Close()
	}
	a.state.Close()
	if a.Tracing != nil {
		// What is queued gets one bounded try; a dead collector costs
		// the shutdown at most this long.
		ctx, cancel := context.WithTimeout(context.Background(), telemetry.ExportTimeout)
		_ = a.Tracing.Shutdown(ctx)
		cancel()
	}
}

// TelemetryConfig is the tracing the configuration asks for.
func TelemetryConfig(cfg *config.Config, version string) telemetry.Config {
	t := cfg.Telemetry
	out := telemetry.Config{Endpoint: t.Endpoint, SampleRatio: t.SampleRatio, ServiceName: t.ServiceName, Version: version}
	if len(t.Headers) > 0 {
		out.Headers = make(map[string]string, len(t.Headers))
		for _, h := range t.Headers {
			out.Headers[h.Name] = h.Value.Reveal()
		}
	}
	return out
}

// codeTool builds execute_code over the same gateway and discovery the
// top-level tools use (S6), with cfg's execute.* bounds.
func (a *App) codeTool(cfg *config.Config, log *slog.Logger) (server.CodeTool, error) {
	return contract.New(contract.Options{
		Gateway:          a.Gateway,
		Discovery:        a.Discovery,
		Pool:             a.Pool,
		MaxHostCalls:     cfg.Execute.MaxHostCalls,
		HostCallTimeout:  cfg.Execute.HostCallTimeout,
		MaxEmittedBytes:  int(cfg.Execute.MaxEmittedBytes),
		MaxEmittedBlocks: cfg.Execute.MaxEmittedBlocks,
		MaxCodeBytes:     config.ExecuteMaxCodeBytes,
		Identity:         server.RequestIdentity,
		Notifier:         programNotifier,
		Tracer:           a.Tracing.Provider(),
		Logger:           log.With("component", "contract"),
	})
}

// CloseExecutor closes the pool New built (not one given in Options), so
// programs still running end executor_closed; serve does this when the
// shutdown grace is over.
func (a *App) CloseExecutor() {
	if a.Pool != nil && a.ownsPool {
		_ = a.Pool.Close()
	}
}

// ConnectorSpecs turns the configured connectors into gateway specs, the
// built-in demo included.
func ConnectorSpecs(cfg *config.Config) []gateway.ConnectorSpec {
	specs := make([]gateway.ConnectorSpec, 0, len(cfg.Connectors))
	for _, c := range cfg.Connectors {
		spec := gateway.ConnectorSpec{
			ID: c.ID, Title: c.Title, Description: c.Description, Guide: c.Guide,
			URL: c.URL, Command: c.Command,
			Admission:     callAdmission(c.CallAdmission),
			SharedSession: c.SharedSession,
			LegacyVersion: c.LegacyVersion,
			ReadOnly:      c.ReadOnly, ApprovalRequired: c.ApprovalRequired,
			OAuth:      c.OAuth != nil,
			PerCaller:  c.PerCaller(),
			CatalogPin: cfg.CatalogPin(&c),
		}
		if c.Credential != nil {
			spec.Credential = &gateway.CredentialSlot{Label: c.Credential.Label, Header: c.Credential.Header, Scheme: c.Credential.Scheme}
		}
		if len(c.Headers) > 0 {
			spec.Headers = make(map[string]string, len(c.Headers))
			for _, h := range c.Headers {
				spec.Headers[h.Name] = h.Value.Reveal()
			}
		}
		if len(c.Command) > 0 {
			spec.Env = make(map[string]string, len(c.Env))
			for _, e := range c.Env {
				spec.Env[e.Name] = e.Value.Reveal()
			}
		}
		for _, v := range c.Secrets {
			spec.Secrets = append(spec.Secrets, v.Reveal())
		}
		if len(c.Missing) > 0 {
			spec.MissingCredential = c.Missing[0].Reference
		}
		for _, m := range c.Missing {
			spec.CredentialRefs = append(spec.CredentialRefs, m.Reference)
		}
		if c.Builtin == config.BuiltinDemo {
			spec.Demo = true
			spec.InProcess = demo.NewServer
			if spec.Title == "" {
				spec.Title = demo.Title
			}
			if spec.Description == "" {
				spec.Description = demo.Description
			}
			if spec.Guide == "" {
				spec.Guide = demo.Guide
			}
		}
		specs = append(specs, spec)
	}
	return specs
}

// SupervisorOptions sizes the executor pool from executor.*.
func SupervisorOptions(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) supervisor.Options {
	e := cfg.Executor
	cacheDir := e.CacheDir
	if cacheDir == "" {
		// Under systemd, CacheDirectory= gives the service its own cache.
		if d := os.Getenv("CACHE_DIRECTORY"); d != "" {
			cacheDir = filepath.Join(d, "wazero")
		}
	}
	return supervisor.Options{
		Slots:        e.Concurrency,
		MaxQueue:     e.MaxQueueSize,
		QueueTimeout: e.QueueTimeout,
		Spares:       e.Spares,
		MaxSpares:    e.MaxSpares,
		SpareIdle:    e.SpareIdle,
		Limits: supervisor.Limits{
			Wall: e.Timeout, CPUTime: e.CPUTime,
			HeapBytes: uint64(e.MemoryLimitBytes), StackBytes: uint64(e.MaxStackSizeBytes),
		},
		CacheDir: cacheDir,
		// The slim child this build carries (make build), or none.
		Child:    supervisor.Child{Binary: childbin.Binary(), SHA256: childbin.SHA256()},
		Logger:   log,
		Registry: reg,
	}
}

// ExecutorAdmission renders the executor's admission in /health's shape.
func ExecutorAdmission(s supervisor.Snapshot) server.AdmissionSnapshot {
	return server.AdmissionSnapshot{
		Concurrency:    s.Slots,
		MaxQueueSize:   s.MaxQueue,
		QueueTimeoutMs: s.QueueTimeout.Milliseconds(),
		RetryAfterMs:   s.QueueTimeout.Milliseconds(), // executor_overloaded's retryAfterMs
		Active:         s.Active,
		Queued:         s.Queued,
		Closed:         s.Closed,
		Totals: server.AdmissionTotals{
			Admitted: s.Totals.Admitted, Queued: s.Totals.Queued, Rejected: s.Totals.Rejected,
			Cancelled: s.Totals.Cancelled, Closed: s.Totals.Closed,
		},
		QueueWaitMs: server.QueueWaitStats{
			Count: s.QueueWaitCount, Total: s.QueueWaitTotal.Milliseconds(), Max: s.QueueWaitMax.Milliseconds(),
		},
	}
}

// programNotifier adapts the server's per-request stream to the contract's
// Notifier; no stream is a nil interface, never a typed nil.
func programNotifier(ctx context.Context) contract.Notifier {
	if n := server.ProgramNotifier(ctx); n != nil {
		return n
	}
	return nil
}

// callAdmission is a connector's configured rule as the gateway takes it.
func callAdmission(r config.CallAdmission) *gateway.CallAdmission {
	out := &gateway.CallAdmission{
		MaxConcurrency: r.MaxConcurrency, MaxQueueSize: r.MaxQueueSize, QueueTimeout: r.QueueTimeout,
		RetryAfter: r.RetryAfter, PerCaller: r.PerCaller, MaxPartitions: r.MaxPartitions,
	}
	if b := r.Budget; b != nil {
		out.Budget = &gateway.CallBudget{MaxCalls: b.MaxCalls, Window: b.Window}
	}
	return out
}
