package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoingDownstream is a real MCP server whose one tool fails with an error
// text quoting the Authorization header it received, in the forms servers
// echo: as sent, the token alone, base64 and, for Basic, decoded.
func echoingDownstream(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	var auth string
	s := mcp.NewServer(&mcp.Implementation{Name: "echoing", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			a := auth
			mu.Unlock()
			_, token, _ := strings.Cut(a, " ")
			text := "denied: Authorization: " + a + "; token=" + token + "; b64=" + base64.StdEncoding.EncodeToString([]byte(token)) +
				"; url64=" + base64.RawURLEncoding.EncodeToString([]byte(token))
			if raw, err := base64.StdEncoding.DecodeString(token); err == nil {
				_, pass, _ := strings.Cut(string(raw), ":")
				text += "; basic=" + string(raw) + "; password=" + pass
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// A downstream that echoes what connecta sent it cannot hand a secret to
// the model: the vault credential and a config secret (here a Basic
// credential) are redacted from the error text a program's e.message and
// call_tool read, in every form, and the rest of the text stays.
func TestRedact_DownstreamErrorEchoingTheCredentialReachesTheModelRedacted(t *testing.T) {
	url := echoingDownstream(t)
	const vaultSecret = "vault-secret-0123456789"
	const basicPass = "cfg-pass-9876543210"
	basic := base64.StdEncoding.EncodeToString([]byte("svc:" + basicPass))
	g, err := New(context.Background(), Options{
		Connectors: []ConnectorSpec{
			{ID: "keyed", URL: url, Credential: &CredentialSlot{Label: "API key", Header: "Authorization", Scheme: "Bearer"}},
			{ID: "basic", URL: url, Headers: map[string]string{"Authorization": "Basic " + basic}, Secrets: []string{basic}},
		},
		Credentials: fixedCredential{value: vaultSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for id, secrets := range map[string][]string{
		"keyed": {vaultSecret, base64.StdEncoding.EncodeToString([]byte(vaultSecret)), base64.RawURLEncoding.EncodeToString([]byte(vaultSecret))},
		"basic": {basic, basicPass, "svc:" + basicPass},
	} {
		for _, front := range []FrontDoor{FrontDoorProgram, FrontDoorTopLevel} {
			_, gerr := g.Invoke(context.Background(), nil, CallRequest{Address: id + ".whoami", Args: json.RawMessage(`{}`), Front: front, RequestID: "r", Actor: "tester"})
			if gerr == nil || gerr.Code != CodeConnectorCallFailed {
				t.Fatalf("%s: %v", id, gerr)
			}
			for _, s := range secrets {
				if strings.Contains(gerr.Message, s) {
					t.Errorf("%s: the model reads %q in %q", id, s, gerr.Message)
				}
			}
			if !strings.Contains(gerr.Message, "denied: Authorization: ") || !strings.Contains(gerr.Message, redactedMark) {
				t.Errorf("%s: message %q lost its text or marks nothing", id, gerr.Message)
			}
		}
	}
}

// secretForms: every form, and nothing for a value too short to redact.
func TestSecretForms(t *testing.T) {
	b := base64.StdEncoding.EncodeToString([]byte("user:hunter2-pass"))
	forms := secretForms("Basic " + b)
	for _, want := range []string{"Basic " + b, b, "user:hunter2-pass", "hunter2-pass", base64.RawURLEncoding.EncodeToString([]byte("hunter2-pass"))} {
		found := false
		for _, f := range forms {
			found = found || f == want
		}
		if !found {
			t.Errorf("forms of a Basic credential lack %q", want)
		}
	}
	if f := secretForms("abc"); f != nil {
		t.Errorf("a 3-byte value: %v", f)
	}
	r := newRedactor([]string{"tok-123456"})
	r.observe("Bearer at-abcdef", "ab")
	if got := r.Redact("x tok-123456 y at-abcdef z ab"); got != "x [redacted] y [redacted] z ab" {
		t.Errorf("Redact: %q", got)
	}
}
