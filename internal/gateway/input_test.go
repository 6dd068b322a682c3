//lint:file-ignore SA1019 the test downstream asks for sampling, the deprecated input request connecta must refuse.

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingServer's tool "ask" asks the client for a sampling message, reports
// what the client answered, then waits for its call to end — as a
// downstream that waits for input it will never get does.
func askingServer(answers chan<- error, quit <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= "2026-07-28" {
				// 2026-07-28 asks in the result (input_required).
				answers <- errors.New("does not support CreateMessage: not asked mid-call")
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.CreateMessageParams{MaxTokens: 1, Messages: []*mcp.SamplingMessage{}}}}, nil
			}
			// connecta ends the call as soon as it sees the request, and that
			// cancellation races the SDK's answer to it: wait for the answer
			// on a context the call's end does not cancel (bounded: an
			// unanswered request fails the test, after a while).
			askCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, err := req.Session.CreateMessage(askCtx, &mcp.CreateMessageParams{MaxTokens: 1, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			answers <- err
			select {
			case <-ctx.Done():
			case <-quit: // the test's end, should cancellation not arrive
			}
			return nil, ctx.Err()
		})
	return s
}

// A downstream that sends sampling/createMessage mid-call (a session
// protocol's input request) gets the SDK's JSON-RPC error at once, and the
// call fails input_required_unsupported at once instead of waiting out its
// deadline: over streamable HTTP (the request arrives on the call's own
// stream) and in process (the one pending call's). Under 2026-07-28 the
// same downstream answers input_required, which fails the same way.
func TestInputRequest_FailsInputRequiredUnsupportedAtOnce(t *testing.T) {
	quit := make(chan struct{})
	answersHTTP := make(chan error, 1)
	srvHTTP := askingServer(answersHTTP, quit)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srvHTTP }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(quit) })
	answersInProc := make(chan error, 1)
	answersModern := make(chan error, 1)
	srvModern := askingServer(answersModern, quit)
	ms := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srvModern }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ms.Close)
	env := newTestGateway(t, time.Minute,
		ConnectorSpec{ID: "h", URL: hs.URL, LegacyVersion: true},
		ConnectorSpec{ID: "p", LegacyVersion: true, InProcess: func() *mcp.Server { return askingServer(answersInProc, quit) }},
		ConnectorSpec{ID: "m", URL: ms.URL},
	)
	for id, answers := range map[string]chan error{"h": answersHTTP, "p": answersInProc, "m": answersModern} {
		scope := env.g.NewScope()
		_, gerr := env.g.Invoke(context.Background(), scope, CallRequest{Address: id + ".ask", Front: FrontDoorProgram, Source: "execute_code"})
		scope.Close()
		if gerr == nil || gerr.Code != CodeInputRequiredUnsupported || gerr.Retryable {
			t.Fatalf("%s: got %+v, want input_required_unsupported", id, gerr)
		}
		// The SDK answered the request itself (connecta declares no sampling).
		if err := <-answers; err == nil || !strings.Contains(err.Error(), "does not support CreateMessage") {
			t.Fatalf("%s: the downstream's sampling request got %v, want the client's refusal", id, err)
		}
		// The connector still works: the failure was this call's.
		if _, err := env.g.Tools(context.Background(), id); err != nil {
			t.Fatalf("%s after the input request: %v", id, err)
		}
	}
}
