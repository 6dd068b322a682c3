// Package activity records one payload-free event per attempted call
// (V1–V4): the history in the store (memory:, SQLite or PostgreSQL; written
// off the request path in batches) for /activity, an optional JSON-lines
// file, and one slog line per event. Events have no field that could carry
// arguments, results, program source or error prose — payload-free by
// construction, not by discipline.
package activity

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

// Contract bounds (V3, docs/meta-tools.md §11) and defaults (docs/DECISIONS.md).
const (
	// maxContextBytes bounds the request-scoped strings (requestId, actor,
	// source, errorCode) so no caller-influenced field is unbounded.
	maxContextBytes = 128
	// fileMode keeps the history readable by the service user only.
	fileMode = 0o600
)

// Outcomes an event may carry (V2).
const (
	OutcomeSuccess   = "success"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
	// OutcomeDenied: the caller's access rules hid the connector or tool;
	// the caller was answered as for one that does not exist (errorCode).
	// Only operators see it (AsSeenBy).
	OutcomeDenied = "denied"
)

// AsSeenBy is the event as a reader sees it: an operator sees everything
// as recorded; anyone else sees a denial as the event an unknown address
// or tool produces (outcome error, the errorCode the caller was given).
func (e Event) AsSeenBy(operator bool) Event {
	if !operator && e.Outcome == OutcomeDenied {
		e.Outcome = OutcomeError
	}
	return e
}

// Sources an event may carry (V2): the front door that attempted the call.
const (
	SourceExecuteCode         = "execute_code"
	SourceCallTool            = "call_tool"
	SourceCallDestructiveTool = "call_destructive_tool"
)

// Friction classes (V2), derived only from a typed error code.
const (
	FrictionToolNotFound       = "tool_not_found"
	FrictionSchemaRetry        = "schema_retry"
	FrictionDestructiveReroute = "destructive_reroute"
	FrictionAuthRequired       = "auth_required"
	FrictionResultTooLarge     = "result_too_large"
)

// Event is one payload-free activity record (V2). Field order is the JSON
// order; errorCode and friction are omitted when empty.
type Event struct {
	ID         string    `json:"id"`
	OccurredAt time.Time `json:"occurredAt"`
	RequestID  string    `json:"requestId"`
	Actor      string    `json:"actor"`
	// ActorName is filled when the history is read, never stored: an issued
	// token's current name (actor "token:<id>").
	ActorName     string `json:"actorName,omitempty"`
	ConnectorID   string `json:"connectorId"`
	ToolName      string `json:"toolName"`
	Address       string `json:"address"`
	Source        string `json:"source"`
	Outcome       string `json:"outcome"`
	DurationMs    int64  `json:"durationMs"`
	Attempts      int    `json:"attempts"`
	ErrorCode     string `json:"errorCode,omitempty"`
	Friction      string `json:"friction,omitempty"`
	ServerName    string `json:"serverName"`
	ServerVersion string `json:"serverVersion"`
	// TraceID is the request's trace (hex) when it was sampled for export
	// (telemetry), so an operator goes from an event to its trace.
	TraceID string `json:"traceId,omitempty"`
}

// Options configure a Recorder.
type Options struct {
	// Store keeps the history (memory:, SQLite or PostgreSQL); nil means a
	// fresh memory: store of its own.
	Store store.Activity
	// File, when set, receives one JSON object per line, appended (0600).
	File string
	// Logger receives one payload-free line per event; nil discards.
	Logger        *slog.Logger
	ServerName    string
	ServerVersion string
	// Buffer bounds the events waiting for the store; when it is full new
	// events are dropped (and counted), never waited for. 0 = DefaultBuffer.
	Buffer int
	// Registerer receives connecta_activity_dropped_total; nil keeps it
	// unregistered.
	Registerer prometheus.Registerer
}

// Writer defaults: events reach the store in batches, off the request path.
const (
	DefaultBuffer  = 4096
	batchMax       = 256
	batchEvery     = 100 * time.Millisecond
	writeTimeout   = 5 * time.Second
	flushWait      = 2 * time.Second // a read waits this long for its own process's pending events
	closeFlushWait = 5 * time.Second
)

// Recorder records events. It is safe for concurrent use. Recording never
// fails or blocks a call: the event is queued for the store's writer (a full
// queue drops it and counts it), appended to the file, and logged.
type Recorder struct {
	logger        *slog.Logger
	serverName    string
	serverVersion string
	st            store.Activity
	dropped       prometheus.Counter
	seq           atomic.Uint64
	tag           string // this process's id suffix

	queue   chan Event
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	file   *os.File // nil when no file or after Close
	closed bool
	// fileFailed stops repeated warnings after the first write failure.
	fileFailed bool
}

// New builds a Recorder, opening the JSON-lines file when configured, and
// starts its store writer (ended by Close).
func New(opts Options) (*Recorder, error) {
	if opts.Buffer < 0 {
		return nil, fmt.Errorf("activity: buffer %d is negative", opts.Buffer)
	}
	if opts.Buffer == 0 {
		opts.Buffer = DefaultBuffer
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st := opts.Store
	if st == nil {
		st = store.NewMemory()
	}
	r := &Recorder{
		logger:        logger,
		serverName:    opts.ServerName,
		serverVersion: opts.ServerVersion,
		st:            st,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "connecta_activity_dropped_total",
			Help: "Activity events not stored because the store's queue was full or the store failed.",
		}),
		tag:     NewID()[:8],
		queue:   make(chan Event, opts.Buffer),
		flushes: make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(r.dropped); err != nil {
			return nil, fmt.Errorf("activity: %w", err)
		}
	}
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
		if err != nil {
			return nil, fmt.Errorf("activity: open %s: %w", opts.File, err)
		}
		r.file = f
	}
	go r.writer()
	return r, nil
}

// Record completes e (id, occurredAt, server identity, friction from the
// error code when unset), clamps caller-influenced fields, and records it.
func (r *Recorder) Record(e Event) {
	e = r.complete(e)
	line := encodeLine(e)

	select {
	case r.queue <- e:
	default:
		r.dropped.Inc()
	}

	r.mu.Lock()
	var writeErr error
	if r.file != nil && !r.fileFailed && line != nil {
		// One write per line under O_APPEND: lines from concurrent writers
		// (even other processes) never interleave.
		if _, err := r.file.Write(line); err != nil {
			r.fileFailed = true
			writeErr = err
		}
	}
	r.mu.Unlock()

	// A success is routine (debug); a failure is what an operator looks for.
	level := slog.LevelInfo
	if e.Outcome == OutcomeSuccess {
		level = slog.LevelDebug
	}
	r.logger.Log(context.Background(), level, "activity",
		slog.String("id", e.ID),
		slog.String("requestId", e.RequestID),
		slog.String("actor", e.Actor),
		slog.String("connectorId", e.ConnectorID),
		slog.String("toolName", e.ToolName),
		slog.String("address", e.Address),
		slog.String("source", e.Source),
		slog.String("outcome", e.Outcome),
		slog.Int64("durationMs", e.DurationMs),
		slog.Int("attempts", e.Attempts),
		slog.String("errorCode", e.ErrorCode),
		slog.String("friction", e.Friction),
	)
	if writeErr != nil {
		r.logger.Warn("activity file write failed; further file writes skipped", slog.String("error", writeErr.Error()))
	}
}

// writer moves queued events to the store in batches until Close.
func (r *Recorder) writer() {
	defer close(r.done)
	batch := make([]Event, 0, batchMax)
	tick := time.NewTicker(batchEvery)
	defer tick.Stop()
	failing := false
	write := func() {
		if len(batch) == 0 {
			return
		}
		recs := make([]store.ActivityRecord, len(batch))
		for i, e := range batch {
			recs[i] = record(e)
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := r.st.AppendActivity(ctx, recs)
		cancel()
		if err != nil {
			r.dropped.Add(float64(len(batch)))
			if !failing {
				r.logger.Warn("activity: the store failed; events are dropped (and counted) until it answers",
					slog.Int("dropped", len(batch)), slog.String("error", err.Error()))
			}
		} else if failing {
			r.logger.Info("activity: the store answers again")
		}
		failing = err != nil
		batch = batch[:0]
	}
	drain := func() {
		for {
			select {
			case e := <-r.queue:
				batch = append(batch, e)
				if len(batch) == batchMax {
					write()
				}
			default:
				write()
				return
			}
		}
	}
	for {
		select {
		case e := <-r.queue:
			batch = append(batch, e)
			if len(batch) == batchMax {
				write()
			}
		case <-tick.C:
			write()
		case reply := <-r.flushes:
			drain()
			close(reply)
		case <-r.stop:
			drain()
			return
		}
	}
}

// flush waits (at most flushWait) until the events this process queued so
// far reached the store, so a reader sees its own process's calls.
func (r *Recorder) flush(ctx context.Context) {
	reply := make(chan struct{})
	t := time.NewTimer(flushWait)
	defer t.Stop()
	select {
	case r.flushes <- reply:
	case <-r.done:
		return
	case <-t.C:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-reply:
	case <-t.C:
	case <-ctx.Done():
	}
}

func record(e Event) store.ActivityRecord {
	line := encodeLine(e)
	if len(line) > 0 {
		line = line[:len(line)-1] // no newline in the store
	}
	return store.ActivityRecord{ID: e.ID, OccurredAt: e.OccurredAt, ConnectorID: e.ConnectorID,
		Outcome: e.Outcome, Actor: e.Actor, JSON: line}
}

func (r *Recorder) complete(e Event) Event {
	// Ids order this process's events within one millisecond (newest first
	// is occurredAt, then id, descending); the tag keeps replicas' apart.
	e.ID = fmt.Sprintf("%08x%s", uint32(r.seq.Add(1)), r.tag)
	e.OccurredAt = time.Now().UTC().Truncate(time.Millisecond) // ISO-8601 with milliseconds, like the original
	e.ServerName = r.serverName
	e.ServerVersion = r.serverVersion
	// The identity clamps (V3) are jstext.Clamp, the helper discovery uses
	// for the addresses it echoes (S4).
	e.ConnectorID = jstext.Clamp(e.ConnectorID, jstext.MaxIdentityBytes)
	e.ToolName = jstext.Clamp(e.ToolName, jstext.MaxIdentityBytes)
	e.Address = jstext.Clamp(e.Address, jstext.MaxAddressBytes)
	e.RequestID = jstext.Clamp(e.RequestID, maxContextBytes)
	e.Actor = jstext.Clamp(e.Actor, maxContextBytes)
	e.Source = jstext.Clamp(e.Source, maxContextBytes)
	e.Outcome = jstext.Clamp(e.Outcome, maxContextBytes)
	e.ErrorCode = jstext.Clamp(e.ErrorCode, maxContextBytes)
	if e.Friction == "" {
		e.Friction = Friction(e.ErrorCode)
	} else {
		e.Friction = jstext.Clamp(e.Friction, maxContextBytes)
	}
	if e.DurationMs < 0 {
		e.DurationMs = 0
	}
	if e.Attempts < 0 {
		e.Attempts = 0
	}
	return e
}

func encodeLine(e Event) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil // every field is a clamped valid string or a number
	}
	return buf.Bytes() // Encode ends with '\n'
}

// Query selects events for /activity, newest first. Zero fields do not
// filter; Before is a cursor from a previous page.
type Query struct {
	Limit       int
	Before      string
	ConnectorID string
	Outcome     string
	Actor       string
	Since       time.Time
	Until       time.Time
}

// Page is one page of events and the cursor of the next ("" at the end).
type Page struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// ErrBadCursor is a `before` cursor this server did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// maxCursorBytes bounds a cursor before it is decoded.
const maxCursorBytes = 512

// EncodeCursor makes the opaque cursor of a position: base64url of
// "<occurredAtMs>:<id>".
func EncodeCursor(c store.Cursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%s", c.OccurredAtMs, c.ID))
}

// DecodeCursor reverses EncodeCursor; anything else is ErrBadCursor.
func DecodeCursor(s string) (store.Cursor, error) {
	if len(s) > maxCursorBytes {
		return store.Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.Cursor{}, ErrBadCursor
	}
	ms, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n < 0 || id == "" || !utf8.ValidString(id) || len(id) > maxContextBytes {
		return store.Cursor{}, ErrBadCursor
	}
	return store.Cursor{OccurredAtMs: n, ID: id}, nil
}

// List returns one page of the history, newest first. It first waits
// (briefly) for this process's queued events, so a caller reads its own
// calls. A store failure matches store.ErrUnavailable.
func (r *Recorder) List(ctx context.Context, q Query) (Page, error) {
	sq := store.ActivityQuery{Limit: max(q.Limit, 1), ConnectorID: q.ConnectorID, Outcome: q.Outcome,
		Actor: q.Actor, Since: q.Since, Until: q.Until}
	if q.Before != "" {
		c, err := DecodeCursor(q.Before)
		if err != nil {
			return Page{}, err
		}
		sq.Before = &c
	}
	r.flush(ctx)
	recs, more, err := r.st.ListActivity(ctx, sq)
	if err != nil {
		return Page{}, err
	}
	p := Page{Events: make([]Event, 0, len(recs))}
	for _, rec := range recs {
		var e Event
		if err := json.Unmarshal(rec.JSON, &e); err != nil {
			continue // a row this binary cannot read is skipped, not fatal
		}
		p.Events = append(p.Events, e)
	}
	if more && len(recs) > 0 {
		last := recs[len(recs)-1]
		p.NextCursor = EncodeCursor(store.Cursor{OccurredAtMs: last.OccurredAt.UnixMilli(), ID: last.ID})
	}
	return p, nil
}

// Recent returns up to limit events, newest first; limit ≤ 0 means up to
// 100,000. A store failure gives what could be read (nothing).
func (r *Recorder) Recent(limit int) []Event {
	if limit <= 0 {
		limit = 100_000
	}
	p, err := r.List(context.Background(), Query{Limit: limit})
	if err != nil {
		return []Event{}
	}
	return p.Events
}

// Close writes the queued events (waiting at most a few seconds), stops the
// writer, and syncs and closes the file. Recording after Close still reaches
// the log. Close is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	f := r.file
	r.file = nil
	r.mu.Unlock()
	close(r.stop)
	select {
	case <-r.done:
	case <-time.After(closeFlushWait):
	}
	if f == nil {
		return nil
	}
	return errors.Join(f.Sync(), f.Close())
}

// Friction derives the optional friction class from a typed error code
// (V2); "" when the code derives none.
func Friction(code string) string {
	switch code {
	case "unknown_address", "unknown_tool":
		return FrictionToolNotFound
	case "invalid_args":
		return FrictionSchemaRetry
	case "destructive_tool_requires_approval":
		return FrictionDestructiveReroute
	case "auth_required":
		return FrictionAuthRequired
	case "result_too_large":
		return FrictionResultTooLarge
	default:
		return ""
	}
}

// NewID returns a random 16-hex-digit event id.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
