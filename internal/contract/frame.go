package contract

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// newSecret returns a fresh 128-bit run secret as 32 hex digits (X11).
func newSecret() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("contract: run secret: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// clipMessage bounds a failure message so that its JSON serialization,
// quotes and the … marker included, is at most max UTF-16 units (E1).
func clipMessage(msg string, max int) string {
	if jstext.Len(jstext.Quote(msg)) <= max {
		return msg
	}
	room := max - 2 - 1 // quotes and the marker
	n := 0
	for i, r := range msg {
		w := serializedUnits(r)
		if n+w > room {
			return msg[:i] + "…"
		}
		n += w
	}
	return msg
}

// serializedUnits is how many UTF-16 units r takes inside a JSON.stringify
// string.
func serializedUnits(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20:
		return 6
	case r >= 0x10000:
		return 2
	case r == utf8.RuneError:
		return 1
	}
	return 1
}

// boundError is the failure as the guest and the model see it: the message
// clipped to MaxFrameMessageChars and, when the serialized object would
// exceed MaxFrameDetailsChars, optional recovery metadata omitted whole
// (never clipped: a clipped address describes a different call). code,
// message, retryable and retryAfterMs always stay. ok is false when even
// those do not fit, which refuses the frame whole.
func boundError(e *gateway.Error) (bounded *gateway.Error, object []byte, ok bool) {
	b := &gateway.Error{
		Code:         e.Code,
		Message:      clipMessage(e.Message, MaxFrameMessageChars),
		Retryable:    e.Retryable,
		RetryAfterMs: e.RetryAfterMs,
	}
	obj, err := marshalError(b)
	if err != nil || jstext.Len(string(obj)) > MaxFrameDetailsChars {
		return nil, nil, false
	}
	for _, f := range e.Details {
		b.Details = append(b.Details, f)
		next, err := marshalError(b)
		if err != nil || jstext.Len(string(next)) > MaxFrameDetailsChars {
			b.Details = b.Details[:len(b.Details)-1]
			continue
		}
		obj = next
	}
	return b, obj, true
}

func marshalError(e *gateway.Error) ([]byte, error) { return e.MarshalJSON() }

// framePrefix is what the prelude recognizes: the mark, the secret, a colon.
func framePrefix(secret string) string { return FrameMark + secret + ":" }

// failure is one typed failure handed to the guest, kept for E6 matching.
type failure struct {
	message string          // the human message as the guest sees it
	frame   string          // the whole rejection text
	object  json.RawMessage // the bounded error object (the model's `error`)
}

// failureLog remembers the most recent MaxRecordedFailures failures of one
// run, caught ones included (E6).
type failureLog struct {
	mu   sync.Mutex
	ring [MaxRecordedFailures]failure
	n    int // total recorded
}

func (l *failureLog) add(f failure) {
	l.mu.Lock()
	l.ring[l.n%MaxRecordedFailures] = f
	l.n++
	l.mu.Unlock()
}

// match finds the typed failure an escaped program error carries: exact
// equality first, then containment for messages of at least
// MinContainmentChars, each pass newest first (E6).
func (l *failureLog) match(text string) (json.RawMessage, bool) {
	if text == "" {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := min(l.n, MaxRecordedFailures)
	at := func(k int) *failure { return &l.ring[(l.n-1-k)%MaxRecordedFailures] }
	for k := range kept {
		if f := at(k); text == f.message || text == f.frame {
			return f.object, true
		}
	}
	for k := range kept {
		f := at(k)
		if jstext.Len(f.message) >= MinContainmentChars && strings.Contains(text, f.message) {
			return f.object, true
		}
		if strings.Contains(text, f.frame) {
			return f.object, true
		}
	}
	return nil, false
}

// framer turns gateway failures into authenticated rejection texts for one
// run and records them.
type framer struct {
	prefix   string
	failures failureLog
}

func newFramer(secret string) *framer { return &framer{prefix: framePrefix(secret)} }

// reject returns the rejection text for e: the frame, or the fixed refusal
// when it cannot be bounded.
func (f *framer) reject(e *gateway.Error) string {
	bounded, obj, ok := boundError(e)
	if !ok {
		return textFrameRefused
	}
	frame := f.prefix + string(obj)
	f.failures.add(failure{message: bounded.Message, frame: frame, object: obj})
	return frame
}
