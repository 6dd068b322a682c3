package activity

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

func TestV2_FrictionTable(t *testing.T) {
	cases := map[string]string{
		"unknown_address":                    "tool_not_found",
		"unknown_tool":                       "tool_not_found",
		"invalid_args":                       "schema_retry",
		"destructive_tool_requires_approval": "destructive_reroute",
		"auth_required":                      "auth_required",
		"result_too_large":                   "result_too_large",
		"":                                   "",
		"timeout":                            "",
		"unavailable":                        "",
		"connector_call_failed":              "",
		"budget_exceeded":                    "",
		"ambiguous_tool_alias":               "", // retired in 0.24.4
	}
	for code, want := range cases {
		if got := Friction(code); got != want {
			t.Errorf("Friction(%q) = %q, want %q", code, got, want)
		}
	}
}

func TestV2_EventJSONShape(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "activity.jsonl")
	var logBuf bytes.Buffer
	r, err := New(Options{File: file, Logger: slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})), ServerName: "connecta", ServerVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	r.Record(Event{RequestID: "req-1", Actor: "laptop", ConnectorID: "tracker", ToolName: "list_issues",
		Address: "tracker.list_issues", Source: SourceExecuteCode, Outcome: OutcomeError, DurationMs: 12, Attempts: 1,
		ErrorCode: "invalid_args"})
	r.Record(Event{ConnectorID: "tracker", ToolName: "get", Address: "tracker.get", Source: SourceCallTool,
		Outcome: OutcomeSuccess, DurationMs: 3, Attempts: 1})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", data)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range first {
		keys = append(keys, k)
	}
	wantKeys := []string{"actor", "address", "attempts", "connectorId", "durationMs", "errorCode", "friction", "id",
		"occurredAt", "outcome", "requestId", "serverName", "serverVersion", "source", "toolName"}
	if !sameSet(keys, wantKeys) {
		t.Fatalf("keys %v, want %v", keys, wantKeys)
	}
	if first["friction"] != "schema_retry" || first["serverName"] != "connecta" || first["serverVersion"] != "1.2.3" {
		t.Fatalf("unexpected event %v", first)
	}
	if id, _ := first["id"].(string); len(id) != 16 {
		t.Fatalf("id %q is not 16 hex digits", id)
	}
	if strings.Contains(lines[1], "errorCode") || strings.Contains(lines[1], "friction") {
		t.Fatalf("empty errorCode/friction not omitted: %s", lines[1])
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", info.Mode().Perm())
	}
	// One slog line per event (a success at debug), with the same payload-free fields.
	if n := strings.Count(logBuf.String(), `"msg":"activity"`); n != 2 {
		t.Fatalf("want 2 log lines, got %d: %s", n, logBuf.String())
	}
}

func TestV1_FileAppendsAcrossRecorders(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a.jsonl")
	for i := 0; i < 2; i++ {
		r, err := New(Options{File: file})
		if err != nil {
			t.Fatal(err)
		}
		r.Record(Event{ConnectorID: "c", ToolName: "t", Address: "c.t", Source: SourceCallTool, Outcome: OutcomeSuccess, Attempts: 1})
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(file)
	if strings.Count(string(data), "\n") != 2 {
		t.Fatalf("want 2 appended lines, got %q", data)
	}
}

func TestV1_NewestFirstWithCursor(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		r.Record(Event{ConnectorID: "c", ToolName: name, Address: "c." + name})
	}
	got := r.Recent(0)
	var names []string
	for _, e := range got {
		names = append(names, e.ToolName)
	}
	if !reflect.DeepEqual(names, []string{"e", "d", "c", "b", "a"}) {
		t.Fatalf("Recent = %v (newest first, even within one millisecond)", names)
	}
	p, err := r.List(context.Background(), Query{Limit: 2})
	if err != nil || len(p.Events) != 2 || p.NextCursor == "" {
		t.Fatalf("page 1: %+v, %v", p, err)
	}
	p, err = r.List(context.Background(), Query{Limit: 5, Before: p.NextCursor})
	if err != nil || len(p.Events) != 3 || p.Events[0].ToolName != "c" || p.NextCursor != "" {
		t.Fatalf("page 2: %+v, %v", p, err)
	}
	for _, bad := range []string{"!!", "bm9jb2xvbg", EncodeCursor(store.Cursor{OccurredAtMs: 1}), strings.Repeat("A", 600)} {
		if _, err := r.List(context.Background(), Query{Limit: 1, Before: bad}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
		}
	}
}

// blockingStore never finishes a write until released: a slow store.
type blockingStore struct {
	store.Activity
	release chan struct{}
}

func (b blockingStore) AppendActivity(ctx context.Context, _ []store.ActivityRecord) error {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return errors.New("slow store")
}

// TestV1_SlowStoreNeverSlowsACall: recording with a store that does not
// answer returns at once; what does not fit the buffer is dropped and
// counted in connecta_activity_dropped_total.
func TestV1_SlowStoreNeverSlowsACall(t *testing.T) {
	reg := prometheus.NewRegistry()
	bs := blockingStore{Activity: store.NewMemory(), release: make(chan struct{})}
	r, err := New(Options{Store: bs, Buffer: 4, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 1000 {
		r.Record(Event{ConnectorID: "c", ToolName: "t", Address: "c.t"})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 records took %s with a stuck store", d)
	}
	if got := testutil.ToFloat64(r.dropped); got < 1000-4-batchMax {
		t.Fatalf("dropped %v, want nearly all", got)
	}
	close(bs.release)
	_ = r.Close()
}

func TestV3_IdentityClamp(t *testing.T) {
	r, _ := New(Options{})
	huge := strings.Repeat("x", 50_000)
	emoji := strings.Repeat("😀", 40) // 160 bytes of 4-byte runes
	invalid := strings.Repeat("\xff\xfe", 30_000)
	cases := []struct {
		name                  string
		connector, tool, addr string
	}{
		{"50KB ascii", huge, huge, huge + "." + huge},
		{"multibyte runes", emoji, emoji, emoji + "." + emoji},
		{"invalid utf-8", invalid, invalid, invalid},
		{"mixed", "é" + invalid + emoji, emoji + huge, "\x80" + huge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.Record(Event{ConnectorID: tc.connector, ToolName: tc.tool, Address: tc.addr})
			e := r.Recent(1)[0]
			for _, f := range []struct {
				v   string
				max int
			}{{e.ConnectorID, jstext.MaxIdentityBytes}, {e.ToolName, jstext.MaxIdentityBytes}, {e.Address, jstext.MaxAddressBytes}} {
				if len(f.v) > f.max+len(jstext.Marker) {
					t.Errorf("%d bytes > %d and the marker", len(f.v), f.max)
				}
				if !utf8.ValidString(f.v) {
					t.Errorf("invalid UTF-8 %q", f.v)
				}
				if !strings.HasSuffix(f.v, jstext.Marker) {
					t.Errorf("clamped value lacks the marker: %q", f.v)
				}
			}
		})
	}
	// Short values are exact and untagged.
	r.Record(Event{ConnectorID: "tracker", ToolName: "list", Address: "tracker.list"})
	e := r.Recent(1)[0]
	if e.ConnectorID != "tracker" || e.ToolName != "list" || e.Address != "tracker.list" {
		t.Fatalf("short values changed: %+v", e)
	}
	// Exactly at the bound stays exact.
	at := strings.Repeat("a", jstext.MaxIdentityBytes)
	r.Record(Event{ConnectorID: at, ToolName: at, Address: at + "." + at})
	if e := r.Recent(1)[0]; e.ConnectorID != at || e.ToolName != at || e.Address != at+"."+at {
		t.Fatalf("values at the bound were clamped: %+v", e)
	}
}

// The identity clamp rule (docs/DECISIONS.md "Identity clamps"): the first
// N UTF-8 bytes on a character boundary, then the marker. Before one helper
// served activity and discovery, activity kept N bytes in all (N−3 of text),
// so the same caller-authored id read differently in /activity and in a
// describe error.
func TestV3_IdentityClampKeepsNBytesThenMarker(t *testing.T) {
	r, _ := New(Options{})
	at := strings.Repeat("a", jstext.MaxIdentityBytes)
	r.Record(Event{ConnectorID: at + "b", ToolName: at + "b", Address: at + "." + at + "b"})
	e := r.Recent(1)[0]
	if e.ConnectorID != at+jstext.Marker || e.ToolName != at+jstext.Marker {
		t.Fatalf("one over the bound: %q", e.ConnectorID)
	}
	if e.Address != at+"."+at+jstext.Marker {
		t.Fatalf("address one over the bound: %q", e.Address)
	}
	// Never splits a rune: 128 bytes over 4-byte runes keeps 32 of them.
	emoji := strings.Repeat("😀", 40)
	r.Record(Event{ConnectorID: emoji})
	if got := r.Recent(1)[0].ConnectorID; got != strings.Repeat("😀", 32)+jstext.Marker {
		t.Fatalf("rune split: %q", got)
	}
}

func TestV1_ConcurrentRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.jsonl")
	r, err := New(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r.Record(Event{ConnectorID: "c", ToolName: "t", Address: "c.t", Outcome: OutcomeSuccess, Attempts: 1})
				_ = r.Recent(5)
			}
		}()
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	r.Record(Event{ConnectorID: "after", ToolName: "close"}) // neither blocks nor panics
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	ids := map[string]bool{}
	n := 0
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d not one JSON event: %v", n, err)
		}
		ids[e.ID] = true
		n++
	}
	if n != goroutines*each || len(ids) != n {
		t.Fatalf("%d lines, %d distinct ids; want %d", n, len(ids), goroutines*each)
	}
	if got := len(r.Recent(0)); got != goroutines*each {
		t.Fatalf("store holds %d, want %d", got, goroutines*each)
	}
}

func TestV2_ExplicitFrictionKeptAndNegativesClamped(t *testing.T) {
	r, _ := New(Options{})
	r.Record(Event{ErrorCode: "unknown_tool", DurationMs: -5, Attempts: -1})
	e := r.Recent(1)[0]
	if e.Friction != "tool_not_found" || e.DurationMs != 0 || e.Attempts != 0 {
		t.Fatalf("%+v", e)
	}
	r.Record(Event{Friction: FrictionResultTooLarge})
	if e := r.Recent(1)[0]; e.Friction != FrictionResultTooLarge {
		t.Fatalf("explicit friction lost: %+v", e)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func BenchmarkRecord(b *testing.B) {
	r, _ := New(Options{File: filepath.Join(b.TempDir(), "b.jsonl")})
	defer r.Close()
	e := Event{ConnectorID: "tracker", ToolName: "list", Address: "tracker.list", Source: SourceCallTool, Outcome: OutcomeSuccess, Attempts: 1}
	for b.Loop() {
		r.Record(e)
	}
}
