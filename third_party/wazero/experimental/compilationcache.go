package experimental

import (
	"context"

	"github.com/tetratelabs/wazero/internal/expctxkeys"
)

// WithTrustedCompilationCache tells Runtime.CompileModule, called with the
// returned context, that the runtime's compilation cache is trusted: a module
// whose compiled code is found there (in memory or in the cache directory)
// is loaded without validating its function bodies again. Those bodies were
// validated when the code was compiled, and a cache entry is keyed by the
// SHA-256 of the exact binary, the wazero version and the CPU features.
//
// Everything else about the module is still validated, and a module the
// cache does not hold is validated in full before it is compiled. Use this
// only with a cache directory nobody else can write: it holds native code
// that is executed as it is, so whoever can write it can already run code in
// the process.
//
// The default (without this context value) validates every module in full.
func WithTrustedCompilationCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, expctxkeys.TrustedCompilationCache{}, struct{}{})
}

// WithImmutableBinary tells Runtime.CompileModule, called with the returned
// context, that the binary passed to it is never modified (for example, one
// embedded in the program) and that sum is its SHA-256. Function bodies are
// then sliced from the binary instead of copied, and the module ID (the
// compilation cache's key) is derived from sum instead of by hashing the
// binary. The ID differs from the one computed without this option, so a
// module is cached once for each way it is compiled.
//
// A wrong sum makes the cache serve code compiled from another binary: use
// it only with a digest checked against the binary (a committed checksum
// and a test that compares them).
func WithImmutableBinary(ctx context.Context, sum [32]byte) context.Context {
	return context.WithValue(ctx, expctxkeys.ImmutableBinary{}, sum)
}
