package activity

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Successful calls are routine: their activity line is DEBUG; a failure is
// INFO, what an operator's default level shows.
func TestActivityLog_SuccessAtDebugFailureAtInfo(t *testing.T) {
	var buf bytes.Buffer
	r, err := New(Options{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Record(Event{ConnectorID: "a", ToolName: "t", Address: "a.t", Source: "call_tool", Outcome: OutcomeSuccess, Attempts: 1})
	r.Record(Event{ConnectorID: "a", ToolName: "t", Address: "a.t", Source: "call_tool", Outcome: OutcomeError, ErrorCode: "unavailable", Attempts: 1})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=DEBUG msg=activity") || !strings.Contains(lines[1], "level=INFO msg=activity") {
		t.Fatalf("lines:\n%s", buf.String())
	}
}
