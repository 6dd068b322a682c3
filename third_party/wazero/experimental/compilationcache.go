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
