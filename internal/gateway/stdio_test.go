package gateway

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func stdioSpec(id string) ConnectorSpec {
	return ConnectorSpec{ID: id, Command: []string{"/proc/self/exe", stdioServerArg}, Env: map[string]string{"ONLY_THIS": "1"}}
}

func TestStdio_ExplicitEnvRestartAndStderr(t *testing.T) {
	env := newTestGateway(t, 10*time.Second, stdioSpec("s"))
	res, gerr := env.call(t, "s.env", "", false)
	if gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	var environ []string
	if err := json.Unmarshal(res.Value, &environ); err != nil {
		t.Fatalf("env value %s", res.Value)
	}
	if len(environ) != 1 || environ[0] != "ONLY_THIS=1" {
		t.Fatalf("child environment = %v, want only the explicit env", environ)
	}

	// A crash fails the call in flight as unavailable; the next call
	// restarts the process (after its backoff) and succeeds.
	_, gerr = env.call(t, "s.crash", "", false)
	if gerr == nil || gerr.Code != CodeUnavailable || !gerr.Retryable {
		t.Fatalf("crash: %v", gerr)
	}
	if _, gerr := env.call(t, "s.read_items", "", false); gerr != nil {
		t.Fatalf("after restart: %s", errJSON(t, gerr))
	}
	c := env.g.lookup("s")
	if tail := c.stderr.String(); !strings.Contains(tail, "crashing on purpose") || !strings.Contains(tail, "stdio test server up") {
		t.Fatalf("stderr tail = %q", tail)
	}
	if h := env.g.Health()[0]; h.Restarts != 1 || !h.Connected {
		t.Fatalf("health %+v", h)
	}
}

func TestStdio_MissingCommandIsUnavailable(t *testing.T) {
	env := newTestGateway(t, 2*time.Second, ConnectorSpec{ID: "s", Command: []string{"/nonexistent/mcp-server"}})
	_, err := env.g.Tools(context.Background(), "s")
	gerr, _ := err.(*Error)
	if gerr == nil || gerr.Code != CodeCatalogLookupFailed || !gerr.Retryable {
		t.Fatalf("got %v", err)
	}
	// The exec error reaches the caller: what failed, not a generic line.
	if !strings.Contains(gerr.Message, "could not be started") || !strings.Contains(gerr.Message, "/nonexistent/mcp-server") {
		t.Fatalf("message %q does not name the exec error", gerr.Message)
	}
}

// A command without a slash resolves through the connector's env.PATH when
// it sets one: a program only there starts, and a program only in
// connecta's PATH (sh) does not.
func TestStdio_CommandResolvesThroughTheConnectorsPATH(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "connecta-test-stdio")); err != nil {
		t.Fatal(err)
	}
	env := newTestGateway(t, 10*time.Second,
		ConnectorSpec{ID: "s", Command: []string{"connecta-test-stdio", stdioServerArg}, Env: map[string]string{"PATH": "relative:" + dir}},
		ConnectorSpec{ID: "t", Command: []string{"sh", "-c", "exit 0"}, Env: map[string]string{"PATH": dir}})
	if _, gerr := env.call(t, "s.read_items", "", false); gerr != nil {
		t.Fatalf("a program on the connector's PATH: %s", errJSON(t, gerr))
	}
	_, err = env.g.Tools(context.Background(), "t")
	gerr, _ := err.(*Error)
	if gerr == nil || !strings.Contains(gerr.Message, "not found in the connector's env.PATH") {
		t.Fatalf("a program only on connecta's PATH: %v", err)
	}
}

// A server that writes to stderr and exits: the caller sees the exit
// status only; the operator's tail has the stderr with the secret redacted.
func TestStdio_StderrThenExitShowsStatusToCallerAndTailToOperator(t *testing.T) {
	const secret = "s3cr3t-value-42"
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{
		ID: "s", Command: []string{"sh", "-c", `echo "fatal: token $TOKEN refused" >&2; exit 3`},
		Env: map[string]string{"TOKEN": secret}, Secrets: []string{secret},
	})
	_, err := env.g.Tools(context.Background(), "s")
	gerr, _ := err.(*Error)
	if gerr == nil || gerr.Code != CodeCatalogLookupFailed {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(gerr.Message, "exit status 3") || strings.Contains(gerr.Message, "fatal") || strings.Contains(gerr.Message, secret) {
		t.Fatalf("caller message %q: want the exit status and no stderr", gerr.Message)
	}
	tail := env.g.StderrTail("s")
	if !strings.Contains(tail, "fatal: token [redacted] refused") || strings.Contains(tail, secret) {
		t.Fatalf("stderr tail %q: want the line with the secret redacted", tail)
	}
}

func TestTailBuffer_KeepsLastBytesAndRedactsAcrossTheWindow(t *testing.T) {
	const secret = "ABCDEFGHIJ"
	tb := newTailBuffer(16, newRedactor([]string{secret}))
	_, _ = tb.Write([]byte("xxxxxxxxxxxxxxxxxxxx" + secret + "-tail"))
	got := tb.String()
	if strings.Contains(got, "ABC") || strings.Contains(got, "HIJ") || len(got) > 16 || !strings.HasSuffix(got, "-tail") {
		t.Fatalf("tail %q", got)
	}
	tb2 := newTailBuffer(8, newRedactor(nil))
	for i := 0; i < 100; i++ {
		_, _ = tb2.Write([]byte("0123456789"))
	}
	if got := tb2.String(); got != "23456789" {
		t.Fatalf("tail %q", got)
	}
}

func TestStdioBackoff(t *testing.T) {
	cases := []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {6, 3200 * time.Millisecond}, {7, 5 * time.Second}, {50, 5 * time.Second}}
	for _, tc := range cases {
		if got := stdioBackoff(tc.n); got != tc.want {
			t.Fatalf("backoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}
