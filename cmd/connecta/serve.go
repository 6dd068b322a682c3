package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/connecta-dev/connecta/config"
	"github.com/connecta-dev/connecta/demo"
	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/gateway/activity"
	"github.com/connecta-dev/connecta/gateway/discovery"
	"github.com/connecta-dev/connecta/gateway/observe"
	"github.com/connecta-dev/connecta/gateway/validate"
	"github.com/connecta-dev/connecta/oauth"
	"github.com/connecta-dev/connecta/server"
	"github.com/connecta-dev/connecta/supervisor"
)

// Operational constants of the binary.
const (
	serverName        = "connecta"
	shutdownGrace     = server.DefaultShutdownGrace
	executorCloseWait = 2 * time.Second // for executor_closed responses to flush
	observeEntries    = 256             // S9 LRU
	observeTTL        = 24 * time.Hour  // S9 expiry
	validatorEntries  = 256
)

// resolver resolves secret references from this process's environment and
// a credentials directory: credentialsDir when given (`check` and `doctor`
// outside systemd), else systemd's $CREDENTIALS_DIRECTORY.
func resolver(credentialsDir string) config.Resolver {
	if credentialsDir == "" {
		credentialsDir = os.Getenv("CREDENTIALS_DIRECTORY")
	}
	return config.Resolver{LookupEnv: os.LookupEnv, CredentialsDir: credentialsDir}
}

func loadConfig(path, credentialsDir string) (*config.Config, error) {
	if path == "" {
		return config.Default(resolver(credentialsDir))
	}
	return config.Load(path, resolver(credentialsDir))
}

type serveOptions struct {
	// oauthStore keeps downstream OAuth flows and grants (nil: in memory).
	oauthStore oauth.Store
	stdio      bool
	stdin      io.ReadCloser
	stdout     io.WriteCloser
	log        *slog.Logger
	// reload delivers SIGHUP; the configuration is re-read from source.
	reload <-chan os.Signal
	source reloadSource
}

// app is everything serve builds, closed in reverse order.
type app struct {
	registry *prometheus.Registry
	state    *state
	activity *activity.Recorder
	gateway  *gateway.Gateway
	pool     *supervisor.Pool
	server   *server.Server
	oauth    *oauth.Manager // nil without publicUrl
	oauthDB  *sql.DB        // PostgreSQL advisory locks for OAuth refreshes; nil otherwise
	disc     *discovery.Service
	cfg      *config.Config // the configuration running (reload replaces its reloadable sections)
}

// build wires config into the gateway, discovery, stash, executor, contract
// and server. Secrets were resolved by config.Load and are passed by value,
// never logged.
func build(ctx context.Context, cfg *config.Config, log *slog.Logger, withExecutor bool, oauthStore oauth.Store) (*app, error) {
	a := &app{registry: prometheus.NewRegistry(), cfg: cfg}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ok := false
	defer func() {
		if !ok {
			a.close()
		}
	}()
	var err error
	a.state, err = openState(ctx, cfg, log, a.registry)
	if err != nil {
		return nil, err
	}
	a.activity, err = activity.New(activity.Options{
		Store: a.state.store, File: cfg.Activity.File, Logger: log.With("component", "activity"),
		ServerName: serverName, ServerVersion: buildVersion(), Registerer: a.registry,
	})
	if err != nil {
		return nil, fmt.Errorf("activity: %w", err)
	}
	if oauthStore == nil {
		oauthStore, a.oauthDB, err = newOAuthStore(cfg, a.state)
		if err != nil {
			return nil, err
		}
	}
	flows, err := newOAuth(cfg, a, log, oauthStore)
	if err != nil {
		return nil, err
	}
	a.oauth = flows
	a.gateway, err = gateway.New(ctx, gateway.Options{
		Connectors:  connectorSpecs(cfg),
		CatalogTTL:  cfg.Catalog.TTL,
		CallTimeout: cfg.Execute.HostCallTimeout,
		Activity:    a.activity,
		Observer:    observe.New(observe.Options{Entries: observeEntries, TTL: observeTTL, Logger: log.With("component", "observe")}),
		Validator:   validate.New(validate.Options{CacheEntries: validatorEntries, Logger: log.With("component", "validate")}),
		Logger:      log.With("component", "gateway"),
		Metrics:     a.registry,
		Version:     buildVersion(),
		OAuth:       oauthTransport(flows),
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	disc, err := discovery.New(discovery.Options{Catalog: a.gateway, MeasureTopLevel: server.MeasureTopLevel})
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	a.disc = disc

	var code server.CodeTool
	executorName := ""
	if withExecutor {
		a.pool, err = supervisor.New(ctx, supervisorOptions(cfg, log, a.registry))
		if err != nil {
			return nil, fmt.Errorf("executor: %w", err)
		}
		executorName = "quickjs-wasm"
		code, err = newCodeTool(cfg, a.gateway, disc, a.pool, log)
		if err != nil {
			return nil, fmt.Errorf("execute_code: %w", err)
		}
	}

	var codeAdmission func() any
	if a.pool != nil {
		pool := a.pool
		codeAdmission = func() any { return codeSnapshot(pool.Snapshot()) }
	}
	a.server, err = server.New(server.Options{
		MetricsElsewhere: cfg.MetricsListen != "",
		Name:             serverName,
		Version:          buildVersion(),
		Gateway:          a.gateway,
		Discovery:        disc,
		Stash:            a.state.stash,
		Activity:         a.activity,
		Code:             code,

		ExecutorName:         executorName,
		CodeAdmission:        codeAdmission,
		StoreState:           a.state.health,
		Inflight:             a.state.inflight(),
		Tokens:               serverTokens(cfg),
		PublicURL:            cfg.PublicURL,
		OAuth:                oauthFlows(flows),
		Requests:             requestLimits(cfg),
		MaxInlineBytes:       int(cfg.Results.MaxInlineBytes),
		HostCallTimeout:      cfg.Execute.HostCallTimeout,
		ExecutionTimeout:     cfg.Executor.Timeout,
		ExecutorQueueTimeout: cfg.Executor.QueueTimeout,
		Registry:             a.registry,
		Logger:               log.With("component", "server"),
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// close releases everything: the executor first (in-flight programs end
// executor_closed), then connectors, then the activity (its queued events
// reach the store), then the store.
func (a *app) close() {
	if a.pool != nil {
		_ = a.pool.Close()
	}
	if a.gateway != nil {
		_ = a.gateway.Close()
	}
	if a.activity != nil {
		_ = a.activity.Close()
	}
	if a.oauthDB != nil {
		_ = a.oauthDB.Close()
	}
	a.state.close()
}

func connectorSpecs(cfg *config.Config) []gateway.ConnectorSpec {
	specs := make([]gateway.ConnectorSpec, 0, len(cfg.Connectors))
	for _, c := range cfg.Connectors {
		spec := gateway.ConnectorSpec{
			ID: c.ID, Title: c.Title, Description: c.Description, Guide: c.Guide,
			URL: c.URL, Command: c.Command,
			MaxConcurrency: c.MaxConcurrency,
			SharedSession:  c.SharedSession,
			ReadOnly:       c.ReadOnly, ApprovalRequired: c.ApprovalRequired,
			OAuth: c.OAuth != nil,
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

func supervisorOptions(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) supervisor.Options {
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
		Logger:   log,
		Registry: reg,
	}
}

// codeSnapshot renders the executor's admission in /health's Snap shape.
func codeSnapshot(s supervisor.Snapshot) any {
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

// serve runs until ctx ends (SIGTERM/SIGINT), then drains: stop admitting,
// let in-flight requests finish within the grace period, close the executor
// (programs still running end executor_closed), close connectors.
func serve(ctx context.Context, cfg *config.Config, o serveOptions) error {
	applyRuntime(cfg.Runtime, os.LookupEnv, o.log)
	// Bind first: a taken address fails before any child is spawned.
	var ln net.Listener
	if !o.stdio {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return listenError(cfg.Listen, err)
		}
		defer ln.Close()
	}
	var mln net.Listener
	if cfg.MetricsListen != "" {
		var err error
		if mln, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			return metricsListenError(cfg.MetricsListen, err)
		}
		defer mln.Close()
	}
	a, err := build(ctx, cfg, o.log, true, o.oauthStore)
	if err != nil {
		return err
	}
	defer a.close()
	if mln != nil {
		stopMetrics := serveMetrics(mln, a.server, o.log)
		defer stopMetrics()
	}
	notifier := newNotifier(o.log)
	defer notifier.stop()

	poolAlive := func(ctx context.Context) (bool, string) {
		if a.pool != nil && !a.pool.Alive(ctx) {
			return false, "the executor's supervisor loop did not answer"
		}
		return true, ""
	}
	if o.stdio {
		o.log.Info("serving MCP over stdio", "version", buildVersion(), "connectors", len(cfg.Connectors))
		notifier.ready(poolAlive)
		stopReloads := make(chan struct{})
		defer close(stopReloads)
		go func() {
			for {
				select {
				case <-o.reload:
					a.reload(o.source, o.log)
				case <-stopReloads:
					return
				}
			}
		}()
		err := a.server.ServeStdio(ctx, o.stdin, o.stdout)
		notifier.stopping()
		return err
	}

	srv := a.server.HTTPServer(cfg.Listen)
	errc := make(chan error, 1)
	watched := &acceptWatch{Listener: ln}
	go func() {
		err := srv.Serve(watched)
		watched.ended.Store(true)
		errc <- err
	}()
	o.log.Info("serving MCP over HTTP", "addr", ln.Addr().String(), "path", "/mcp",
		"version", buildVersion(), "connectors", len(cfg.Connectors), "auth", len(cfg.Auth.Tokens) > 0)
	notifier.ready(func(ctx context.Context) (bool, string) {
		if !watched.alive(time.Second) {
			return false, "the HTTP accept loop is not running"
		}
		return poolAlive(ctx)
	})

	for running := true; running; {
		select {
		case err := <-errc:
			return fmt.Errorf("http: %w", err)
		case <-o.reload:
			a.reload(o.source, o.log)
		case <-ctx.Done():
			running = false
		}
	}
	notifier.stopping()
	o.log.Info("shutting down", "inFlight", a.server.InFlight(), "grace", shutdownGrace.String())
	a.server.BeginShutdown()
	drainCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil && errors.Is(err, context.DeadlineExceeded) {
		// Grace is over: close the executor so running programs end
		// executor_closed and their responses can still be written.
		o.log.Warn("grace period over; closing the executor", "inFlight", a.server.InFlight())
		if a.pool != nil {
			_ = a.pool.Close()
		}
		flushCtx, cancelFlush := context.WithTimeout(context.Background(), executorCloseWait)
		if err := srv.Shutdown(flushCtx); err != nil {
			_ = srv.Close()
		}
		cancelFlush()
	}
	<-errc
	o.log.Info("stopped")
	return nil
}

// serveMetrics serves /metrics alone on its own listener (metricsListen)
// until the returned stop is called.
func serveMetrics(ln net.Listener, s *server.Server, log *slog.Logger) (stop func()) {
	srv := &http.Server{
		Handler:           s.MetricsHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	log.Info("serving /metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
}

func metricsListenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen %s: address already in use: another process holds it; choose another address with `metricsListen:` in the configuration file", addr)
	}
	return fmt.Errorf("metricsListen %s: %w", addr, err)
}

// listenError says how to pick another address when this one is taken.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen %s: address already in use: another process holds it; stop it, or choose another address with --listen HOST:PORT or `listen:` in the configuration file", addr)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}
