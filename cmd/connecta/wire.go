package main

import (
	"context"
	"log/slog"

	"github.com/connecta-dev/connecta/config"
	"github.com/connecta-dev/connecta/contract"
	"github.com/connecta-dev/connecta/gateway"
	"github.com/connecta-dev/connecta/gateway/discovery"
	"github.com/connecta-dev/connecta/server"
	"github.com/connecta-dev/connecta/supervisor"
)

// programNotifier adapts the server's per-request stream to the contract's
// Notifier; no stream is a nil interface, never a typed nil.
func programNotifier(ctx context.Context) contract.Notifier {
	if n := server.ProgramNotifier(ctx); n != nil {
		return n
	}
	return nil
}

// newCodeTool builds execute_code over the same gateway and discovery the
// top-level tools use (S6).
func newCodeTool(cfg *config.Config, gw *gateway.Gateway, disc *discovery.Service, pool *supervisor.Pool, log *slog.Logger) (server.CodeTool, error) {
	return contract.New(contract.Options{
		Gateway:          gw,
		Discovery:        disc,
		Pool:             pool,
		MaxHostCalls:     cfg.Execute.MaxHostCalls,
		HostCallTimeout:  cfg.Execute.HostCallTimeout,
		MaxEmittedBytes:  int(cfg.Execute.MaxEmittedBytes),
		MaxEmittedBlocks: cfg.Execute.MaxEmittedBlocks,
		MaxCodeBytes:     contract.DefaultMaxCodeBytes,
		Identity:         server.RequestIdentity,
		Notifier:         programNotifier,
		Logger:           log.With("component", "contract"),
	})
}
