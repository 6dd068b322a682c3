package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
)

func codeHarness(t *testing.T) *harness {
	t.Helper()
	sharedPool(t)
	return newHarness(t, harnessOptions{code: withCode})
}

func TestSurface_ExactlySevenTools(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"authorize_connector", "call_destructive_tool", "call_tool", "execute_code", "get_result", "search_tools", "skills"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want exactly %v", names, want)
	}
	out := call(t, cs, "execute_code", `{"code":"async () => 42"}`)
	if out.IsError || textOf(t, out) != `{"result":42}` {
		t.Fatalf("execute_code: %s", textOf(t, out))
	}
}

// parityProgram calls address with args and returns the caught error's
// stable fields.
func parityProgram(address, args string) string {
	code := `async () => { try { await connecta.call(` + quoteJS(address) + `, ` + args + `); return {ok:true} } ` +
		`catch (e) { return {code: e.code, retryable: e.retryable, retryAfterMs: e.details && e.details.retryAfterMs} } }`
	b, _ := json.Marshal(map[string]string{"code": code})
	return string(b)
}

func quoteJS(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestS6_ParityTopLevelAndProgram: a top-level call_tool and a program's
// connecta.call reach the same invocation path — same refusal, same
// classification, same activity (only the source differs).
func TestS6_ParityTopLevelAndProgram(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	call(t, cs, "call_tool", `{"address":"down.echo"}`) // warm the catalog
	for _, tc := range []struct {
		name, mode, address, code string
		retryable                 bool
	}{
		{"destructive refusal", "", "down.delete_item", "destructive_tool_requires_approval", false},
		{"unknown tool", "", "down.nope", "unknown_tool", false},
		{"unknown connector", "", "ghost.read", "unknown_address", false},
		{"rate limited", "429", "down.echo", "rate_limited", true},
		{"unavailable", "500", "down.echo", "unavailable", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.down.mode.Store(tc.mode)
			defer h.down.mode.Store("")
			top := call(t, cs, "call_tool", `{"address":"`+tc.address+`","args":{"id":7},"resultMode":"value"}`)
			var topEnv struct {
				Error struct {
					Code         string `json:"code"`
					Retryable    bool   `json:"retryable"`
					RetryAfterMs *int64 `json:"retryAfterMs"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(textOf(t, top)), &topEnv); err != nil {
				t.Fatalf("top-level: %v %s", err, textOf(t, top))
			}
			topEvent := h.activity.Recent(1)[0]

			prog := call(t, cs, "execute_code", parityProgram(tc.address, `{id:7}`))
			var progEnv struct {
				Result struct {
					Code         string `json:"code"`
					Retryable    bool   `json:"retryable"`
					RetryAfterMs *int64 `json:"retryAfterMs"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(textOf(t, prog)), &progEnv); err != nil {
				t.Fatalf("program: %v %s", err, textOf(t, prog))
			}
			progEvent := h.activity.Recent(1)[0]

			if topEnv.Error.Code != tc.code || progEnv.Result.Code != tc.code {
				t.Fatalf("codes: top %q program %q, want %q", topEnv.Error.Code, progEnv.Result.Code, tc.code)
			}
			if topEnv.Error.Retryable != tc.retryable || progEnv.Result.Retryable != tc.retryable {
				t.Fatalf("retryable: top %v program %v", topEnv.Error.Retryable, progEnv.Result.Retryable)
			}
			if (topEnv.Error.RetryAfterMs == nil) != (progEnv.Result.RetryAfterMs == nil) ||
				(topEnv.Error.RetryAfterMs != nil && *topEnv.Error.RetryAfterMs != *progEnv.Result.RetryAfterMs) {
				t.Fatalf("retryAfterMs: top %v program %v", topEnv.Error.RetryAfterMs, progEnv.Result.RetryAfterMs)
			}
			if topEvent.Source != "call_tool" || progEvent.Source != "execute_code" {
				t.Fatalf("sources %q %q", topEvent.Source, progEvent.Source)
			}
			if !sameEvent(topEvent, progEvent) {
				t.Fatalf("activity differs:\n top %+v\n prog %+v", topEvent, progEvent)
			}
		})
	}
}

// sameEvent compares the classification fields of two activity events.
func sameEvent(a, b activity.Event) bool {
	return a.ConnectorID == b.ConnectorID && a.ToolName == b.ToolName && a.Address == b.Address &&
		a.Outcome == b.Outcome && a.Attempts == b.Attempts && a.ErrorCode == b.ErrorCode && a.Friction == b.Friction
}

func TestDisconnect_CancelsARunningProgram(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
			"code": `async () => await connecta.call("down.slow", {})`,
		}})
		errc <- err
	}()
	<-h.down.slowStarted
	cancel()
	select {
	case <-h.down.slowCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the program's host call was not cancelled by the disconnect")
	}
	<-errc
}

// The two front doors write the same error object (docs/DECISIONS.md "JSON
// the model reads"): byte for byte, JSON.stringify's rules (U+2028 and
// U+2029 raw, no HTML escaping), except the recovery key — `tool:
// "search_tools"` at the top level, `function: "connecta.search"` inside a
// program. Before one writer served both, call_tool escaped U+2028.
func TestE1_FrontDoorsWriteIdenticalErrorObjects(t *testing.T) {
	h := codeHarness(t)
	cs := h.connect(t, "")
	call(t, cs, "call_tool", `{"address":"down.echo"}`) // warm the catalog
	for _, address := range []string{"down.no\u2028pe<&>", "ghost\u2029.read"} {
		t.Run(address, func(t *testing.T) {
			top := call(t, cs, "call_tool", `{"address":`+quoteJS(address)+`,"args":{}}`)
			var topEnv struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(textOf(t, top)), &topEnv); err != nil {
				t.Fatalf("top-level: %v %s", err, textOf(t, top))
			}
			code := `async () => { try { await connecta.call(` + quoteJS(address) + `, {}); return null } catch (e) { return e.details } }`
			b, _ := json.Marshal(map[string]string{"code": code})
			prog := call(t, cs, "execute_code", string(b))
			var progEnv struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(textOf(t, prog)), &progEnv); err != nil {
				t.Fatalf("program: %v %s", err, textOf(t, prog))
			}
			want := strings.Replace(string(topEnv.Error), `"tool":"search_tools"`, `"function":"connecta.search"`, 1)
			if want != string(progEnv.Result) {
				t.Fatalf("error objects differ beyond the recovery key:\n top     %s\n program %s", topEnv.Error, progEnv.Result)
			}
			if !strings.Contains(want, "\u2028") && !strings.Contains(want, "\u2029") || strings.Contains(want, `\u202`) || strings.Contains(want, `\u003c`) {
				t.Fatalf("not JSON.stringify's escaping: %s", want)
			}
		})
	}
}
