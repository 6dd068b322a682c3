package childbin

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// A build with the slim child carries the bytes make build stamped; one
// without carries neither.
func TestStampMatchesTheEmbeddedChild(t *testing.T) {
	if Binary() == nil {
		if SHA256() != "" {
			t.Fatalf("no child, but a stamp %q", SHA256())
		}
		t.Skip("built without the slimchild tag: no embedded child")
	}
	sum := sha256.Sum256(Binary())
	if got := hex.EncodeToString(sum[:]); got != SHA256() {
		t.Fatalf("embedded child %s, stamp %s: run make child (make build does)", got, SHA256())
	}
	if len(Binary()) < 4 || string(Binary()[:4]) != "\x7fELF" {
		t.Fatal("the embedded child is not an ELF executable")
	}
}
