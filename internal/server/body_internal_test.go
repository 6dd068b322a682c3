package server

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// chunkReader hands out its bytes in the chunk sizes it is given, cycling.
type chunkReader struct {
	b      []byte
	chunks []byte
	i      int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.chunks) > 0 {
		n = int(c.chunks[c.i%len(c.chunks)])%700 + 1
		c.i++
	}
	n = min(n, len(p), len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

// peekFirst, however the body arrives, drops exactly the leading JSON
// whitespace, stops at the first other byte (so a batch is seen behind any
// amount of blanks), replays everything after it, and refuses blanks beyond
// the limit.
func FuzzPeekFirst(f *testing.F) {
	f.Add(append(bytes.Repeat([]byte(" "), 600), '['), []byte{200, 1}, int64(1<<20))
	f.Add([]byte("\n\t\r {\"jsonrpc\":\"2.0\"}"), []byte{3}, int64(10))
	f.Add([]byte("    "), []byte{1}, int64(3))
	f.Add([]byte(""), []byte{}, int64(0))
	f.Fuzz(func(t *testing.T, body, chunks []byte, limit int64) {
		if limit < 0 {
			limit = -limit
		}
		want := bytes.TrimLeft(body, " \t\r\n")
		blanks := int64(len(body) - len(want))
		r := &chunkReader{b: body, chunks: chunks}
		head, skipped, eof, err := peekFirst(r, limit)
		if blanks > limit {
			if !errors.Is(err, errBodyTooLarge) {
				t.Fatalf("%d blanks over limit %d: err %v", blanks, limit, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("err %v", err)
		}
		if skipped != blanks {
			t.Fatalf("skipped %d, want %d", skipped, blanks)
		}
		if len(want) > 0 && (len(head) == 0 || head[0] != want[0]) {
			t.Fatalf("head %q, want it to start with %q", head, want[0])
		}
		rest, _ := io.ReadAll(&peekedBody{head: head, rest: r, eof: eof})
		if !bytes.Equal(rest, want) {
			t.Fatalf("replayed %q, want %q", rest, want)
		}
	})
}
