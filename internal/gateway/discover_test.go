package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioSilentDiscoverArg runs the test binary as a stdio go-sdk server that
// never answers server/discover (TestMain).
const stdioSilentDiscoverArg = "-gateway-test-stdio-silent-discover"

// runSilentDiscoverStdio is that server: every other request is served.
func runSilentDiscoverStdio() {
	_ = newTestServer(nil).Run(context.Background(), swallowDiscover{&mcp.StdioTransport{}})
}

// swallowDiscover drops every server/discover request before the server
// sees it: no answer, no error, as a server that ignores unknown methods.
type swallowDiscover struct{ inner mcp.Transport }

func (s swallowDiscover) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return swallowConn{c}, nil
}

type swallowConn struct{ mcp.Connection }

func (c swallowConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == discoverMethod {
			continue
		}
		return msg, err
	}
}

// silentDiscoverHTTP is a go-sdk server (session protocols) on loopback
// whose front ignores server/discover: hold keeps the POST open without an
// answer; stream answers 200 text/event-stream and then sends nothing.
// It counts the discover POSTs it swallowed.
func silentDiscoverHTTP(t *testing.T, stream bool) (url string, swallowed func() int) {
	t.Helper()
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestServer(nil) }, nil)
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var head struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &head) == nil && head.Method == discoverMethod {
				mu.Lock()
				n++
				mu.Unlock()
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL + "/mcp", func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// bounded is a gateway with one connector whose discover bound is short
// beside the call deadline: an unbounded discover would take the whole
// deadline and the call would fail. The deadline is roomy: within it the
// fallback also starts a process or connects again, which a loaded machine
// (-race) can stretch past a few seconds.
func bounded(t *testing.T, spec ConnectorSpec) *testEnv {
	t.Helper()
	env := newTestGateway(t, 30*time.Second, spec)
	env.g.lookup(spec.ID).discover.timeout = 300 * time.Millisecond
	return env
}

// call calls a read-only tool of the connector's, which must succeed.
func call(t *testing.T, env *testEnv, id string) { callTool(t, env, id+".read_items") }

func callTool(t *testing.T, env *testEnv, address string) {
	t.Helper()
	scope := env.g.NewScope()
	defer scope.Close()
	if _, gerr := env.g.Invoke(context.Background(), scope, CallRequest{Address: address, Args: json.RawMessage(`{}`), Front: FrontDoorTopLevel, Source: "call_tool"}); gerr != nil {
		t.Fatalf("call: %s: %s", gerr.Code, gerr.Message)
	}
}

// A downstream that holds the server/discover POST without answering is
// given the bound, then reached through initialize on the same connector;
// its later connections skip the discover.
func TestDiscoverBound_HTTPHeldPOSTFallsBackToInitialize(t *testing.T) {
	url, swallowed := silentDiscoverHTTP(t, false)
	env := bounded(t, ConnectorSpec{ID: "h", URL: url})
	call(t, env, "h")
	if v := env.g.ConnectorStates()["h"].ProtocolVersion; v != mcpProtocolVersion {
		t.Fatalf("protocolVersion %q, want %s", v, mcpProtocolVersion)
	}
	env.g.lookup("h").invalidateCatalog()
	call(t, env, "h")
	if n := swallowed(); n != 1 {
		t.Fatalf("%d server/discover POSTs; want 1 (later connections start at initialize)", n)
	}
}

// The same for a downstream that opens the SSE answer stream and never
// writes the answer on it.
func TestDiscoverBound_HTTPSilentStreamFallsBackToInitialize(t *testing.T) {
	url, swallowed := silentDiscoverHTTP(t, true)
	env := bounded(t, ConnectorSpec{ID: "h", URL: url})
	call(t, env, "h")
	if v := env.g.ConnectorStates()["h"].ProtocolVersion; v != mcpProtocolVersion || swallowed() != 1 {
		t.Fatalf("protocolVersion %q after %d discovers, want %s after 1", v, swallowed(), mcpProtocolVersion)
	}
}

// A stdio server (a real process) that drops server/discover: the bound's
// error answer comes from connecta's side of the pipe, and initialize
// follows on the same process.
func TestDiscoverBound_StdioSilentServerFallsBackToInitialize(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := bounded(t, ConnectorSpec{ID: "p", Command: []string{exe, stdioSilentDiscoverArg}})
	call(t, env, "p")
	if v := env.g.ConnectorStates()["p"].ProtocolVersion; v != mcpProtocolVersion {
		t.Fatalf("protocolVersion %q, want %s", v, mcpProtocolVersion)
	}
}

// A downstream that answers server/discover within the bound is unaffected:
// 2026-07-28, and the bound never marks it silent.
func TestDiscoverBound_AnsweredDiscoverKeeps2026(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	env := bounded(t, ConnectorSpec{ID: "s", URL: d.URL})
	c := env.g.lookup("s")
	// A bound the answer is sure to beat on a loaded machine: 300 ms is
	// one a starved downstream can miss, and it would then be silent.
	c.discover.timeout = 20 * time.Second
	callTool(t, env, "s.echo")
	if v := env.g.ConnectorStates()["s"].ProtocolVersion; v != statelessProtocolVersion || c.discover.silent.Load() {
		t.Fatalf("protocolVersion %q, silent %v", v, c.discover.silent.Load())
	}
}

// heldAnswerHTTP fronts a 2026-07-28 downstream: it answers server/discover
// as one SSE event and then holds the stream open (the spec says a server
// SHOULD close it; this one does not), until the client goes or the test
// ends; left is closed when connecta leaves that stream. Every other
// request is proxied, tools/list once connecta has left.
func heldAnswerHTTP(t *testing.T, upstream string) (mcpURL string, left <-chan struct{}) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	done, gone := make(chan struct{}), make(chan struct{})
	var goneOnce sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var head struct {
			Method string `json:"method"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &head) != nil || head.Method != discoverMethod {
			// The listing waits until connecta has left the discover
			// stream: a client that holds it until its connect context
			// ends (or the bound fires) never gets its tools.
			if head.Method == "tools/list" {
				select {
				case <-gone:
				case <-time.After(20 * time.Second):
					http.Error(w, "the discover stream is still held", http.StatusServiceUnavailable)
					return
				}
			}
			proxy.ServeHTTP(w, r)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The upstream answers as JSON or as one SSE event: keep the JSON.
		if i := bytes.Index(answer, []byte("data: ")); i >= 0 {
			answer, _, _ = bytes.Cut(answer[i+len("data: "):], []byte("\n"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		// The answer split across writes, with a comment and a CRLF line.
		fmt.Fprint(w, ": priming\r\n\r\nevent: message\r\n")
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: %s\n\n", bytes.TrimSpace(answer))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			goneOnce.Do(func() { close(gone) })
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL + target.Path, gone
}

// A downstream that answers server/discover on an SSE stream it keeps open
// is left as soon as the answer has come, and is not taken for silent.
// Before, the SDK's drain of the body held the stream until the connect
// context ended or the bound fired, which marked the server silent: a
// listing slower than the bound was enough (this test's listing waits for
// the stream to be left, and failed after 20 s).
func TestDiscoverBound_AnswerOnAHeldStreamKeeps2026(t *testing.T) {
	d := newVersionedHTTP(t, []string{"2026-07-28"}, true)
	u, left := heldAnswerHTTP(t, d.URL)
	env := newTestGateway(t, 30*time.Second, ConnectorSpec{ID: "s", URL: u})
	c := env.g.lookup("s")
	// A bound far past the wait below: only the answer can end the stream.
	c.discover.timeout = 10 * time.Minute
	if _, err := env.g.Tools(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	<-left
	if v := env.g.ConnectorStates()["s"].ProtocolVersion; v != statelessProtocolVersion || c.discover.silent.Load() {
		t.Fatalf("protocolVersion %q, silent %v", v, c.discover.silent.Load())
	}
}

// answerWatch sees the answer whatever the stream's chunking, and only the
// answer to its own id.
func TestAnswerWatch_FindsItsAnswerInAnyChunking(t *testing.T) {
	stream := ": hi\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n" +
		"event: other\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\n" + "data: \"id\":7,\"result\":{}}\n\n" + "data: trailing"
	want := strings.Index(stream, "data: trailing")
	id, _ := jsonrpc.MakeID(float64(7))
	for size := 1; size <= len(stream); size++ {
		w := newAnswerWatch(id)
		end := -1
		for off := 0; off < len(stream) && end < 0; off += size {
			chunk := stream[off:min(off+size, len(stream))]
			if w.feed([]byte(chunk)) {
				end = off + len(chunk)
			}
		}
		if end < want || end > want+size {
			t.Fatalf("chunks of %d: answer seen at byte %d, want at %d", size, end, want)
		}
	}
}

func FuzzAnswerWatch(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), uint8(3))
	f.Add([]byte("event: x\r\ndata:\r\n\r\n:\n"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		id, _ := jsonrpc.MakeID(float64(1))
		w := newAnswerWatch(id)
		step := int(size) + 1
		for off := 0; off < len(stream); off += step {
			if w.feed(stream[off:min(off+step, len(stream))]) {
				return
			}
			if w.events.Held() > 2*maxWatchedEvent+step {
				t.Fatalf("watch holds %d bytes", w.events.Held())
			}
		}
	})
}
