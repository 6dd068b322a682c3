package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// tsClientDir holds the pinned official TypeScript client (make tsclient).
const tsClientDir = "../../test/tsclient/testdata"

// tsClient runs one scenario of client.mjs against h; lines carries what it
// prints, send writes a line to its stdin. CI sets CONNECTA_REQUIRE_TSCLIENT
// so a missing node or package fails instead of skipping.
func tsClient(t *testing.T, h *harness, scenario string) (lines <-chan map[string]any, send func()) {
	t.Helper()
	node := testkit.TSClientNode(t, tsClientDir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, node, "client.mjs", scenario, h.url+"/mcp")
	cmd.Dir = tsClientDir
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]any, 8)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				out <- m
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("client.mjs %s: %v\n%s", scenario, err, stderr.String())
		}
		cancel()
	})
	return out, func() { _, _ = io.WriteString(stdin, "go\n") }
}

func next(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-lines:
		if !ok {
			t.Fatal("client.mjs ended early")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("client.mjs said nothing for 30 s")
	}
	return nil
}

// An AbortSignal in the official TypeScript client frees the slot and
// aborts the downstream request: its notifications/cancelled matches the one
// request of that actor with that id.
func TestTSClient_AbortSignalFreesTheSlotAndAbortsDownstream(t *testing.T) {
	p := sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	lines, send := tsClient(t, h, "abort")
	next(t, lines)
	<-h.down.slowStarted
	start := time.Now()
	send()
	select {
	case <-h.down.slowCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the downstream request was not aborted")
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return p.Snapshot().Active == 0 }, "the slot was not released")
	t.Logf("abort → slot free in %s", time.Since(start))
	if m := next(t, lines); !strings.Contains(m["error"].(string), "stop") {
		t.Fatalf("client saw %v", m)
	}
	send()
	if got := h.cancellations(t, "matched"); got != 1 {
		t.Fatalf("matched = %v", got)
	}
}

// Two TypeScript clients of one actor both send tools/call id 1: one
// aborts, which names two in-flight requests, so nothing is cancelled and
// the other's run completes.
func TestTSClient_CollidingIDsOneCancelsTheOtherCompletes(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	lines, send := tsClient(t, h, "collide")
	next(t, lines)
	<-h.down.sleepStarted
	<-h.down.sleepStarted
	send()
	m := next(t, lines)
	if !strings.HasPrefix(m["a"].(string), "rejected") || m["b"] != `{"result":true}` || m["bError"] != false {
		t.Fatalf("client saw %v", m)
	}
	if got := h.cancellations(t, "ambiguous"); got != 1 {
		t.Fatalf("ambiguous = %v", got)
	}
}

// onprogress receives a program's first log line while the program still
// waits on a slow host call; the log level streams notifications/message;
// the result is unchanged.
func TestTSClient_OnProgressGetsTheFirstLineWhileTheProgramWaits(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	lines, _ := tsClient(t, h, "progress")
	m := next(t, lines)
	progress, _ := m["progress"].([]any)
	if len(progress) < 2 {
		t.Fatalf("progress %v", m)
	}
	first := progress[0].(map[string]any)
	last := progress[len(progress)-1].(map[string]any)
	// The last line follows the 500 ms host call: the first reached the
	// client while the call was pending and that host call still ran.
	if first["message"] != "first line" || first["pending"] != true || last["ms"].(float64)-first["ms"].(float64) < 400 {
		t.Fatalf("first progress %v, last %v (want the first line while the 500 ms host call runs)", first, last)
	}
	if last["message"] != "last line" || last["progress"].(float64) != float64(len(progress)) {
		t.Fatalf("last progress %v of %d", last, len(progress))
	}
	if logs := m["logs"].([]any); len(logs) != 2 || logs[0] != "info:first line" || logs[1] != "warning:last line" {
		t.Fatalf("logs %v", logs)
	}
	if m["result"] != `{"result":7,"logs":"first line\nlast line"}` {
		t.Fatalf("result %v", m["result"])
	}
}

// With no progress token and no log level, the TypeScript client reads the
// ordinary JSON reply, byte for byte.
func TestTSClient_NoTokenNoLevelReadsTheOrdinaryJSONReply(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	lines, _ := tsClient(t, h, "plain")
	last, _ := next(t, lines)["last"].(map[string]any)
	if last == nil || last["contentType"] != "application/json" || last["text"] != ordinaryReply {
		t.Fatalf("reply %v\nwant %s", last, ordinaryReply)
	}
}
