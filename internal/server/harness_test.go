package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/internal/supervisor"
	"github.com/connecta-dev/connecta/test/testkit"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	code := m.Run()
	closeSharedPool()
	os.Exit(code)
}

// One executor pool per test binary: children are spawned from this binary
// (TestMain's child check) and share one compilation cache (docs/PITFALLS.md).
var (
	poolOnce sync.Once
	pool     *supervisor.Pool
	poolErr  error
)

func sharedPool(t testing.TB) *supervisor.Pool {
	t.Helper()
	poolOnce.Do(func() {
		cache := filepath.Join(os.TempDir(), "connecta-server-test-cache")
		_ = os.MkdirAll(cache, 0o700)
		pool, poolErr = supervisor.New(context.Background(), supervisor.Options{Slots: 2, MaxQueue: 16, Spares: 1, CacheDir: cache,
			QueueTimeout: config.DefaultExecutorQueueTimeout, SpareIdle: config.DefaultExecutorSpareIdle,
			Limits: supervisor.Limits{Wall: 10 * time.Second, CPUTime: config.DefaultExecutorCPUTime,
				HeapBytes: config.DefaultExecutorMemoryLimitBytes, StackBytes: config.DefaultExecutorMaxStackSizeBytes}})
	})
	if poolErr != nil {
		t.Fatalf("executor pool: %v", poolErr)
	}
	return pool
}

func closeSharedPool() {
	if pool != nil {
		_ = pool.Close()
	}
}

// withCode asks the harness for the real execute_code (contract) on the
// shared pool.
const withCode = true

// withStreamingCode is withCode: the application always wires streaming
// (progress from a program) as serve does.
const withStreamingCode = withCode

// downstream is a real go-sdk MCP server on a loopback port that misbehaves
// on demand: mode "401", "429", "500" answers every HTTP request so.
type downstream struct {
	url  string
	mode atomic.Value // string
	// requests counts every HTTP request the server was sent (any method).
	requests atomic.Int64

	mu       sync.Mutex
	lastArgs string
	calls    int

	slowStarted   chan struct{}
	slowCancelled chan struct{}
	sleepStarted  chan struct{}
}

func boolp(b bool) *bool { return &b }

func newDownstream(t testing.TB) *downstream {
	t.Helper()
	d := &downstream{slowStarted: make(chan struct{}, 16), slowCancelled: make(chan struct{}, 16), sleepStarted: make(chan struct{}, 64)}
	d.mode.Store("")
	quit := make(chan struct{})
	newServer := func(reqCtx context.Context) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "downstream", Version: "1.0.0"}, nil)
		ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
		obj := json.RawMessage(`{"type":"object"}`)
		record := func(req *mcp.CallToolRequest) {
			d.mu.Lock()
			d.lastArgs = string(req.Params.Arguments)
			d.calls++
			d.mu.Unlock()
		}
		s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo the arguments back as JSON text.", InputSchema: obj, Annotations: ro},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "list_items", Description: "List items with ids and names.", InputSchema: obj, Annotations: ro},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				body := `{"items":[{"id":1,"name":"alpha"},{"id":2,"name":"beta"}],"count":2}`
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}, StructuredContent: json.RawMessage(body)}, nil
			})
		s.AddTool(&mcp.Tool{Name: "slow", Description: "Block until cancelled.", InputSchema: obj, Annotations: ro},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				d.slowStarted <- struct{}{}
				// A stateless handler's context may be detached from the HTTP
				// request; the request's own context shows the caller hung up.
				select {
				case <-ctx.Done():
				case <-reqCtx.Done():
				case <-quit:
					return nil, context.Canceled
				}
				d.slowCancelled <- struct{}{}
				return nil, context.Canceled
			})
		s.AddTool(&mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds, reporting progress every 50 ms.", Annotations: ro,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}}}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				var in struct{ Ms, Burst int }
				_ = json.Unmarshal(req.Params.Arguments, &in)
				select {
				case d.sleepStarted <- struct{}{}:
				default:
				}
				// burst: N notifications "k of N" at once, then the result
				// (server-everything's shape: the last one right before it).
				if tok := req.Params.GetProgressToken(); tok != nil && in.Burst > 0 {
					for k := 1; k <= min(in.Burst, 100); k++ {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(k), Total: float64(in.Burst), Message: fmt.Sprintf("step %d", k)})
					}
				}
				end := time.After(time.Duration(min(in.Ms, 10_000)) * time.Millisecond)
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for n := 1; ; n++ {
					select {
					case <-end:
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"slept":true}`}}}, nil
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-reqCtx.Done():
						return nil, reqCtx.Err()
					case <-tick.C:
						if tok := req.Params.GetProgressToken(); tok != nil {
							_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: fmt.Sprintf("tick %d", n)})
						}
					}
				}
			})
		s.AddTool(&mcp.Tool{Name: "big", Description: "Return a large text result.", InputSchema: json.RawMessage(`{"type":"object","properties":{"bytes":{"type":"integer"}}}`), Annotations: ro},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				var in struct{ Bytes int }
				_ = json.Unmarshal(req.Params.Arguments, &in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", in.Bytes/2)}}}, nil
			})
		s.AddTool(&mcp.Tool{Name: "delete_item", Description: "Delete an item permanently.", InputSchema: obj,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: boolp(true)}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				record(req)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"deleted":true}`}}}, nil
			})
		return s
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server { return newServer(r.Context()) }, &mcp.StreamableHTTPOptions{Stateless: true})
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		switch d.mode.Load().(string) {
		case "401":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		case "429":
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		case "500":
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		if os.Getenv("DEBUG_DOWN") != "" {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			t.Logf("downstream %s %s proto=%q sess=%q -> %d %s", r.Method, r.URL.Path, r.Header.Get("Mcp-Protocol-Version"), r.Header.Get("Mcp-Session-Id"), rec.Code, rec.Body.String())
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(wrapped)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // runs first: releases stuck handlers
	d.url = srv.URL
	return d
}

func (d *downstream) args() (string, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastArgs, d.calls
}

type harnessOptions struct {
	tokens         []server.Token
	requests       server.RequestLimits
	maxInlineBytes int
	extra          []gateway.ConnectorSpec
	code           bool // execute_code on the shared pool
	publicURL      string
	callAdmission  string      // connector down's callAdmission, as YAML flow
	storeURL       string      // store.url; "" is memory:
	down           *downstream // an existing downstream (another replica's); nil starts one
	access         string      // an `access:` section, appended as written
}

// harness is connecta over real HTTP on a loopback port, with real gateway,
// discovery, stash and activity in front of the downstream.
type harness struct {
	url      string
	srv      *server.Server
	gw       *gateway.Gateway
	disc     *discovery.Service
	activity *activity.Recorder
	down     *downstream
	registry *prometheus.Registry
}

// harnessConfig is the configuration file the harness serves: the
// downstream as connector "down", and the options as the keys an operator
// would write.
func harnessConfig(t testing.TB, o harnessOptions, downURL string) *config.Config {
	t.Helper()
	var y strings.Builder
	y.WriteString("listen: 127.0.0.1:0\n")
	if o.publicURL != "" {
		fmt.Fprintf(&y, "publicUrl: %q\n", o.publicURL)
	}
	env := map[string]string{} // tokens are secret references, never literals
	if len(o.tokens) > 0 {
		y.WriteString("auth:\n  tokens:\n")
		for i, tk := range o.tokens {
			name := fmt.Sprintf("CONNECTA_TEST_TOKEN_%d", i)
			env[name] = tk.Value
			fmt.Fprintf(&y, "    - {name: %q, token: \"${env:%s}\", operator: %v}\n", tk.Name, name, tk.Operator)
		}
	}
	r := o.requests
	y.WriteString("requests:\n")
	fmt.Fprintf(&y, "  maxQueue: %d\n", r.MaxQueue) // the harness's zero is no queue, as server.Options'
	for _, f := range []struct {
		key string
		v   int64
	}{{"maxActive", int64(r.MaxActive)}, {"maxActivePerCaller", int64(r.MaxActivePerCaller)}, {"queueTimeoutMs", r.QueueTimeout.Milliseconds()}, {"retryAfterMs", r.RetryAfter.Milliseconds()},
		{"maxBodyBytes", r.MaxBodyBytes}, {"bodyTimeoutMs", r.BodyTimeout.Milliseconds()}} {
		if f.v > 0 {
			fmt.Fprintf(&y, "  %s: %d\n", f.key, f.v)
		}
	}
	if o.maxInlineBytes > 0 {
		fmt.Fprintf(&y, "results: {maxInlineBytes: %d}\n", o.maxInlineBytes)
	}
	if o.storeURL != "" {
		env["CONNECTA_TEST_STORE_URL"] = o.storeURL
		y.WriteString("store: {url: \"${env:CONNECTA_TEST_STORE_URL}\"}\n")
	}
	fmt.Fprintf(&y, "connectors:\n  - id: down\n    title: Downstream\n    description: Test downstream\n    guide: %q\n    url: %q\n",
		"# Downstream guide\n\nUse echo for echoes.", downURL+"/mcp")
	if o.callAdmission != "" {
		fmt.Fprintf(&y, "    callAdmission: %s\n", o.callAdmission)
	}
	y.WriteString(o.access)
	cfg, err := config.Parse("harness.yaml", []byte(y.String()), config.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("harness configuration: %v\n%s", err, y.String())
	}
	return cfg
}

// newHarness is connecta as app.New builds it (the constructor serve uses)
// over real HTTP on a loopback port.
func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{down: o.down, registry: prometheus.NewRegistry()}
	if h.down == nil {
		h.down = newDownstream(t)
	}
	opts := app.Options{
		Config:     harnessConfig(t, o, h.down.url),
		Version:    "test",
		Registry:   h.registry,
		Connectors: o.extra,
	}
	if o.code {
		opts.Executor, opts.Pool = true, sharedPool(t)
	}
	a, err := app.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	h.srv, h.gw, h.disc, h.activity = a.Server, a.Gateway, a.Discovery, a.Activity
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := h.srv.HTTPServer(ln.Addr().String())
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	h.url = "http://" + ln.Addr().String()
	return h
}

// tokenTransport adds a bearer token to every request.
type tokenTransport struct {
	token string
	base  http.RoundTripper
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.base.RoundTrip(r)
}

func (h *harness) connect(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := h.tryConnect(context.Background(), token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (h *harness) tryConnect(ctx context.Context, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             h.url + "/mcp",
		HTTPClient:           &http.Client{Transport: &tokenTransport{token: token, base: http.DefaultTransport}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return res
}

func textOf(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("no content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T", res.Content[0])
	}
	return tc.Text
}

// failureOf checks the one top-level failure shape (isError; text and
// structuredContent the same {ok:false, error:{code,message,retryable,…}})
// and returns the error object.
func failureOf(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	text := textOf(t, res)
	if !res.IsError || res.StructuredContent == nil {
		t.Fatalf("not a typed failure (isError %v, structuredContent %v): %s", res.IsError, res.StructuredContent != nil, text)
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(sc, &a) != nil || json.Unmarshal([]byte(text), &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("structuredContent differs from text:\n%s\n%s", sc, text)
	}
	m := decode(t, text)
	e, ok := m["error"].(map[string]any)
	if m["ok"] != false || !ok {
		t.Fatalf("want {ok:false, error:{…}}: %s", text)
	}
	if _, ok := e["code"].(string); !ok {
		t.Fatalf("error without code: %s", text)
	}
	if _, ok := e["message"].(string); !ok {
		t.Fatalf("error without message: %s", text)
	}
	if _, ok := e["retryable"].(bool); !ok {
		t.Fatalf("error without retryable: %s", text)
	}
	return e
}

// decode parses a JSON text into a generic value for assertions.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	return m
}

// get fetches path from the server; the body is read and closed.
func (h *harness) get(t testing.TB, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(h.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp, body
}

// rawPost sends a JSON-RPC body to /mcp with the MCP headers.
func (h *harness) rawPost(t testing.TB, body io.Reader, size int64, token string) *http.Response {
	t.Helper()
	req := h.mcpRequest(t, body)
	req.ContentLength = size
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return send(t, req)
}

// mcpRequest is a POST of body to /mcp with the MCP headers, for a test to
// adjust (Host, Origin) before send.
func (h *harness) mcpRequest(t testing.TB, body io.Reader) *http.Request {
	t.Helper()
	return testkit.MCPRequest(t, h.url+"/mcp", body)
}

// send does req; the response body is closed when the test ends.
func send(t testing.TB, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const toolsListBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func itoa(n int) string { return strconv.Itoa(n) }

var _ = fmt.Sprintf

// withConfigLimits fills the request limits and host-call deadline a
// Reloadable leaves zero with config's defaults (Reload requires them; app
// passes them from the configuration).
func withConfigLimits(r server.Reloadable) server.Reloadable {
	q := &r.Requests
	if q.MaxActive == 0 {
		q.MaxActive, q.MaxQueue = config.DefaultRequestsMaxActive, config.DefaultRequestsMaxQueue
	}
	if q.QueueTimeout == 0 {
		q.QueueTimeout = config.DefaultRequestsQueueTimeout
	}
	if q.RetryAfter == 0 {
		q.RetryAfter = config.DefaultRequestsRetryAfter
	}
	if q.MaxBodyBytes == 0 {
		q.MaxBodyBytes = config.DefaultRequestsMaxBodyBytes
	}
	if q.BodyTimeout == 0 {
		q.BodyTimeout = config.DefaultRequestsBodyTimeout
	}
	if r.HostCallTimeout == 0 {
		r.HostCallTimeout = config.DefaultExecuteHostCallTimeout
	}
	return r
}
