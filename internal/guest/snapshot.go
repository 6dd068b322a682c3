package guest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"

	quickjswasm "github.com/connecta-dev/connecta/internal/quickjs.wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// A persisted snapshot is the template instance's memory after QuickJS's
// init and the engine's setup code (takeSnapshot), so a fresh process can
// restore it instead of running both (about 1.3 ms of a sandbox child's
// CPU). It holds only run-independent state: each run's limits, the
// Math.random reseed and the prelude (with the run's frame secret) are
// applied after the restore, never before the snapshot is taken.
//
// The encoding is snapshotMagic, the 64-hex-digit SnapshotKey, a newline,
// the memory size in wasm pages (4 bytes, little endian), then the memory
// above the shadow stack.
const snapshotMagic = "connecta-snapshot-1\n"

// ErrSnapshotMismatch is returned by NewEngine for a snapshot taken by
// another build, or one that is malformed; the caller initializes afresh.
var ErrSnapshotMismatch error = guestError("guest: snapshot does not belong to this build")

// SnapshotKey names everything a snapshot depends on: the module, the setup
// code, the template's init parameters and memory layout, and the build
// (Go version and module versions, VCS revision when recorded).
func SnapshotKey() string {
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field(snapshotMagic)
	field(quickjswasm.SHA256())
	field(setupSource)
	field(strconv.FormatUint(DefaultHeapBytes, 10))
	field(strconv.FormatUint(DefaultStackBytes, 10))
	field(strconv.Itoa(linkStackBytes))
	field(runtime.Version() + " " + runtime.GOARCH)
	if info, ok := debug.ReadBuildInfo(); ok {
		field(info.Main.Path + "@" + info.Main.Version)
		for _, d := range info.Deps {
			field(d.Path + "@" + d.Version)
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				field(s.Key + "=" + s.Value)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SnapshotFileName is the file a build's snapshot is persisted under.
func SnapshotFileName() string { return "snapshot-" + SnapshotKey()[:32] + ".bin" }

// MarshalSnapshot encodes the engine's post-initialization snapshot.
func (e *Engine) MarshalSnapshot() []byte {
	key := SnapshotKey()
	out := make([]byte, 0, len(snapshotMagic)+len(key)+1+4+len(e.snapshot))
	out = append(out, snapshotMagic...)
	out = append(out, key...)
	out = append(out, '\n')
	out = binary.LittleEndian.AppendUint32(out, e.snapshotPages)
	return append(out, e.snapshot...)
}

// restoreSnapshot makes the engine's template instance from an encoded
// snapshot instead of initializing one.
func (e *Engine) restoreSnapshot(ctx context.Context, data []byte) error {
	key := SnapshotKey()
	head := len(snapshotMagic) + len(key) + 1
	if len(data) < head+4 || string(data[:len(snapshotMagic)]) != snapshotMagic ||
		string(data[len(snapshotMagic):head-1]) != key || data[head-1] != '\n' {
		return ErrSnapshotMismatch
	}
	pages := binary.LittleEndian.Uint32(data[head:])
	mem := data[head+4:]
	if uint64(pages)*wasmPageBytes != linkStackBytes+uint64(len(mem)) || uint64(pages)*wasmPageBytes > e.memCap {
		return fmt.Errorf("%w: %d pages for %d bytes", ErrSnapshotMismatch, pages, len(mem))
	}
	e.snapshot, e.snapshotPages = mem, pages
	alloc := mmapAllocator{populateFrom: linkStackBytes, populateTo: linkStackBytes + uint64(len(mem))}
	mod, err := e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, alloc), e.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		e.snapshot, e.snapshotPages = nil, 0
		return fmt.Errorf("guest: instantiate template: %w", err)
	}
	if err := e.restore(mod); err != nil {
		_ = mod.Close(context.Background())
		e.snapshot, e.snapshotPages = nil, 0
		return fmt.Errorf("guest: restore snapshot: %w", err)
	}
	e.primed = mod
	return nil
}

// RestoreSnapshot is Start with data as the snapshot (see
// EngineOptions.Snapshot): a caller that reads the snapshot itself, after
// Compile, passes it here.
func (e *Engine) RestoreSnapshot(ctx context.Context, data []byte) error {
	return e.restoreSnapshot(ctx, data)
}
