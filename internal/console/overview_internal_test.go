package console

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
)

// The Overview's numbers come from the hour's events: calls and executions
// (one per execute_code request) per minute by outcome, connectors by p95,
// error codes by count; events outside the hour are not drawn.
func TestOverview_SummarizesTheLastHourOfActivity(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 30, 20, 0, time.UTC)
	ev := func(ago time.Duration, connector, source, req, outcome, code string, ms int64) activity.Event {
		return activity.Event{OccurredAt: now.Add(-ago), ConnectorID: connector, Source: source, RequestID: req, Actor: "a",
			Outcome: outcome, ErrorCode: code, DurationMs: ms}
	}
	events := []activity.Event{
		ev(time.Minute, "fast", activity.SourceExecuteCode, "r1", "success", "", 10),
		ev(time.Minute, "slow", activity.SourceExecuteCode, "r1", "error", "unavailable", 900),
		ev(2*time.Minute, "fast", activity.SourceCallTool, "r2", "success", "", 12),
		ev(2*time.Minute, "slow", activity.SourceCallTool, "r3", "timeout", "timeout", 5000),
		ev(3*time.Minute, "slow", activity.SourceExecuteCode, "r4", "error", "unavailable", 800),
		ev(2*time.Hour, "old", activity.SourceCallTool, "r5", "error", "ancient", 99999), // not this hour's
	}
	var d overviewData
	summarize(&d, events, now)
	if d.Calls.Total != 5 || d.Executions.Total != 2 {
		t.Fatalf("calls %d executions %d, want 5 and 2", d.Calls.Total, d.Executions.Total)
	}
	legend := func(c chart) string {
		var b strings.Builder
		for _, l := range c.Legend {
			b.WriteString(l.Name + "=" + strconv.Itoa(l.Count) + " ")
		}
		return b.String()
	}
	if got := legend(d.Executions); got != "error=2 " { // r1 had a failed call; r4 failed
		t.Errorf("executions legend %q", got)
	}
	if got := legend(d.Calls); got != "success=2 error=2 timeout=1 " {
		t.Errorf("calls legend %q", got)
	}
	if len(d.Slowest) != 2 || d.Slowest[0].Connector != "slow" || d.Slowest[0].P95Ms != 5000 || d.Slowest[0].Calls != 3 || d.Slowest[0].ErrorCalls != 3 || d.Slowest[1].P95Ms != 12 {
		t.Errorf("slowest %+v", d.Slowest)
	}
	if len(d.Errors) != 2 || d.Errors[0] != (errorCount{Code: "unavailable", Count: 2, BarW: overviewBarMax}) {
		t.Errorf("errors %+v", d.Errors)
	}
	for _, b := range d.Calls.Bars {
		if b.X < chartPadL || b.X+b.W > d.Calls.Width || b.Y < chartPadT || b.Y+b.H > chartPadT+chartH {
			t.Errorf("bar outside the plot: %+v", b)
		}
	}
}
