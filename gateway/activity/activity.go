// Package activity records one payload-free event per attempted call
// (V1–V4): a bounded in-memory ring for /activity, an optional JSON-lines
// file, and one slog line per event. Events have no field that could carry
// arguments, results, program source or error prose — payload-free by
// construction, not by discipline.
package activity

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/jstext"
)

// Contract bounds (V3, spec-meta-tools §11) and defaults (DECISIONS.md).
const (
	// DefaultRing is activity.ring's default capacity.
	DefaultRing = 1000
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
)

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
	ID            string    `json:"id"`
	OccurredAt    time.Time `json:"occurredAt"`
	RequestID     string    `json:"requestId"`
	Actor         string    `json:"actor"`
	ConnectorID   string    `json:"connectorId"`
	ToolName      string    `json:"toolName"`
	Address       string    `json:"address"`
	Source        string    `json:"source"`
	Outcome       string    `json:"outcome"`
	DurationMs    int64     `json:"durationMs"`
	Attempts      int       `json:"attempts"`
	ErrorCode     string    `json:"errorCode,omitempty"`
	Friction      string    `json:"friction,omitempty"`
	ServerName    string    `json:"serverName"`
	ServerVersion string    `json:"serverVersion"`
}

// Options configure a Recorder.
type Options struct {
	// Ring is the number of recent events kept in memory; 0 means DefaultRing.
	Ring int
	// File, when set, receives one JSON object per line, appended (0600).
	File string
	// Logger receives one payload-free line per event; nil discards.
	Logger        *slog.Logger
	ServerName    string
	ServerVersion string
}

// Recorder keeps recent events. It is safe for concurrent use. Recording is
// best-effort: it never fails or blocks a call on storage trouble.
type Recorder struct {
	logger        *slog.Logger
	serverName    string
	serverVersion string

	mu     sync.Mutex
	ring   []Event // circular; next is the slot the next event fills
	next   int
	count  int
	file   *os.File // nil when no file or after Close
	closed bool
	// fileFailed stops repeated warnings after the first write failure.
	fileFailed bool
}

// New builds a Recorder, opening the JSON-lines file when configured.
func New(opts Options) (*Recorder, error) {
	size := opts.Ring
	if size < 0 {
		return nil, fmt.Errorf("activity: ring size %d is negative", size)
	}
	if size == 0 {
		size = DefaultRing
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		logger:        logger,
		serverName:    opts.ServerName,
		serverVersion: opts.ServerVersion,
		ring:          make([]Event, size),
	}
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
		if err != nil {
			return nil, fmt.Errorf("activity: open %s: %w", opts.File, err)
		}
		r.file = f
	}
	return r, nil
}

// Record completes e (id, occurredAt, server identity, friction from the
// error code when unset), clamps caller-influenced fields, and stores it.
// Recent returns the event as stored.
func (r *Recorder) Record(e Event) {
	e = r.complete(e)
	line := encodeLine(e)

	r.mu.Lock()
	r.ring[r.next] = e
	r.next = (r.next + 1) % len(r.ring)
	if r.count < len(r.ring) {
		r.count++
	}
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

func (r *Recorder) complete(e Event) Event {
	e.ID = NewID()
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

// Recent returns up to limit events, newest first; limit ≤ 0 means all kept.
func (r *Recorder) Recent(limit int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.count
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]Event, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.ring[(r.next-i+len(r.ring))%len(r.ring)])
	}
	return out
}

// Close syncs and closes the file. Recording after Close still reaches the
// ring and the log. Close is idempotent.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.file == nil {
		return nil
	}
	f := r.file
	r.file = nil
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
