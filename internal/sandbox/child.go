// Package sandbox is the child side of the process boundary: a re-executed
// copy of the binary that hardens itself, loads the engine, runs exactly one
// program and exits. The supervisor package is the parent side; the two share
// only package ipc.
//
// MaybeRunChild must be the first statement of main (and of TestMain in any
// package whose tests spawn children).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/guest"
	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// Exit codes of a child; the parent reports them with the stderr tail.
const (
	exitOK        = 0
	exitBadArgv   = 64
	exitHardening = 70
	exitEngine    = 71
	exitProtocol  = 72
	exitIO        = 74
)

// MaybeRunChild returns at once unless argv marks this process as a sandbox
// child; a child serves one program (or warms the cache) and exits without
// returning.
func MaybeRunChild() {
	args, ok, err := ipc.ParseChildArgs(os.Args)
	if !ok {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(exitBadArgv)
	}
	os.Exit(runChild(args))
}

func runChild(a ipc.ChildArgs) int {
	if err := hardenEarly(a); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: hardening:", err)
		return exitHardening
	}
	if a.Mode == ipc.ModeWarm {
		return warmCache(a)
	}
	in := os.NewFile(ipc.ChildInFD, "ipc-in")
	out := os.NewFile(ipc.ChildOutFD, "ipc-out")
	if in == nil || out == nil {
		fmt.Fprintln(os.Stderr, "sandbox: IPC descriptors missing")
		return exitIO
	}
	ctx := context.Background()
	eng, fallback, err := prepareEngine(ctx, a, inherited(), func(*guest.Engine) error { return hardenLate(a) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		if errors.As(err, new(hardeningError)) {
			return exitHardening
		}
		return exitEngine
	}
	// No warm-up run: Start leaves its template instance primed (its
	// instantiation paid the first-use page faults) and the program runs in
	// it, so a throwaway run would only add CPU and an instantiation.
	return serve(ctx, eng, fallback, ipc.NewReader(in), ipc.NewWriter(out))
}

// prepareEngine loads the engine, then hardens the process (harden:
// hardenLate, the seccomp filter), and only then starts the engine: no guest
// code — not the module's _initialize, not a snapshot restore, not QuickJS —
// runs before the filter is in force. The compiled code is mapped before it,
// so the filter can refuse every later executable mapping.
func prepareEngine(ctx context.Context, a ipc.ChildArgs, d descriptors, harden func(*guest.Engine) error) (eng *guest.Engine, fallback string, err error) {
	eng, snapshot, note, err := loadEngine(ctx, a, d)
	if note != "" {
		fmt.Fprintln(os.Stderr, "sandbox:", note)
	}
	if err != nil {
		return nil, "", fmt.Errorf("engine: %w", err)
	}
	warmCodecs()
	if err := harden(eng); err != nil {
		return nil, "", hardeningError{err}
	}
	if fallback, err = startEngine(ctx, eng, snapshot); err != nil {
		return nil, "", fmt.Errorf("engine: %w", err)
	}
	return eng, fallback, nil
}

// descriptors are what the parent handed over after the IPC pipes.
type descriptors struct{ code, snapshot *os.File }

func inherited() descriptors {
	return descriptors{os.NewFile(ipc.ChildCodeFD, "compiled-code"), os.NewFile(ipc.ChildSnapshotFD, "snapshot")}
}

// hardeningError is a failure to harden (exitHardening), not the engine's.
type hardeningError struct{ err error }

func (e hardeningError) Error() string { return "hardening: " + e.err.Error() }
func (e hardeningError) Unwrap() error { return e.err }

// loadEngine maps the compiled module the parent handed over in
// ChildCodeFD (sealed; loaded trusted), or compiles in memory without one;
// note explains a fallback. It reads the snapshot from ChildSnapshotFD when
// the parent sent one. Nothing of the module runs here.
func loadEngine(ctx context.Context, a ipc.ChildArgs, d descriptors) (eng *guest.Engine, snapshot []byte, note string, err error) {
	opts := engineOptions(a.MemoryLimitBytes)
	if a.CompiledKey != "" {
		f := d.code
		if serr := checkSealed(f); serr != nil {
			note = fmt.Sprintf("compiled code descriptor refused, compiling in memory: %v", serr)
		} else {
			opts.Code = &guest.CodeFile{File: f, Key: a.CompiledKey, Trusted: true}
		}
	}
	if a.Snapshot {
		snapshot, err = readSealed(d.snapshot, maxSnapshotBytes)
		if err != nil {
			snapshot, err = nil, nil
			note = strings.TrimPrefix(note+"; ", "; ") + "snapshot descriptor unusable"
		}
	}
	eng, err = guest.Compile(ctx, opts)
	if err != nil && opts.Code != nil {
		note = fmt.Sprintf("compiled code failed to load, compiling in memory: %v", err)
		opts.Code = nil
		eng, err = guest.Compile(ctx, opts)
	}
	return eng, snapshot, note, err
}

// startEngine restores the snapshot when there is one and it is this
// build's, else initializes afresh and says why in fallback (the parent
// warns and counts it).
func startEngine(ctx context.Context, eng *guest.Engine, snapshot []byte) (fallback string, err error) {
	if snapshot == nil {
		return "", eng.StartFresh(ctx)
	}
	if err := eng.RestoreSnapshot(ctx, snapshot); err != nil {
		fallback = fmt.Sprintf("snapshot refused: %v", err)
		return fallback, eng.StartFresh(ctx)
	}
	return "", nil
}

// maxSnapshotBytes bounds what readSealed reads (a snapshot is ~260 KB).
const maxSnapshotBytes = 64 << 20

// requiredSeals are what the parent applies before it hands a descriptor
// to a serving child: nobody can change the bytes again.
const requiredSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// checkSealed refuses a descriptor whose content could still change.
func checkSealed(f *os.File) error {
	if f == nil {
		return errors.New("descriptor missing")
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("not a sealed memory file: %w", err)
	}
	if seals&requiredSeals != requiredSeals {
		return fmt.Errorf("seals %#x, want %#x", seals, requiredSeals)
	}
	return nil
}

// readSealed reads a sealed descriptor's whole content (at most max bytes)
// with positioned reads: the offset is not shared with anyone.
func readSealed(f *os.File, max int64) ([]byte, error) {
	if err := checkSealed(f); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() > max || fi.Size() == 0 {
		return nil, fmt.Errorf("unusable: %v (%d bytes)", err, fi.Size())
	}
	// One read of the known size: a growing buffer would copy it and, with
	// the child's GC off, keep every copy.
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

// warmCache is the warm-up child: it loads the compiled code the parent
// read from its cache directory (ChildCodeFD, keyed by CompiledKey, loaded
// with wazero's checks: function bodies validated, code CRC checked) or
// compiles the module and writes its code there, then, under the seccomp
// filter, initializes QuickJS once and writes the snapshot into
// ChildSnapshotFD. The parent seals both after this process is gone and
// hands them to every serving child. The key goes to the parent in a ready
// frame.
func warmCache(a ipc.ChildArgs) int {
	d := inherited()
	code, snap := d.code, d.snapshot
	if code == nil || snap == nil {
		return exitOK // nothing to fill
	}
	if _, err := code.Stat(); err != nil {
		return exitOK
	}
	ctx := context.Background()
	opts := engineOptions(a.MemoryLimitBytes)
	opts.Code = &guest.CodeFile{File: code, Key: a.CompiledKey, Fill: true}
	eng, err := guest.Compile(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: compiling the module:", err)
		return exitEngine
	}
	defer eng.Close()
	key := eng.CompiledKey()
	if key == "" {
		key = a.CompiledKey // loaded what the parent handed over
	}
	if err := hardenLate(a); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: hardening:", err)
		return exitHardening
	}
	if err := eng.StartFresh(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: initializing the engine:", err)
		return exitEngine
	}
	ready := &ipc.Message{Type: ipc.TypeReady, CompiledKey: key}
	if _, err := snap.Write(eng.MarshalSnapshot()); err != nil {
		// Children initialize afresh: slower, still correct.
		fmt.Fprintln(os.Stderr, "sandbox: writing the snapshot:", err)
	}
	if out := os.NewFile(ipc.ChildOutFD, "ipc-out"); out != nil {
		_ = ipc.NewWriter(out).Write(ready)
	}
	return exitOK
}

// warmCodecs builds encoding/json's decoder and encoders for the frames
// before ready (~0.1–0.2 ms of reflection), so the program's arrival does not
// pay for them: same CPU, less latency.
func warmCodecs() {
	_, _ = ipc.Decode([]byte(`{"t":"run","run":{"code":"0","providers":[{"name":"p","fns":["f"]}],"limits":{}}}`))
	_, _ = ipc.Decode([]byte(`{"t":"reply","id":1,"ok":true,"value":0}`))
	_, _ = ipc.Encode(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Err: &ipc.ProgramError{}}})
}

// serve runs the child's one conversation: ready, run, calls/logs, done.
func serve(ctx context.Context, eng *guest.Engine, fallback string, r *ipc.Reader, w *ipc.Writer) int {
	if err := w.Write(&ipc.Message{Type: ipc.TypeReady, SnapshotFallback: fallback}); err != nil {
		return exitIO // the parent is gone
	}
	m, err := r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return exitOK // a spare the parent discarded, or the parent died
		}
		fmt.Fprintln(os.Stderr, "sandbox: reading the program:", err)
		return exitProtocol
	}
	if m.Type != ipc.TypeRun {
		fmt.Fprintf(os.Stderr, "sandbox: expected run, got %q\n", m.Type)
		return exitProtocol
	}
	h := &ipcHost{w: w, pending: make(map[uint32]func(guest.Reply))}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Replies are read on their own goroutine for the whole run, so the
	// parent's writes never block on us; EOF means the parent is gone.
	go h.readReplies(r)

	out, err := eng.Run(runCtx, program(m.Run), h)
	done := &ipc.Done{}
	if err != nil {
		done.Err = &ipc.ProgramError{Kind: string(guest.ErrInternal), Message: jstext.Prefix("Sandbox failed: "+err.Error(), ipc.MaxErrorChars)}
	} else {
		done = doneOf(out)
	}
	if err := w.Write(&ipc.Message{Type: ipc.TypeDone, Done: done}); err != nil {
		// Cannot happen with the bounds above; say so rather than hang.
		fmt.Fprintln(os.Stderr, "sandbox: sending done:", err)
		return exitIO
	}
	return exitOK
}

func program(r *ipc.Run) guest.Program {
	p := guest.Program{
		Code:       r.Code,
		Prelude:    r.Prelude,
		RandomSeed: r.Seed,
		Limits: guest.Limits{
			HeapBytes:  r.Limits.HeapBytes,
			StackBytes: r.Limits.StackBytes,
			CPUTime:    time.Duration(r.Limits.CPUTimeNs),
			Wall:       time.Duration(r.Limits.WallNs),
		},
	}
	for _, pr := range r.Providers {
		p.Providers = append(p.Providers, guest.Provider{Name: pr.Name, Functions: pr.Functions})
	}
	return p
}

func doneOf(out *guest.Outcome) *ipc.Done {
	d := &ipc.Done{
		Value:         out.Value,
		CPUTimeNs:     int64(out.CPUTime),
		PeakHeapBytes: out.PeakHeapBytes,
		HostCalls:     out.HostCalls,
	}
	if out.Err != nil {
		d.Err = &ipc.ProgramError{Kind: string(out.Err.Kind), Message: jstext.Prefix(out.Err.Message, ipc.MaxErrorChars)}
	}
	var logs ipc.LogPrefix
	for _, e := range out.Logs {
		logs.Add(e)
	}
	d.LogPrefix, d.LogEntries, d.LogChars = logs.String(), logs.Entries(), logs.Chars()
	return d
}

// ipcHost adapts guest host calls and console entries to frames.
type ipcHost struct {
	w       *ipc.Writer
	mu      sync.Mutex
	pending map[uint32]func(guest.Reply)
}

// Call sends the call frame; the reply settles it from readReplies. A call
// whose frame cannot be built (the guest bounds arguments first; this is the
// backstop for, say, a huge function name) fails that call only.
func (h *ipcHost) Call(_ context.Context, c guest.Call, settle func(guest.Reply)) {
	h.mu.Lock()
	h.pending[c.ID] = settle
	h.mu.Unlock()
	err := h.w.Write(&ipc.Message{Type: ipc.TypeCall, ID: c.ID, Provider: c.Provider, Function: c.Function, Args: c.Args})
	if err == nil {
		return
	}
	h.mu.Lock()
	delete(h.pending, c.ID)
	h.mu.Unlock()
	if errors.Is(err, ipc.ErrFrameTooLarge) {
		n := len(c.Args) + len(c.Provider) + len(c.Function)
		settle(guest.Reply{Err: fmt.Sprintf("Host call payload is %d UTF-8 bytes, over the %d-byte IPC limit.", n, ipc.MaxPayloadBytes)})
		return
	}
	// The parent is gone; the reader will see EOF and end the process.
	settle(guest.Reply{Err: "Host call could not be sent."})
}

// Log streams one entry as it happens. The guest caps entries, so a frame
// always fits; an entry that somehow does not is dropped from the stream (it
// is still in the done frame's prefix).
func (h *ipcHost) Log(e guest.LogEntry) {
	_ = h.w.Write(&ipc.Message{Type: ipc.TypeLog, Level: e.Level, Text: e.Text, Marker: e.Marker})
}

func (h *ipcHost) readReplies(r *ipc.Reader) {
	for {
		m, err := r.Read()
		if err != nil {
			// EOF: the parent died or abandoned the run. Either way nobody
			// wants the result: exit now (EOF-as-death).
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "sandbox: reading replies:", err)
				os.Exit(exitProtocol)
			}
			os.Exit(exitOK)
		}
		if m.Type != ipc.TypeReply {
			fmt.Fprintf(os.Stderr, "sandbox: unexpected %q during a run\n", m.Type)
			os.Exit(exitProtocol)
		}
		h.mu.Lock()
		settle := h.pending[m.ID]
		delete(h.pending, m.ID)
		h.mu.Unlock()
		if settle == nil {
			continue // stale or duplicate: the parent settles once, ignore
		}
		if m.OK {
			settle(guest.Reply{Value: m.Value})
		} else {
			settle(guest.Reply{Err: m.Err})
		}
	}
}

// engineOptions fills the engine's required bounds from their one
// definition, package ipc: the parent checks the same constants.
func engineOptions(memoryLimit uint64) guest.EngineOptions {
	return guest.EngineOptions{
		MemoryLimitBytes: memoryLimit,
		MaxArgBytes:      ipc.MaxPayloadBytes,
		MaxResultChars:   ipc.MaxResultChars,
	}
}
