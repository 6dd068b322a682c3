package server_test

import (
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
)

// V2: a call_tool success truncated past results.maxInlineBytes records
// friction result_too_large with outcome success; one that fits inline —
// including one that fits only after `fields` projection — records none.
func TestV2_TruncatedCallToolSuccessIsResultTooLarge(t *testing.T) {
	h := newHarness(t, harnessOptions{maxInlineBytes: 1024})
	cs := h.connect(t, "")
	cases := []struct {
		name, tool, args, friction string
	}{
		{"mcp mode over the cap", "call_tool", `{"address":"down.big","args":{"bytes":5000}}`, activity.FrictionResultTooLarge},
		{"value mode over the cap", "call_tool", `{"address":"down.big","args":{"bytes":5000},"resultMode":"value"}`, activity.FrictionResultTooLarge},
		{"fits inline", "call_tool", `{"address":"down.big","args":{"bytes":100}}`, ""},
		{"fits after projection", "call_tool", `{"address":"down.echo","args":{"n":1,"pad":"` + strings.Repeat("x", 3000) + `"},"fields":["n"]}`, ""},
		{"value mode fits after projection", "call_tool", `{"address":"down.echo","args":{"n":1,"pad":"` + strings.Repeat("x", 3000) + `"},"fields":["n"],"resultMode":"value"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.activity.Recent(0))
			call(t, cs, tc.tool, tc.args)
			events := h.activity.Recent(0)
			if len(events) != before+1 {
				t.Fatalf("%d new events, want 1", len(events)-before)
			}
			ev := events[0] // newest first
			if ev.Outcome != activity.OutcomeSuccess || ev.Friction != tc.friction || ev.Source != "call_tool" {
				t.Fatalf("event %+v, want success with friction %q", ev, tc.friction)
			}
		})
	}
}
