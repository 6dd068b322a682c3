// Package traces_test proves connecta's traces end to end: a live
// application (app.New, its real /mcp, a real sandbox child) exports OTLP
// to a real backend, and the trace read back from it has the pinned tree
// (docs/DESIGN.md "Traces").
//
// The backend is Jaeger v2 (test/jaeger: its cmd/jaeger built in its own
// module by `make jaeger`) when its binary is there, read back through its
// query API; otherwise an OTLP/HTTP receiver in this test that decodes the
// spans with the OTLP protobuf types. CONNECTA_REQUIRE_JAEGER=1 (CI) makes
// a missing Jaeger binary a failure.
package traces_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/contract"
	"github.com/connecta-dev/connecta/internal/oauth"
	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/internal/stdioshim"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunChild() // children of this test binary serve one program and exit
	stdioshim.MaybeRun()    // or start a stdio connector's server
	os.Exit(m.Run())
}

// Markers that must never reach an exported attribute: the program's
// arguments, the downstream's result, a console line, the program text, the
// OTLP header's secret and the caller's bearer-free identity aside.
const (
	argMarker    = "ARG-MARKER-7f3a"
	resultMarker = "RESULT-MARKER-91bc"
	logMarker    = "LOG-MARKER-c0de"
	otlpSecret   = "otlp-secret-5e5e"
	callerToken  = "caller-token-0123456789abcdef0123456789abcdef"
)

// Caller's trace context (W3C): the request span must be its child.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// downstream is a go-sdk MCP server on loopback that records the trace
// context each tools/call arrived with, in its HTTP headers and its _meta.
type downstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	// headers: the traceparent of each POST carrying a tools/call; metas:
	// params._meta.traceparent of each call.
	headers, metas []string
}

func newDownstream(t testing.TB) *downstream {
	d := &downstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "down", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			d.mu.Lock()
			d.metas = append(d.metas, tp)
			d.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"v":"` + resultMarker + `"}`}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body := make([]byte, 0, 512)
			buf := make([]byte, 512)
			for {
				n, err := r.Body.Read(buf)
				body = append(body, buf[:n]...)
				if err != nil {
					break
				}
			}
			if strings.Contains(string(body), `"tools/call"`) {
				d.mu.Lock()
				d.headers = append(d.headers, r.Header.Get("traceparent"))
				d.mu.Unlock()
			}
			r.Body = readCloser{strings.NewReader(string(body))}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

func (d *downstream) seen() (headers, metas []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.headers...), append([]string(nil), d.metas...)
}

// live is connecta as serve builds it, with telemetry to endpoint.
type live struct {
	url string
	a   *app.App
	reg *prometheus.Registry
	cs  *mcp.ClientSession
}

func start(t testing.TB, endpoint, downURL string) *live {
	t.Helper()
	return startWith(t, endpoint, downURL, setup{})
}

// setup is what a test adds to the configuration start writes.
type setup struct {
	extra      string            // top-level YAML (e.g. auth)
	connectors string            // more connector entries, each "  - id: …"
	executor   string            // more executor keys, e.g. ", cpuTimeMs: 50"
	rt         http.RoundTripper // every MCP request goes through it (nil: the default transport)
	logs       io.Writer         // the application's JSON log (nil: discarded)
	ln         net.Listener      // where it serves (nil: a fresh port), e.g. the one publicUrl names
	oauthStore oauth.Store       // downstream OAuth state (nil: the app's own)
	sampleAll  bool              // sampleRatio 1 (else 0: only a sampled caller's trace is kept)
}

func startWith(t testing.TB, endpoint, downURL string, o setup) *live {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "otlp-token"), []byte(otlpSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(os.TempDir(), "connecta-traces-test-cache")
	ratio := 0
	if o.sampleAll {
		ratio = 1
	}
	yaml := fmt.Sprintf(`connectors:
  - id: down
    url: %s
%sexecutor: {concurrency: 1, maxQueueSize: 4, spares: 1, cacheDir: %q%s}
telemetry:
  otlp:
    endpoint: "%s"
    headers: {authorization: "Bearer ${credential:otlp-token}"}
  sampleRatio: %d
  serviceName: connecta-test
`, downURL, o.connectors, cache, o.executor, endpoint, ratio) + o.extra
	if err := os.WriteFile(filepath.Join(dir, "caller-token"), []byte(callerToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("traces.yaml", []byte(yaml), config.Resolver{CredentialsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logger *slog.Logger
	if o.logs != nil {
		logger = slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := app.New(context.Background(), app.Options{Config: cfg, Executor: true, Registry: reg, Version: "test", Logger: logger, OAuthStore: o.oauthStore})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(a.Server.Handler())
	if o.ln != nil {
		front.Listener.Close()
		front.Listener = o.ln
	}
	front.Start()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: front.URL + "/mcp", HTTPClient: &http.Client{Transport: o.rt}}, nil)
	if err != nil {
		front.Close()
		a.Close()
		t.Fatal(err)
	}
	l := &live{a: a, reg: reg, cs: cs, url: front.URL}
	t.Cleanup(func() { _ = cs.Close(); front.Close(); l.close() })
	return l
}

var closeOnce sync.Map

func (l *live) close() {
	if _, done := closeOnce.LoadOrStore(l, true); !done {
		l.a.Close() // shuts tracing down: what is queued is exported
	}
}

// program: three host calls to the real downstream, a console line.
const program = `async () => {
  console.log("` + logMarker + `");
  let out = [];
  for (let i = 0; i < 3; i++) out.push((await connecta.call("down.echo", {a: "` + argMarker + `", i})).v);
  return out.length;
}`

func (l *live) run(t testing.TB, meta mcp.Meta) string {
	t.Helper()
	r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: meta, Name: contract.ToolName, Arguments: map[string]any{"code": program}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Content[0].(*mcp.TextContent).Text
}

// TestTrace_ProgramTreeReachesTheBackend: one execute_code with three host
// calls is one trace whose root is the caller's traceparent's child:
// request → execution → three host calls → one downstream tools/call each,
// and the downstream received (header and _meta) a child of each call span.
// sampleRatio 0 proves the parent-based sampler keeps a sampled caller's
// trace. Nothing exported carries the payload.
func TestTrace_ProgramTreeReachesTheBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: spawns sandbox children")
	}
	be := newBackend(t)
	down := newDownstream(t)
	l := start(t, be.endpoint(), down.srv.URL)
	got := l.run(t, mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01", "tracestate": "vendor=x"})
	if got != `{"result":3,"logs":"`+logMarker+`"}` {
		t.Fatalf("program result %s", got)
	}
	l.close()
	// request, admission, execution, child wait, program; three host
	// calls, each one downstream call; the first call's catalog load.
	spans := be.trace(t, callerTrace, 5+3+3+1)

	byName := map[string][]span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	one := func(name string) span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %q, want 1; trace: %s", len(byName[name]), name, dump(spans))
		}
		return byName[name][0]
	}
	root := one("tools/call execute_code")
	if root.Parent != callerSpan {
		t.Errorf("request span's parent %q, want the caller's %s", root.Parent, callerSpan)
	}
	if root.Kind != "server" || root.Attrs["mcp.method.name"] != "tools/call" || root.Attrs["gen_ai.tool.name"] != contract.ToolName || root.Attrs["connecta.outcome"] != "success" {
		t.Errorf("request span %+v", root)
	}
	adm := one("connecta.admission")
	exec := one("connecta.execution")
	for _, s := range []span{adm, exec} {
		if s.Parent != root.ID {
			t.Errorf("%s's parent %s, want the request %s", s.Name, s.Parent, root.ID)
		}
	}
	if exec.Attrs["connecta.child.source"] == "" || exec.Attrs["connecta.execution.host_calls"] != "3" || exec.Attrs["connecta.outcome"] != "ok" {
		t.Errorf("execution span attributes %v", exec.Attrs)
	}
	for _, name := range []string{"connecta.child.spawn", "connecta.program"} {
		if s := one(name); s.Parent != exec.ID {
			t.Errorf("%s's parent %s, want the execution %s", name, s.Parent, exec.ID)
		}
	}
	hosts := byName["connecta.host_call"]
	calls := byName["tools/call echo"]
	if len(hosts) != 3 || len(calls) != 3 {
		t.Fatalf("%d host calls, %d downstream calls, want 3 and 3: %s", len(hosts), len(calls), dump(spans))
	}
	hostIDs := map[string]bool{}
	for _, h := range hosts {
		if h.Parent != exec.ID {
			t.Errorf("host call's parent %s, want the execution %s", h.Parent, exec.ID)
		}
		if h.Attrs["connecta.address"] != "down.echo" || h.Attrs["connecta.outcome"] != "ok" || h.Attrs["connecta.host.function"] != "call" {
			t.Errorf("host call attributes %v", h.Attrs)
		}
		hostIDs[h.ID] = true
	}
	if cl := one("connecta.catalog.load"); !hostIDs[cl.Parent] || cl.Attrs["connecta.connector"] != "down" {
		t.Errorf("catalog load %+v: not a host call's child", cl)
	}
	callIDs := map[string]bool{}
	for _, c := range calls {
		if !hostIDs[c.Parent] {
			t.Errorf("downstream call's parent %s is no host call", c.Parent)
		}
		delete(hostIDs, c.Parent)
		if c.Kind != "client" || c.Attrs["connecta.connector"] != "down" || c.Attrs["mcp.protocol.version"] == "" {
			t.Errorf("downstream call span %+v", c)
		}
		callIDs[c.ID] = true
	}
	headers, metas := down.seen()
	if len(headers) != 3 || len(metas) != 3 {
		t.Fatalf("downstream saw %d headers, %d _meta, want 3 each", len(headers), len(metas))
	}
	for i := range headers {
		for _, tp := range []string{headers[i], metas[i]} {
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[1] != callerTrace || !callIDs[parts[2]] {
				t.Errorf("downstream received traceparent %q: not a child of a downstream call span", tp)
			}
		}
	}
	// Payload-free: every attribute of every exported span.
	for _, s := range spans {
		for k, v := range s.Attrs {
			for _, bad := range []string{argMarker, resultMarker, logMarker, otlpSecret, "connecta.call(", "console.log"} {
				if strings.Contains(v, bad) || strings.Contains(k, bad) {
					t.Errorf("span %s attribute %s=%q carries %q", s.Name, k, v, bad)
				}
			}
		}
	}
	// The activity events name the trace.
	for _, e := range l.a.Activity.Recent(10) {
		if e.TraceID != callerTrace {
			t.Errorf("activity event %s/%s traceId %q, want %s", e.Source, e.ToolName, e.TraceID, callerTrace)
		}
	}
	if n := testutil.ToFloat64(dropped(t, l.reg)); n != 0 {
		t.Errorf("%v spans dropped with the collector up", n)
	}
	// Exemplars: the request and execution durations name the trace.
	for _, name := range []string{"connecta_tool_call_duration_seconds", "connecta_executor_execution_duration_seconds"} {
		if !hasExemplar(t, l.reg, name, callerTrace) {
			t.Errorf("%s has no exemplar with trace_id %s", name, callerTrace)
		}
	}
}

func hasExemplar(t *testing.T, reg *prometheus.Registry, name, traceID string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, lp := range b.GetExemplar().GetLabel() {
					if lp.GetName() == "trace_id" && lp.GetValue() == traceID {
						return true
					}
				}
			}
		}
	}
	return false
}

// TestTrace_DeadCollectorNeverFailsACall: once the collector is stopped,
// calls still succeed and their spans are dropped and counted.
func TestTrace_DeadCollectorNeverFailsACall(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: spawns sandbox children")
	}
	be := newBackend(t)
	down := newDownstream(t)
	l := start(t, be.endpoint(), down.srv.URL)
	want := `{"result":3,"logs":"` + logMarker + `"}`
	if got := l.run(t, mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}); got != want {
		t.Fatalf("program result %s", got)
	}
	if spans := be.trace(t, callerTrace, 12); len(spans) < 12 {
		t.Fatalf("the collector received %d spans of the first call, want 12", len(spans))
	}
	be.stop()
	for range 2 {
		if got := l.run(t, mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}); got != want {
			t.Fatalf("program result with the collector down: %s", got)
		}
	}
	l.close() // the last batch is tried (and refused) at shutdown
	if n := testutil.ToFloat64(dropped(t, l.reg)); n < 2*11 {
		t.Errorf("connecta_trace_spans_dropped_total = %v, want at least 22 (two traces of 11 spans)", n)
	}
}

func dropped(t testing.TB, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "connecta_trace_spans_dropped_total" {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatal("connecta_trace_spans_dropped_total is not registered")
	return nil
}

// span is one exported span as the test reads it back.
type span struct {
	Name, ID, Parent, Kind string
	Attrs                  map[string]string
}

func dump(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\n  %s id=%s parent=%s", s.Name, s.ID, s.Parent)
	}
	return b.String()
}

// searchSpans finds a search_tools request's span and its discovery span
// (nil when missing).
func searchSpans(spans []span) (root, disc *span) {
	for i := range spans {
		switch spans[i].Name {
		case "tools/call search_tools":
			root = &spans[i]
		case "connecta.discovery":
			disc = &spans[i]
		}
	}
	return root, disc
}

// headerTransport sets the traceparent header and a bearer token on every
// request.
type headerTransport struct{ traceparent, token string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", h.traceparent)
	r.Header.Set("Authorization", "Bearer "+h.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTrace_TraceparentHeaderHonouredOnlyAfterAuthentication: a caller
// whose token is refused cannot choose a trace (nothing is exported under
// its traceparent); an authenticated caller's traceparent header parents
// the request span (no _meta: the header is taken).
func TestTrace_TraceparentHeaderHonouredOnlyAfterAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a collector")
	}
	const (
		refusedTrace = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		headerTrace  = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		headerSpan   = "bbbbbbbbbbbbbbbb"
	)
	be := newBackend(t)
	down := newDownstream(t)
	auth := "auth:\n  tokens:\n    - {name: tracer, token: \"${credential:caller-token}\"}\n"
	l := startWith(t, be.endpoint(), down.srv.URL, setup{extra: auth, rt: headerTransport{traceparent: "00-" + headerTrace + "-" + headerSpan + "-01", token: callerToken}})
	if _, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}}); err != nil {
		t.Fatal(err)
	}
	// The refused caller: same server, a wrong token, its own traceparent.
	refused, err := mcp.NewClient(&mcp.Implementation{Name: "r", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: l.url + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{traceparent: "00-" + refusedTrace + "-" + headerSpan + "-01", token: "wrong-token-wrong-token-wrong-token"}}}, nil)
	if err == nil {
		_, err = refused.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo"}})
		_ = refused.Close()
	}
	if err == nil {
		t.Fatal("a wrong token was accepted")
	}
	l.close()
	spans := be.trace(t, headerTrace, 2)
	root, disc := searchSpans(spans)
	if root == nil || root.Parent != headerSpan || root.Attrs["connecta.actor"] != "tracer" {
		t.Fatalf("no request span parented by the authenticated header: %s", dump(spans))
	}
	if disc == nil || disc.Parent != root.ID || disc.Attrs["connecta.discovery.operation"] != "search" {
		t.Errorf("no discovery span under the request: %s", dump(spans))
	}
	if got := be.trace(t, refusedTrace, 0); len(got) != 0 {
		t.Fatalf("the refused caller's traceparent has spans: %s", dump(got))
	}
}
