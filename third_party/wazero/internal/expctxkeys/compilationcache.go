package expctxkeys

// TrustedCompilationCache is a context.Context Value key. Its presence means
// the caller trusts the runtime's compilation cache as it trusts the native
// code in it (see experimental.WithTrustedCompilationCache).
type TrustedCompilationCache struct{}

// ImmutableBinary is a context.Context Value key; its value, a [32]byte, is
// the SHA-256 of a binary the caller never modifies (see
// experimental.WithImmutableBinary).
type ImmutableBinary struct{}
