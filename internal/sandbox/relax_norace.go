//go:build !race

package sandbox

// relaxedHardening is false in normal builds: the full allow-list applies.
const relaxedHardening = false
