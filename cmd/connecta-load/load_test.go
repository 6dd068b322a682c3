package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/test/testkit"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunChild() // the executor re-executes this test binary
	os.Exit(m.Run())
}

const testToken = "load-test-token"

// needExecutor skips execute_code load under the race detector.
func needExecutor(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("execute_code under the race detector is too slow for a load run; search_tools covers the generator")
	}
}

// startConnecta serves the application as app.New builds it (the built-in
// demo connector, execute_code) over HTTP on a loopback port, requiring a
// bearer token. It skips when the executor cannot start here, and fails
// instead under CONNECTA_REQUIRE_EXECUTOR.
func startConnecta(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	// The default compilation cache is shared across runs, so only the
	// first run of the machine pays for compiling the engine.
	yaml := "connectors:\n  - {id: demo, builtin: demo}\n" +
		"auth: {tokens: [{name: load, token: \"${env:CONNECTA_LOAD_TEST_TOKEN}\"}]}\n" +
		"executor: {concurrency: 2, maxQueueSize: 16}\n" +
		"execute: {maxHostCalls: 50, hostCallTimeoutMs: 15000, maxEmittedBytes: 1048576, maxEmittedBlocks: 8}\n"
	cfg, err := config.Parse("load.yaml", []byte(yaml), config.Resolver{LookupEnv: func(k string) (string, bool) {
		return testToken, k == "CONNECTA_LOAD_TEST_TOKEN"
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Options{Config: cfg, Version: "test", Executor: true})
	if err != nil {
		// The executor needs nothing CI does not have: there, not starting
		// is a failure, not a skip.
		if os.Getenv("CONNECTA_REQUIRE_EXECUTOR") != "" {
			t.Fatalf("executor unavailable (CONNECTA_REQUIRE_EXECUTOR is set): %v", err)
		}
		t.Skipf("executor unavailable here: %v", err)
	}
	t.Cleanup(a.Close)
	srv := a.Server
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer(ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestLoad_RunsBothProgramsAndSearch drives the real stack for about a
// second per program and checks the report's bookkeeping, never timing.
func TestLoad_RunsBothProgramsAndSearch(t *testing.T) {
	url := startConnecta(t)
	cases := []struct {
		name, tool, code string
		wantResult       string // substring of the first result
	}{
		{name: "1plus1", tool: ToolExecuteCode, code: ProgramOnePlusOne, wantResult: `{"result":2}`},
		{name: "fivecall", tool: ToolExecuteCode, code: ProgramFiveCall, wantResult: `"projects":["WEB","API","MOB"]`},
		{name: "search", tool: ToolSearchTools, wantResult: `demo.search_issues`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tool == ToolExecuteCode {
				needExecutor(t)
			}
			r, err := Run(context.Background(), Config{
				URL: url, Token: testToken, Clients: 2, Duration: time.Second,
				Tool: tc.tool, ProgramName: tc.name, Code: tc.code, Query: "search issues",
				CallTimeout: 30 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Calls == 0 || r.OK != r.Calls || r.ErrorCount() != 0 {
				t.Fatalf("calls %d ok %d errors %v %v", r.Calls, r.OK, r.Errors, r.Samples)
			}
			if !strings.Contains(r.Result, tc.wantResult) {
				t.Errorf("result sample %q lacks %q", r.Result, tc.wantResult)
			}
			if !(r.Min <= r.P50 && r.P50 <= r.P95 && r.P95 <= r.P99 && r.P99 <= r.Max) || r.PerSec <= 0 {
				t.Errorf("inconsistent statistics: %+v", r)
			}
			var out bytes.Buffer
			if err := r.WriteText(&out); err != nil || !strings.Contains(out.String(), "p99") {
				t.Errorf("text report (%v): %s", err, out.String())
			}
		})
	}
}

// TestLoad_RequestsBoundAndErrorsCounted: --requests bounds the total, and a
// wrong token is counted as a failure, not hidden.
func TestLoad_RequestsBoundAndErrorsCounted(t *testing.T) {
	url := startConnecta(t)
	r, err := Run(context.Background(), Config{
		URL: url, Token: testToken, Clients: 3, Duration: time.Minute, Requests: 7,
		Tool: ToolSearchTools, Query: "issues", CallTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 7 || r.OK != 7 {
		t.Errorf("calls %d ok %d, want 7 and 7 (errors %v)", r.Calls, r.OK, r.Errors)
	}
	assertNoRunGoroutines(t)

	// A rejected token: no client connects, which is an error, not a report.
	if _, err := Run(context.Background(), Config{
		URL: url, Token: "wrong", Clients: 1, Duration: time.Second,
		Tool: ToolSearchTools, Query: "issues", CallTimeout: 10 * time.Second,
	}); err == nil {
		t.Error("a rejected token produced a report")
	}
}

// TestLoad_ProgramErrorsClassified: a failing program counts under its
// code; an untyped throw is program_error.
func TestLoad_ProgramErrorsClassified(t *testing.T) {
	needExecutor(t)
	url := startConnecta(t)
	cases := []struct{ code, want string }{
		{code: `async () => { throw new Error("planned") }`, want: "program_error"},
		{code: `async () => connecta.call("demo.nope", {})`, want: "unknown_tool"},
	}
	for _, tc := range cases {
		r, err := Run(context.Background(), Config{
			URL: url, Token: testToken, Clients: 1, Duration: time.Minute, Requests: 2,
			Tool: ToolExecuteCode, Code: tc.code, CallTimeout: 30 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Calls != 2 || r.Errors[tc.want] != 2 {
			t.Errorf("%s: calls %d errors %v samples %v, want 2 × %s", tc.code, r.Calls, r.Errors, r.Samples, tc.want)
		}
	}
}

// TestLoad_CommandLine covers flag handling and the exit codes.
func TestLoad_CommandLine(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "p.js")
	if err := os.WriteFile(prog, []byte("async () => 40 + 2"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.js")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), MaxProgramBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{name: "UnknownProgram", args: []string{"--program", "nope"}, code: 2},
		{name: "TooManyClients", args: []string{"--clients", "1000"}, code: 2},
		{name: "ZeroDuration", args: []string{"--duration", "0s"}, code: 2},
		{name: "BadTool", args: []string{"--tool", "call_tool"}, code: 2},
		{name: "ProgramTooBig", args: []string{"--program", "file:" + big}, code: 2},
		{name: "Stray", args: []string{"extra"}, code: 2},
		{name: "FreePort", args: []string{"--free-port"}, code: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tc.args, &stdout, &stderr); got != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", got, tc.code, stderr.String())
			}
		})
	}
	if code, err := loadProgram("file:" + prog); err != nil || code != "async () => 40 + 2" {
		t.Errorf("file program: %q %v", code, err)
	}

	needExecutor(t)
	url := startConnecta(t)
	var stdout, stderr bytes.Buffer
	got := run(context.Background(), []string{"--url", url, "--token", testToken, "--clients", "1", "--duration", "5s",
		"--requests", "2", "--program", "file:" + prog, "--json"}, &stdout, &stderr)
	if got != 0 {
		t.Fatalf("exit %d; stderr %s", got, stderr.String())
	}
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Calls != 2 || r.Result != `{"result":42}` {
		t.Errorf("JSON report (%v): %s", err, stdout.String())
	}
}

// assertNoRunGoroutines: every goroutine Run starts has ended when it returns.
func assertNoRunGoroutines(t *testing.T) {
	t.Helper()
	var stacks string
	if !testkit.Poll(5*time.Second, func() bool {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		stacks = buf.String()
		return !strings.Contains(stacks, "main.Run.func") && !strings.Contains(stacks, "main.callOnce") && !strings.Contains(stacks, "main.connect(")
	}) {
		t.Fatalf("Run left goroutines behind:\n%s", stacks)
	}
}

// The token from the environment must never be printed: a mistyped flag
// prints the usage with every flag's default.
func TestLoad_EnvTokenNeverInUsage(t *testing.T) {
	const secret = "env-token-must-not-print"
	t.Setenv(tokenEnv, secret)
	var stdout, stderr bytes.Buffer
	if got := run(context.Background(), []string{"--no-such-flag"}, &stdout, &stderr); got != 2 {
		t.Fatalf("exit %d, want 2", got)
	}
	if strings.Contains(stderr.String()+stdout.String(), secret) {
		t.Fatalf("usage printed the token:\n%s", stderr.String())
	}
}
