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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/guest"
	"github.com/connecta-dev/connecta/ipc"
	"github.com/connecta-dev/connecta/jstext"
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
	eng, note, fallback, err := openEngine(ctx, a)
	if note != "" {
		fmt.Fprintln(os.Stderr, "sandbox:", note)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: engine:", err)
		return exitEngine
	}
	// No warm-up run: NewEngine leaves its template instance primed (its
	// instantiation paid the first-use page faults) and the program runs in
	// it, so a throwaway run would only add CPU and an instantiation.
	warmCodecs()
	if err := hardenLate(a); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: hardening:", err)
		return exitHardening
	}
	return serve(ctx, eng, fallback, ipc.NewReader(in), ipc.NewWriter(out))
}

// openEngine loads the compiled module from the cache directory when it is
// usable, else compiles in memory; note explains a fallback. It restores the
// snapshot the parent handed over when that verifies, and otherwise says in
// fallback why it initialized afresh (the parent warns and counts it).
func openEngine(ctx context.Context, a ipc.ChildArgs) (eng *guest.Engine, note, fallback string, err error) {
	dir := a.CacheDir
	if dir != "" {
		if err := checkCacheDir(dir); err != nil {
			note = fmt.Sprintf("compilation cache unusable, compiling in memory: %v", err)
			dir = ""
		}
	}
	opts := engineOptions(dir, a.MemoryLimitBytes)
	if a.Snapshot != "" {
		if dir == "" {
			fallback = "the cache directory holding the snapshot is unusable"
		} else if opts.Snapshot, err = loadSnapshot(dir, a.Snapshot); err != nil {
			fallback = err.Error()
		}
	}
	eng, err = guest.NewEngine(ctx, opts)
	if err != nil && opts.Snapshot != nil {
		fallback = fmt.Sprintf("snapshot refused: %v", err)
		opts.Snapshot = nil
		eng, err = guest.NewEngine(ctx, opts)
	}
	if err != nil && dir != "" {
		note = fmt.Sprintf("compilation cache failed, compiling in memory: %v", err)
		opts.CacheDir = ""
		eng, err = guest.NewEngine(ctx, opts)
	}
	return eng, note, fallback, err
}

// maxSnapshotBytes bounds what loadSnapshot reads (a snapshot is ~260 KB).
const maxSnapshotBytes = 64 << 20

// loadSnapshot reads the snapshot named in the child's arguments
// ("<file>:<sha256 hex>") from the cache directory and checks it against
// the parent's checksum and this build's file name.
func loadSnapshot(dir, arg string) ([]byte, error) {
	name, sum, ok := strings.Cut(arg, ":")
	if !ok || name != guest.SnapshotFileName() {
		return nil, fmt.Errorf("snapshot %q is not this build's (%s)", name, guest.SnapshotFileName())
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("snapshot unreadable: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSnapshotBytes {
		return nil, fmt.Errorf("snapshot unreadable: %v", err)
	}
	// One read of the known size: a growing buffer would copy it and, with
	// the child's GC off, keep every copy.
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("snapshot unreadable: %w", err)
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		return nil, errors.New("snapshot checksum mismatch")
	}
	return data, nil
}

// warmCache compiles the module into the cache directory once, for the
// parent, before any serving child starts, and persists the
// post-initialization snapshot beside it: the parent's warm-up is the only
// writer. The snapshot's file name goes to the parent in a ready frame.
func warmCache(a ipc.ChildArgs) int {
	if a.CacheDir == "" {
		return exitOK
	}
	if err := checkCacheDir(a.CacheDir); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: compilation cache unusable:", err)
		return exitEngine
	}
	pruneStaleCaches(a.CacheDir)
	eng, err := guest.NewEngine(context.Background(), engineOptions(a.CacheDir, a.MemoryLimitBytes))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: warming the compilation cache:", err)
		return exitEngine
	}
	defer eng.Close()
	name, err := writeSnapshot(a.CacheDir, eng.MarshalSnapshot())
	if err != nil {
		// Children initialize afresh: slower, still correct.
		fmt.Fprintln(os.Stderr, "sandbox: persisting the snapshot:", err)
		return exitOK
	}
	if out := os.NewFile(ipc.ChildOutFD, "ipc-out"); out != nil {
		_ = ipc.NewWriter(out).Write(&ipc.Message{Type: ipc.TypeReady, Snapshot: name})
	}
	return exitOK
}

// writeSnapshot stores data as this build's snapshot in dir (atomically:
// a reader sees the old file or the new one) and removes other builds'.
func writeSnapshot(dir string, data []byte) (string, error) {
	name := guest.SnapshotFileName()
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return "", err
	}
	if old, err := filepath.Glob(filepath.Join(dir, "snapshot-*.bin")); err == nil {
		for _, o := range old {
			if filepath.Base(o) != name {
				_ = os.Remove(o)
			}
		}
	}
	return name, nil
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
		Code:    r.Code,
		Prelude: r.Prelude,
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
	_ = h.w.Write(&ipc.Message{Type: ipc.TypeLog, Level: e.Level, Text: e.Text})
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
func engineOptions(cacheDir string, memoryLimit uint64) guest.EngineOptions {
	return guest.EngineOptions{
		CacheDir:         cacheDir,
		MemoryLimitBytes: memoryLimit,
		MaxArgBytes:      ipc.MaxPayloadBytes,
		MaxResultChars:   ipc.MaxResultChars,
	}
}
