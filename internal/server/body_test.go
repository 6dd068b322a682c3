package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/test/testkit"
)

func postMCP(t testing.TB, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req := testkit.MCPRequest(t, url+"/mcp", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// One HTTP request is one unit of admission: a JSON-RPC batch — of any
// protocol version, with or without MCP-Protocol-Version — is refused with
// HTTP 400 and −32600 before admission, and nothing in it runs.
func TestBatch_RefusedBeforeAdmissionForEveryVersion(t *testing.T) {
	h := newHarness(t, harnessOptions{code: withCode})
	var calls []string
	for i := range 100 {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"async () => 1"}}}`, i))
	}
	batch := "\n  [" + strings.Join(calls, ",") + "]"
	before := h.srv.Health().Admission.Requests.Totals.Admitted
	executed := sharedPool(t).Snapshot().Totals.Admitted
	for _, version := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25"} {
		hdr := map[string]string{}
		if version != "" {
			hdr["MCP-Protocol-Version"] = version
		}
		status, body := postMCP(t, h.url, batch, hdr)
		if status != http.StatusBadRequest {
			t.Fatalf("version %q: status %d %s", version, status, body)
		}
		var rpc struct {
			ID    *int `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &rpc); err != nil || rpc.Error.Code != -32600 || rpc.ID != nil {
			t.Fatalf("version %q: body %s", version, body)
		}
	}
	if after := h.srv.Health().Admission.Requests.Totals.Admitted; after != before {
		t.Fatalf("a batch was admitted: %d → %d", before, after)
	}
	if after := sharedPool(t).Snapshot().Totals.Admitted; after != executed {
		t.Fatalf("the executor admitted %d programs from a batch", after-executed)
	}
}

// A batch is a batch however much JSON whitespace comes before its '[':
// 600 blanks (past one peek) or a megabyte of them are skipped, up to the
// body limit; a single request behind the same blanks is served.
func TestBatch_RefusedBehindAnyAmountOfWhitespace(t *testing.T) {
	h := newHarness(t, harnessOptions{code: withCode})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"async () => 1"}}}`
	executed := sharedPool(t).Snapshot().Totals.Admitted
	for _, blanks := range []string{strings.Repeat(" ", 600), strings.Repeat(" \t\r\n", 1<<18)} {
		status, body := postMCP(t, h.url, blanks+"["+call+","+call+"]", nil)
		if status != http.StatusBadRequest || !strings.Contains(body, "-32600") {
			t.Fatalf("%d blanks: status %d %.200s", len(blanks), status, body)
		}
	}
	if after := sharedPool(t).Snapshot().Totals.Admitted; after != executed {
		t.Fatalf("the executor admitted %d programs from a batch", after-executed)
	}
	status, body := postMCP(t, h.url, strings.Repeat("\n ", 5000)+call, nil)
	if status != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("a single request behind blanks: status %d %.300s", status, body)
	}
}

// trickle opens a raw connection that declares a body and sends it one byte
// per interval; it returns the status line it got (or the error).
func trickle(addr string, every time.Duration, stop <-chan struct{}) string {
	return trickleAs(addr, "", every, stop)
}

// trickleAs is trickle with a bearer token ("" for none).
func trickleAs(addr, token string, every time.Duration, stop <-chan struct{}) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", addr, auth, len(body)+1000)
	got := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			got <- err.Error()
			return
		}
		got <- strings.TrimSpace(line)
	}()
	_, _ = c.Write([]byte{body[0]}) // at once: the request then waits for a permit
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case line := <-got:
			return line
		case <-stop:
			return "stopped"
		case <-t.C:
			_, _ = c.Write([]byte{body[i%len(body)]})
		}
	}
}

// Sixteen connections trickling their bodies hold every permit for at most
// the body timeout each: they end 408, and a normal caller queued behind
// them is served within bodyTimeoutMs + 1 s.
func TestBodyTimeout_TricklersEnd408AndANormalCallerGetsThrough(t *testing.T) {
	const bodyTimeout = 700 * time.Millisecond
	h := newHarness(t, harnessOptions{requests: server.RequestLimits{MaxActive: 16, MaxQueue: 32, QueueTimeout: 5 * time.Second, BodyTimeout: bodyTimeout}})
	addr := strings.TrimPrefix(h.url, "http://")
	stop := make(chan struct{})
	defer close(stop)
	var wg sync.WaitGroup
	results := make([]string, 16)
	for i := range results {
		wg.Go(func() { results[i] = trickle(addr, 50*time.Millisecond, stop) })
	}
	// Let the tricklers take every permit.
	testkit.Eventually(t, 5*time.Second, func() bool { return h.srv.Health().Admission.Requests.Active >= 16 },
		"the tricklers hold %d permits, want 16", h.srv.Health().Admission.Requests.Active)
	start := time.Now()
	cs := h.connect(t, "")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "skills", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("normal caller: %v", err)
	}
	if waited := time.Since(start); waited > bodyTimeout+time.Second {
		t.Fatalf("the normal caller waited %s (> bodyTimeout + 1 s)", waited)
	}
	wg.Wait()
	for i, r := range results {
		if !strings.Contains(r, " 408 ") {
			t.Errorf("trickler %d ended %q, want 408", i, r)
		}
	}
}

// Fair request admission: 64 slow senders of one token — every permit held,
// the queue full of them — do not starve another caller. Its requests take
// the place of the flood's newest waiters and get the next permits (the
// flood is capped at half of maxActive while both wait). Before, every
// request of the other caller was refused 503.
func TestFairAdmission_SixtyFourSlowSendersOfOneTokenDoNotStarveAnother(t *testing.T) {
	const slow, other = "slow-sender-token-0123456789", "other-caller-token-0123456789"
	h := newHarness(t, harnessOptions{
		tokens:   []server.Token{{Name: "flood", Value: slow}, {Name: "other", Value: other}},
		requests: server.RequestLimits{MaxActive: 16, MaxQueue: 32, QueueTimeout: 5 * time.Second, BodyTimeout: 700 * time.Millisecond},
	})
	addr := strings.TrimPrefix(h.url, "http://")
	stop := make(chan struct{})
	defer close(stop)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range 64 {
		wg.Go(func() { trickleAs(addr, slow, 50*time.Millisecond, stop) })
	}
	if !testkit.Poll(5*time.Second, func() bool {
		a := h.srv.Health().Admission.Requests
		return a.Active >= 16 && a.Queued >= 32
	}) {
		a := h.srv.Health().Admission.Requests
		t.Fatalf("the flood holds %d permits and %d places", a.Active, a.Queued)
	}
	cs := h.connect(t, other)
	for range 3 {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "skills", Arguments: map[string]any{}}); err != nil {
			t.Fatalf("the other caller: %v", err)
		}
	}
}

// BenchmarkBodyTimeout_NormalCallerP99During16Trickling keeps 16
// connections trickling bodies (each replaced as soon as it is cut off) and
// reports a normal caller's p99 latency (a skills call: one admitted request each) with the default
// bodyTimeoutMs (target ≤ bodyTimeoutMs + 1 s).
func BenchmarkBodyTimeout_NormalCallerP99During16Trickling(b *testing.B) {
	h := newHarness(b, harnessOptions{requests: server.RequestLimits{MaxActive: 16, MaxQueue: 32, QueueTimeout: 5 * time.Second}})
	addr := strings.TrimPrefix(h.url, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 125 * time.Millisecond) // spread their deadlines over the timeout
			for {
				select {
				case <-stop:
					return
				default:
				}
				trickle(addr, 200*time.Millisecond, stop)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	testkit.Eventually(b, 10*time.Second, func() bool { return h.srv.Health().Admission.Requests.Active >= 16 },
		"the 16 trickling connections hold no permits")
	cs := h.connect(b, "")
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond) // sample at random phases
		start := time.Now()
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "skills", Arguments: map[string]any{}}); err != nil { // tools/list may come from the client's cache
			b.Fatalf("normal caller: %v", err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	p99 := lat[min(len(lat)-1, len(lat)*99/100)]
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
}
