// Command driver is connecta's client under the MCP conformance suite's
// client scenarios (`conformance client --command "driver"`, which appends
// the scenario server's URL and sets MCP_CONFORMANCE_SCENARIO). It builds
// connecta as `connecta serve` does (package app) on a loopback port, with
// the scenario's server as the HTTP connector "suite", and plays the model
// through connecta's own MCP endpoint:
//
//   - the core scenarios: the catalog load (server/discover, then
//     initialize, then tools/list) and one call of the first tool;
//   - the auth/ scenarios (the connector has `oauth: {}`, or the
//     pre-registered client the scenario hands over in
//     MCP_CONFORMANCE_CONTEXT): a call of the suite's test-tool; on
//     auth_required, authorize_connector, and its authorizationUrl followed
//     by a scripted browser — a Go HTTP client, since the suite's
//     authorization servers approve at once and redirect to connecta's
//     callback — then the call again; at most maxAuthorizations sign-ins.
//
// It exits 0 when the call succeeded, 1 otherwise (the suite judges the
// scenario by what it saw on the wire, and some scenarios expect a refusal).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/oauth"
)

// maxAuthorizations bounds the sign-ins one run makes: the first, one
// step-up, one more. A downstream that keeps refusing (auth/scope-retry-limit)
// gets no more; connecta itself never starts a sign-in on its own.
const maxAuthorizations = 3

// clientSecretVar names the pre-registered client's secret in the
// configuration (resolved from MCP_CONFORMANCE_CONTEXT, not the environment).
const clientSecretVar = "CONFORMANCE_CLIENT_SECRET"

// authTool is the tool every auth/ scenario's server offers.
const authTool = "test-tool"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: driver URL")
		os.Exit(2)
	}
	if err := run(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT")); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

// scenarioContext is MCP_CONFORMANCE_CONTEXT: a pre-registered client
// (auth/pre-registration).
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

func run(target, scenario, rawContext string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	var sc scenarioContext
	if rawContext != "" {
		if err := json.Unmarshal([]byte(rawContext), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	auth := strings.HasPrefix(scenario, "auth/")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()
	// The pre-registered secret reaches the configuration as a reference,
	// as an operator's would.
	secrets := config.Resolver{LookupEnv: func(name string) (string, bool) {
		return sc.ClientSecret, name == clientSecretVar && sc.ClientSecret != ""
	}}
	cfg, err := config.Parse("conformance.yaml", []byte(configYAML(ln.Addr().String(), target, auth, sc)), secrets)
	if err != nil {
		return err
	}
	a, err := app.New(ctx, app.Options{Config: cfg, Version: "conformance", Logger: log, OAuthStore: oauth.NewMemoryStore()})
	if err != nil {
		return err
	}
	defer a.Close()
	srv := a.Server.HTTPServer(cfg.Listen)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	address := "suite." + authTool
	args := map[string]any{}
	if !auth {
		// The catalog load is the initialize scenario; the others call the
		// first tool (tools_call: add_numbers; sse-retry: the tool whose
		// stream the server closes mid-call).
		tools, gerr := a.Gateway.Tools(ctx, "suite")
		if gerr != nil {
			return fmt.Errorf("catalog: %w", gerr)
		}
		fmt.Printf("%d tools\n", len(tools))
		if scenario == "initialize" || len(tools) == 0 {
			return nil
		}
		address = tools[0].Address()
		if tools[0].Name == "add_numbers" {
			args = map[string]any{"a": 5, "b": 3}
		}
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-driver", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (string, bool, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", name, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res.IsError, nil
	}

	browser := &http.Client{Timeout: 10 * time.Second}
	for signIns := 0; ; {
		// The suite's tools are not marked read-only: call_destructive_tool.
		text, isErr, err := call("call_destructive_tool", map[string]any{"address": address, "args": args})
		if err != nil {
			return err
		}
		if !isErr {
			fmt.Println(text)
			return nil
		}
		var failure struct {
			Error struct{ Code, Recovery, Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(text), &failure)
		if failure.Error.Code != "auth_required" || failure.Error.Recovery != "oauth" {
			return fmt.Errorf("call: %s", text)
		}
		if signIns == maxAuthorizations {
			return fmt.Errorf("still auth_required after %d sign-ins: %s", signIns, failure.Error.Message)
		}
		text, isErr, err = call("authorize_connector", map[string]any{"connector": "suite"})
		if err != nil {
			return err
		}
		var st struct{ Status, AuthorizationURL, Reason, Message string }
		if isErr || json.Unmarshal([]byte(text), &st) != nil || st.AuthorizationURL == "" {
			return fmt.Errorf("authorize_connector: %s (the call: %s)", text, failure.Error.Message)
		}
		signIns++
		fmt.Printf("sign-in %d (%s%s)\n", signIns, st.Status, map[bool]string{true: ", " + st.Reason}[st.Reason != ""])
		if err := signIn(ctx, browser, st.AuthorizationURL, base+"/oauth/callback/suite"); err != nil {
			return err
		}
	}
}

// configYAML is connecta's configuration for one scenario: loopback only,
// state in memory, the scenario's server as connector "suite", its first
// catalog served without an operator's approval.
func configYAML(addr, target string, auth bool, sc scenarioContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\npublicUrl: http://%s\nstore: {url: \"memory:\"}\ncatalog: {approveFirst: false}\n", addr, addr)
	fmt.Fprintf(&b, "connectors:\n  - id: suite\n    url: %q\n", target)
	if auth {
		b.WriteString("    oauth:")
		if sc.ClientID != "" {
			fmt.Fprintf(&b, " {clientId: %q, clientSecret: \"${env:%s}\"}\n", sc.ClientID, clientSecretVar)
		} else {
			b.WriteString(" {}\n")
		}
	}
	return b.String()
}

// signIn is the person opening the link: the suite's authorization server
// approves at once and redirects to connecta's callback, whose page must
// say it worked.
func signIn(ctx context.Context, browser *http.Client, link, callback string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	res, err := browser.Do(req)
	if err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}
	page, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	landed := res.Request.URL
	if !strings.HasPrefix(landed.String(), callback+"?") {
		return fmt.Errorf("sign-in ended at %s, not connecta's callback", redact(landed))
	}
	if res.StatusCode != http.StatusOK {
		return errors.New("callback: " + res.Status + ": " + string(page))
	}
	return nil
}

// redact drops a URL's query (it may hold a code).
func redact(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	return c.String()
}
