package gateway

import "time"

// Contract bounds and defaults of the gateway core, in one place.
const (
	// DefaultCallTimeout is the one deadline over catalog + admission + call
	// when the caller names none (execute.hostCallTimeoutMs, E2 `timeout`).
	DefaultCallTimeout = 15 * time.Second
	// DefaultCatalogTTL is how long a listed catalog is served (catalog.ttlMs).
	DefaultCatalogTTL = 300 * time.Second
	// CatalogRefreshTimeout bounds one detached tools/list refresh
	// (discovery.probeTimeoutMs).
	CatalogRefreshTimeout = 30 * time.Second
	// MaxCatalogTools is the largest catalog read through every cursor page;
	// more is a partial catalog, which counts as a failure.
	MaxCatalogTools = 100_000
	// MaxCatalogPages stops a downstream that keeps handing out cursors.
	MaxCatalogPages = 1_000
	// MaxCatalogBytes bounds the tool definitions one catalog keeps across
	// all its pages (each page is already cut at MaxResponseBodyBytes).
	MaxCatalogBytes = 64 << 20

	// MaxResponseBodyBytes caps one downstream HTTP response before it is read
	// into memory (a 1 GB body is cut off here).
	MaxResponseBodyBytes = 32 << 20

	// MaxArgsEchoBytes: E4 echoes args whole only when their JSON fits.
	MaxArgsEchoBytes = 512
	// MaxDownstreamTextBytes bounds downstream prose carried in a message
	// (isError text, JSON-RPC error messages).
	MaxDownstreamTextBytes = 1_024
	// MaxHostBytes bounds details.host, an HTTP(S) origin (E1).
	MaxHostBytes = 253
	// MaxCodeBytes bounds details.code, an errno name or `timeout` (E1).
	MaxCodeBytes = 32

	// MaxValidationFindings is how many E8 findings an error carries; more
	// sets `truncated`, as does a field validate clipped (its bounds are
	// validate.MaxPathChars and friends).
	MaxValidationFindings      = 3
	stdioRestartBackoffInitial = 100 * time.Millisecond
	stdioRestartBackoffMax     = 5 * time.Second
	// StderrTailBytes is how much of a stdio server's stderr is kept.
	StderrTailBytes = 8 << 10
	// stdioTerminateGrace is how long Close waits after closing a stdio
	// server's stdin before SIGTERM.
	stdioTerminateGrace = 2 * time.Second
	// sessionDeleteTimeout bounds the best-effort session-termination DELETE
	// (the SDK's own bound is 5 s).
	sessionDeleteTimeout = time.Second

	// MaxCallerChildren bounds a per-caller connector's children kept in
	// memory; past it the least recently used idle one is closed.
	MaxCallerChildren = 1024
	// CallerChildIdle is how long an unused per-caller child is kept.
	CallerChildIdle = 30 * time.Minute
)

// Downstream protocol versions (versionNegotiation, connect). Under auto the
// SDK sends server/discover for statelessProtocolVersion first and falls back
// to initialize with mcpProtocolVersion, which the downstream may answer
// with 2025-06-18 or 2025-03-26; legacy starts at initialize. The session
// protocols keep sessions (404 → reconnect) and the standalone SSE stream
// (list_changed); P4 isolates their sessions per scope.
const (
	statelessProtocolVersion = "2026-07-28"
	mcpProtocolVersion       = "2025-11-25"
)

// DiscoverTimeout bounds auto's server/discover alone (discover.go): a
// downstream that never answers an unknown method is given an error answer
// after it, so the SDK falls back to initialize on the same connection
// instead of holding the connect until the caller's deadline; its later
// connections start at initialize. Short beside DefaultCallTimeout, so the
// fallback and the call still fit; a 2026-07-28 server slower than this to
// answer (a stdio server still starting) is reached through a session
// protocol instead.
const DiscoverTimeout = 3 * time.Second
