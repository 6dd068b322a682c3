package ipc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// benchRoundTrip sends a frame over one pipe to an echo goroutine and reads
// the echo back over another: one parent→child→parent round trip.
func benchRoundTrip(b *testing.B, m *Message) {
	aR, aW, _ := os.Pipe()
	bR, bW, _ := os.Pipe()
	defer aW.Close()
	defer bR.Close()
	go func() {
		defer bW.Close()
		r, w := NewReader(aR), NewWriter(bW)
		for {
			msg, err := r.Read()
			if err != nil {
				return
			}
			if w.Write(msg) != nil {
				return
			}
		}
	}()
	w, r := NewWriter(aW), NewReader(bR)
	frame, err := Encode(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	for range b.N {
		if err := w.Write(m); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFrameRoundTrip_Small(b *testing.B) {
	benchRoundTrip(b, &Message{Type: TypeReply, ID: 1, OK: true, Value: json.RawMessage(`{"ok":true}`)})
}

func BenchmarkFrameRoundTrip_256KiB(b *testing.B) {
	v := `"` + strings.Repeat("x", MaxPayloadBytes-2) + `"`
	benchRoundTrip(b, &Message{Type: TypeReply, ID: 1, OK: true, Value: json.RawMessage(v)})
}
