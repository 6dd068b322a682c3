package quickjswasm

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The embedded module is the one the committed checksum names.
func TestEmbeddedChecksum(t *testing.T) {
	sum := sha256.Sum256(Binary())
	if got := hex.EncodeToString(sum[:]); got != SHA256() {
		t.Fatalf("quickjs.wasm sha256 %s, quickjs.wasm.sha256 says %s", got, SHA256())
	}
}
