package expctxkeys

// TrustedCompilationCache is a context.Context Value key. Its presence means
// the caller trusts the runtime's compilation cache as it trusts the native
// code in it (see experimental.WithTrustedCompilationCache).
type TrustedCompilationCache struct{}
