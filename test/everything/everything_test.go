// Package everything_test runs the real third-party MCP server
// @modelcontextprotocol/server-everything (pinned in testdata/package.json,
// installed by `make everything`) as a connector through the real gateway:
// catalog, discovery, the read-only gate, operator classification, argument
// validation and an approved write, over stdio and (with `make
// test-everything-http`) as a remote streamable-HTTP connector.
//
// Without node or the installed package the tests skip, unless
// CONNECTA_REQUIRE_EVERYTHING=1 (CI), where a missing piece is a failure.
package everything_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/gateway/observe"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/stdioshim"
)

const (
	packageName = "@modelcontextprotocol/server-everything"
	connectorID = "everything"

	// requireEnv makes a missing node or package a failure (set by CI).
	requireEnv = "CONNECTA_REQUIRE_EVERYTHING"
	// urlEnv names a running server-everything streamable-HTTP endpoint
	// (set by `make test-everything-http`).
	urlEnv = "CONNECTA_EVERYTHING_URL"

	callTimeout = 30 * time.Second // first stdio call includes node start-up
	// httpReadyWait bounds how long the HTTP test waits for the server the
	// Makefile started to accept connections.
	httpReadyWait = 20 * time.Second
)

// missing skips, or fails when the environment requires the package.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s (%s=1 requires it; run `make everything`)", msg, requireEnv)
	}
	t.Skipf("%s; install node and npm, then run `make everything` (skipping)", msg)
}

// installed finds node and the package's bin script, and checks the
// installed version is the one testdata/package.json pins.
func installed(t *testing.T) (node, bin string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not on PATH")
	}
	var pin struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, filepath.Join("testdata", "package.json"), &pin)
	want := pin.Dependencies[packageName]
	if want == "" {
		t.Fatalf("testdata/package.json does not pin %s", packageName)
	}

	dir := filepath.Join("testdata", "node_modules", filepath.FromSlash(packageName))
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		missing(t, "%s is not installed in testdata/node_modules", packageName)
	}
	var pkg struct {
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("installed %s/package.json: %v", packageName, err)
	}
	if pkg.Version != want {
		missing(t, "installed %s is %s, testdata/package.json pins %s", packageName, pkg.Version, want)
	}
	script := pkg.Bin["mcp-server-everything"]
	if script == "" {
		t.Fatalf("installed %s declares no mcp-server-everything bin (bins: %v)", packageName, pkg.Bin)
	}
	bin, err = filepath.Abs(filepath.Join(dir, filepath.FromSlash(script)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		missing(t, "bin script %s: %v", bin, err)
	}
	return node, bin
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// stdioSpec runs the installed server over stdio. Env is the child's whole
// environment; node needs nothing from ours.
func stdioSpec(t *testing.T) gateway.ConnectorSpec {
	node, bin := installed(t)
	return gateway.ConnectorSpec{
		ID: connectorID, Title: "MCP Everything (third-party test server)",
		Description: "The MCP reference test server, exercising every protocol feature.",
		Command:     []string{node, bin, "stdio"},
		Env:         map[string]string{"NODE_ENV": "production"},
	}
}

// fixture is one gateway with discovery in front of server-everything.
type fixture struct {
	gw       *gateway.Gateway
	disc     *discovery.Service
	activity *activity.Recorder
}

func newFixture(t *testing.T, spec gateway.ConnectorSpec) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := activity.New(activity.Options{Logger: log, ServerName: "connecta", ServerVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	gw, err := gateway.New(context.Background(), gateway.Options{
		Connectors:  []gateway.ConnectorSpec{spec},
		CallTimeout: callTimeout,
		Activity:    rec,
		Observer:    observe.New(observe.Options{Entries: 64, TTL: time.Hour}),
		Validator:   validate.New(validate.Options{CacheEntries: 64}),
		Logger:      log,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	disc, err := discovery.New(discovery.Options{Catalog: gw})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{gw: gw, disc: disc, activity: rec}
}

func (f *fixture) invoke(t *testing.T, tool, args string, allowWrite bool) (*gateway.CallResult, *gateway.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	scope := f.gw.NewScope()
	defer scope.Close()
	source := "call_tool"
	if allowWrite {
		source = "call_destructive_tool"
	}
	return f.gw.Invoke(ctx, scope, gateway.CallRequest{
		Address: connectorID + "." + tool, Args: json.RawMessage(args),
		Front: gateway.FrontDoorTopLevel, Source: source, AllowWrite: allowWrite,
		RequestID: "req-" + tool, Actor: "everything-test",
	})
}

// TestEverythingStdio runs every check against the server over stdio.
// TestMain: stdio connectors start through this binary re-executed as the
// stdio shim.
func TestMain(m *testing.M) {
	stdioshim.MaybeRun()
	os.Exit(m.Run())
}

func TestEverythingStdio(t *testing.T) {
	spec := stdioSpec(t)
	exercise(t, spec)
}

// TestEverythingHTTP runs the same checks against a server-everything the
// Makefile started on its streamable HTTP transport (`make
// test-everything-http`); it skips when CONNECTA_EVERYTHING_URL is unset.
func TestEverythingHTTP(t *testing.T) {
	endpoint := os.Getenv(urlEnv)
	if endpoint == "" {
		t.Skipf("%s is unset; `make test-everything-http` starts server-everything over streamable HTTP and sets it", urlEnv)
	}
	waitListening(t, endpoint)
	exercise(t, gateway.ConnectorSpec{
		ID: connectorID, Title: "MCP Everything (remote)",
		Description: "The MCP reference test server over streamable HTTP.",
		URL:         endpoint,
		// toggle-simulated-logging keeps its state per MCP session, and an
		// HTTP connector opens one session per call unless it is shared
		// (P4): the write round trip needs one session, as stdio has.
		SharedSession: true,
	})
}

// waitListening waits until the endpoint's port accepts TCP connections.
func waitListening(t *testing.T, endpoint string) {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("%s=%q is not a URL", urlEnv, endpoint)
	}
	deadline := time.Now().Add(httpReadyWait)
	for {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything at %s did not accept connections within %s: %v", endpoint, httpReadyWait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exercise is the transport-independent suite, each check a subtest named
// after the clause it proves.
func exercise(t *testing.T, spec gateway.ConnectorSpec) {
	f := newFixture(t, spec)
	t.Run("CatalogListed", func(t *testing.T) { testCatalogListed(t, f) })
	t.Run("S1_SearchFindsTools", func(t *testing.T) { testSearch(t, f) })
	t.Run("S4_DescribeEcho", func(t *testing.T) { testDescribe(t, f) })
	t.Run("S5_ReadOnlyCallsUnwrap", func(t *testing.T) { testReadOnlyCalls(t, f) })
	t.Run("E8_InvalidArgsNeverDispatched", func(t *testing.T) { testInvalidArgs(t, f) })
	t.Run("E4_NotReadOnlyRefusedWithoutApproval", func(t *testing.T) { testRefusal(t, f) })
	t.Run("E4_AllowWriteRoundTrip", func(t *testing.T) { testAllowWrite(t, f) })
	t.Run("V2_ActivityRecorded", func(t *testing.T) { testActivity(t, f) })
	t.Run("ProgressForwardedWithTotalLastOneIncluded", func(t *testing.T) { testProgress(t, f) })
	// Operator classification needs its own gateway (the spec's lists).
	t.Run("S6_OperatorClassification", func(t *testing.T) { testClassification(t, spec) })
}

// Tools this version of server-everything always registers, and their
// read-only classification from the annotations it sends.
var wantTools = map[string]bool{
	"echo":                      true,
	"get-sum":                   true,
	"get-structured-content":    true,
	"get-annotated-message":     true,
	"get-tiny-image":            true,
	"toggle-simulated-logging":  false,
	"toggle-subscriber-updates": false,
	"gzip-file-as-resource":     false,
}

func testCatalogListed(t *testing.T, f *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	tools, err := f.gw.Tools(ctx, connectorID)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	byName := map[string]*gateway.Tool{}
	for i := range tools {
		tl := &tools[i]
		byName[tl.Name] = tl
		if tl.ConnectorID != connectorID {
			t.Errorf("%s: connector %q", tl.Name, tl.ConnectorID)
		}
		if len(tl.Definition) == 0 || !json.Valid(tl.Definition) {
			t.Errorf("%s: definition not kept as JSON: %q", tl.Name, tl.Definition)
		}
		if len(tl.InputSchema) == 0 || !json.Valid(tl.InputSchema) {
			t.Errorf("%s: input schema %q", tl.Name, tl.InputSchema)
		}
	}
	for name, readOnly := range wantTools {
		tl := byName[name]
		if tl == nil {
			t.Errorf("catalog lacks %s (got %d tools: %v)", name, len(tools), names(tools))
			continue
		}
		if tl.Annotations == nil || tl.Annotations.ReadOnlyHint == nil {
			t.Errorf("%s: readOnlyHint not carried: %+v", name, tl.Annotations)
		}
		if got := f.gw.ReadOnly(tl); got != readOnly {
			t.Errorf("ReadOnly(%s) = %v, want %v", name, got, readOnly)
		}
	}
	if tl := byName["get-structured-content"]; tl != nil && !strings.Contains(string(tl.OutputSchema), `"temperature"`) {
		t.Errorf("get-structured-content output schema not carried: %s", tl.OutputSchema)
	}
	if tl := byName["echo"]; tl != nil && !strings.Contains(string(tl.InputSchema), `"message"`) {
		t.Errorf("echo input schema lacks message: %s", tl.InputSchema)
	}
}

func names(tools []gateway.Tool) []string {
	out := make([]string, len(tools))
	for i := range tools {
		out[i] = tools[i].Name
	}
	return out
}

// flatPage is the program front door's search page.
type flatPage struct {
	Tools []struct {
		Name        string          `json:"name"`
		Address     string          `json:"address"`
		Description string          `json:"description"`
		InputKeys   []string        `json:"inputKeys"`
		Annotations json.RawMessage `json:"annotations"`
	} `json:"tools"`
	Total   int  `json:"total"`
	HasMore bool `json:"hasMore"`
}

func (f *fixture) search(t *testing.T, front gateway.FrontDoor, args string) json.RawMessage {
	t.Helper()
	p, err := discovery.DecodeSearchArgs(json.RawMessage(args))
	if err != nil {
		t.Fatalf("DecodeSearchArgs(%s): %v", args, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	page, err := f.disc.Search(ctx, front, p)
	if err != nil {
		t.Fatalf("Search(%s): %v", args, err)
	}
	return page
}

func testSearch(t *testing.T, f *fixture) {
	cases := []struct {
		name, args string
		want       string   // first address
		has, lacks []string // addresses present / absent on the page
	}{
		{name: "QueryEcho", args: `{"query":"echo message back","connector":"everything"}`, want: "everything.echo"},
		{name: "QuerySum", args: `{"query":"sum of two numbers"}`, want: "everything.get-sum"},
		{name: "ReadOnlyFilter", args: `{"query":"toggle logging","safety":"readOnly","limit":100}`,
			lacks: []string{"everything.toggle-simulated-logging", "everything.toggle-subscriber-updates"}},
		{name: "ApprovalFilter", args: `{"query":"toggle logging","safety":"approvalRequired","limit":100}`,
			has: []string{"everything.toggle-simulated-logging"}, lacks: []string{"everything.echo", "everything.get-sum"}},
		{name: "SchemaKeys", args: `{"query":"sum","includeSchemas":"compact","limit":1}`, want: "everything.get-sum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var page flatPage
			raw := f.search(t, gateway.FrontDoorProgram, tc.args)
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatalf("page %s: %v", raw, err)
			}
			var got []string
			for _, r := range page.Tools {
				got = append(got, r.Address)
			}
			if tc.want != "" && (len(got) == 0 || got[0] != tc.want) {
				t.Errorf("first result %v, want %s first; page %s", got, tc.want, raw)
			}
			for _, a := range tc.has {
				if !slices.Contains(got, a) {
					t.Errorf("page lacks %s: %v", a, got)
				}
			}
			for _, a := range tc.lacks {
				if slices.Contains(got, a) {
					t.Errorf("page has %s: %v", a, got)
				}
			}
			if tc.name == "SchemaKeys" && len(page.Tools) == 1 && !(slices.Contains(page.Tools[0].InputKeys, "a") && slices.Contains(page.Tools[0].InputKeys, "b")) {
				t.Errorf("get-sum inputKeys %v, want a and b", page.Tools[0].InputKeys)
			}
		})
	}
	// The top-level page groups the same hit by connector.
	raw := f.search(t, gateway.FrontDoorTopLevel, `{"query":"echo","connector":"everything"}`)
	if !strings.Contains(string(raw), `"connectors":[`) || !strings.Contains(string(raw), `"everything.echo"`) {
		t.Errorf("top-level page: %s", raw)
	}
}

func testDescribe(t *testing.T, f *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	raw, err := f.disc.Describe(ctx, gateway.FrontDoorProgram, discovery.DescribeParams{
		Addresses: []string{"everything.echo", "everything.ech0"}, Format: discovery.FormatJSON,
	})
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	var page struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &page); err != nil || len(page.Tools) != 2 {
		t.Fatalf("describe page (%v): %s", err, raw)
	}
	if !strings.Contains(string(page.Tools[0]), `"message"`) {
		t.Errorf("echo entry lacks its input schema: %s", page.Tools[0])
	}
	if !strings.Contains(string(page.Tools[1]), `"everything.echo"`) {
		t.Errorf("close miss does not suggest everything.echo: %s", page.Tools[1])
	}
}

// server-everything's long-running operation sends "i of steps" with its
// last notification right before the result: every one reaches the call's
// callback, with its total (the last was lost, and total never passed).
func testProgress(t *testing.T, f *fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	scope := f.gw.NewScope()
	defer scope.Close()
	var got []string
	_, gerr := f.gw.Invoke(ctx, scope, gateway.CallRequest{
		Address: connectorID + ".trigger-long-running-operation", Args: json.RawMessage(`{"duration":0.2,"steps":4}`),
		Front: gateway.FrontDoorTopLevel, Source: "call_tool", RequestID: "req-progress", Actor: "everything-test",
		Progress: func(p gateway.Progress) { got = append(got, fmt.Sprintf("%g/%g", p.Progress, p.Total)) },
	})
	if gerr != nil {
		t.Fatalf("%s: %s", gerr.Code, gerr.Message)
	}
	if want := "[1/4 2/4 3/4 4/4]"; fmt.Sprint(got) != want {
		t.Fatalf("progress %v, want %s", got, want)
	}
}

func testReadOnlyCalls(t *testing.T, f *fixture) {
	cases := []struct {
		name, tool, args string
		want             string // exact unwrapped value
	}{
		// All-text, not JSON: the raw text, without HTML escaping.
		{name: "EchoText", tool: "echo", args: `{"message":"héllo <&> 🌍"}`, want: `"Echo: héllo <&> 🌍"`},
		{name: "SumText", tool: "get-sum", args: `{"a":2,"b":3.5}`, want: `"The sum of 2 and 3.5 is 5.5."`},
		// structuredContent wins.
		{name: "StructuredContent", tool: "get-structured-content", args: `{"location":"Chicago"}`,
			want: `{"temperature":36,"conditions":"Light rain / drizzle","humidity":82}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, gerr := f.invoke(t, tc.tool, tc.args, false)
			if gerr != nil {
				t.Fatalf("%s: %s: %s", tc.tool, gerr.Code, gerr.Message)
			}
			if string(res.Value) != tc.want {
				t.Errorf("value %s, want %s", res.Value, tc.want)
			}
			if res.Result == nil || res.Attempts != 1 {
				t.Errorf("raw result %v, attempts %d", res.Result, res.Attempts)
			}
		})
	}
	// A mixed (image) result passes through raw.
	res, gerr := f.invoke(t, "get-tiny-image", `{}`, false)
	if gerr != nil {
		t.Fatalf("get-tiny-image: %s: %s", gerr.Code, gerr.Message)
	}
	if !strings.Contains(string(res.Value), `"type":"image"`) || !strings.Contains(string(res.Value), `"mimeType":"image/png"`) {
		t.Errorf("image result not passed through: %.200s", res.Value)
	}
}

func testInvalidArgs(t *testing.T, f *fixture) {
	res, gerr := f.invoke(t, "get-sum", `{"a":"two","b":3}`, false)
	if gerr == nil {
		t.Fatalf("get-sum with a string: no error, value %s", res.Value)
	}
	if gerr.Code != gateway.CodeInvalidArgs || gerr.Retryable {
		t.Fatalf("got %s (retryable %v): %s, want non-retryable invalid_args", gerr.Code, gerr.Retryable, gerr.Message)
	}
	if res.Attempts != 0 {
		t.Errorf("invalid args reached the downstream (%d attempts)", res.Attempts)
	}
	body, _ := json.Marshal(gerr)
	if !strings.Contains(string(body), `"path":"/a"`) {
		t.Errorf("findings do not name /a: %s", body)
	}
}

func testRefusal(t *testing.T, f *fixture) {
	for _, tool := range []string{"toggle-simulated-logging", "toggle-subscriber-updates", "gzip-file-as-resource"} {
		t.Run(tool, func(t *testing.T) {
			res, gerr := f.invoke(t, tool, `{}`, false)
			if gerr == nil {
				t.Fatalf("%s ran without approval", tool)
			}
			if gerr.Code != gateway.CodeDestructiveNeedsApproval || gerr.Retryable {
				t.Fatalf("got %s (retryable %v): %s", gerr.Code, gerr.Retryable, gerr.Message)
			}
			if res.Attempts != 0 {
				t.Errorf("refused call reached the downstream (%d attempts)", res.Attempts)
			}
			body, _ := json.Marshal(gerr)
			if !strings.Contains(string(body), `"tool":"call_destructive_tool"`) || !strings.Contains(string(body), `"address":"everything.`+tool+`"`) {
				t.Errorf("nextAction does not route to call_destructive_tool: %s", body)
			}
		})
	}
}

func testAllowWrite(t *testing.T, f *fixture) {
	// toggle-simulated-logging is a harmless write: on, then off again.
	for i, want := range []string{"Started simulated", "Stopped simulated logging"} {
		res, gerr := f.invoke(t, "toggle-simulated-logging", `{}`, true)
		if gerr != nil {
			t.Fatalf("toggle %d: %s: %s", i, gerr.Code, gerr.Message)
		}
		var text string
		if err := json.Unmarshal(res.Value, &text); err != nil || !strings.HasPrefix(text, want) {
			t.Errorf("toggle %d: value %s, want text starting %q", i, res.Value, want)
		}
	}
	// AllowWrite also passes read-only tools.
	res, gerr := f.invoke(t, "echo", `{"message":"approved"}`, true)
	if gerr != nil || string(res.Value) != `"Echo: approved"` {
		t.Errorf("echo with AllowWrite: %v %v", res, gerr)
	}
}

func testActivity(t *testing.T, f *fixture) {
	f.invoke(t, "echo", `{"message":"activity"}`, false)
	f.invoke(t, "toggle-subscriber-updates", `{}`, false)
	events := f.activity.Recent(50)
	var sawOK, sawRefused bool
	for _, e := range events {
		if e.ConnectorID != connectorID {
			t.Errorf("event for connector %q", e.ConnectorID)
		}
		if e.ToolName == "echo" && e.ErrorCode == "" {
			sawOK = true
		}
		if e.ToolName == "toggle-subscriber-updates" && e.ErrorCode == string(gateway.CodeDestructiveNeedsApproval) {
			sawRefused = true
		}
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "activity\"}") || strings.Contains(string(b), `"message"`) {
			t.Errorf("event carries the payload: %s", b)
		}
	}
	if !sawOK || !sawRefused {
		t.Errorf("activity lacks the success (%v) or the refusal (%v): %d events", sawOK, sawRefused, len(events))
	}
}

// testClassification: the operator's lists override annotations, and
// approvalRequired wins over readOnly (fail closed).
func testClassification(t *testing.T, base gateway.ConnectorSpec) {
	spec := base
	spec.ReadOnly = []string{"toggle-subscriber-updates", "get-sum"}
	spec.ApprovalRequired = []string{"echo", "get-sum"}
	f := newFixture(t, spec)
	cases := []struct {
		tool, args string
		refused    bool
	}{
		{tool: "echo", args: `{"message":"x"}`, refused: true},  // annotated read-only, operator says approval
		{tool: "get-sum", args: `{"a":1,"b":2}`, refused: true}, // in both lists: approval wins
		{tool: "get-structured-content", args: `{"location":"New York"}`, refused: false},
		{tool: "toggle-subscriber-updates", args: `{}`, refused: false}, // annotated write, operator says read-only
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			res, gerr := f.invoke(t, tc.tool, tc.args, false)
			switch {
			case tc.refused && (gerr == nil || gerr.Code != gateway.CodeDestructiveNeedsApproval):
				t.Errorf("want destructive_tool_requires_approval, got %v (value %v)", gerr, res)
			case !tc.refused && gerr != nil:
				t.Errorf("want success, got %s: %s", gerr.Code, gerr.Message)
			}
		})
	}
	// Turn subscriber updates back off for this session.
	if _, gerr := f.invoke(t, "toggle-subscriber-updates", `{}`, false); gerr != nil {
		t.Errorf("second toggle: %v", gerr)
	}
}

// TestEverythingStdio_ClosedGatewayRefuses proves Close ends the node child:
// a call after Close fails instead of hanging.
func TestEverythingStdio_ClosedGatewayRefuses(t *testing.T) {
	f := newFixture(t, stdioSpec(t))
	if _, gerr := f.invoke(t, "echo", `{"message":"up"}`, false); gerr != nil {
		t.Fatalf("echo: %s: %s", gerr.Code, gerr.Message)
	}
	health := f.gw.Health()
	if len(health) != 1 || health[0].Kind != "stdio" || !health[0].Connected {
		t.Errorf("health before close: %+v", health)
	}
	if err := f.gw.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan *gateway.Error, 1)
	go func() {
		_, gerr := f.invoke(t, "echo", `{"message":"down"}`, false)
		done <- gerr
	}()
	select {
	case gerr := <-done:
		if gerr == nil {
			t.Error("call after Close succeeded")
		}
	case <-time.After(callTimeout + 5*time.Second):
		t.Fatal("call after Close did not return")
	}
}
