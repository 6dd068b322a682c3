package guest

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
	quickjswasm "github.com/connecta-dev/connecta/internal/quickjs.wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Engine build facts (shim and link line in internal/quickjs.wasm/).
const (
	// linkStackBytes is the shadow stack the module is linked with. The JS
	// stack limit must stay below it with room for C frames past the check.
	linkStackBytes = 2 << 20
	// MaxStackBytes is the largest Limits.StackBytes accepted.
	MaxStackBytes = linkStackBytes - 512<<10
	// defaultMemoryHeadroom is added to DefaultHeapBytes for the default wasm
	// page cap: shadow stack, static data, allocator overhead, host buffers.
	defaultMemoryHeadroom = 32 << 20
	wasmPageBytes         = 64 << 10
	// maxHeapBytes keeps the JS heap limit (a 32-bit size_t in the guest,
	// plus the shim's reporting reserve) from wrapping.
	maxHeapBytes = 1<<32 - 16<<20
)

// Guest-visible texts (docs/sandbox.md §6).
const (
	stallMessage     = "Execution stalled: code awaits something that can never settle."
	cancelledMessage = ipc.CancelledMessage
)

//go:embed setup.js
var setupSource string

// ErrClosed is returned by Run after Close. (A constant-backed error: an
// errors.New variable allocates in init, in every sandbox child.)
var ErrClosed error = guestError("guest: engine is closed")

var errNotStarted error = guestError("guest: engine was compiled but not started")

type guestError string

func (e guestError) Error() string { return string(e) }

// Engine holds the wazero runtime and the compiled QuickJS module. It is safe
// for concurrent use: every Run gets its own fresh instance.
type Engine struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	memCap   uint64
	bounds   EngineOptions // MaxArgBytes and MaxResultChars: the run defaults
	store    *codeStore    // opts.Code, nil without one
	epoch    time.Time     // monotonic origin of the guest's monotonic clock

	// snapshot is the template instance's linear memory above the shadow
	// stack after init and prepare; every run starts from a copy of it.
	snapshot      []byte
	snapshotPages uint32

	// primed is the template instance itself, kept open after the snapshot
	// was read from it: its memory is the snapshot, so the first Run takes
	// it instead of instantiating and restoring (the sandbox child runs one
	// program: this takes an instantiation off its CPU and its latency).
	primeMu sync.Mutex
	primed  api.Module

	mu      sync.RWMutex
	closed  bool
	running sync.WaitGroup
}

// NewEngine builds the runtime (compiler mode, no debug info, page cap),
// compiles the embedded QuickJS module (through opts.Code or opts.CacheDir
// when given) and starts it: Compile, then Start.
func NewEngine(ctx context.Context, opts EngineOptions) (*Engine, error) {
	e, err := Compile(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// Compile builds the runtime and loads or compiles the module, and runs
// nothing of it: no instance exists until Start. The sandbox child hardens
// itself (seccomp) between the two, so no guest code ever runs before its
// filter is in force.
func Compile(ctx context.Context, opts EngineOptions) (*Engine, error) {
	switch {
	case opts.MaxArgBytes <= 0:
		return nil, errors.New("guest: EngineOptions.MaxArgBytes is required (L6)")
	case opts.MaxResultChars < 200:
		return nil, errors.New("guest: EngineOptions.MaxResultChars is required and must leave room for the truncation envelope (200)")
	case opts.Code != nil && opts.CacheDir != "":
		return nil, errCodeFileAndDir
	}
	memCap := opts.MemoryLimitBytes
	if memCap == 0 {
		memCap = DefaultHeapBytes + defaultMemoryHeadroom
	}
	pages := (memCap + wasmPageBytes - 1) / wasmPageBytes
	if pages > 65536 {
		return nil, fmt.Errorf("guest: MemoryLimitBytes %d is over the 4 GiB wasm32 limit", memCap)
	}
	cfg := wazero.NewRuntimeConfigCompiler().
		WithDebugInfoEnabled(false).
		WithCloseOnContextDone(false). // ~8x slower on QuickJS; the interrupt handler does this job
		WithMemoryLimitPages(uint32(pages))
	var store *codeStore
	switch {
	case opts.Code != nil:
		var err error
		if store, err = newCodeStore(*opts.Code); err != nil {
			return nil, err
		}
		cfg = cfg.WithCompilationCache(wazero.NewCompilationCacheWithStore(store))
	case opts.CacheDir != "":
		cache, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("guest: compilation cache %s: %w", opts.CacheDir, err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	e := &Engine{rt: rt, memCap: pages * wasmPageBytes, epoch: time.Now(), bounds: opts, store: store}
	if err := e.instantiateHostModules(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	compileCtx := ctx
	if opts.Code != nil && opts.Code.Trusted {
		// Only bytes this process tree produced or verified, sealed since
		// (CodeFile.Trusted); a cache directory is never trusted.
		compileCtx = experimental.WithTrustedCompilationCache(ctx)
	}
	// The embedded module never changes and its checksum is committed beside
	// it (quickjswasm's test compares the two): wazero then slices function
	// bodies out of it instead of copying them (~570 KB of every child's
	// heap) and keys its cache by that checksum instead of hashing 640 KB.
	var sum [32]byte
	if n, err := hex.Decode(sum[:], []byte(quickjswasm.SHA256())); err == nil && n == len(sum) {
		compileCtx = experimental.WithImmutableBinary(compileCtx, sum)
	}
	compiled, err := rt.CompileModule(compileCtx, quickjswasm.Binary())
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("guest: compile quickjs.wasm: %w", err)
	}
	e.compiled = compiled
	// Build encoding/json's encoder for the run configuration now, not in
	// the first Run: ~0.1 ms of reflection a one-program sandbox child would
	// otherwise pay after the program arrived.
	_, _ = json.Marshal(setupConfig{Providers: []setupProvider{{Functions: []string{}}}})
	return e, nil
}

// Start makes the template instance: it restores opts.Snapshot, or runs the
// module's initialization and the engine's setup code. This is the first
// guest code that runs. A snapshot that does not restore is an error (with
// ErrSnapshotMismatch for another build's); the engine can then Start again
// with StartFresh.
func (e *Engine) Start(ctx context.Context) error {
	if e.bounds.Snapshot != nil {
		return e.restoreSnapshot(ctx, e.bounds.Snapshot)
	}
	return e.takeSnapshot(ctx)
}

// Started reports whether Start (or StartFresh, or RestoreSnapshot) has
// made the template instance: before it, no guest code has run.
func (e *Engine) Started() bool {
	e.primeMu.Lock()
	defer e.primeMu.Unlock()
	return e.primed != nil || e.snapshotPages != 0
}

// StartFresh is Start ignoring opts.Snapshot.
func (e *Engine) StartFresh(ctx context.Context) error { return e.takeSnapshot(ctx) }

// CompiledKey is the hex cache key under which Compile wrote the module's
// compiled code into a CodeFile with Fill, or "" when it wrote none.
func (e *Engine) CompiledKey() string {
	if e.store == nil {
		return ""
	}
	return e.store.added
}

// takeSnapshot runs QuickJS's runtime and context creation and the engine's
// setup once, in a template instance, and keeps its memory: a run then costs
// a copy instead of about a millisecond of interpreter start-up and parsing.
func (e *Engine) takeSnapshot(ctx context.Context) error {
	mod, err := e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mmapAllocator{}), e.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
	if err != nil {
		return fmt.Errorf("guest: instantiate template: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = mod.Close(ctx)
		}
	}()
	res, err := mod.ExportedFunction("init").Call(ctx, DefaultHeapBytes, DefaultStackBytes)
	if err != nil || int32(res[0]) != 0 {
		return fmt.Errorf("guest: template init: %v %v", res, err)
	}
	r := &run{ctx: ctx}
	r.bind(ctx, mod)
	st, err := r.withBytes([]byte(setupSource), func(p, n uint32) (uint64, error) {
		res, err := mod.ExportedFunction("prepare").Call(ctx, uint64(p), uint64(n))
		if err != nil {
			return 0, err
		}
		return res[0], nil
	})
	if err != nil || st != stOK {
		return fmt.Errorf("guest: template setup: status %d %v: %s", st, err, r.output())
	}
	mem := mod.Memory()
	size := mem.Size()
	b, ok := mem.Read(linkStackBytes, size-linkStackBytes)
	if !ok {
		return fmt.Errorf("guest: template memory is %d bytes", size)
	}
	e.snapshot = append([]byte(nil), b...)
	e.snapshotPages = size / wasmPageBytes
	e.primed, keep = mod, true
	return nil
}

// takePrimed returns the template instance once, then nil.
func (e *Engine) takePrimed() api.Module {
	e.primeMu.Lock()
	defer e.primeMu.Unlock()
	mod := e.primed
	e.primed = nil
	return mod
}

// instance returns a fresh instance whose memory is the snapshot: the
// template instance the first time (nothing ran in it after the snapshot was
// read), a new instance with the snapshot restored after that.
func (e *Engine) instance(ctx context.Context) (api.Module, error) {
	if mod := e.takePrimed(); mod != nil {
		return mod, nil
	}
	// No start function: the snapshot already holds _initialize's effects.
	alloc := mmapAllocator{populateFrom: linkStackBytes, populateTo: linkStackBytes + uint64(len(e.snapshot))}
	mod, err := e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, alloc), e.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("guest: instantiate: %w", err)
	}
	if err := e.restore(mod); err != nil {
		_ = mod.Close(context.Background())
		return nil, fmt.Errorf("guest: restore snapshot: %w", err)
	}
	return mod, nil
}

// restore makes a fresh instance's memory the snapshot's.
func (e *Engine) restore(mod api.Module) error {
	mem := mod.Memory()
	if have := mem.Size() / wasmPageBytes; have < e.snapshotPages {
		if _, ok := mem.Grow(e.snapshotPages - have); !ok {
			return errors.New("cannot grow memory to the snapshot's size")
		}
	}
	if !mem.Write(linkStackBytes, e.snapshot) {
		return errors.New("snapshot does not fit")
	}
	return nil
}

// Close releases the runtime after the runs in progress return.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.running.Wait()
	return e.rt.Close(context.Background())
}

// resolvedLimits are a run's limits with defaults applied.
type resolvedLimits struct {
	Limits
}

func (e *Engine) resolve(l Limits) (resolvedLimits, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if l.HeapBytes == 0 {
		l.HeapBytes = DefaultHeapBytes
	}
	if l.StackBytes == 0 {
		l.StackBytes = DefaultStackBytes
	}
	if l.CPUTime == 0 {
		l.CPUTime = DefaultCPUTime
	}
	if l.Wall == 0 {
		l.Wall = DefaultWall
	}
	def(&l.MaxResultChars, e.bounds.MaxResultChars)
	def(&l.MaxArgBytes, e.bounds.MaxArgBytes)
	def(&l.MaxLogEntries, DefaultMaxLogEntries)
	def(&l.MaxLogEntryChars, DefaultMaxLogEntryChars)
	def(&l.MaxLogChars, DefaultMaxLogChars)
	// wasm32 sizes are 32-bit; the page cap stops anything near this first.
	if l.HeapBytes > maxHeapBytes {
		l.HeapBytes = maxHeapBytes
	}
	switch {
	case l.StackBytes > MaxStackBytes:
		return resolvedLimits{}, fmt.Errorf("guest: StackBytes %d is over the engine's %d", l.StackBytes, MaxStackBytes)
	case l.CPUTime < 0 || l.Wall < 0:
		return resolvedLimits{}, errors.New("guest: CPUTime and Wall must be positive")
	case l.MaxResultChars < 0 || l.MaxArgBytes < 0 || l.MaxLogEntries < 0 || l.MaxLogEntryChars < 0 || l.MaxLogChars < 0:
		return resolvedLimits{}, errors.New("guest: limits must not be negative")
	case l.MaxResultChars > e.bounds.MaxResultChars || l.MaxArgBytes > e.bounds.MaxArgBytes:
		return resolvedLimits{}, errors.New("guest: a run may lower MaxResultChars and MaxArgBytes, not raise them over the engine's")
	case l.MaxResultChars < 200:
		return resolvedLimits{}, errors.New("guest: MaxResultChars must leave room for the truncation envelope (200)")
	}
	return resolvedLimits{l}, nil
}

// setupConfig is what setup.js receives.
type setupConfig struct {
	Providers []setupProvider `json:"providers"`
	Limits    setupLimits     `json:"limits"`
}

type setupProvider struct {
	Name      string   `json:"name"`
	Functions []string `json:"functions"`
}

type setupLimits struct {
	MaxResultChars   int    `json:"maxResultChars"`
	MaxLogEntries    int    `json:"maxLogEntries"`
	MaxLogEntryChars int    `json:"maxLogEntryChars"`
	MaxLogChars      int    `json:"maxLogChars"`
	MaxLogWeight     int    `json:"maxLogWeight"`
	EntryMarker      string `json:"entryMarker"`
	CountMarker      string `json:"countMarker"`
	SizeMarker       string `json:"sizeMarker"`
}

// Run executes one program in a fresh instance and closes it. The error is
// non-nil only when the engine could not run the program at all (invalid
// limits or providers, closed engine, instantiation failure); every program
// failure, including the deadline and cancellation, is in Outcome.Err.
//
// Run locks its goroutine to its OS thread for the duration so that guest
// CPU can be read as thread CPU time.
func (e *Engine) Run(ctx context.Context, prog Program, host Host) (*Outcome, error) {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, ErrClosed
	}
	e.running.Add(1)
	e.mu.RUnlock()
	defer e.running.Done()
	if e.snapshotPages == 0 {
		return nil, errNotStarted
	}

	lim, err := e.resolve(prog.Limits)
	if err != nil {
		return nil, err
	}
	cfg := setupConfig{
		Providers: make([]setupProvider, len(prog.Providers)),
		Limits: setupLimits{
			MaxResultChars:   lim.MaxResultChars,
			MaxLogEntries:    lim.MaxLogEntries,
			MaxLogEntryChars: lim.MaxLogEntryChars,
			MaxLogChars:      lim.MaxLogChars,
			MaxLogWeight:     LogWeightBytes,
			EntryMarker:      LogEntryTruncatedMarker,
			CountMarker:      LogCountMarker(lim.MaxLogEntries),
			SizeMarker:       LogSizeMarker,
		},
	}
	for i, p := range prog.Providers {
		if p.Name == "" {
			return nil, fmt.Errorf("guest: provider %d has no name", i)
		}
		fns := p.Functions
		if fns == nil {
			fns = []string{}
		}
		cfg.Providers[i] = setupProvider{Name: p.Name, Functions: fns}
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("guest: providers: %w", err)
	}

	if ctx.Err() != nil {
		return failure(ErrCancelled, cancelledMessage), nil
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	r := newRun(e, lim, prog.Providers, host)
	r.seed = prog.RandomSeed
	if r.seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		r.seed = binary.LittleEndian.Uint64(b[:])
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the host calls still in flight (L2)
	defer r.finish()
	r.callCtx = callCtx
	r.parent = ctx

	ictx := context.WithValue(callCtx, runKey{}, r)
	mod, err := e.instance(ictx)
	if err != nil {
		return nil, err
	}
	defer mod.Close(context.Background())
	r.bind(ictx, mod)

	out := r.execute(cfgJSON, prog.Prelude, prog.Code)
	out.CPUTime = r.cpuUsed
	out.PeakHeapBytes = r.heapPeak()
	out.Logs = r.logs
	out.HostCalls = r.hostCalls
	return out, nil
}
