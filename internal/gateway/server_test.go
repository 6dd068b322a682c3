package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/gateway/observe"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/connecta-dev/connecta/internal/stdioshim"
)

// Real go-sdk MCP servers that misbehave on demand: in process, over
// streamable HTTP on 127.0.0.1, and over stdio (this test binary re-executed
// in server mode).

const stdioServerArg = "-gateway-test-stdio-server"

func TestMain(m *testing.M) {
	stdioshim.MaybeRun()
	if len(os.Args) > 1 && os.Args[1] == stdioServerArg {
		fmt.Fprintln(os.Stderr, "stdio test server up")
		s := newTestServer(nil)
		_ = s.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == stdioSilentDiscoverArg {
		runSilentDiscoverStdio()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func boolp(b bool) *bool { return &b }

// Exact structured bytes: key order, a big integer and HTML characters must
// pass through untouched (S5, JSON fidelity).
const structuredFixture = `{"z":1,"a":{"n":12345678901234567890},"html":"<&>"}`

const readItemsSchema = `{"type":"object","properties":{"z":{"type":"string"},"limit":{"type":"integer"}}}`

const strictSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`

type serverCounters struct {
	calls atomic.Int64  // tool handler invocations (any tool)
	stop  chan struct{} // closed at cleanup: releases hanging handlers
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func newTestServer(counters *serverCounters) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gateway-test", Version: "1"}, &mcp.ServerOptions{PageSize: 4})
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(name string, ann *mcp.ToolAnnotations, schema json.RawMessage, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: "test tool " + name, InputSchema: schema, Annotations: ann},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if counters != nil {
					counters.calls.Add(1)
				}
				return h(ctx, req)
			})
	}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	add("read_items", ro, json.RawMessage(readItemsSchema), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("ignored"), StructuredContent: json.RawMessage(structuredFixture)}, nil
	})
	add("text_json", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{"b": 1, "a": [1, 2]}`)}, nil
	})
	add("text_multi", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "["}, &mcp.TextContent{Text: "1]"}}}, nil
	})
	add("text_plain", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("hello <world> & co")}, nil
	})
	add("image", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"}}}, nil
	})
	add("fails", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: text("boom: widget 7 is broken")}, nil
	})
	add("fails_ratelimit", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: text("upstream rate limit hit")}, nil
	})
	add("unannotated", nil, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{"written":true}`)}, nil
	})
	add("destructive", &mcp.ToolAnnotations{DestructiveHint: boolp(true)}, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{"deleted":true}`)}, nil
	})
	add("contradictory", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: boolp(true)}, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{}`)}, nil
	})
	add("not_destructive_write", &mcp.ToolAnnotations{DestructiveHint: boolp(false)}, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{}`)}, nil
	})
	add("classified", nil, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{"ok":1}`)}, nil
	})
	add("ro_but_approval", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{}`)}, nil
	})
	var stop chan struct{}
	if counters != nil {
		stop = counters.stop
	}
	add("hang", ro, obj, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// A downstream that ignores the cancellation notification must not
		// keep httptest.Server.Close (which waits for handlers) forever.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, errors.New("test server stopping")
		}
	})
	add("echo", ro, obj, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("echo"), StructuredContent: req.Params.Arguments}, nil
	})
	add("strict", ro, json.RawMessage(strictSchema), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(`{"ok":true}`)}, nil
	})
	add("rpc_invalid", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "n must be positive"}
	})
	add("elicit", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{Mode: "url", Message: "sign in", URL: "https://example.invalid/x", ElicitationID: "e1"}})
	})
	add("env", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(os.Environ())
		return &mcp.CallToolResult{Content: text(string(b))}, nil
	})
	add("crash", ro, obj, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
		return nil, nil
	})
	return s
}

// misbehavingHTTP serves a real go-sdk MCP server over streamable HTTP and
// misbehaves on demand for tools/call or tools/list requests.
type misbehavingHTTP struct {
	srv      *httptest.Server
	server   *mcp.Server
	counters serverCounters
	mode     atomic.Value // string
	callPOST atomic.Int64 // tools/call POSTs that reached the handler
	listPOST atomic.Int64
	once     atomic.Bool
}

func newMisbehavingHTTP(t *testing.T) *misbehavingHTTP {
	t.Helper()
	m := &misbehavingHTTP{}
	m.counters.stop = make(chan struct{})
	m.mode.Store("")
	server := newTestServer(&m.counters)
	m.server = server
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var head struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &head)
			mode := m.mode.Load().(string)
			target, action, _ := strings.Cut(mode, ":")
			switch head.Method {
			case "tools/call":
				m.callPOST.Add(1)
			case "tools/list":
				m.listPOST.Add(1)
			}
			if target == "all" || (target != "" && "tools/"+target == head.Method) {
				if m.misbehave(w, r, action) {
					return
				}
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(m.srv.Close)
	t.Cleanup(func() { close(m.counters.stop) }) // runs first (LIFO)
	return m
}

func (m *misbehavingHTTP) set(mode string) { m.mode.Store(mode) }

func (m *misbehavingHTTP) url() string { return m.srv.URL + "/mcp?token=s3cret-in-query" }

// misbehave answers the request itself and reports true, or false to let
// the real server answer.
func (m *misbehavingHTTP) misbehave(w http.ResponseWriter, r *http.Request, action string) bool {
	switch {
	case strings.HasPrefix(action, "status="):
		var code int
		fmt.Sscanf(strings.TrimPrefix(action, "status="), "%d", &code)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "provider prose that must not leak")
	case action == "429secs":
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	case action == "503secs":
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
	case action == "429date":
		w.Header().Set("Retry-After", time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	case action == "reset" || action == "eof":
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("no hijacker")
		}
		conn, _, err := hj.Hijack()
		if err != nil {
			panic(err)
		}
		if tcp, ok := conn.(*net.TCPConn); ok && action == "reset" {
			_ = tcp.SetLinger(0) // RST instead of FIN
		}
		_ = conn.Close()
	case action == "badjson":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`)
	case action == "huge":
		w.Header().Set("Content-Type", "application/json")
		chunk := bytes.Repeat([]byte(" "), 1<<20)
		for i := 0; i < 1024; i++ { // 1 GiB unless the client stops reading
			if _, err := w.Write(chunk); err != nil {
				return true
			}
		}
	case action == "hang":
		<-r.Context().Done()
	case action == "404once":
		if r.Header.Get("Mcp-Session-Id") != "" && m.once.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusNotFound)
			return true
		}
		return false
	default:
		return false
	}
	return true
}

type testEnv struct {
	g        *Gateway
	activity *activity.Recorder
	observer *observe.Observer
	registry *prometheus.Registry
}

// testMaxResponseBytes keeps the 1 GB-body case quick under -race; the
// default cap is exercised by TestCappedBodyCutsOff's mechanism.
const testMaxResponseBytes = 4 << 20

func newTestGateway(t *testing.T, timeout time.Duration, specs ...ConnectorSpec) *testEnv {
	t.Helper()
	rec, err := activity.New(activity.Options{ServerName: "connecta-test", ServerVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	obs := observe.New(observe.Options{})
	reg := prometheus.NewRegistry()
	g, err := New(context.Background(), Options{
		Connectors:  specs,
		CallTimeout: timeout,
		Activity:    rec,
		Observer:    obs,
		Validator:   validate.New(validate.Options{}),
		Metrics:     reg,

		MaxResponseBytes: testMaxResponseBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Close()
		_ = rec.Close()
	})
	return &testEnv{g: g, activity: rec, observer: obs, registry: reg}
}

func inProcessSpec(id string, counters *serverCounters) ConnectorSpec {
	return ConnectorSpec{ID: id, Title: "Test " + id, InProcess: func() *mcp.Server { return newTestServer(counters) }}
}

// call is Invoke through a fresh scope with the program front door.
func (e *testEnv) call(t *testing.T, address string, args string, allowWrite bool) (*CallResult, *Error) {
	t.Helper()
	scope := e.g.NewScope()
	defer scope.Close()
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	return e.g.Invoke(context.Background(), scope, CallRequest{
		Address: address, Args: raw, Front: FrontDoorProgram, Source: "execute_code",
		AllowWrite: allowWrite, RequestID: "req-1", Actor: "tester",
	})
}

func errJSON(t *testing.T, e *Error) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
