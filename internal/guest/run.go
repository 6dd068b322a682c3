package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// Statuses returned by the shim's exports (internal/quickjs.wasm/shim/shim.c).
const (
	stPending     = 0
	stValue       = 1
	stUndefined   = 2
	stThrown      = 3
	stSyntax      = 4
	stOOM         = 5
	stResult      = 6
	stInterrupted = 7
	stInternal    = 8
	stOK          = 9
)

var logLevels = [...]string{"log", "info", "warn", "error", "debug"}

type runKey struct{}

type settledCall struct {
	id    uint32
	reply Reply
}

// run is the state of one Run: one instance, driven from one goroutine.
// Only the fields under mu are touched by other goroutines (settle).
type run struct {
	e         *Engine
	lim       resolvedLimits
	providers []Provider
	host      Host

	parent                                                              context.Context // the caller's context: cancellation
	callCtx                                                             context.Context // handed to Host.Call; cancelled when Run returns
	ctx                                                                 context.Context // carries the run to the host functions
	mod                                                                 api.Module
	mem                                                                 api.Memory
	fSetup, fPrelude, fRun, fSettle, fOutput, fHeapPeak, fMalloc, fFree api.Function

	start    time.Time
	deadline time.Time

	// CPU metering: a segment is one call into the guest.
	cpuUsed  time.Duration
	segCPU   time.Duration
	segWall  time.Time
	tripped  ErrorKind // why should_interrupt said yes; "" until it does
	inflight int

	logs      []string
	seed      uint64 // Math.random's seed for this run
	hostCalls int
	origin    origin // where the evaluated source sits in the caller's code

	mu      sync.Mutex
	done    bool
	settled []bool // by call id - 1: a reply was accepted
	queue   []settledCall
	wake    chan struct{}
}

func newRun(e *Engine, lim resolvedLimits, providers []Provider, host Host) *run {
	now := time.Now()
	return &run{
		e: e, lim: lim, providers: providers, host: host,
		start: now, deadline: now.Add(lim.Wall),
		wake: make(chan struct{}, 1),
	}
}

func (r *run) bind(ctx context.Context, mod api.Module) {
	r.ctx = ctx
	r.mod = mod
	r.mem = mod.Memory()
	r.fSetup = mod.ExportedFunction("setup")
	r.fPrelude = mod.ExportedFunction("prelude")
	r.fRun = mod.ExportedFunction("run")
	r.fSettle = mod.ExportedFunction("settle")
	r.fOutput = mod.ExportedFunction("output")
	r.fHeapPeak = mod.ExportedFunction("heap_peak")
	r.fMalloc = mod.ExportedFunction("malloc")
	r.fFree = mod.ExportedFunction("free")
}

// finish makes every later settle a no-op.
func (r *run) finish() {
	r.mu.Lock()
	r.done = true
	r.queue = nil
	r.mu.Unlock()
}

// enter calls into the guest as one metered segment.
func (r *run) enter(f api.Function, params ...uint64) (uint64, error) {
	r.segWall = time.Now()
	r.segCPU = threadCPU()
	res, err := f.Call(r.ctx, params...)
	r.cpuUsed += threadCPU() - r.segCPU
	if err != nil {
		return 0, err
	}
	if len(res) == 0 {
		return 0, nil
	}
	return res[0], nil
}

// errInterrupted is the panic that ends a guest call once shouldInterrupt
// said yes (see the should_interrupt host function).
var errInterrupted = errors.New("guest: interrupted")

// shouldInterrupt answers QuickJS's interrupt handler and the allocator's
// poll. Once it says yes it keeps saying yes; the host function turns a yes
// into a trap, so a program cannot catch its way out.
func (r *run) shouldInterrupt() bool {
	if r.tripped != "" {
		return true
	}
	if r.parent.Err() != nil {
		r.tripped = ErrCancelled
		return true
	}
	now := time.Now()
	if now.After(r.deadline) {
		r.tripped = ErrDeadline
		return true
	}
	// Thread CPU in this segment is at most its wall time: skip the syscall
	// while even that cannot exceed the budget.
	if r.cpuUsed+now.Sub(r.segWall) > r.lim.CPUTime && r.cpuUsed+threadCPU()-r.segCPU > r.lim.CPUTime {
		r.tripped = ErrCPU
		return true
	}
	return false
}

// withBytes copies b into a guest buffer for the duration of f.
func (r *run) withBytes(b []byte, f func(ptr, n uint32) (uint64, error)) (uint64, error) {
	size := uint64(len(b))
	if size == 0 {
		size = 1
	}
	res, err := r.fMalloc.Call(r.ctx, size)
	if err != nil {
		return 0, err
	}
	ptr := uint32(res[0])
	if ptr == 0 {
		return 0, errGuestOOM
	}
	defer r.fFree.Call(r.ctx, uint64(ptr))
	if !r.mem.Write(ptr, b) {
		return 0, fmt.Errorf("guest buffer out of range")
	}
	return f(ptr, uint32(len(b)))
}

var errGuestOOM error = guestError("out of memory")

const replyTooLarge = "Host result could not be delivered: the sandbox is out of memory."

// output is the text the last status carried.
func (r *run) output() string {
	res, err := r.fOutput.Call(r.ctx)
	if err != nil || len(res) == 0 {
		return ""
	}
	ptr, n := uint32(res[0]>>32), uint32(res[0])
	if n == 0 {
		return ""
	}
	b, ok := r.mem.Read(ptr, n)
	if !ok {
		return ""
	}
	return string(b)
}

func (r *run) heapPeak() uint64 {
	if r.fHeapPeak == nil {
		return 0
	}
	res, err := r.fHeapPeak.Call(r.ctx)
	if err != nil || len(res) == 0 {
		return 0
	}
	return res[0]
}

func failure(kind ErrorKind, msg string) *Outcome {
	return &Outcome{Err: &ProgramError{Kind: kind, Message: msg}}
}

// trippedOutcome reports why the interrupt handler stopped the guest.
func (r *run) trippedOutcome() *Outcome {
	switch r.tripped {
	case ErrCPU:
		return failure(ErrCPU, ipc.CPUBudgetMessage(r.lim.CPUTime))
	case ErrDeadline:
		return failure(ErrDeadline, ipc.DeadlineMessage(r.lim.Wall))
	default:
		return failure(ErrCancelled, cancelledMessage)
	}
}

// trap reports a failed call into the guest (a wasm trap or a host panic).
func (r *run) trap(stage string, err error) *Outcome {
	if r.tripped != "" {
		return r.trippedOutcome()
	}
	if err == errGuestOOM {
		return failure(ErrOutOfMemory, "InternalError: out of memory")
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return failure(ErrInternal, fmt.Sprintf("QuickJS engine failure during %s: %s", stage, msg))
}

// setupStatus turns a failed setup/prelude status into an outcome.
func (r *run) setupFailure(st uint64) *Outcome {
	if r.tripped != "" {
		return r.trippedOutcome()
	}
	if st == stOOM {
		return failure(ErrOutOfMemory, "Sandbox setup failed: "+r.output())
	}
	return failure(ErrInternal, "Sandbox setup failed: "+r.output())
}

func (r *run) execute(cfg []byte, prelude, code string) *Outcome {
	st, err := r.withBytes(cfg, func(p, n uint32) (uint64, error) {
		return r.enter(r.fSetup, r.lim.HeapBytes, r.lim.StackBytes, uint64(p), uint64(n), uint64(r.lim.MaxArgBytes), r.seed)
	})
	if err != nil {
		return r.trap("setup", err)
	}
	if st != stOK {
		return r.setupFailure(st)
	}
	if prelude != "" {
		st, err = r.withBytes([]byte(prelude), func(p, n uint32) (uint64, error) {
			return r.enter(r.fPrelude, uint64(p), uint64(n))
		})
		if err != nil {
			return r.trap("prelude", err)
		}
		if st != stOK {
			return r.setupFailure(st)
		}
	}
	src, origin := normalize(code)
	r.origin = origin
	st, err = r.withBytes([]byte(src), func(p, n uint32) (uint64, error) {
		return r.enter(r.fRun, uint64(p), uint64(n))
	})
	if err != nil {
		return r.trap("run", err)
	}
	return r.loop(st)
}

// loop is the job loop: deliver host replies until the program settles, the
// deadline passes, the caller cancels, or nothing can settle it (X6).
func (r *run) loop(st uint64) *Outcome {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if r.tripped != "" {
			return r.trippedOutcome()
		}
		if st != stPending {
			return r.final(st)
		}
		if r.inflight == 0 {
			return failure(ErrStall, stallMessage)
		}
		batch := r.takeQueue()
		for len(batch) == 0 {
			if timer == nil {
				timer = time.NewTimer(time.Until(r.deadline))
			}
			select {
			case <-r.wake:
			case <-r.parent.Done():
				r.tripped = ErrCancelled
			case <-timer.C:
				r.tripped = ErrDeadline
			}
			if r.tripped != "" {
				return r.trippedOutcome()
			}
			batch = r.takeQueue()
		}
		for i, s := range batch {
			r.inflight--
			var err error
			st, err = r.deliver(s)
			if err != nil {
				return r.trap("settle", err)
			}
			if st != stPending || r.tripped != "" {
				if i+1 < len(batch) {
					r.inflight -= len(batch) - i - 1 // never delivered; the run is over
				}
				break
			}
		}
	}
}

func (r *run) takeQueue() []settledCall {
	r.mu.Lock()
	q := r.queue
	r.queue = nil
	r.mu.Unlock()
	return q
}

func (r *run) deliver(s settledCall) (uint64, error) {
	ok, payload := uint64(1), []byte(s.reply.Value)
	if s.reply.Err != "" {
		ok, payload = 0, []byte(s.reply.Err)
	}
	st, err := r.withBytes(payload, func(p, n uint32) (uint64, error) {
		return r.enter(r.fSettle, uint64(s.id), ok, uint64(p), uint64(n))
	})
	if err == errGuestOOM {
		// No room in guest memory for the reply itself: the call fails.
		st, err = r.withBytes([]byte(replyTooLarge), func(p, n uint32) (uint64, error) {
			return r.enter(r.fSettle, uint64(s.id), 0, uint64(p), uint64(n))
		})
	}
	return st, err
}

func (r *run) final(st uint64) *Outcome {
	switch st {
	case stValue:
		return &Outcome{Value: json.RawMessage(r.output())}
	case stUndefined:
		return &Outcome{}
	case stThrown:
		return failure(ErrThrown, jstext.FromWTF8(r.output())) // text, like a console entry
	case stSyntax:
		return failure(ErrSyntax, r.origin.syntaxMessage(r.output()))
	case stOOM:
		return failure(ErrOutOfMemory, r.output())
	case stResult:
		return failure(ErrResult, r.output())
	case stInterrupted:
		return failure(ErrInternal, "Execution was interrupted.")
	default:
		if msg := r.output(); msg != "" {
			return failure(ErrInternal, "QuickJS shim failure: "+msg)
		}
		return failure(ErrInternal, fmt.Sprintf("QuickJS shim failure: status %d", st))
	}
}

// ---- host functions (called by the guest on the Run goroutine) ----

func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

func (r *run) hostCall(id, provider, fn, argsPtr, argsLen uint32) {
	r.hostCalls++
	r.inflight++
	r.mu.Lock()
	for uint32(len(r.settled)) < id {
		r.settled = append(r.settled, false)
	}
	r.mu.Unlock()
	settle := r.settler(id)
	if int(provider) >= len(r.providers) || int(fn) >= len(r.providers[provider].Functions) {
		settle(Reply{Err: "internal error: unknown host function"})
		return
	}
	args, ok := r.mem.Read(argsPtr, argsLen)
	if !ok {
		settle(Reply{Err: "internal error: host call arguments out of range"})
		return
	}
	p := r.providers[provider]
	r.host.Call(r.callCtx, Call{
		ID:       id,
		Provider: p.Name,
		Function: p.Functions[fn],
		Args:     json.RawMessage(append([]byte(nil), args...)),
	}, settle)
}

// settler returns the settle function for call id: the first reply wins,
// later ones and any after Run returned are ignored.
func (r *run) settler(id uint32) func(Reply) {
	return func(rep Reply) {
		r.mu.Lock()
		if r.done || id == 0 || int(id) > len(r.settled) || r.settled[id-1] {
			r.mu.Unlock()
			return
		}
		r.settled[id-1] = true
		r.queue = append(r.queue, settledCall{id: id, reply: rep})
		r.mu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// logMarkerBit on a log call's level marks the count or size marker
// (setup.js's MARKER).
const logMarkerBit = 8

func (r *run) hostLog(level, ptr, n uint32) {
	b, ok := r.mem.Read(ptr, n)
	if !ok {
		return
	}
	marker := level&logMarkerBit != 0
	level &^= logMarkerBit
	name := "log"
	if int(level) < len(logLevels) {
		name = logLevels[level]
	}
	// A lone surrogate arrives as WTF-8: one U+FFFD, not one per byte.
	text := jstext.FromWTF8(string(b))
	r.logs = append(r.logs, text)
	r.host.Log(LogEntry{Level: name, Text: text, Marker: marker})
}
