// Package config loads connecta's one YAML configuration file: strict
// decoding (every refusal names file, line and field), the defaults pinned in
// docs/DECISIONS.md, validation, secret references resolved through an explicit
// Resolver, and the embedded default used when no file is given. The file's
// shape (every key, where it may appear) is written once, in shape.go.
//
// Beyond the pinned docs/DECISIONS.md shape there is one additive key: a connector
// may say `builtin: demo` instead of url/command (the embedded default does).
//
// The package reads no environment and keeps no state: the caller passes a
// Resolver that says how to look up environment variables, where systemd's
// credentials live and how to read files.
package config

import (
	"time"
)

// Config is a loaded, validated configuration. Durations come from the
// `…Ms` keys (milliseconds in the file), sizes are bytes.
type Config struct {
	// Access is `access` (internal/config/access.go); nil when absent.
	Access *Access
	// File is the name the configuration was loaded from (used in messages).
	File string

	Listen     string // host:port of the HTTP listener
	ListenLine int    // line of `listen` in File; 0 when defaulted
	// MetricsListen, when set, is the one address /metrics is served on
	// (and then not on Listen): scrape a private interface only.
	MetricsListen string
	PublicURL     string // "" when unset

	Auth       Auth
	Requests   Requests
	Executor   Executor
	Execute    Execute
	Catalog    Catalog
	Results    Results
	Activity   Activity
	Store      Store
	Vault      Vault
	Runtime    Runtime
	Connectors []Connector
	// AccessTokens: operator-issued bearer tokens (accessTokens).
	AccessTokens AccessTokens
	// Telemetry is `telemetry`: traces over OTLP (off without an endpoint).
	Telemetry Telemetry

	warnings []Warning
}

// Auth holds the server's static bearer tokens and its OIDC provider. With
// neither (and no accessTokens) the server is loopback-only: a non-loopback
// listen address is refused.
type Auth struct {
	Tokens []Token
	OIDC   *OIDC // nil without auth.oidc
}

// Token is one accepted bearer token and the actor it stands for.
type Token struct {
	Name  string // the actor recorded in activity
	Token Secret // resolved; never empty
	// Reference is the token's configured text (e.g.
	// "${credential:connecta-token}"), safe to show.
	Reference string
	// Operator: this token's caller may force a new downstream OAuth
	// authorization over a working grant.
	Operator bool
	Line     int
}

// Requests is the /mcp request admission (a global FIFO before auth) and the
// request body cap.
type Requests struct {
	MaxActive int
	// MaxActivePerCaller caps one caller's permits while requests of more
	// than one caller wait; 0 (absent) means half of MaxActive, rounded up.
	MaxActivePerCaller int
	MaxQueue           int // 0 = fail fast when every slot is busy
	QueueTimeout       time.Duration
	RetryAfter         time.Duration
	MaxBodyBytes       int64
	// BodyTimeout bounds how long a request's body may take to arrive once
	// it holds a permit (408 after it); below QueueTimeout, so a queued
	// caller waits at most this long behind slow senders.
	BodyTimeout time.Duration
}

// Executor configures the sandbox pool (supervisor).
type Executor struct {
	Concurrency       int // slots
	MaxQueueSize      int // 0 = fail fast when every slot is busy
	QueueTimeout      time.Duration
	Spares            int           // warm children kept ready at least; 0 = none
	MaxSpares         int           // grown toward demand (after a miss) up to this; ≥ Spares
	SpareIdle         time.Duration // a spare above Spares unused this long is discarded
	Timeout           time.Duration // wall deadline per program (X1)
	CPUTime           time.Duration // guest CPU per program
	MemoryLimitBytes  int64
	MaxStackSizeBytes int64
	// CacheDir is the wazero compilation cache; "" means the caller picks
	// ($CACHE_DIRECTORY under systemd, else under the user's cache dir).
	CacheDir string
}

// Execute holds the per-program budgets of execute_code.
type Execute struct {
	MaxHostCalls     int
	HostCallTimeout  time.Duration
	MaxEmittedBytes  int64
	MaxEmittedBlocks int
}

// Results configures inline result size and the get_result stash.
type Results struct {
	MaxInlineBytes int64
	StashTTL       time.Duration
	StashMaxBytes  int64
}

// Activity configures the history's retention in the store and the optional
// JSON-lines file.
type Activity struct {
	MaxEvents int           // newest events kept; 0 = no count bound
	MaxAge    time.Duration // events older than this are deleted; 0 = no age bound
	File      string        // "" = no file; relative paths are resolved against the config file's directory
}

// Runtime tunes the Go runtime of the serving process (never the sandbox
// children). A key present in the file overrides GOGC / GOMEMLIMIT; an absent
// key leaves a set environment variable alone and otherwise takes the
// default (GC target 400 %, no memory limit).
type Runtime struct {
	GCPercent        int   // runtime.gcPercent
	GCPercentSet     bool  // the key is in the file
	MemoryLimitBytes int64 // runtime.memoryLimitBytes; 0 = no limit
	MemoryLimitSet   bool  // the key is in the file
}

// Connector is one downstream MCP server. Exactly one of URL (remote MCP over
// streamable HTTP), Command (stdio MCP) or Builtin is set.
type Connector struct {
	ID          string
	Title       string // whitespace-normalized; "" when not configured
	Description string
	Guide       string // Markdown; from `guide` or the contents of `guideFile`
	GuideFile   string // resolved path when the guide came from a file

	// Builtin names an in-process connector ("demo"). For a builtin, an empty
	// Title, Description or Guide means "use the builtin's own".
	Builtin string
	URL     string
	Headers []Header // only with URL, in file order; unresolved ones are left out (see Missing)
	Command []string // only for stdio: argv, Command[0] is the program
	Env     []EnvVar // only with Command, in file order; the child's whole environment; unresolved ones are left out (see Missing)

	// OAuth is set for `oauth: {}` (downstream OAuth; url connectors only).
	OAuth *OAuth
	// Credential is set for `credential: {label, header, scheme}`: the
	// header's value comes from the vault (url connectors only).
	Credential *CredentialSlot

	// CallAdmission bounds the tools/call attempts that reach the
	// downstream (internal/config/calladmission.go).
	CallAdmission CallAdmission
	// SharedSession (url connectors only) is the operator's statement that
	// the downstream is stateless: every execution and top-level call
	// shares one MCP session instead of opening its own (P4).
	SharedSession bool
	// LegacyVersion is `versionNegotiation: legacy`: the session protocols
	// only (2025-11-25 down), never 2026-07-28's server/discover. The
	// default, auto, tries 2026-07-28 first.
	LegacyVersion    bool
	ReadOnly         []string // tool names classified read-only by the operator
	ApprovalRequired []string // tool names that always need call_destructive_tool
	// CatalogPin is the connector's catalog.pin override ("" = the
	// top-level catalog.pin; Config.CatalogPin resolves it).
	CatalogPin string

	// Missing lists the credential references that could not be resolved.
	// The connector still loads; its calls fail auth_required with recovery
	// operator_config naming the first entry.
	Missing []MissingCredential

	// Secrets are the values the references in Headers and Env resolved to
	// (a stdio server's stderr tail is redacted with them).
	Secrets []Secret

	Line int // line of the connector's entry
}

// OAuth is a connector's downstream OAuth client configuration; all fields
// optional (the client is then found by metadata document or dynamic
// registration, and the scopes from the downstream).
type OAuth struct {
	ClientID     string
	ClientSecret Secret // resolved from a secret reference; zero when unset
	Scopes       []string
	// Grants is PerConnector (the team's one grant, the default) or
	// PerCaller (each signed-in person's own grant, keyed by actor).
	Grants string
}

// Who a connector's grant or credential belongs to (`oauth.grants`,
// `credential.per`).
const (
	PerConnector = "connector"
	PerCaller    = "caller"
)

// PerCaller reports whether the connector's calls carry each caller's own
// grant or credential instead of the team's one.
func (c *Connector) PerCaller() bool {
	return (c.OAuth != nil && c.OAuth.Grants == PerCaller) || (c.Credential != nil && c.Credential.Per == PerCaller)
}

// Header is one HTTP header sent to a remote connector.
type Header struct {
	Name  string
	Value Secret
}

// EnvVar is one environment variable of a stdio connector.
type EnvVar struct {
	Name  string
	Value Secret // may be empty (an explicit empty literal)
}

// MissingCredential is a connector credential reference that did not
// resolve at load.
type MissingCredential struct {
	Reference string // as written, e.g. "${credential:tracker-token}"
	Field     string // the config key, e.g. "connectors[0].headers.Authorization"
	Reason    string // why, without any secret value
	Line      int
}

// Builtin connector kinds.
const (
	BuiltinDemo = "demo"
)

// versionNegotiation values.
const (
	VersionAuto   = "auto"
	VersionLegacy = "legacy"
)

// Defaults (docs/DECISIONS.md, "Configuration").
const (
	DefaultListen = "127.0.0.1:8787"

	DefaultRequestsMaxActive    = 16
	DefaultRequestsMaxQueue     = 32
	DefaultRequestsQueueTimeout = 5000 * time.Millisecond
	DefaultRequestsRetryAfter   = 1000 * time.Millisecond
	DefaultRequestsMaxBodyBytes = 10 << 20 // 10,485,760
	DefaultRequestsBodyTimeout  = 2000 * time.Millisecond

	DefaultExecutorConcurrency       = 2
	DefaultExecutorMaxQueueSize      = 32
	DefaultExecutorQueueTimeout      = 5000 * time.Millisecond
	DefaultExecutorSpares            = 2
	DefaultExecutorMaxSpares         = 8 // raised to spares when only spares is set above it
	DefaultExecutorSpareIdle         = 30000 * time.Millisecond
	DefaultExecutorTimeout           = 30000 * time.Millisecond
	DefaultExecutorCPUTime           = 250 * time.Millisecond
	DefaultExecutorMemoryLimitBytes  = 64 << 20 // 67,108,864
	DefaultExecutorMaxStackSizeBytes = 1 << 20  // 1,048,576

	DefaultExecuteMaxHostCalls     = 20
	DefaultExecuteHostCallTimeout  = 15000 * time.Millisecond
	DefaultExecuteMaxEmittedBytes  = 4000000
	DefaultExecuteMaxEmittedBlocks = 32

	DefaultResultsMaxInlineBytes = 50000
	DefaultResultsStashTTL       = 900000 * time.Millisecond
	DefaultResultsStashMaxBytes  = 64 << 20 // 67,108,864

	DefaultActivityMaxEvents = 100_000
	DefaultActivityMaxAge    = 2_592_000_000 * time.Millisecond // 30 days

	// The parent allocates mostly short-lived request garbage and keeps a
	// small live heap, so a higher GC target trades a few MB for less GC CPU.
	DefaultRuntimeGCPercent = 400

	DefaultConnectorMaxConcurrency = 4
)

// Fixed values with no configuration key, defined here beside the defaults
// so that the packages app wires take every value from one home.
const (
	// ExecuteMaxCodeBytes bounds execute_code's code (UTF-8); larger is
	// invalid_args before admission.
	ExecuteMaxCodeBytes = 128 << 10
	// ShutdownGrace is how long in-flight requests may drain on SIGTERM
	// (shutdownTimeoutMs of the reference implementation).
	ShutdownGrace = 10 * time.Second
)

// Bounds of the file itself and of what it points at.
const (
	MaxConfigBytes   = 1 << 20   // the YAML file
	MaxGuideBytes    = 256 << 10 // a connector guide (inline or guideFile)
	MaxSecretBytes   = 64 << 10  // a ${file:…} or ${credential:…} file
	MaxErrors        = 20        // refusals reported at once
	MinTokenBytes    = 16        // shorter server tokens are warned about
	maxShownValueLen = 64        // bytes of a bad id/key echoed in a message
)

// ConnectorIDPattern is the pinned connector id syntax.
const ConnectorIDPattern = `^[a-z0-9][a-z0-9_-]{0,63}$`

func defaults() *Config {
	return &Config{
		Listen: DefaultListen,
		Requests: Requests{
			MaxActive:    DefaultRequestsMaxActive,
			MaxQueue:     DefaultRequestsMaxQueue,
			QueueTimeout: DefaultRequestsQueueTimeout,
			RetryAfter:   DefaultRequestsRetryAfter,
			MaxBodyBytes: DefaultRequestsMaxBodyBytes,
			BodyTimeout:  DefaultRequestsBodyTimeout,
		},
		Executor: Executor{
			Concurrency:       DefaultExecutorConcurrency,
			MaxQueueSize:      DefaultExecutorMaxQueueSize,
			QueueTimeout:      DefaultExecutorQueueTimeout,
			Spares:            DefaultExecutorSpares,
			MaxSpares:         DefaultExecutorMaxSpares,
			SpareIdle:         DefaultExecutorSpareIdle,
			Timeout:           DefaultExecutorTimeout,
			CPUTime:           DefaultExecutorCPUTime,
			MemoryLimitBytes:  DefaultExecutorMemoryLimitBytes,
			MaxStackSizeBytes: DefaultExecutorMaxStackSizeBytes,
		},
		Execute: Execute{
			MaxHostCalls:     DefaultExecuteMaxHostCalls,
			HostCallTimeout:  DefaultExecuteHostCallTimeout,
			MaxEmittedBytes:  DefaultExecuteMaxEmittedBytes,
			MaxEmittedBlocks: DefaultExecuteMaxEmittedBlocks,
		},
		Catalog: defaultCatalog(),
		Results: Results{
			MaxInlineBytes: DefaultResultsMaxInlineBytes,
			StashTTL:       DefaultResultsStashTTL,
			StashMaxBytes:  DefaultResultsStashMaxBytes,
		},
		Activity:  Activity{MaxEvents: DefaultActivityMaxEvents, MaxAge: DefaultActivityMaxAge},
		Store:     Store{URL: NewSecret(DefaultStoreURL)},
		Runtime:   Runtime{GCPercent: DefaultRuntimeGCPercent},
		Telemetry: Telemetry{SampleRatio: DefaultTraceSampleRatio, ServiceName: DefaultTraceServiceName},
	}
}

// Warnings are the non-fatal findings of the load: unresolved connector
// credentials, cleartext credentials, weak tokens. `connecta check` and
// `doctor` print them.
func (c *Config) Warnings() []Warning {
	return append([]Warning(nil), c.warnings...)
}

// Connector returns the connector with the given id, or nil.
func (c *Config) Connector(id string) *Connector {
	for i := range c.Connectors {
		if c.Connectors[i].ID == id {
			return &c.Connectors[i]
		}
	}
	return nil
}

// CredentialSlot is a connector's operator-set credential: the vault value
// (kind "credential", name "value") is sent as Header, prefixed by
// "Scheme " unless Scheme is empty.
type CredentialSlot struct {
	Label  string
	Header string
	Scheme string
	// Per is PerConnector (one value for the connector, the default) or
	// PerCaller (each actor's own value).
	Per string
}

// Defaults of a `credential` slot.
const (
	DefaultCredentialLabel  = "API key"
	DefaultCredentialHeader = "Authorization"
	DefaultCredentialScheme = "Bearer"
)
