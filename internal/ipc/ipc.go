// Package ipc is the wire between the supervisor (parent) and a sandbox child:
// length-prefixed JSON frames and the messages they carry. Nothing else.
//
// A frame is a 4-byte big-endian body length followed by the body, one JSON
// object. The whole frame (header included) is at most MaxFrameBytes, in both
// directions: a Reader refuses a larger length before reading the body, and a
// Writer never produces one.
//
// Conversation: the child sends ready once its engine is loaded; the parent
// sends run; the child sends call (answered by exactly one reply) and log
// frames in any order, then exactly one done, and exits.
package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Contract bounds, each defined here once (docs/DECISIONS.md "Wire and
// limits"). The sandbox child hands the guest-side ones to the engine, and
// the parent reads them through the supervisor.
const (
	// MaxFrameBytes bounds one frame, the 4-byte header and envelope included.
	MaxFrameBytes = 262144
	// HeaderBytes is the length prefix.
	HeaderBytes = 4
	// MaxBodyBytes is the largest JSON body a frame may carry.
	MaxBodyBytes = MaxFrameBytes - HeaderBytes
	// MaxPayloadBytes bounds a host call's serialized arguments and its
	// serialized result (L6, X10), leaving room for the envelope so that a
	// frame carrying one never exceeds MaxFrameBytes.
	MaxPayloadBytes = MaxFrameBytes - 4096
	// MaxResultChars bounds a program's result: UTF-16 code units of its
	// JSON.stringify (R2). Larger results come back as a truncation envelope.
	MaxResultChars = 24000
	// MaxErrorChars clips a program error message in a done frame.
	MaxErrorChars = 4000
	// MaxRetainedLogChars is the presented-log prefix a done frame carries and
	// the parent retains for failures: one past the 4,000-char presentation
	// cap so truncation stays visible (R5, X4). UTF-16 code units.
	MaxRetainedLogChars = 4001
)

// ResultTooLarge is L6's text for a host result over MaxPayloadBytes; label
// names what the program called.
func ResultTooLarge(label string) string {
	return fmt.Sprintf("Host result from %s exceeds the %d-byte serialized bridge limit.", label, MaxPayloadBytes)
}

// Message types.
const (
	TypeReady = "ready" // child → parent: engine loaded, hardened, waiting for run
	TypeCall  = "call"  // child → parent: a host call
	TypeLog   = "log"   // child → parent: one console entry, as it happens
	TypeDone  = "done"  // child → parent: the run's outcome; the last frame
	TypeRun   = "run"   // parent → child: the one program
	TypeReply = "reply" // parent → child: settles one call
)

// Errors a Reader reports. Every one of them is a protocol violation.
var (
	// Spelled out, not fmt.Errorf: that would allocate in init in every
	// sandbox child (TestErrFrameTooLargeNamesTheLimit keeps it in step).
	ErrFrameTooLarge = errors.New("ipc: frame exceeds the 262144-byte limit")
	ErrEmptyFrame    = errors.New("ipc: empty frame")
	ErrInvalidUTF8   = errors.New("ipc: frame is not valid UTF-8")
	ErrUnknownType   = errors.New("ipc: unknown message type")
)

// Message is one frame's JSON object. Type selects which fields are meaningful;
// a flat struct keeps decoding to one pass.
type Message struct {
	Type string `json:"t"`

	// call, reply
	ID uint32 `json:"id,omitempty"`
	// call
	Provider string          `json:"p,omitempty"`
	Function string          `json:"fn,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"` // JSON array, as the guest serialized it
	// reply: OK with Value (empty = undefined), or Err (the rejection text)
	OK    bool            `json:"ok,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	Err   string          `json:"err,omitempty"`
	// log; Marker: the entry is the engine's count or size marker (the log
	// stopped there), not the program's text
	Level  string `json:"level,omitempty"`
	Text   string `json:"text,omitempty"`
	Marker bool   `json:"marker,omitempty"`

	// ready (warm mode): the cache key of the compiled code the warm-up
	// left in ChildCodeFD (loaded or written), for the parent to seal and
	// hand with it to every child.
	CompiledKey string `json:"code,omitempty"`
	// ready (serve mode): why the child initialized afresh instead of
	// restoring the snapshot it was handed; empty when it restored it.
	SnapshotFallback string `json:"snapFallback,omitempty"`

	Run  *Run  `json:"run,omitempty"`
	Done *Done `json:"done,omitempty"`
}

// Provider is one guest global and its callable functions.
type Provider struct {
	Name      string   `json:"name"`
	Functions []string `json:"fns"`
}

// Limits bound one run; zero fields take the engine's contract defaults.
type Limits struct {
	HeapBytes  uint64 `json:"heap,omitempty"`
	StackBytes uint64 `json:"stack,omitempty"`
	CPUTimeNs  int64  `json:"cpuNs,omitempty"`
	WallNs     int64  `json:"wallNs,omitempty"`
}

// Run is the program the parent hands a child.
type Run struct {
	Code      string     `json:"code"`
	Prelude   string     `json:"prelude,omitempty"`
	Providers []Provider `json:"providers,omitempty"`
	Limits    Limits     `json:"limits"`
	// Seed is the run's Math.random seed, 64 bits from the parent's CSPRNG.
	Seed uint64 `json:"seed,omitempty"`
}

// ProgramError is an untyped program failure.
type ProgramError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"` // clipped to MaxErrorChars; may be empty
}

// Done is a run's outcome. Logs were streamed already; LogPrefix is the
// presented prefix (≤ MaxRetainedLogChars UTF-16 units of the entries joined
// with "\n") and LogChars the full joined length.
type Done struct {
	Value         json.RawMessage `json:"value,omitempty"` // R2-bounded; absent = undefined
	Err           *ProgramError   `json:"err,omitempty"`
	LogPrefix     string          `json:"logs,omitempty"`
	LogEntries    int             `json:"logEntries,omitempty"`
	LogChars      int             `json:"logChars,omitempty"`
	CPUTimeNs     int64           `json:"cpuNs,omitempty"`
	PeakHeapBytes uint64          `json:"peakHeap,omitempty"`
	HostCalls     int             `json:"hostCalls,omitempty"`
}

// Reader reads frames from one stream. Not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderBytes]byte
}

// NewReader buffers r. The buffer only coalesces small frames: a body at
// least as large as the buffer is read straight into its own slice, so a
// small buffer costs nothing on big frames and saves 60 KiB per child.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 4<<10)}
}

// ReadFrame returns the next frame's body. The length is checked before any
// of the body is read. io.EOF means the stream ended cleanly between frames;
// io.ErrUnexpectedEOF means it ended inside one.
func (r *Reader) ReadFrame() ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if n == 0 {
		return nil, ErrEmptyFrame
	}
	if n > MaxBodyBytes {
		return nil, fmt.Errorf("%w (length %d)", ErrFrameTooLarge, uint64(n)+HeaderBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// Read returns the next decoded message.
func (r *Reader) Read() (*Message, error) {
	body, err := r.ReadFrame()
	if err != nil {
		return nil, err
	}
	return Decode(body)
}

// Decode parses one frame body: valid UTF-8, one JSON object, a known type.
func Decode(body []byte) (*Message, error) {
	if len(body) > MaxBodyBytes {
		return nil, ErrFrameTooLarge
	}
	if !utf8.Valid(body) {
		return nil, ErrInvalidUTF8
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("ipc: malformed frame: %w", err)
	}
	switch m.Type {
	case TypeReady, TypeCall, TypeLog, TypeDone, TypeRun, TypeReply:
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownType, jstext.Clamp(m.Type, 32))
	}
	if m.Type == TypeRun && m.Run == nil {
		return nil, errors.New("ipc: run frame without a program")
	}
	if m.Type == TypeDone && m.Done == nil {
		return nil, errors.New("ipc: done frame without an outcome")
	}
	return &m, nil
}

// Encode serializes m into a whole frame (header included), refusing one over
// MaxFrameBytes. A call's Args and a reply's Value are spliced in verbatim
// rather than re-scanned (they are the large payloads): the caller guarantees
// they are valid JSON, and a receiver refuses the frame otherwise.
func Encode(m *Message) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, HeaderBytes))
	raw, key := m.Args, `,"args":`
	if m.Type == TypeReply {
		raw, key = m.Value, `,"value":`
	}
	head := m
	if len(raw) > 0 && (m.Type == TypeCall || m.Type == TypeReply) {
		c := *m
		c.Args, c.Value = nil, nil
		head = &c
	} else {
		raw = nil
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(head); err != nil {
		return nil, fmt.Errorf("ipc: encode %s: %w", m.Type, err)
	}
	buf.Truncate(buf.Len() - 1) // Encoder's trailing newline
	if raw != nil {
		if buf.Len()+len(key)+len(raw) > MaxFrameBytes {
			return nil, fmt.Errorf("%w (%s frame of over %d bytes)", ErrFrameTooLarge, m.Type, buf.Len()+len(raw))
		}
		buf.Truncate(buf.Len() - 1) // the object's closing brace
		buf.WriteString(key)
		buf.Write(raw)
		buf.WriteByte('}')
	}
	frame := buf.Bytes()
	if len(frame) > MaxFrameBytes {
		return nil, fmt.Errorf("%w (%s frame of %d bytes)", ErrFrameTooLarge, m.Type, len(frame))
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-HeaderBytes))
	return frame, nil
}

// Writer writes whole frames; safe for concurrent use (one frame at a time).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write encodes and writes m; an oversized message is refused and nothing is
// written (errors.Is(err, ErrFrameTooLarge)).
func (w *Writer) Write(m *Message) error {
	frame, err := Encode(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(frame)
	return err
}

// WriteFrame writes a frame made by Encode.
func (w *Writer) WriteFrame(frame []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(frame)
	return err
}
