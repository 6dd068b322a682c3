package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/test/testkit"
)

// rpcCall is one tools/call body with a chosen id and _meta.
func rpcCall(id any, tool string, args any, meta map[string]any) string {
	params := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return string(b)
}

// post sends body to /mcp (with token when not empty) and returns the open
// response; the caller reads and closes it.
func (h *harness) post(t testing.TB, ctx context.Context, body, token string) *http.Response {
	t.Helper()
	req := testkit.MCPRequest(t, h.url+"/mcp", strings.NewReader(body)).WithContext(ctx)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// reply is a whole response read in the background: a JSON reply's headers
// come only with its body, so a request that waits must not block the test.
func (h *harness) reply(t testing.TB, body, token string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	req := testkit.MCPRequest(t, h.url+"/mcp", strings.NewReader(body))
	go func() {
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- "transport: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- string(b)
	}()
	return out
}

// cancel posts notifications/cancelled for id.
func (h *harness) cancel(t testing.TB, id any, token string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": id, "reason": "test"}})
	resp := h.post(t, context.Background(), string(b), token)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: HTTP %d", resp.StatusCode)
	}
}

type sseMessage struct {
	at     time.Time
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// readSSE delivers each event-stream message of resp as it arrives; the
// channel closes at the end of the stream.
func readSSE(t testing.TB, resp *http.Response) <-chan sseMessage {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Content-Type %q, want an event stream: %s", ct, b)
	}
	out := make(chan sseMessage, 512)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m sseMessage
			if json.Unmarshal([]byte(data), &m) == nil {
				m.at = time.Now()
				out <- m
			}
		}
	}()
	return out
}

func resultText(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var r mcp.CallToolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result: %v: %s", err, raw)
	}
	return textOf(t, &r)
}

// L2 from a real client in stateless HTTP: a notifications/cancelled naming
// exactly one in-flight request of the actor does what a disconnect does —
// the downstream call is aborted, the slot is released — and the answer
// still written is executor_cancelled.
func TestCancel_MatchedCancelAbortsDownstreamAndFreesTheSlot(t *testing.T) {
	p := sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	answer := h.reply(t, rpcCall(7, "execute_code", map[string]any{"code": `async () => await connecta.call("down.slow", {})`}, nil), "")
	<-h.down.slowStarted
	h.cancel(t, 7, "")
	select {
	case <-h.down.slowCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the downstream call was not aborted")
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Snapshot().Active == 0 }, "the slot was not released")
	if body := <-answer; !strings.Contains(body, `executor_cancelled`) {
		t.Fatalf("answer: %s", body)
	}
	if got := h.cancellations(t, "matched"); got != 1 {
		t.Fatalf("matched = %v", got)
	}
}

// A top-level call cancelled the same way answers cancelled.
func TestCancel_TopLevelCallAnswersCancelled(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	answer := h.reply(t, rpcCall("abc", "call_tool", map[string]any{"address": "down.slow"}, nil), "")
	<-h.down.slowStarted
	h.cancel(t, "abc", "")
	<-h.down.slowCancelled
	if body := <-answer; !strings.Contains(body, `\"code\":\"cancelled\"`) {
		t.Fatalf("answer: %s", body)
	}
}

// Clients number their requests alike: with one actor, two in-flight
// requests with the same id make a cancel ambiguous and it cancels nothing;
// an id nobody has is unknown. With two actors, each id is theirs alone.
func TestCancel_CollidingIDsCancelNothingAcrossOneActor(t *testing.T) {
	h := newHarness(t, harnessOptions{
		code:   withStreamingCode,
		tokens: []server.Token{{Name: "a", Value: "token-of-actor-a-0123456789"}, {Name: "b", Value: "token-of-actor-b-0123456789"}},
	})
	sharedPool(t)
	sleep := map[string]any{"code": `async () => (await connecta.call("down.sleep", {ms: 2000})).slept`}
	inFlight := func(n int) {
		for range n {
			<-h.down.sleepStarted
		}
	}
	first := h.reply(t, rpcCall(1, "execute_code", sleep, nil), "token-of-actor-a-0123456789")
	second := h.reply(t, rpcCall(1, "execute_code", sleep, nil), "token-of-actor-a-0123456789")
	inFlight(2)
	h.cancel(t, 1, "token-of-actor-a-0123456789")
	h.cancel(t, 99, "token-of-actor-a-0123456789")
	for _, answer := range []<-chan string{first, second} {
		if body := <-answer; !strings.Contains(body, `{\"result\":true}`) {
			t.Fatalf("an ambiguous cancel cancelled a run: %s", body)
		}
	}
	// Actor b's request 1 is the only one of b: its cancel matches, and a's
	// run with the same id completes.
	ofA := h.reply(t, rpcCall(1, "execute_code", sleep, nil), "token-of-actor-a-0123456789")
	ofB := h.reply(t, rpcCall(1, "execute_code", sleep, nil), "token-of-actor-b-0123456789")
	inFlight(2)
	h.cancel(t, 1, "token-of-actor-b-0123456789")
	if body := <-ofB; !strings.Contains(body, "executor_cancelled") {
		t.Fatalf("b's run: %s", body)
	}
	if body := <-ofA; !strings.Contains(body, `{\"result\":true}`) {
		t.Fatalf("a's run: %s", body)
	}
	for result, want := range map[string]float64{"ambiguous": 1, "unknown": 1, "matched": 1} {
		if got := h.cancellations(t, result); got != want {
			t.Errorf("%s = %v, want %v", result, got, want)
		}
	}
}

// With a progress token, each console entry is a progress notification as
// the program writes it — the first arrives while the program still waits on
// a slow host call — and the downstream's own progress inside a program
// advances the same counter with no text. The result is unchanged.
func TestStream_ProgressCarriesEachConsoleEntryWhileTheProgramRuns(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	code := `async () => { console.log("first line"); await connecta.call("down.sleep", {ms: 400}); console.warn("second"); return 42 }`
	resp := h.post(t, context.Background(), rpcCall(3, "execute_code", map[string]any{"code": code}, map[string]any{"progressToken": "tok"}), "")
	var progress []map[string]any
	var firstAt, lastAt time.Time
	var result json.RawMessage
	for m := range readSSE(t, resp) {
		switch {
		case m.Method == "notifications/progress":
			var p map[string]any
			_ = json.Unmarshal(m.Params, &p)
			if len(progress) == 0 {
				firstAt = m.at
			}
			lastAt = m.at
			progress = append(progress, p)
		case m.Result != nil:
			result = m.Result
		}
	}
	if len(progress) < 3 || progress[0]["message"] != "first line" || progress[len(progress)-1]["message"] != "second" {
		t.Fatalf("progress: %v", progress)
	}
	// The last line is written after the 400 ms host call: the first one
	// reached the client while that call still ran.
	if lastAt.Sub(firstAt) < 300*time.Millisecond {
		t.Fatalf("the first line arrived only %s before the last: not while the host call slept", lastAt.Sub(firstAt))
	}
	for i, p := range progress {
		if p["progressToken"] != "tok" || p["progress"] != float64(i+1) {
			t.Fatalf("progress %d: %v (one counter per request)", i, p)
		}
		if i > 0 && i < len(progress)-1 && p["message"] != nil {
			t.Fatalf("downstream progress passed text into the stream: %v", p)
		}
	}
	if got := resultText(t, result); got != `{"result":42,"logs":"first line\nsecond"}` {
		t.Fatalf("result %s", got)
	}
}

// With a log level, entries at or above it are notifications/message with
// the console level mapped (log → info, warn → warning, error → error).
func TestStream_LogLevelSendsEntriesAtOrAboveIt(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	code := `async () => { console.log("a"); console.warn("b"); console.error("c"); return 1 }`
	resp := h.post(t, context.Background(), rpcCall(4, "execute_code", map[string]any{"code": code}, map[string]any{"io.modelcontextprotocol/logLevel": "warning"}), "")
	var got []string
	for m := range readSSE(t, resp) {
		if m.Method == "notifications/message" {
			var p struct {
				Level string `json:"level"`
				Data  string `json:"data"`
			}
			_ = json.Unmarshal(m.Params, &p)
			got = append(got, p.Level+":"+p.Data)
		}
		if m.Method == "notifications/progress" {
			t.Fatalf("progress without a token: %s", m.Params)
		}
	}
	if strings.Join(got, ",") != "warning:b,error:c" {
		t.Fatalf("messages %v", got)
	}
}

// ordinaryReply is the JSON reply to tools/call id 1 of
// `async () => { console.log("x"); return 1+1 }`, as it was before streaming.
const ordinaryReply = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"result\":2,\"logs\":\"x\"}"}],"structuredContent":{"result":2,"logs":"x"}}}`

// R6: with neither a progress token nor a log level the reply is the
// ordinary JSON one, byte for byte.
func TestStream_NoTokenNoLevelIsTheOrdinaryJSONReply(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	resp := h.post(t, context.Background(), rpcCall(1, "execute_code", map[string]any{"code": `async () => { console.log("x"); return 1+1 }`}, nil), "")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/json" || string(body) != ordinaryReply {
		t.Fatalf("%s\n%s\nwant\n%s", resp.Header.Get("Content-Type"), body, ordinaryReply)
	}
}

// call_tool forwards the downstream's progress, its text included, on the
// request's own counter.
func TestStream_CallToolForwardsDownstreamProgress(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	resp := h.post(t, context.Background(), rpcCall(5, "call_tool", map[string]any{"address": "down.sleep", "args": map[string]any{"ms": 400}}, map[string]any{"progressToken": 9}), "")
	var msgs []string
	for m := range readSSE(t, resp) {
		if m.Method == "notifications/progress" {
			var p map[string]any
			_ = json.Unmarshal(m.Params, &p)
			if p["progressToken"] != float64(9) || p["progress"] != float64(len(msgs)+1) {
				t.Fatalf("progress %v", p)
			}
			msgs = append(msgs, fmt.Sprint(p["message"]))
		}
	}
	if len(msgs) < 2 || msgs[0] != "tick 1" {
		t.Fatalf("forwarded %v", msgs)
	}
}

// call_tool forwards every notification the downstream sent before its
// result, the last one included, with its progress and total as sent
// (server-everything's "1..4 of 4" arrived as 1..3 without total).
func TestStream_CallToolForwardsTheLastNotificationAndTotal(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for round := 0; round < 20; round++ {
		resp := h.post(t, context.Background(), rpcCall(5, "call_tool", map[string]any{"address": "down.sleep", "args": map[string]any{"ms": 0, "burst": 4}}, map[string]any{"progressToken": "p"}), "")
		var got []string
		for m := range readSSE(t, resp) {
			if m.Method == "notifications/progress" {
				var p struct {
					Progress, Total float64
					Message         string
				}
				_ = json.Unmarshal(m.Params, &p)
				got = append(got, fmt.Sprintf("%g/%g %s", p.Progress, p.Total, p.Message))
			}
		}
		if want := "[1/4 step 1 2/4 step 2 3/4 step 3 4/4 step 4]"; fmt.Sprint(got) != want {
			t.Fatalf("round %d: forwarded %v, want %s", round, got, want)
		}
	}
}

// The same through the official Go SDK client: its progress and logging
// handlers receive the program's lines, and cancelling its context frees
// the slot and aborts the downstream call.
func TestStream_GoSDKClientProgressLogsAndCancel(t *testing.T) {
	p := sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	progress := make(chan string, 16)
	logs := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "go-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Message },
		//lint:ignore SA1019 the deprecated logging feature is what program output streams through (see stream.go)
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logs <- fmt.Sprint(r.Params.Data) },
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Meta: mcp.Meta{"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"},
		Name: "execute_code", Arguments: map[string]any{"code": `async () => { console.log("hello"); return 1 }`},
	})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if m := <-progress; m != "hello" {
		t.Fatalf("progress %q", m)
	}
	if m := <-logs; m != "hello" {
		t.Fatalf("log %q", m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": `async () => await connecta.call("down.slow", {})`}})
		done <- err
	}()
	<-h.down.slowStarted
	cancel()
	<-h.down.slowCancelled
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Snapshot().Active == 0 }, "the slot was not released")
	<-done
}

// cancellations reads connecta_cancellations_total{result} from the harness's registry.
func (h *harness) cancellations(t testing.TB, result string) float64 {
	t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "connecta_cancellations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("connecta_cancellations_total{result=%q} does not exist", result)
	return 0
}
