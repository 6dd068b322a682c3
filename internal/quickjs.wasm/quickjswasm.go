// Package quickjswasm embeds QuickJS 2025-04-26 compiled to a wasm32-wasi
// reactor together with connecta's C shim (shim/shim.c), the way
// github.com/ncruces/go-sqlite3/embed does for SQLite.
//
// build.sh (make wasm) fetches Debian trixie's quickjs source package through
// a private apt configuration, verifies the upstream tarball's sha256
// (ec81da5b…efbbe; any Debian revision is accepted), applies
// quickjs-wasi.patch and compiles with Debian bookworm's clang-16, lld-16,
// wasi-libc and compiler-rt. The patch makes the source build for wasi (no
// Atomics, malloc_usable_size, no setjmp.h), keeps a small reserve so the
// out-of-memory error object itself can always be allocated, and adds
// JS_ReseedRandom (instances restored from a memory snapshot must not share
// a Math.random sequence). The build is reproducible (relative paths,
// -ffile-prefix-map, --strip-debug); make wasm-verify rebuilds it from
// scratch and fails with "toolchain drift" when the result differs from
// quickjs.wasm.sha256. The binary is committed, so go build needs Go alone;
// no QuickJS source is committed.
//
// Imports: connecta.{host_call, host_log, should_interrupt} and, from
// wasi_snapshot_preview1, clock_time_get plus the stdio functions wasi-libc
// links in (fd_close, fd_seek, fd_write; never called at run time). The
// export ABI is described at the top of shim/shim.c; package guest is its
// only user.
package quickjswasm

import (
	_ "embed"
	"strings"
)

//go:embed quickjs.wasm
var binary []byte

//go:embed quickjs.wasm.sha256
var checksum string

// Binary returns the embedded module. Callers must not modify it.
func Binary() []byte { return binary }

// SHA256 returns the hex sha256 of the embedded module, as committed in
// quickjs.wasm.sha256.
func SHA256() string {
	sum, _, _ := strings.Cut(checksum, " ")
	return strings.TrimSpace(sum)
}
