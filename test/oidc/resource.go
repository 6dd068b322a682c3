package oidctest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/connecta-dev/connecta/test/idptest"
)

// ProtectedServer is a real go-sdk MCP server (streamable HTTP, stateless)
// whose /mcp endpoint requires a bearer token the provider issued for it:
// a JWT access token whose audience is URL, verified against the issuer's
// keys by auth.RequireBearerToken. It serves its protected resource
// metadata (RFC 9728) and names it in its 401 challenge.
type ProtectedServer struct {
	// URL is the MCP endpoint (and the resource indicator): http://127.0.0.1:PORT/mcp.
	URL string
	// MetadataURL is the protected resource metadata document's URL.
	MetadataURL string

	rejectNext   atomic.Int64
	unauthorized atomic.Int64
	calls        atomic.Int64
	lastSubject  atomic.Value
	srv          *http.Server
}

// Tool names the protected server offers (both read-only).
const (
	ToolWhoAmI = "whoami" // answers "subject=<sub> scope=<scope>"
	ToolEcho   = "echo"   // answers its text argument
)

// DefaultScope is the scope the provider's resources accept by default and
// the protected server advertises.
const DefaultScope = idptest.DefaultScope

// NewProtectedServer serves an MCP server protected by p (the real provider
// or its twin) until t ends. Its
// metadata advertises scopes_supported [DefaultScope]; scopes are required of
// every token (none by default) and named in its challenge.
func NewProtectedServer(t testing.TB, p AuthServer, scopes ...string) *ProtectedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	s := &ProtectedServer{URL: base + "/mcp", MetadataURL: base + "/.well-known/oauth-protected-resource/mcp"}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	keys := oidc.NewRemoteKeySet(ctx, p.IssuerURL()+"/jwks")
	verifier := oidc.NewVerifier(p.IssuerURL(), keys, &oidc.Config{ClientID: s.URL, SupportedSigningAlgs: []string{"ES256"}})

	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(server, &mcp.Tool{Name: ToolWhoAmI, Description: "Who the bearer token names.", Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.calls.Add(1)
			info := req.Extra.TokenInfo
			sub, _ := info.Extra["sub"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("subject=%s scope=%s", sub, strings.Join(info.Scopes, " ")),
			}}}, nil, nil
		})
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: ToolEcho, Description: "Echo the text.", Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			s.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})

	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if s.rejectNext.Load() > 0 && s.rejectNext.Add(-1) >= 0 {
			return nil, fmt.Errorf("%w: rejected by the test", auth.ErrInvalidToken)
		}
		idt, err := verifier.Verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		var claims struct {
			Scope string `json:"scope"`
		}
		if err := idt.Claims(&claims); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		s.lastSubject.Store(idt.Subject)
		return &auth.TokenInfo{
			Scopes:     strings.Fields(claims.Scope),
			Expiration: idt.Expiry,
			UserID:     idt.Subject,
			Extra:      map[string]any{"sub": idt.Subject},
		}, nil
	}
	protect := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: s.MetadataURL, Scopes: scopes})
	counted := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&statusWatch{ResponseWriter: w, unauthorized: &s.unauthorized}, r)
		})
	}

	mux := http.NewServeMux()
	mux.Handle("/mcp", counted(protect(handler)))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.URL,
		AuthorizationServers:   []string{p.IssuerURL()},
		ScopesSupported:        []string{DefaultScope},
		BearerMethodsSupported: []string{"header"},
	}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// RejectNext makes the next n requests fail 401 whatever their token (an
// access token the server stopped accepting early).
func (s *ProtectedServer) RejectNext(n int) { s.rejectNext.Store(int64(n)) }

// Unauthorized counts the 401 answers so far.
func (s *ProtectedServer) Unauthorized() int { return int(s.unauthorized.Load()) }

// Calls counts tool executions so far.
func (s *ProtectedServer) Calls() int { return int(s.calls.Load()) }

type statusWatch struct {
	http.ResponseWriter
	unauthorized *atomic.Int64
}

func (w *statusWatch) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		w.unauthorized.Add(1)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWatch) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
