package activity

import (
	"errors"
	"testing"

	"github.com/connecta-dev/connecta/internal/store"
)

// FuzzDecodeCursor: a `before` cursor is untrusted text. It decodes to a
// position or ErrBadCursor, never panics, and what decodes re-encodes to
// a cursor that decodes to the same position.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(EncodeCursor(store.Cursor{OccurredAtMs: 1_700_000_000_000, ID: "0000000a1b2c3d4e"}))
	f.Add("")
	f.Add("!!")
	f.Add("MTow")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		again, err := DecodeCursor(EncodeCursor(c))
		if err != nil || again != c {
			t.Fatalf("%q: %+v does not round-trip (%+v, %v)", s, c, again, err)
		}
	})
}
