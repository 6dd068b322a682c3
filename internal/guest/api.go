// Package guest runs one JavaScript program in one fresh QuickJS instance
// compiled to WebAssembly and hosted by wazero.
//
// An Engine holds the wazero runtime (compiler mode, debug info off, a wasm
// page cap) and the compiled module (loaded from an on-disk compilation cache
// when one is given), plus a snapshot of a template instance's memory taken
// right after QuickJS's runtime and context were created. Engine.Run
// instantiates a fresh module for every program, restores the snapshot into
// it and closes it afterwards, so nothing survives a run (P4); the first Run
// takes the template instance itself, in which no program has run (a
// one-program sandbox child so skips an instantiation). Linear memory
// is mmap-backed: it grows in place and goes back to the OS on close.
//
// The guest reaches the outside world only through the Host it is given:
// provider function calls (async, JSON in and out) and console entries.
// From WASI it gets real wall and monotonic clocks and nothing else: no
// filesystem, environment, arguments, randomness or network (P2, X5).
//
// # Limits (L5, L3)
//
// The JS heap limit gives a catchable "out of memory"; the wasm page cap
// (EngineOptions.MemoryLimitBytes) backs it up. The JS stack limit stays
// below the 2 MiB link-time shadow stack. Guest CPU is the Run goroutine's
// thread CPU time (Run locks its OS thread), so host waits never count; it
// is enforced through QuickJS's interrupt handler, which also enforces the
// wall deadline and the caller's cancellation. Once the handler says stop,
// the host function traps (a Go panic that unwinds the whole wasm call), so
// no try/catch/finally in the guest can catch or outlive it; QuickJS's own
// "uncatchable" error was not enough (a refused allocation while it is
// decorated replaces it with a catchable out of memory). The allocator polls
// the same handler at large allocations, so a short loop around an expensive
// allocating builtin is stopped too.
//
// # Known gap: builtins that never poll
//
// Some QuickJS builtins loop in C without allocating or polling the
// interrupt handler, for example
//
//	Array.prototype.indexOf.call({length: 2**53 - 1}, 1)
//	Array.prototype.lastIndexOf.call({length: 2**53 - 1}, 1)
//	new Array(2**31).join("")
//
// Compiled wasm is not preemptible, so such a program holds its goroutine
// (and, in a test binary, eventually every goroutine at the next GC stop the
// world) until the loop ends, which is effectively never. Neither the CPU
// budget nor the wall deadline nor ctx can stop it in process; only killing
// the process does. The supervisor runs every program in a disposable child
// process, watches that child's CPU clock from outside and kills it shortly
// past the budget, answering with this package's budget text. Never run
// them in process (the tests here deliberately do not).
//
// This package imports nothing else of the project; the sandbox child adapts
// it to IPC.
package guest

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Contract defaults (L5, R5). The engine applies them when a Limits field is
// zero. The R2 result bound and the L6 argument bound are not here: they are
// required EngineOptions that the sandbox child fills from package ipc, their
// one definition (this package imports only the engine).
const (
	DefaultHeapBytes        = 64 << 20 // JS heap (JS_SetMemoryLimit)
	DefaultStackBytes       = 1 << 20  // JS stack (JS_SetMaxStackSize), below the link-time shadow stack
	DefaultCPUTime          = 250 * time.Millisecond
	DefaultWall             = 30 * time.Second // includes host waits (L3)
	DefaultMaxLogEntries    = 200              // X4 per-run entry cap
	DefaultMaxLogEntryChars = 8000             // X4 per-entry cap
	DefaultMaxLogChars      = 256000           // X4 cumulative cap
)

// Console truncation markers (docs/sandbox.md §7; docs/DECISIONS.md: a visible
// marker containing TRUNCATED). An entry over MaxLogEntryChars keeps its
// first MaxLogEntryChars UTF-16 units followed by LogEntryTruncatedMarker;
// the entry after the last one allowed by MaxLogEntries is LogCountMarker;
// the entry that would cross MaxLogChars or LogWeightBytes is LogSizeMarker,
// and nothing is captured after a count or size marker.
const (
	LogEntryTruncatedMarker = "…[entry TRUNCATED]"
	LogSizeMarker           = "[log TRUNCATED: size budget exceeded]"
	// LogWeightBytes bounds the UTF-8 bytes of JSON.stringify(JSON.stringify(entry))
	// summed over entries, marker included (the 0.18.2 log transport bound).
	LogWeightBytes = 512 << 10
)

// LogCountMarker is the entry that replaces everything after the first
// maxEntries console entries.
func LogCountMarker(maxEntries int) string {
	return "[log TRUNCATED after " + strconv.Itoa(maxEntries) + " entries]"
}

// EngineOptions are fixed for the life of an Engine.
type EngineOptions struct {
	// CacheDir is the wazero compilation cache directory. Empty compiles in
	// memory (about 280 ms). The engine never looks at the environment.
	// Its entries are loaded with wazero's checks (function bodies
	// validated, code CRC checked): a path is not trusted.
	CacheDir string
	// Code, when set instead of CacheDir, is the compilation cache as one
	// file held by descriptor (see CodeFile); the sandbox's way.
	Code *CodeFile
	// Snapshot, when set, is a post-initialization snapshot that
	// MarshalSnapshot of this same build encoded: the engine restores it
	// instead of initializing QuickJS and running its setup code. One from
	// another build is refused with ErrSnapshotMismatch. The engine keeps it:
	// the caller must not modify it.
	Snapshot []byte
	// MemoryLimitBytes caps wasm linear memory (the backstop above the JS
	// heap limit). Zero picks a cap comfortably above DefaultHeapBytes.
	MemoryLimitBytes uint64
	// MaxArgBytes bounds a host call's serialized arguments, UTF-8 bytes
	// (L6). Required; a run's Limits may only lower it.
	MaxArgBytes int
	// MaxResultChars bounds the program's serialized result, UTF-16 code
	// units of JSON.stringify (R2). Required, at least 200 (the truncation
	// envelope); a run's Limits may only lower it.
	MaxResultChars int
}

// Limits bound one run. Zero fields take the defaults above, or the
// Engine's MaxResultChars and MaxArgBytes.
type Limits struct {
	HeapBytes        uint64
	StackBytes       uint64
	CPUTime          time.Duration // guest thread CPU time; host waits do not count
	Wall             time.Duration // wall deadline including host waits
	MaxResultChars   int
	MaxArgBytes      int
	MaxLogEntries    int
	MaxLogEntryChars int
	MaxLogChars      int
}

// Provider is one guest global (for example "connecta") whose own members
// named in Functions are async host calls. Any other member, inherited ones
// included, fails in the guest with "Unknown function <name>.<member>" and
// makes no host call (X8).
type Provider struct {
	Name      string
	Functions []string
}

// Program is one run.
type Program struct {
	Code      string     // the model's program (P1 normalization applies)
	Prelude   string     // trusted code run after provider globals exist, before Code
	Providers []Provider //
	Limits    Limits
	// RandomSeed seeds Math.random for this run (64 bits; the sandbox's
	// parent draws it from its CSPRNG). Zero draws one from crypto/rand
	// here.
	RandomSeed uint64
}

// Call is one host call made by the guest.
type Call struct {
	ID       uint32
	Provider string
	Function string
	Args     json.RawMessage // JSON array of the call's arguments, as the guest serialized it
}

// Reply settles a Call. When Err is non-empty the guest's promise rejects
// with new Error(Err); otherwise it resolves with Value (JSON; empty = undefined).
type Reply struct {
	Value json.RawMessage
	Err   string
}

// LogEntry is one captured console entry, already capped.
type LogEntry struct {
	Level string // log, info, warn, error, debug
	Text  string
	// Marker: the entry is LogCountMarker or LogSizeMarker, written by the
	// engine when the log stopped, not the program's text (a program that
	// logs the same text is not a marker).
	Marker bool
}

// Host is what the guest can reach. Call is invoked on the engine's goroutine
// and must not block: it starts the work and arranges for settle to be called
// exactly once, from any goroutine. A settle after Run returned is ignored.
// Log is called synchronously, in call order, as each entry is captured.
type Host interface {
	Call(ctx context.Context, call Call, settle func(Reply))
	Log(entry LogEntry)
}

// ErrorKind classifies why a program failed.
type ErrorKind string

const (
	ErrThrown      ErrorKind = "thrown"    // the program threw or rejected (including syntax errors)
	ErrSyntax      ErrorKind = "syntax"    // the program did not parse
	ErrCPU         ErrorKind = "cpu"       // guest CPU budget exhausted (uncatchable)
	ErrDeadline    ErrorKind = "deadline"  // wall deadline (L3)
	ErrCancelled   ErrorKind = "cancelled" // the caller's context ended
	ErrOutOfMemory ErrorKind = "out_of_memory"
	ErrStall       ErrorKind = "stall"    // awaits something that can never settle (X6)
	ErrResult      ErrorKind = "result"   // the result is not JSON-serializable (X9)
	ErrInternal    ErrorKind = "internal" // engine failure (trap, setup)
)

// ProgramError is a failed run. Message is the guest-visible text
// ("<name>: <message>" unless the name is Error; may be empty: E5).
type ProgramError struct {
	Kind    ErrorKind
	Message string
}

func (e *ProgramError) Error() string { return e.Message }

// Outcome is what a run produced.
type Outcome struct {
	Value         json.RawMessage // R2-bounded JSON; nil when the program returned undefined
	Err           *ProgramError   // nil on success
	Logs          []string        // every captured entry (caps applied), in order
	CPUTime       time.Duration
	PeakHeapBytes uint64
	HostCalls     int
}
