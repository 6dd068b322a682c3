package ipc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/jstext"
	"io"
	"strings"
	"testing"
)

func frameOf(body []byte) []byte {
	f := make([]byte, HeaderBytes+len(body))
	binary.BigEndian.PutUint32(f, uint32(len(body)))
	copy(f[HeaderBytes:], body)
	return f
}

func TestFrame_RoundTripEveryType(t *testing.T) {
	msgs := []*Message{
		{Type: TypeReady},
		{Type: TypeRun, Run: &Run{Code: "async () => 1+1", Prelude: "p", Providers: []Provider{{Name: "connecta", Functions: []string{"call"}}}, Limits: Limits{WallNs: 5}}},
		{Type: TypeCall, ID: 7, Provider: "connecta", Function: "call", Args: json.RawMessage(`["a<b>&",{"x":1}]`)},
		{Type: TypeReply, ID: 7, OK: true, Value: json.RawMessage(`{"v":"<&>"}`)},
		{Type: TypeReply, ID: 8, Err: "\u001econnecta-error:abc:{}"},
		{Type: TypeLog, Level: "warn", Text: "hello"},
		{Type: TypeDone, Done: &Done{Value: json.RawMessage(`2`), LogPrefix: "a\nb", LogEntries: 2, LogChars: 3, CPUTimeNs: 10, PeakHeapBytes: 4096, HostCalls: 1}},
		{Type: TypeDone, Done: &Done{Err: &ProgramError{Kind: "thrown", Message: ""}}},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, m := range msgs {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(buf.String(), `\u003c`) {
		t.Fatal("HTML escaping must be off")
	}
	r := NewReader(&buf)
	for i, want := range msgs {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("msg %d: %v", i, err)
		}
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if !bytes.Equal(wj, gj) {
			t.Fatalf("msg %d: got %s want %s", i, gj, wj)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	// An empty error message keeps its presence (E5).
	m := msgs[len(msgs)-1]
	f, _ := Encode(m)
	got, _ := Decode(f[HeaderBytes:])
	if got.Done.Err == nil || got.Done.Err.Message != "" {
		t.Fatal("empty error message lost")
	}
}

// countingReader records how much was read, to prove the body of an oversized
// frame is never read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestFrame_OversizedLengthRefusedBeforeBody(t *testing.T) {
	for _, n := range []uint32{MaxBodyBytes + 1, 1 << 31, 0xFFFFFFFF} {
		hdr := make([]byte, 4)
		binary.BigEndian.PutUint32(hdr, n)
		// The reader must fail without reading the (endless) body.
		cr := &countingReader{r: io.MultiReader(bytes.NewReader(hdr), endless{})}
		r := NewReader(cr)
		_, err := r.ReadFrame()
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("len %d: %v", n, err)
		}
		if cr.n > 4 {
			t.Fatalf("len %d: read %d bytes, want only the header", n, cr.n)
		}
	}
	// The largest legal frame is accepted.
	body := []byte(`{"t":"log","text":"` + strings.Repeat("x", MaxBodyBytes-len(`{"t":"log","text":""}`)) + `"}`)
	if len(body) != MaxBodyBytes {
		t.Fatal(len(body))
	}
	r := NewReader(bytes.NewReader(frameOf(body)))
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestFrame_WriterNeverProducesOversizedFrame(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	big := strings.Repeat("y", MaxBodyBytes)
	err := w.Write(&Message{Type: TypeLog, Text: big})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v", err)
	}
	if buf.Len() != 0 {
		t.Fatal("a refused frame wrote bytes")
	}
	// Escaping expansion counts: 50,000 control chars are 300,000 bytes of JSON.
	err = w.Write(&Message{Type: TypeLog, Text: strings.Repeat("\x01", 50000)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("escaped: %v", err)
	}
	// A host-call payload at the L6 bound always fits in one frame.
	payload := `"` + strings.Repeat("z", MaxPayloadBytes-2) + `"`
	if err := w.Write(&Message{Type: TypeReply, ID: 0xFFFFFFFF, OK: true, Value: json.RawMessage(payload)}); err != nil {
		t.Fatalf("payload at bound: %v", err)
	}
	if err := w.Write(&Message{Type: TypeCall, ID: 0xFFFFFFFF, Provider: "connecta", Function: "describe", Args: json.RawMessage(payload)}); err != nil {
		t.Fatalf("args at bound: %v", err)
	}
}

func TestFrame_MalformedRefused(t *testing.T) {
	cases := map[string][]byte{
		"truncated header": {0, 0},
		"truncated body":   append([]byte{0, 0, 0, 10}, `{"t":`...),
		"empty":            {0, 0, 0, 0},
		"invalid utf8":     frameOf([]byte("{\"t\":\"log\",\"text\":\"\xff\"}")),
		"not json":         frameOf([]byte("garbage!")),
		"not an object":    frameOf([]byte(`[1,2]`)),
		"unknown type":     frameOf([]byte(`{"t":"exec"}`)),
		"no type":          frameOf([]byte(`{}`)),
		"run without body": frameOf([]byte(`{"t":"run"}`)),
		"done without":     frameOf([]byte(`{"t":"done"}`)),
		"trailing data":    frameOf([]byte(`{"t":"ready"} {}`)),
		"deep json":        frameOf([]byte(`{"t":"call","args":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)),
		"wrong field type": frameOf([]byte(`{"t":"call","id":"x"}`)),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(in)).Read()
			if err == nil || err == io.EOF {
				t.Fatalf("accepted: %v", err)
			}
		})
	}
}

func TestLogPrefix_RetainsOnePastPresentationCap(t *testing.T) {
	var l LogPrefix
	l.Add("a")
	l.Add(strings.Repeat("b", 5000))
	l.Add("c")
	if got := jstext.Len(l.String()); got != MaxRetainedLogChars {
		t.Fatalf("retained %d", got)
	}
	if l.Chars() != 1+1+5000+1+1 || l.Entries() != 3 {
		t.Fatalf("chars %d entries %d", l.Chars(), l.Entries())
	}
	// Surrogate pairs are never split.
	var s LogPrefix
	s.Add(strings.Repeat("😀", 3000))
	if jstext.Len(s.String()) != 4000 || !strings.HasSuffix(s.String(), "😀") {
		t.Fatalf("split pair: %d", jstext.Len(s.String()))
	}
	if jstext.Prefix("a😀", 2) != "a" || jstext.Prefix("a😀", 3) != "a😀" {
		t.Fatal("ClipUTF16")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"t":"ready"}`))
	f.Add([]byte(`{"t":"call","id":1,"p":"connecta","fn":"call","args":["x"]}`))
	f.Add([]byte(`{"t":"done","done":{"value":1,"err":{"kind":"thrown","message":""}}}`))
	f.Add([]byte("{\"t\":\"log\",\"text\":\"\xed\xa0\x80\"}"))
	f.Add([]byte(`{"t":"reply","id":4294967295,"ok":true,"value":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Decode(body)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes within the bound it came in.
		if len(body) <= MaxBodyBytes {
			if _, err := Encode(m); err != nil && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("re-encode: %v", err)
			}
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frameOf([]byte(`{"t":"ready"}`)))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, '{'})
	f.Add([]byte{0, 0, 0, 5, '{', '"'})
	f.Add(append(frameOf([]byte(`{"t":"log","text":"a"}`)), 0, 0))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := NewReader(bytes.NewReader(stream))
		for i := 0; i < 64; i++ {
			body, err := r.ReadFrame()
			if err != nil {
				return
			}
			if len(body) == 0 || len(body) > MaxBodyBytes {
				t.Fatalf("frame of %d bytes accepted", len(body))
			}
			_, _ = Decode(body)
		}
	})
}

func TestChildArgs_RoundTrip(t *testing.T) {
	a := ChildArgs{Mode: ModeServe, ParentPID: 42, CompiledKey: "0123abcd", MemoryLimitBytes: 1 << 27, CPULimitSeconds: 50,
		Snapshot: true}
	got, ok, err := ParseChildArgs(append([]string{"exe"}, a.Argv()...))
	if !ok || err != nil || got != a {
		t.Fatalf("%+v %v %v", got, ok, err)
	}
	if _, ok, _ := ParseChildArgs([]string{"connecta", "serve"}); ok {
		t.Fatal("a normal argv was taken for a child's")
	}
	if _, ok, err := ParseChildArgs([]string{"exe", ChildMarker, "9"}); !ok || err == nil {
		t.Fatal("a malformed child argv was accepted")
	}
	empty := ChildArgs{Mode: ModeWarm}
	got, _, err = ParseChildArgs(append([]string{"exe"}, empty.Argv()...))
	if err != nil || got.CompiledKey != "" || got.Snapshot {
		t.Fatal(got, err)
	}
}

func FuzzParseChildArgs(f *testing.F) {
	f.Add(ChildMarker, ArgvVersion, ModeServe, "1", "ab12", "0", "0", "fd")
	f.Fuzz(func(t *testing.T, m, v, mode, pid, dir, mem, cpu, snap string) {
		a, ok, err := ParseChildArgs([]string{"exe", m, v, mode, pid, dir, mem, cpu, snap})
		if ok && err == nil && (a.Mode != ModeServe && a.Mode != ModeWarm) {
			t.Fatal("bad mode accepted")
		}
	})
}

func TestErrFrameTooLargeNamesTheLimit(t *testing.T) {
	if want := fmt.Sprintf("the %d-byte limit", MaxFrameBytes); !strings.Contains(ErrFrameTooLarge.Error(), want) {
		t.Fatalf("ErrFrameTooLarge = %q, want it to name %q", ErrFrameTooLarge, want)
	}
}
