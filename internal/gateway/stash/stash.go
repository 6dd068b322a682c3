// Package stash is the get_result store (docs/meta-tools.md §7): a call_tool
// result too large to return inline is kept here under an unguessable handle
// for a while and read back in UTF-8-safe pages. Stash keeps them in a
// store.Stash (memory:, SQLite or PostgreSQL, package store).
package stash

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

// Defaults (docs/DECISIONS.md: results.stashTtlMs, stashMaxBytes, maxInlineBytes).
const (
	DefaultTTL       = 900_000 * time.Millisecond
	DefaultMaxBytes  = 67_108_864
	DefaultPageBytes = 50_000
	// maxRuneBytes bounds how far an offset moves to find a character start,
	// so invalid bytes can never make paging walk the whole text.
	maxRuneBytes = utf8.UTFMax
	// maxHandleInError keeps a hostile handle out of error prose.
	maxHandleInError = 128
)

// Page is one get_result page (docs/meta-tools.md §7). NextOffset is present iff the page ends
// before TotalBytes; concatenating the pages from offset 0 reproduces the
// stored text byte for byte.
type Page struct {
	Offset     int    `json:"offset"`
	NextOffset *int   `json:"nextOffset,omitempty"`
	TotalBytes int    `json:"totalBytes"`
	Text       string `json:"text"`
}

// Store is the get_result store; a shared store can replace Memory.
// Get's offset and limit are UTF-8 bytes; limit 0 means the store's default
// page size (the deployment-wide inline cap).
// Each entry belongs to the actor whose call stashed it: Get by anyone else
// is ErrUnknownHandle, exactly the answer for an id never issued.
type Store interface {
	Put(ctx context.Context, owner actor.ID, data string) (handle string, err error)
	Get(ctx context.Context, owner actor.ID, handle string, offset, limit int) (Page, error)
}

// Sentinel errors; match with errors.Is. Get wraps them in *HandleError.
var (
	ErrUnknownHandle = errors.New("unknown result id")
	ErrExpiredHandle = errors.New("expired result id")
	ErrTooLarge      = errors.New("result larger than the stash")
)

// HandleError reports a handle Get cannot serve. Its message is the docs/meta-tools.md §7 text,
// the same for unknown and expired ids (the handle is clamped).
type HandleError struct {
	Handle string
	Err    error // ErrUnknownHandle or ErrExpiredHandle
}

func (e *HandleError) Error() string {
	return fmt.Sprintf("Unknown or expired result id %q", jstext.Clamp(e.Handle, maxHandleInError))
}

func (e *HandleError) Unwrap() error { return e.Err }

// RangeError reports an invalid offset or limit; Field is the get_result
// argument name ("offset" or "maxBytes").
type RangeError struct {
	Field string
	Value int
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("Invalid %s: %d (must be a non-negative integer)", e.Field, e.Value)
}

// Options configure a Stash. Zero values take the defaults.
type Options struct {
	MaxBytes int64         // total stored bytes; oldest entries are evicted
	TTL      time.Duration // lifetime of an entry
	Now      func() time.Time
	// PageBytes is the page size when Get's limit is 0.
	PageBytes int
}

// Stash is the Store over a store.Stash (memory:, SQLite or PostgreSQL):
// the TTL and the byte bound are enforced by the store, so every replica on
// one database pages every handle, and expired rows go with the store's one
// periodic sweep. A page reads only its own bytes (plus the few needed to
// align on characters), never the whole text.
type Stash struct {
	st        store.Stash
	maxBytes  int64
	ttl       time.Duration
	now       func() time.Time
	pageBytes int
}

var _ Store = (*Stash)(nil)

// New builds a Stash over st.
func New(st store.Stash, opts Options) *Stash {
	s := &Stash{st: st, maxBytes: opts.MaxBytes, ttl: opts.TTL, now: opts.Now, pageBytes: opts.PageBytes}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.ttl <= 0 {
		s.ttl = DefaultTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.pageBytes <= 0 {
		s.pageBytes = DefaultPageBytes
	}
	return s
}

// NewMemory builds a Stash over a fresh memory: store (tests, tools).
func NewMemory(opts Options) *Stash { return New(store.NewMemory(), opts) }

// Put stores data under a new unguessable handle (a random UUID). A store
// failure matches store.ErrUnavailable.
func (s *Stash) Put(ctx context.Context, owner actor.ID, data string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("stash put: %w", err)
	}
	size := int64(len(data))
	if size > s.maxBytes {
		return "", fmt.Errorf("stash put: %d bytes over the %d-byte stash: %w", size, s.maxBytes, ErrTooLarge)
	}
	handle := newHandle()
	err := s.st.PutResult(ctx, handle, owner.Key(), []byte(data), s.now().Add(s.ttl), s.maxBytes)
	if errors.Is(err, store.ErrTooLarge) {
		return "", fmt.Errorf("stash put: %d bytes over the %d-byte stash: %w", size, s.maxBytes, ErrTooLarge)
	}
	if err != nil {
		return "", fmt.Errorf("stash put: %w", err)
	}
	return handle, nil
}

// Get returns the page of the stored text starting at offset (moved back to
// the start of its UTF-8 character) and at most limit bytes long (the end
// moved back to a character start, or forward past one character when the
// page would otherwise be empty). An offset at or past the end gives "".
func (s *Stash) Get(ctx context.Context, owner actor.ID, handle string, offset, limit int) (Page, error) {
	if err := ctx.Err(); err != nil {
		return Page{}, fmt.Errorf("stash get: %w", err)
	}
	if offset < 0 {
		return Page{}, &RangeError{Field: "offset", Value: offset}
	}
	if limit < 0 {
		return Page{}, &RangeError{Field: "maxBytes", Value: limit}
	}
	if limit == 0 {
		limit = s.pageBytes
	}
	// The window covers every byte the alignment rules may look at.
	base := max(0, offset-(maxRuneBytes-1))
	win, total, err := s.st.ResultWindow(ctx, handle, owner.Key(), base, offset+limit+maxRuneBytes, s.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Page{}, &HandleError{Handle: handle, Err: ErrUnknownHandle}
	case errors.Is(err, store.ErrExpired):
		return Page{}, &HandleError{Handle: handle, Err: ErrExpiredHandle}
	case err != nil:
		return Page{}, fmt.Errorf("stash get: %w", err)
	}
	return pageOf(window{s: string(win), base: base, total: total}, offset, limit), nil
}

// PageOf cuts one docs/meta-tools.md §7 page out of data; offset ≥ 0, limit > 0.
func PageOf(data string, offset, limit int) Page {
	return pageOf(window{s: data, total: len(data)}, offset, limit)
}

// window is the bytes [base, base+len(s)) of a text total bytes long.
type window struct {
	s     string
	base  int
	total int
}

// at is the byte at absolute position i, and whether the window holds it.
func (w window) at(i int) (byte, bool) {
	j := i - w.base
	if j < 0 || j >= len(w.s) {
		return 0, false
	}
	return w.s[j], true
}

func (w window) slice(from, to int) string {
	return w.s[from-w.base : to-w.base]
}

func pageOf(w window, offset, limit int) Page {
	total := w.total
	if offset >= total {
		return Page{Offset: offset, TotalBytes: total}
	}
	start := w.alignBack(offset)
	end := total
	if limit < total-start {
		end = w.alignBack(start + limit)
	}
	if end <= start {
		end = w.alignForward(start)
	}
	p := Page{Offset: start, TotalBytes: total, Text: w.slice(start, end)}
	if end < total {
		next := end
		p.NextOffset = &next
	}
	return p
}

// alignBack moves i back to the start of its UTF-8 character, looking at
// most maxRuneBytes-1 bytes back; invalid runs stay where they are. It is
// idempotent, which is what makes consecutive pages meet exactly.
func (w window) alignBack(i int) int {
	if i >= w.total {
		return w.total
	}
	for j := i; j > i-maxRuneBytes && j >= 0; j-- {
		if b, ok := w.at(j); ok && utf8.RuneStart(b) {
			return j
		}
	}
	return i
}

// alignForward returns the end of the character starting at i: past i and
// the continuation bytes after it, at most maxRuneBytes in all.
func (w window) alignForward(i int) int {
	end := i + 1
	for end < w.total && end < i+maxRuneBytes {
		b, ok := w.at(end)
		if !ok || utf8.RuneStart(b) {
			break
		}
		end++
	}
	return end
}

// newHandle returns a random (version 4) UUID: 122 bits from crypto/rand.
func newHandle() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexdigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexdigits[c>>4], hexdigits[c&0x0f])
	}
	return string(out)
}
