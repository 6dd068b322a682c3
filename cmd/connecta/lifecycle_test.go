package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// Modes of this test binary, re-executed by the tests below (TestMain).
const (
	// serveMode runs the real command line: <bin> serveMode serve --config …
	serveMode = "-connecta-test-serve"
	// stdioServerMode is a stdio MCP server with one read-only tool, ping.
	// It writes its pid to $CONNECTA_TEST_PIDFILE; with
	// $CONNECTA_TEST_STUBBORN set it ignores stdin EOF and SIGTERM.
	stdioServerMode = "-connecta-test-stdio-server"
)

// runTestMode runs a re-executed mode and exits; it returns when argv names
// none.
func runTestMode() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case serveMode:
		os.Exit(run(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	case stdioServerMode:
		if f := os.Getenv("CONNECTA_TEST_PIDFILE"); f != "" {
			_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600)
		}
		stubborn := os.Getenv("CONNECTA_TEST_STUBBORN") != ""
		if stubborn {
			signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		}
		_ = pingServer().Run(context.Background(), &mcp.StdioTransport{})
		if stubborn {
			select {} // stdin is gone; live on regardless
		}
		os.Exit(0)
	}
}

// serverProcess is bin/connecta's command line run by this test binary.
type serverProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testkit.Buffer
}

func startServer(t testing.TB, configYAML string) *serverProcess {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "connecta.yaml")
	if err := os.WriteFile(path, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	p := &serverProcess{addr: addr, stderr: &testkit.Buffer{}}
	p.cmd = exec.Command(exe, serveMode, "serve", "--config", path, "--listen", addr)
	p.cmd.Stderr = p.stderr
	p.cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "connecta-cmd-test-xdg"))
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	if !testkit.Poll(60*time.Second, func() bool { return answersHealth("http://" + addr) }) {
		t.Fatalf("server did not come up\n%s", p.stderr.String())
	}
	return p
}

// answersHealth reports whether the server at base answers /health at all
// (any status: it is listening).
func answersHealth(base string) bool {
	resp, err := http.Get(base + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

func (p *serverProcess) client(t *testing.T, ctx context.Context, token string) *mcp.ClientSession {
	t.Helper()
	httpClient := http.DefaultClient
	if token != "" {
		httpClient = &http.Client{Transport: bearer{token: token}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "lifecycle-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + p.addr + "/mcp", HTTPClient: httpClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func callTool(ctx context.Context, cs *mcp.ClientSession, address string) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"address": address}})
	if err != nil {
		return "", false, err
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return text, res.IsError, nil
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 10*time.Second, func() bool {
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			return false
		}
		pid, err = strconv.Atoi(string(data))
		return err == nil
	}, "no pid in %s", path)
	return pid
}

// kill -9 of the server leaves no stdio connector alive: not one that
// ignores stdin EOF and SIGTERM, nor one started through a wrapper that
// forks (sh -c with a command after it).
func TestStdioLifecycle_KillNineOfServerLeavesNoConnectorAlive(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stubbornPid := filepath.Join(dir, "stubborn.pid")
	wrappedPid := filepath.Join(dir, "wrapped.pid")
	cfg := fmt.Sprintf(`executor: {spares: 0}
connectors:
  - id: stubborn
    command: [%q, %q]
    env: {CONNECTA_TEST_PIDFILE: %q, CONNECTA_TEST_STUBBORN: "1"}
  - id: wrapped
    command: [sh, -c, '"$0" %s; echo wrapper-done', %q]
    env: {CONNECTA_TEST_PIDFILE: %q, CONNECTA_TEST_STUBBORN: "1"}
`, exe, stdioServerMode, stubbornPid, stdioServerMode, exe, wrappedPid)
	srv := startServer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := srv.client(t, ctx, "")
	for _, addr := range []string{"stubborn.ping", "wrapped.ping"} {
		text, isErr, err := callTool(ctx, cs, addr)
		if err != nil || isErr || !strings.Contains(text, "pong") {
			t.Fatalf("%s: %v %v %s\n%s", addr, err, isErr, text, srv.stderr.String())
		}
	}
	pids := []int{readPid(t, stubbornPid), readPid(t, wrappedPid)}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("connector %d is not running before the kill", pid)
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	testkit.Poll(10*time.Second, func() bool { return !slices.ContainsFunc(pids, alive) })
	for _, pid := range pids {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("stdio connector %d outlived the server's kill -9", pid)
		}
	}
}

// A connector whose command does not exist and one that writes to stderr and
// exits: doctor and the log name the reason (the exit status, the redacted
// stderr tail); the error a model would see carries the status only.
func TestStdioLifecycle_StartFailuresShowTheReasonInDoctorAndLog(t *testing.T) {
	const secret = "hunter2-connecta-test"
	t.Setenv("CONNECTA_TEST_SECRET", secret)
	dir := t.TempDir()
	path := filepath.Join(dir, "connecta.yaml")
	cfg := `executor: {spares: 0}
connectors:
  - id: missing
    command: [/nonexistent/connecta-mcp-server]
  - id: crashy
    command: [sh, -c, 'echo "fatal: key $KEY rejected" >&2; exit 3']
    env: {KEY: "${env:CONNECTA_TEST_SECRET}"}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("doctor", "--config", path)
	if code != 1 {
		t.Fatalf("doctor exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		`connector missing: FAILED catalog_lookup_failed: The catalog of connector "missing" could not be loaded: the stdio server could not be started: exec: "/nonexistent/connecta-mcp-server"`,
		`connector crashy: FAILED catalog_lookup_failed: The catalog of connector "crashy" could not be loaded: the stdio server exited (exit status 3)`,
		"  | fatal: key [redacted] rejected",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"stdio server could not be started", "exit status 3", "fatal: key [redacted] rejected", "/nonexistent/connecta-mcp-server"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout+stderr, secret) {
		t.Fatalf("the secret leaked:\n%s\n%s", stdout, stderr)
	}
}

// The watchdog is pinged only while the HTTP accept loop is alive: once
// Serve has returned, the pings stop (systemd then restarts the service).
func TestNotify_WatchdogWithheldOnceTheAcceptLoopEnds(t *testing.T) {
	conn := watchdogSocket(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	watched := &acceptWatch{Listener: ln}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	served := make(chan struct{})
	go func() {
		_ = srv.Serve(watched)
		watched.ended.Store(true)
		close(served)
	}()
	logs := &testkit.Buffer{}
	n := newNotifier(newLogger(logs))
	n.ready(func(context.Context) (bool, string) {
		if !watched.alive(time.Second) {
			return false, "the HTTP accept loop is not running"
		}
		return true, ""
	})
	defer n.stop()
	read := func(wait time.Duration) (string, error) {
		buf := make([]byte, 64)
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		k, err := conn.Read(buf)
		return string(buf[:k]), err
	}
	if got, err := read(5 * time.Second); err != nil || got != "READY=1" {
		t.Fatalf("first datagram %q %v", got, err)
	}
	if got, err := read(5 * time.Second); err != nil || got != "WATCHDOG=1" {
		t.Fatalf("while serving: %q %v", got, err)
	}
	_ = srv.Close()
	<-served
	// Drain pings sent before the loop ended, then expect silence.
	for {
		if _, err := read(300 * time.Millisecond); err != nil {
			break
		}
	}
	if got, err := read(300 * time.Millisecond); err == nil {
		t.Fatalf("watchdog pinged %q with the accept loop gone", got)
	}
	if !strings.Contains(logs.String(), "watchdog ping withheld") {
		t.Fatalf("no log line says why: %s", logs.String())
	}
}

// pingServer is a go-sdk MCP server with the read-only tool ping.
func pingServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "lifecycle-test", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"pong":true}`}}}, nil
		})
	return s
}

// fixture serves pingServer over streamable HTTP on addr until stopped.
func startFixture(t *testing.T, addr string) (stop func()) {
	t.Helper()
	var ln net.Listener
	var err error
	testkit.Poll(2*time.Second, func() bool { // the port may linger briefly after a stop
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := pingServer()
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { _ = srv.Close() }) }
	t.Cleanup(stop)
	return stop
}

type healthBody struct {
	Status          string `json:"status"`
	Version         string `json:"version"`
	Connectors      int    `json:"connectors"`
	ConnectorStates map[string]struct {
		State         string `json:"state"`
		LastContactAt string `json:"lastContactAt"`
		LastOutcome   string `json:"lastOutcome"`
		ToolCount     *int   `json:"toolCount"`
		LastErrorCode string `json:"lastErrorCode"`
	} `json:"connectorStates"`
	Admission struct {
		Requests struct {
			Concurrency int `json:"concurrency"`
		} `json:"requests"`
	} `json:"admission"`
}

func (p *serverProcess) health(t *testing.T) (int, healthBody) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h healthBody
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

func (p *serverProcess) metric(t *testing.T, line string) bool {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return strings.Contains(b.String(), line)
}

// /health reports each connector from its last real contact: unknown before
// any, failed (status degraded, still HTTP 200) while the downstream is down,
// ok again once it answers; connecta_connector_up follows.
func TestHealth_DegradedWhileAFixtureIsDownOkWhenItReturns(t *testing.T) {
	fixture := testkit.FreeAddr(t)
	stop := startFixture(t, fixture)
	srv := startServer(t, fmt.Sprintf("executor: {spares: 0}\nconnectors:\n  - id: remote\n    url: http://%s/mcp\n", fixture))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := srv.client(t, ctx, "")

	code, h := srv.health(t)
	if code != 200 || h.Status != "ok" || h.Connectors != 1 || h.ConnectorStates["remote"].State != "unknown" || h.Version == "" {
		t.Fatalf("before contact: %d %+v", code, h)
	}
	ping := func() (string, bool) {
		text, isErr, err := callTool(ctx, cs, "remote.ping")
		if err != nil {
			t.Fatal(err)
		}
		return text, isErr
	}
	if text, isErr := ping(); isErr {
		t.Fatalf("ping: %s", text)
	}
	code, h = srv.health(t)
	if st := h.ConnectorStates["remote"]; code != 200 || h.Status != "ok" || st.State != "ok" || st.LastOutcome != "success" || st.LastContactAt == "" || st.ToolCount == nil || *st.ToolCount != 1 {
		t.Fatalf("after a good call: %d %+v", code, h)
	}
	if !srv.metric(t, `connecta_connector_up{connector="remote"} 1`) {
		t.Fatal("connector_up is not 1")
	}

	stop()
	if text, isErr := ping(); !isErr || !strings.Contains(text, "unavailable") {
		t.Fatalf("ping with the downstream down: %s", text)
	}
	code, h = srv.health(t)
	if st := h.ConnectorStates["remote"]; code != 200 || h.Status != "degraded" || st.State != "failed" || st.LastErrorCode != "unavailable" || st.LastOutcome != "failure" {
		t.Fatalf("downstream down: %d %+v", code, h)
	}
	if !srv.metric(t, `connecta_connector_up{connector="remote"} 0`) {
		t.Fatal("connector_up is not 0")
	}

	startFixture(t, fixture)
	var text string
	if !testkit.Poll(20*time.Second, func() bool {
		var isErr bool
		text, isErr = ping()
		return !isErr
	}) {
		t.Fatalf("ping after the fixture returned: %s", text)
	}
	code, h = srv.health(t)
	if code != 200 || h.Status != "ok" || h.ConnectorStates["remote"].State != "ok" {
		t.Fatalf("downstream back: %d %+v", code, h)
	}
}

func waitLog(t *testing.T, p *serverProcess, want string, n int) {
	t.Helper()
	if !testkit.Poll(20*time.Second, func() bool { return strings.Count(p.stderr.String(), want) >= n }) {
		t.Fatalf("log never said %q (%d times):\n%s", want, n, p.stderr.String())
	}
}

// SIGHUP reloads auth, connectors, execute.* and requests.*: a token and a
// connector added by reload work at once and the kept token still works; a
// restart-only change is logged as ignored; an invalid file keeps the running
// configuration and the log says why; a dropped token stops working.
func TestReload_SIGHUPAddsATokenAndAConnectorInvalidFileKeepsRunning(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tokA := writeFile("token-a", "token-a-0123456789")
	tokB := writeFile("token-b", "token-b-0123456789")
	one, two := testkit.FreeAddr(t), testkit.FreeAddr(t)
	startFixture(t, one)
	startFixture(t, two)
	first := fmt.Sprintf(`executor: {spares: 0}
auth:
  tokens:
    - {name: laptop, token: "${file:%s}"}
connectors:
  - {id: one, url: "http://%s/mcp"}
`, tokA, one)
	srv := startServer(t, first)
	path := srv.cmd.Args[4] // <bin> serveMode serve --config PATH
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pingAs := func(token, address string) (string, bool) {
		t.Helper()
		c := srv.client(t, ctx, token)
		text, isErr, err := callTool(ctx, c, address)
		if err != nil {
			t.Fatal(err)
		}
		return text, isErr
	}
	if text, isErr := pingAs("token-a-0123456789", "one.ping"); isErr {
		t.Fatalf("laptop before reload: %s", text)
	}
	status := func(token string) int {
		req := testkit.MCPRequest(t, "http://"+srv.addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("token-b-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("ci before reload: %d", got)
	}

	_ = os.WriteFile(path, []byte(fmt.Sprintf(`executor: {spares: 0, timeoutMs: 20000}
auth:
  tokens:
    - {name: laptop, token: "${file:%s}"}
    - {name: ci, token: "${file:%s}"}
requests: {maxActive: 8}
connectors:
  - {id: one, url: "http://%s/mcp"}
  - {id: two, url: "http://%s/mcp"}
`, tokA, tokB, one, two)), 0o600)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, "configuration reloaded", 1)
	if text, isErr := pingAs("token-b-0123456789", "two.ping"); isErr {
		t.Fatalf("new token, new connector: %s", text)
	}
	if text, isErr := pingAs("token-a-0123456789", "one.ping"); isErr {
		t.Fatalf("kept token after reload: %s", text)
	}
	if log := srv.stderr.String(); !strings.Contains(log, `"key":"executor"`) || !strings.Contains(log, "needs a restart") {
		t.Fatalf("restart-only change not logged as ignored:\n%s", log)
	}
	if code, h := srv.health(t); code != 200 || h.Connectors != 2 || h.Admission.Requests.Concurrency != 8 {
		t.Fatalf("health after reload (2 connectors, requests.maxActive 8): %d %+v", code, h)
	}

	// An invalid file: refused, the running configuration stays.
	_ = os.WriteFile(path, []byte("connectors: [{id: one, url: 42}]\nbogus: 1\n"), 0o600)
	_ = srv.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, srv, "configuration reload refused", 1)
	if log := srv.stderr.String(); !strings.Contains(log, "bogus") {
		t.Fatalf("the refusal does not say why:\n%s", log)
	}
	if got := status("token-b-0123456789"); got != http.StatusOK {
		t.Fatalf("ci after an invalid reload: %d", got)
	}
	if text, isErr := pingAs("token-a-0123456789", "two.ping"); isErr {
		t.Fatalf("connector two after an invalid reload: %s", text)
	}

	// Drop laptop: its token stops working, ci keeps working.
	_ = os.WriteFile(path, []byte(fmt.Sprintf("executor: {spares: 0, timeoutMs: 20000}\nauth:\n  tokens:\n    - {name: ci, token: \"${file:%s}\"}\nconnectors:\n  - {id: two, url: \"http://%s/mcp\"}\n", tokB, two)), 0o600)
	_ = srv.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, srv, "configuration reloaded", 2)
	if got := status("token-a-0123456789"); got != http.StatusUnauthorized {
		t.Fatalf("dropped token after reload: %d", got)
	}
	if got := status("token-b-0123456789"); got != http.StatusOK {
		t.Fatalf("ci after the second reload: %d", got)
	}
	if srv.cmd.ProcessState != nil {
		t.Fatal("the server exited on SIGHUP")
	}
}

// SIGTERM drains with the listener open: /health answers 503
// shutting_down, a new /mcp request 503 server_shutting_down with
// Retry-After, the call in flight finishes with its result, then the
// process exits 0 (the listener used to close at SIGTERM, so every poll
// was refused).
func TestDrain_HealthAndNewRequestsAnswer503WhileInFlightWorkFinishes(t *testing.T) {
	fixture := testkit.FreeAddr(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	s := pingServer()
	s.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"held":true}`}}}, nil
		})
	ln, err := net.Listen("tcp", fixture)
	if err != nil {
		t.Fatal(err)
	}
	fsrv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: time.Second}
	go func() { _ = fsrv.Serve(ln) }()
	t.Cleanup(func() { _ = fsrv.Close() })

	srv := startServer(t, fmt.Sprintf("executor: {spares: 0}\nconnectors:\n  - id: remote\n    url: http://%s/mcp\n", fixture))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := srv.client(t, ctx, "")
	type answer struct {
		text  string
		isErr bool
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		text, isErr, err := callTool(ctx, cs, "remote.hold")
		done <- answer{text, isErr, err}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the held call never reached the downstream")
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, "shutting down", 1)
	var code int
	var h healthBody
	if !testkit.Poll(20*time.Second, func() bool {
		code, h = srv.health(t) // fails the test on a refused connection
		return code == http.StatusServiceUnavailable && h.Status == "shutting_down"
	}) {
		t.Fatalf("/health while draining: %d %+v", code, h)
	}
	resp, err := http.Post("http://"+srv.addr+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatalf("new /mcp request while draining: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"server_shutting_down"`) {
		t.Fatalf("new /mcp request while draining: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(release)
	a := <-done
	if a.err != nil || a.isErr || !strings.Contains(a.text, "held") {
		t.Fatalf("the in-flight call: %+v", a)
	}
	if err := srv.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, srv.stderr.String())
	}
}
