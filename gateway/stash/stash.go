// Package stash is the get_result store (spec-meta-tools §7): a call_tool
// result too large to return inline is kept here under an unguessable handle
// for a while and read back in UTF-8-safe pages. Store is the seam a shared
// store can replace; Memory is the in-process implementation.
package stash

import (
	"container/list"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/jstext"
)

// Defaults (DECISIONS.md: results.stashTtlMs, stashMaxBytes, maxInlineBytes).
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

// Page is one get_result page (§7). NextOffset is present iff the page ends
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
type Store interface {
	Put(ctx context.Context, data string) (handle string, err error)
	Get(ctx context.Context, handle string, offset, limit int) (Page, error)
}

// Sentinel errors; match with errors.Is. Get wraps them in *HandleError.
var (
	ErrUnknownHandle = errors.New("unknown result id")
	ErrExpiredHandle = errors.New("expired result id")
	ErrTooLarge      = errors.New("result larger than the stash")
)

// HandleError reports a handle Get cannot serve. Its message is the §7 text,
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

// Options configure a Memory store. Zero values take the defaults.
type Options struct {
	MaxBytes int64         // total stored bytes; oldest entries are evicted
	TTL      time.Duration // lifetime of an entry
	Now      func() time.Time
	// PageBytes is the page size when Get's limit is 0.
	PageBytes int
}

type entry struct {
	handle    string
	data      string
	expiresAt time.Time
}

// Memory is the in-process Store: bounded by total bytes (oldest evicted
// first) and by TTL, swept lazily on use — it owns no goroutine.
type Memory struct {
	maxBytes  int64
	ttl       time.Duration
	now       func() time.Time
	pageBytes int

	mu      sync.Mutex
	order   *list.List // of *entry, oldest first
	byID    map[string]*list.Element
	total   int64
	expired map[string]struct{} // recently expired handles, for typed errors
}

var _ Store = (*Memory)(nil)

// NewMemory builds a Memory store.
func NewMemory(opts Options) *Memory {
	m := &Memory{
		maxBytes:  opts.MaxBytes,
		ttl:       opts.TTL,
		now:       opts.Now,
		pageBytes: opts.PageBytes,
		order:     list.New(),
		byID:      make(map[string]*list.Element),
		expired:   make(map[string]struct{}),
	}
	if m.maxBytes <= 0 {
		m.maxBytes = DefaultMaxBytes
	}
	if m.ttl <= 0 {
		m.ttl = DefaultTTL
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.pageBytes <= 0 {
		m.pageBytes = DefaultPageBytes
	}
	return m
}

// Put stores data under a new unguessable handle (a random UUID).
func (m *Memory) Put(ctx context.Context, data string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("stash put: %w", err)
	}
	size := int64(len(data))
	if size > m.maxBytes {
		return "", fmt.Errorf("stash put: %d bytes over the %d-byte stash: %w", size, m.maxBytes, ErrTooLarge)
	}
	handle := newHandle()
	now := m.now()

	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	for m.total+size > m.maxBytes {
		oldest := m.order.Front()
		if oldest == nil {
			break
		}
		m.removeLocked(oldest)
	}
	el := m.order.PushBack(&entry{handle: handle, data: data, expiresAt: now.Add(m.ttl)})
	m.byID[handle] = el
	m.total += size
	return handle, nil
}

// Get returns the page of the stored text starting at offset (moved back to
// the start of its UTF-8 character) and at most limit bytes long (the end
// moved back to a character start, or forward past one character when the
// page would otherwise be empty). An offset at or past the end gives "".
func (m *Memory) Get(ctx context.Context, handle string, offset, limit int) (Page, error) {
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
		limit = m.pageBytes
	}
	now := m.now()

	m.mu.Lock()
	el, ok := m.byID[handle]
	if ok && !now.Before(el.Value.(*entry).expiresAt) {
		m.removeLocked(el)
		m.expired[handle] = struct{}{}
		ok = false
	}
	if !ok {
		_, wasExpired := m.expired[handle]
		m.mu.Unlock()
		cause := ErrUnknownHandle
		if wasExpired {
			cause = ErrExpiredHandle
		}
		return Page{}, &HandleError{Handle: handle, Err: cause}
	}
	data := el.Value.(*entry).data
	m.mu.Unlock()

	return PageOf(data, offset, limit), nil
}

// PageOf cuts one §7 page out of data; offset ≥ 0, limit > 0. Exported so a
// shared Store implementation pages identically.
func PageOf(data string, offset, limit int) Page {
	total := len(data)
	if offset >= total {
		return Page{Offset: offset, TotalBytes: total}
	}
	start := alignBack(data, offset)
	end := total
	if limit < total-start {
		end = alignBack(data, start+limit)
	}
	if end <= start {
		end = alignForward(data, start)
	}
	p := Page{Offset: start, TotalBytes: total, Text: data[start:end]}
	if end < total {
		next := end
		p.NextOffset = &next
	}
	return p
}

// alignBack moves i back to the start of its UTF-8 character, looking at
// most maxRuneBytes-1 bytes back; invalid runs stay where they are. It is
// idempotent, which is what makes consecutive pages meet exactly.
func alignBack(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for j := i; j > i-maxRuneBytes && j >= 0; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}

// alignForward returns the end of the character starting at i: past i and
// the continuation bytes after it, at most maxRuneBytes in all.
func alignForward(s string, i int) int {
	end := i + 1
	for end < len(s) && end < i+maxRuneBytes && !utf8.RuneStart(s[end]) {
		end++
	}
	return end
}

func (m *Memory) sweepLocked(now time.Time) {
	// Entries share one TTL, so insertion order is expiry order.
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		e := el.Value.(*entry)
		if now.Before(e.expiresAt) {
			break
		}
		m.removeLocked(el)
		m.expired[e.handle] = struct{}{}
	}
	// Remembering expired handles is only for a friendlier error; keep it
	// bounded by forgetting all of them at once when it grows large.
	if len(m.expired) > 4096 {
		clear(m.expired)
	}
}

func (m *Memory) removeLocked(el *list.Element) {
	e := el.Value.(*entry)
	m.order.Remove(el)
	delete(m.byID, e.handle)
	m.total -= int64(len(e.data))
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
