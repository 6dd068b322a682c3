package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/required"
	"github.com/prometheus/client_golang/prometheus"
)

// HostResultTooLarge is L6's over-bound result text (ipc.ResultTooLarge), for
// hosts that check a result before it reaches the pool.
func HostResultTooLarge(label string) error { return errors.New(ipc.ResultTooLarge(label)) }

// The pool's own tuning. The configurable values (slots, queue, spares,
// limits) have no defaults here: package config is their one home, and New
// refuses an Options that leaves one of them zero.
const (
	// defaultKillGrace is how long past the wall deadline the parent waits
	// for the child's own deadline error before killing it.
	defaultKillGrace = 250 * time.Millisecond
	// engineHeapBytes is the JS heap the engine's default wasm page cap is
	// sized for; a larger configured heap raises the cap with it.
	engineHeapBytes = 64 << 20
	// cpuGrace is how far past its guest CPU budget a child may go, in
	// process CPU since the run frame was sent, before the parent kills it
	// and answers with the engine's budget text. The engine stops a polling
	// program at the budget itself; this bounds the ones that never poll.
	// Kept well inside the 250 ms the contract allows: the check below can
	// overshoot by cpuCheckMin × the child's threads.
	cpuGrace            = 100 * time.Millisecond
	cpuCheckMin         = 5 * time.Millisecond
	defaultReadyTimeout = 10 * time.Second

	// MaxLogChars is the joined-log prefix kept for failures (R5, X4).
	MaxLogChars = ipc.MaxRetainedLogChars
	// MaxHostResultBytes bounds a host call's serialized result (L6); its
	// definition is ipc.MaxPayloadBytes.
	MaxHostResultBytes = ipc.MaxPayloadBytes
	// MaxResultChars is R2's result bound (ipc.MaxResultChars), for prose
	// that states it.
	MaxResultChars = ipc.MaxResultChars
	// stderrTailBytes is the crash report's stderr tail.
	stderrTailBytes = 8 << 10
	// Parent-side backstop against a child that floods logs past the guest's
	// own caps (200 entries + marker, 256,000 chars): a protocol violation.
	maxLogFramesPerRun = 256
	maxLogCharsPerRun  = 300000
	// How long a child that sent done may take to exit before it is killed.
	exitGrace = 2 * time.Second
	// wasmMemoryHeadroom sits above the JS heap in the wasm page cap (shadow
	// stack, static data, allocator), as the engine's default does.
	wasmMemoryHeadroom = 32 << 20
	// Spare restart backoff: min(maxBackoff, baseBackoff·2^(n−1)).
	baseBackoff = 100 * time.Millisecond
	maxBackoff  = 5 * time.Second
)

// Options configure a Pool. Slots, QueueTimeout, SpareIdle and every field
// of Limits are required (package config holds their defaults); MaxQueue 0
// means fail fast when every slot is busy, as in the config file.
type Options struct {
	Slots        int           // concurrent executions (L7); required
	MaxQueue     int           // FIFO admission waiters; 0 = none (fail fast)
	QueueTimeout time.Duration // admission wait, also retryAfterMs; required
	// Spares is the minimum of warm children kept ready (0 = none). After a
	// miss (a run found none ready) the pool keeps one more, up to
	// MaxSpares (below Spares → Spares: no growth); a spare above Spares
	// that sat unused for SpareIdle (required) is discarded.
	// With MaxSpares 0 every run spawns its own child. A taken spare is
	// replaced at once.
	Spares    int
	MaxSpares int
	SpareIdle time.Duration

	Limits Limits // per-run defaults; every field required
	// MemoryLimitBytes caps wasm linear memory, fixed when a child's runtime
	// is built (so it is set at spawn); 0 → the engine's default.
	MemoryLimitBytes uint64
	// CacheDir is where the parent keeps the compiled module between starts
	// (opened through internal/privdir). Empty → <os.UserCacheDir()>/
	// connecta/wazero (created 0700), and when that cannot be created (a
	// read-only root file system) the module is compiled in memory at every
	// start after one WARN. A directory that exists but is not private, or a
	// configured one that cannot be created, makes New fail naming the fix.
	CacheDir string
	// DisableCache compiles in every child, never touching the disk.
	DisableCache bool

	KillGrace    time.Duration // past the wall deadline; 0 → 250 ms
	ReadyTimeout time.Duration // spawn → ready; 0 → 10 s

	// Namespaces gives each child fresh network, IPC and mount namespaces
	// (CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWNS). Off by default: it costs
	// spawn time (see the package benchmarks) and needs privileges; when the
	// kernel refuses, the pool says so once and spawns without.
	Namespaces bool

	// Child is what every child executes: the slim child the build carries
	// (verified, from a sealed memfd), or, when it carries none, this binary
	// re-executed (then a WARN names the command that builds the slim one).
	Child Child

	Logger   *slog.Logger          // nil → discard
	Registry prometheus.Registerer // nil → no metrics

	// testChildArgv, when set, replaces the child's argv after the
	// executable path (tests select misbehaving children with it).
	testChildArgv func(mode string) []string
	// floorExe, when set, is executed instead of the pool's child (SpawnFloor).
	floorExe string
	// testMemfdNoExec acts as a kernel that refuses executable memfds.
	testMemfdNoExec bool
}

// Limits bound one run. In a Job, zero fields take the pool's.
type Limits struct {
	Wall       time.Duration // wall deadline including host waits (L3)
	CPUTime    time.Duration // guest CPU (L5)
	HeapBytes  uint64        // JS heap (L5)
	StackBytes uint64        // JS stack (L5)
}

// Provider is one guest global whose named functions are host calls.
type Provider struct {
	Name      string
	Functions []string
}

// Job is one program to run.
type Job struct {
	Code      string
	Prelude   string // trusted, runs after the provider globals exist
	Providers []Provider
	Limits    Limits // zero fields → the pool's
}

// Host is what a running program reaches. Call runs on its own goroutine
// with a context derived from Run's (cancelled when the run ends); its error
// text becomes the guest's rejection text (never empty: an empty text is
// replaced). Log receives each console entry of the program as it arrives,
// in order, on the run's goroutine: it must not block for long. The
// engine's truncation markers (ipc.Message.Marker) are not the program's
// entries and are not passed to Log; they stay in the done frame's log
// prefix.
type Host interface {
	Call(ctx context.Context, provider, function string, args json.RawMessage) (json.RawMessage, error)
	Log(level, text string)
}

// check refuses an Options that leaves a required value zero, naming the
// field and the configuration key it comes from.
func (o Options) check() error {
	return required.Check("supervisor", "Options.", []required.Field{
		{o.Slots <= 0, "Slots (executor.concurrency)"},
		{o.QueueTimeout <= 0, "QueueTimeout (executor.queueTimeoutMs)"},
		{o.SpareIdle <= 0, "SpareIdle (executor.spareIdleMs)"},
		{o.Limits.Wall <= 0, "Limits.Wall (executor.timeoutMs)"},
		{o.Limits.CPUTime <= 0, "Limits.CPUTime (executor.cpuTimeMs)"},
		{o.Limits.HeapBytes == 0, "Limits.HeapBytes (executor.memoryLimitBytes)"},
		{o.Limits.StackBytes == 0, "Limits.StackBytes (executor.maxStackSizeBytes)"},
	})
}

// normalized fills the pool's own tuning (not configuration) and clamps.
func (o Options) normalized() Options {
	if o.MaxQueue < 0 {
		o.MaxQueue = 0
	}
	o.Spares = max(o.Spares, 0)
	o.MaxSpares = max(o.MaxSpares, o.Spares)
	if o.MemoryLimitBytes == 0 && o.Limits.HeapBytes > engineHeapBytes {
		// The engine's default page cap is sized for the default heap; a
		// larger configured heap needs its backstop raised with it.
		o.MemoryLimitBytes = o.Limits.HeapBytes + wasmMemoryHeadroom
	}
	if o.KillGrace <= 0 {
		o.KillGrace = defaultKillGrace
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = defaultReadyTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// or fills l's zero fields from d.
func (l Limits) or(d Limits) Limits {
	if l.Wall <= 0 {
		l.Wall = d.Wall
	}
	if l.CPUTime <= 0 {
		l.CPUTime = d.CPUTime
	}
	if l.HeapBytes == 0 {
		l.HeapBytes = d.HeapBytes
	}
	if l.StackBytes == 0 {
		l.StackBytes = d.StackBytes
	}
	return l
}
