package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/app"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/store"
)

// doctorTimeout bounds each doctor probe (docs/meta-tools.md §14: 10 s).
const doctorTimeout = 10 * time.Second

// credentialsDirUsage: outside systemd there is no $CREDENTIALS_DIRECTORY,
// so every command that reads the configuration takes the directory holding
// the credential files.
const credentialsDirUsage = "directory of credential files for ${credential:NAME} (default: $CREDENTIALS_DIRECTORY)"

// cmdCheck validates a configuration: every refusal is printed as
// file:line: field: message and the exit status is 1.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stdout, stderr)
	configPath := fs.String("config", "", "configuration file to check")
	credentialsDir := fs.String("credentials-dir", "", credentialsDirUsage)
	if code, done := fs.parse(args); done {
		return code
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "connecta check: --config FILE is required")
		return 2
	}
	cfg, err := config.Load(*configPath, resolver(*credentialsDir))
	if err != nil {
		printRefusals(stderr, err)
		return 1
	}
	if err := verifyStore(cfg); err != nil {
		fmt.Fprintf(stderr, "error: %s\n", err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "warning: %s\n", w.String())
	}
	checkClassifications(context.Background(), cfg, stdout)
	fmt.Fprintf(stdout, "%s: ok (%d connectors, listen %s)\n", *configPath, len(cfg.Connectors), cfg.Listen)
	return 0
}

// verifyStore is what check can know of the store without opening it (which
// would create a sqlite: file or a schema): the URL's form, the sqlite
// directory and file. Its refusal is file:line: store.url: message.
func verifyStore(cfg *config.Config) error {
	err := store.Verify(cfg.Store.URL.Reveal())
	var ce *store.ConfigError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if cfg.Store.URLLine > 0 {
		return fmt.Errorf("%s:%d: store.url: %s", cfg.File, cfg.Store.URLLine, ce.Msg)
	}
	return fmt.Errorf("%s: store.url: %s", cfg.File, ce.Msg)
}

func printRefusals(w io.Writer, err error) {
	var list config.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintf(w, "error: %s\n", e.Error())
		}
		return
	}
	fmt.Fprintf(w, "error: %s\n", err.Error())
}

// cmdDoctor checks the configuration, every connector's reachability (a
// catalog listing) and the executor (execute_code running `async () => 42`).
func cmdDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", stdout, stderr)
	configPath := fs.String("config", "", "configuration file (default: the embedded configuration)")
	credentialsDir := fs.String("credentials-dir", "", credentialsDirUsage)
	if code, done := fs.parse(args); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "[connecta] "+format+"\n", a...)
		return 1
	}
	cfg, err := loadConfig(*configPath, *credentialsDir)
	if err != nil {
		printRefusals(stderr, err)
		return fail("configuration refused")
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "warning: %s\n", w.String())
	}
	fmt.Fprintf(stdout, "config: ok (%d connectors)\n", len(cfg.Connectors))

	// Log records wait until the report is written, so the two never
	// interleave on a terminal; they follow it on stderr.
	var logs lockedLog
	defer func() {
		if logs.Len() > 0 {
			fmt.Fprintf(stderr, "[connecta] log records during doctor:\n%s", logs.String())
		}
	}()
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	storeFailed := func(err error) int {
		fmt.Fprintf(stdout, "store: FAILED %s: %v\n", store.Redact(cfg.Store.URL.Reveal()), err)
		fmt.Fprintln(stdout, "connectors, identity provider, executor: not checked (they start only with a store)")
		return fail("doctor found 1 problem(s)")
	}
	if err := verifyStore(cfg); err != nil {
		return storeFailed(err)
	}
	a, err := build(ctx, cfg, log, true, nil)
	if err != nil {
		var ce *store.ConfigError
		if errors.As(err, &ce) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrSchemaTooNew) {
			return storeFailed(err)
		}
		fmt.Fprintf(stdout, "startup: FAILED %v\n", err)
		return fail("doctor found 1 problem(s)")
	}
	defer a.Close()

	failures := 0
	listings := map[string][]gateway.Tool{} // the catalogs that loaded, for the access globs
	for _, c := range a.Gateway.Connectors() {
		if cc := cfg.Connector(c.ID); cc != nil && cc.PerCaller() {
			// Its calls carry each caller's own grant or credential, and
			// doctor is nobody: there is no listing it may make.
			fmt.Fprintf(stdout, "connector %s: not checked: it uses each caller's own grant or credential (oauth.grants / credential.per: caller)\n", c.ID)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		// A live listing, not the store's copy: doctor checks reachability.
		a.Gateway.InvalidateCatalog(c.ID)
		tools, err := a.Gateway.Tools(cctx, c.ID)
		cancel()
		if st := a.Gateway.ConnectorStates()[c.ID]; err == nil && st.Catalog.State == gateway.CatalogStale {
			failures++
			fmt.Fprintf(stdout, "connector %s: FAILED %s: the downstream did not answer; servers serve its stored catalog (stale, %d ms old) until catalog.staleMs\n", c.ID, st.LastErrorCode, *st.Catalog.AgeMs)
			continue
		}
		if err != nil {
			failures++
			code := ""
			var gerr *gateway.Error
			if errors.As(err, &gerr) {
				code = string(gerr.Code) + ": "
			}
			fmt.Fprintf(stdout, "connector %s: FAILED %s%s\n", c.ID, code, err.Error())
			// A stdio server's own words (redacted) are for the operator.
			if tail := strings.TrimRight(a.Gateway.StderrTail(c.ID), "\n"); tail != "" {
				fmt.Fprintf(stdout, "connector %s: stderr (last %d bytes at most):\n", c.ID, gateway.StderrTailBytes)
				for _, line := range strings.Split(tail, "\n") {
					fmt.Fprintf(stdout, "  | %s\n", line)
				}
			}
			continue
		}
		listings[c.ID] = tools
		proto := ""
		if v := a.Gateway.ConnectorStates()[c.ID].ProtocolVersion; v != "" {
			proto = ", MCP " + v
		}
		fmt.Fprintf(stdout, "connector %s: ok (%d tools%s)\n", c.ID, len(tools), proto)
		for _, w := range catalogWarnings(a.Gateway, c.ID) {
			fmt.Fprintf(stdout, "warning: %s\n", w) // drift warns, never fails
		}
		for i, cc := range cfg.Connectors {
			if cc.ID == c.ID {
				for _, w := range classificationWarnings(cfg, cc, i, tools) {
					fmt.Fprintf(stdout, "warning: %s\n", w.String())
				}
			}
		}
	}

	for _, w := range accessGlobWarnings(cfg, listings) {
		fmt.Fprintf(stdout, "warning: %s\n", w.String())
	}

	sctx, cancelStore := context.WithTimeout(ctx, doctorTimeout)
	if rep, err := store.Check(sctx, a.Store()); err != nil {
		failures++
		fmt.Fprintf(stdout, "store: FAILED %s: %v\n", store.Redact(cfg.Store.URL.Reveal()), err)
	} else {
		fmt.Fprintf(stdout, "store: ok (%s)\n", rep)
	}
	cancelStore()

	if v := a.Inbound().OIDC(); v != nil {
		octx, cancelOIDC := context.WithTimeout(ctx, doctorTimeout)
		switch n, err := v.Check(octx); {
		case err != nil:
			failures++
			fmt.Fprintf(stdout, "identity provider: FAILED %s: %v (OIDC callers get 503 until it answers)\n", v.Issuer(), err)
		case n == 0:
			failures++
			fmt.Fprintf(stdout, "identity provider: FAILED %s publishes no usable signing key\n", v.Issuer())
		default:
			fmt.Fprintf(stdout, "identity provider: ok (%s, %d signing keys; resource %s)\n", v.Issuer(), n, v.Audience())
		}
		cancelOIDC()
	}

	if err := executorSelfTest(ctx, a); err != nil {
		failures++
		fmt.Fprintf(stdout, "executor: FAILED %v\n", err)
	} else {
		fmt.Fprintf(stdout, "executor: ok (async () => 42 returned 42; sandbox child: %s)\n", a.Pool.ChildKind())
	}
	if failures > 0 {
		return fail("doctor found %d problem(s)", failures)
	}
	fmt.Fprintln(stdout, "Connecta doctor passed: configuration, connectors, store and executor are healthy.")
	return 0
}

func executorSelfTest(ctx context.Context, a *app.App) error {
	code := a.Server.CodeTool()
	if code == nil {
		return errors.New("execute_code is not available")
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "execute_code", Arguments: json.RawMessage(`{"code":"async () => 42"}`)}}
	res, err := code.Handle(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("execute_code failed: %s", firstText(res))
	}
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(firstText(res)), &out); err != nil || strings.TrimSpace(string(out.Result)) != "42" {
		return fmt.Errorf("execute_code returned %q, want result 42", firstText(res))
	}
	return nil
}

func firstText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// lockedLog is a log destination safe for concurrent records.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// catalogWarnings are doctor's drift and quarantine lines for a connector.
func catalogWarnings(g *gateway.Gateway, id string) []string {
	var out []string
	if d, ok := g.CatalogDrift()[id]; ok && (d.UnclassifiedTools+d.UnservedTools+d.AnnotationConflicts+d.SchemaChanges) > 0 {
		out = append(out, fmt.Sprintf("connector %s: catalog drift observed %s: unclassifiedTools=%d unservedTools=%d annotationConflicts=%d schemaChanges=%d",
			id, d.ObservedAt.UTC().Format(time.RFC3339), d.UnclassifiedTools, d.UnservedTools, d.AnnotationConflicts, d.SchemaChanges))
	}
	for _, h := range g.Health() {
		if h.ID == id && h.CatalogQuarantined > 0 {
			out = append(out, fmt.Sprintf("connector %s: %d tools quarantined until approved (connecta catalog diff %s)", id, h.CatalogQuarantined, id))
		}
	}
	return out
}
