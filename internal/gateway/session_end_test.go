package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// A 2026-07-28 connection the SDK ends on a transport failure (a 401 to a
// tools/call) is closed, not only forgotten: its subscriptions/listen
// stream, opened at connect because the downstream offers listChanged, ends
// too. Before, it stayed open until the process exited (and a test's
// downstream waited on it in Close).
func TestSession_EndedConnectionClosesItsListenStream(t *testing.T) {
	var listening, opened, refuse atomic.Int64
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "listening", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
		s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: text("ok")}, nil
			})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && refuse.Load() == 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if bytes.Contains(body, []byte(`"subscriptions/listen"`)) {
			opened.Add(1)
			listening.Add(1)
			defer listening.Add(-1)
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() }) // a leaked stream fails the test, not hangs it
	g, err := New(context.Background(), Options{Connectors: []ConnectorSpec{{ID: "d", URL: srv.URL + "/mcp", SharedSession: true}}, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	call := func() *Error {
		_, gerr := g.Invoke(context.Background(), nil, CallRequest{Address: "d.echo", Front: FrontDoorProgram, Source: "execute_code", RequestID: "r"})
		return gerr
	}
	// The SDK's ending races its listen stream's start, so one round
	// proves little: many rounds.
	for round := range 200 {
		refuse.Store(0)
		if gerr := call(); gerr != nil {
			t.Fatalf("round %d: %v", round, gerr)
		}
		refuse.Store(1)
		if gerr := call(); gerr == nil || gerr.Code != CodeAuthRequired {
			t.Fatalf("round %d, a 401: %v", round, gerr)
		}
	}
	if opened.Load() == 0 {
		t.Fatal("no subscriptions/listen stream was opened: the test proves nothing")
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return listening.Load() == 0 }, "the ended connections' subscriptions/listen streams close (%d open)", listening.Load())
}
