package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/childbin"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/internal/stdioshim"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"github.com/connecta-dev/connecta/test/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	stdioshim.MaybeRun()
	sandbox.MaybeRunChild()
	runTestMode()
	os.Exit(m.Run())
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, nopCloser{&bytes.Buffer{}}, nopCloser{&out}, &errb)
	return code, out.String(), errb.String()
}

func TestCheck_BadConfigNamesFileLineField(t *testing.T) {
	code, _, stderr := runCLI("check", "--config", "testdata/bad.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	testkit.Golden(t, filepath.Join("testdata", "check_bad.golden"), []byte(stderr), *update)
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(line, "error: testdata/bad.yaml:") {
			t.Errorf("line does not name file:line: %q", line)
		}
	}
}

func TestCheck_GoodConfig(t *testing.T) {
	code, stdout, stderr := runCLI("check", "--config", "testdata/good.yaml")
	if code != 0 || !strings.Contains(stdout, "testdata/good.yaml: ok (1 connectors") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

func TestCLI_VersionAndUnknownCommand(t *testing.T) {
	if code, out, _ := runCLI("version"); code != 0 || !strings.HasPrefix(out, "connecta ") {
		t.Fatalf("version: %d %q", code, out)
	}
	if code, _, errOut := runCLI("frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI("check"); code != 2 || !strings.Contains(errOut, "--config") {
		t.Fatalf("check without config: %d %q", code, errOut)
	}
}

// TestServe_EmbeddedDefaultThenGracefulStop runs serve on the embedded
// default (demo connector, loopback), checks /health and a tools/list, then
// cancels (as SIGTERM does) and expects a clean return.
func TestServe_EmbeddedDefaultThenGracefulStop(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the executor pool")
	}
	cfg, err := config.Default(resolver(""))
	if err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	if err := cfg.SetListen(addr); err != nil {
		t.Fatal(err)
	}
	cfg.Executor.Spares = 1
	cfg.Executor.CacheDir = filepath.Join(os.TempDir(), "connecta-cmd-test-cache")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, cfg, serveOptions{log: newLogger(&bytes.Buffer{})}) }()
	var health map[string]any
	testkit.Eventually(t, 90*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		_ = json.NewDecoder(resp.Body).Decode(&health)
		resp.Body.Close()
		return true
	}, "server did not come up")
	if health["status"] != "ok" || health["connectors"] != float64(1) {
		t.Fatalf("health %v", health)
	}
	// The child this build carries: make build's (and make test's) embed the
	// slim one; a plain go build re-executes itself.
	wantChild := supervisor.ChildSelf
	if childbin.Binary() != nil {
		wantChild = supervisor.ChildEmbedded
	}
	if ex, _ := health["executor"].(map[string]any); ex["child"] != wantChild {
		t.Fatalf("health executor %v, want child %q", health["executor"], wantChild)
	}
	// A first execute_code against the demo works at once.
	callCtx, cancelCalls := context.WithTimeout(ctx, 60*time.Second)
	defer cancelCalls()
	client := mcp.NewClient(&mcp.Implementation{Name: "first-run", Version: "1"}, nil)
	cs, err := client.Connect(callCtx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(callCtx, nil)
	if err != nil || len(tools.Tools) != 7 {
		t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
	}
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"code": `async () => { const p = await connecta.search({ query: "projects", connector: "demo" }); return p.tools.length > 0 }`,
	}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `{"result":true}` {
		t.Fatalf("execute_code returned %s", got)
	}
	_ = cs.Close()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// watchdogSocket is a systemd notify socket for this test, in the
// environment with a watchdog every 10 ms for this process.
func watchdogSocket(t *testing.T) *net.UnixConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "20000") // ping every 10 ms
	t.Setenv("WATCHDOG_PID", "")
	return conn
}

func TestNotify_ReadyWatchdogStopping(t *testing.T) {
	conn := watchdogSocket(t)
	n := newNotifier(newLogger(&bytes.Buffer{}))
	n.ready(nil)
	read := func() string {
		buf := make([]byte, 64)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:k])
	}
	if got := read(); got != "READY=1" {
		t.Fatalf("first datagram %q", got)
	}
	if got := read(); got != "WATCHDOG=1" {
		t.Fatalf("second datagram %q", got)
	}
	n.stopping()
	for {
		if got := read(); got == "STOPPING=1" {
			return
		}
	}
}

// A program may wait for request admission, then for an executor slot, then
// run to its wall deadline: the served write timeout must cover all three as
// configured, or a long program's response is cut off.
func TestServe_WriteTimeoutCoversConfiguredWaitsAndDeadline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "connecta.yaml")
	yaml := "requests: {queueTimeoutMs: 5000}\nexecutor: {queueTimeoutMs: 20000, timeoutMs: 30000}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := build(context.Background(), cfg, newLogger(&bytes.Buffer{}), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, min := a.Server.HTTPServer("127.0.0.1:0").WriteTimeout, 55*time.Second; got <= min {
		t.Fatalf("write timeout %s must exceed %s", got, min)
	}
}
