package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/server"
)

// Operational constants of the binary.
const (
	shutdownGrace     = config.ShutdownGrace
	executorCloseWait = 2 * time.Second // for executor_closed responses to flush
)

// resolver resolves secret references from this process's environment and
// a credentials directory: credentialsDir when given (--credentials-dir,
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

// build is the application as serve runs it (package app, the constructor
// every test harness uses too).
func build(ctx context.Context, cfg *config.Config, log *slog.Logger, withExecutor bool, oauthStore oauth.Store) (*app.App, error) {
	return app.New(ctx, app.Options{Config: cfg, Version: buildVersion(), Logger: log, Executor: withExecutor, OAuthStore: oauthStore})
}

// serve runs until ctx ends (SIGTERM/SIGINT), then drains: stop admitting,
// let in-flight requests finish within the grace period, close the executor
// (programs still running end executor_closed), close connectors.
func serve(ctx context.Context, cfg *config.Config, o serveOptions) error {
	if o.stdio {
		if err := stdioAccessRefusal(cfg); err != nil {
			return err
		}
	}
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
	defer a.Close()
	if mln != nil {
		stopMetrics := serveMetrics(mln, a.Server, o.log)
		defer stopMetrics()
	}
	notifier := newNotifier(o.log)
	defer notifier.stop()

	poolAlive := func(ctx context.Context) (bool, string) {
		if a.Pool != nil && !a.Pool.Alive(ctx) {
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
					reload(a, o.source, o.log)
				case <-stopReloads:
					return
				}
			}
		}()
		err := a.Server.ServeStdio(ctx, o.stdin, o.stdout)
		notifier.stopping()
		return err
	}

	srv := a.Server.HTTPServer(cfg.Listen)
	errc := make(chan error, 1)
	watched := &acceptWatch{Listener: ln}
	go func() {
		err := srv.Serve(watched)
		watched.ended.Store(true)
		errc <- err
	}()
	o.log.Info("serving MCP over HTTP", "addr", ln.Addr().String(), "path", "/mcp",
		"version", buildVersion(), "connectors", len(cfg.Connectors), "auth", cfg.AuthRequired(), "oidc", cfg.Auth.OIDC != nil, "accessTokens", cfg.AccessTokens.Enabled)
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
			reload(a, o.source, o.log)
		case <-ctx.Done():
			running = false
		}
	}
	notifier.stopping()
	o.log.Info("shutting down", "inFlight", a.Server.InFlight(), "grace", shutdownGrace.String())
	a.Server.BeginShutdown()
	drainCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// The listener stays open while requests are in flight: /health answers
	// 503 shutting_down and new /mcp requests 503 server_shutting_down with
	// Retry-After (a load balancer's poll must see the drain, not a refused
	// connection); it closes once they are done or the grace is over.
	drainErr := a.Server.WaitIdle(drainCtx)
	if drainErr == nil {
		drainErr = srv.Shutdown(drainCtx)
	}
	if drainErr != nil && errors.Is(drainErr, context.DeadlineExceeded) {
		// Grace is over: close the executor so running programs end
		// executor_closed and their responses can still be written.
		o.log.Warn("grace period over; closing the executor", "inFlight", a.Server.InFlight())
		a.CloseExecutor()
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

// stdioAccessRefusal refuses access rules on a --stdio server, at start and
// on reload: one client, nothing to tell apart (docs/DECISIONS.md "Access
// rules").
func stdioAccessRefusal(cfg *config.Config) error {
	if cfg.Access == nil {
		return nil
	}
	return &config.Error{File: cfg.File, Line: cfg.Access.Line, Field: "access",
		Message: "is refused with --stdio: a stdio server has one caller, so there is nothing to tell apart"}
}
