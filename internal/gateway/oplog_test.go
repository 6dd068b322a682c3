package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// syncBuf is a log writer safe for the gateway's goroutines and the test.
type syncBuf = testkit.Buffer

// Operator logs: a stdio server that crashed and is started again, and a
// catalog that cannot be listed, each leave a payload-free line.
func TestOperatorLog_StdioRestartAndCatalogFailure(t *testing.T) {
	var logs syncBuf
	g, err := New(context.Background(), Options{
		Connectors:  []ConnectorSpec{stdioSpec("s"), {ID: "dead", URL: "http://127.0.0.1:9/mcp"}},
		CallTimeout: 10 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	invoke := func(address string) *Error {
		scope := g.NewScope()
		defer scope.Close()
		_, gerr := g.Invoke(context.Background(), scope, CallRequest{Address: address, Front: FrontDoorProgram, Source: "execute_code"})
		return gerr
	}
	if gerr := invoke("s.crash"); gerr == nil || gerr.Code != CodeUnavailable {
		t.Fatalf("crash: %v", gerr)
	}
	if gerr := invoke("s.read_items"); gerr != nil {
		t.Fatalf("after restart: %s", gerr.Message)
	}
	if gerr := invoke("dead.x"); gerr == nil || gerr.Code != CodeCatalogLookupFailed {
		t.Fatalf("dead: %v", gerr)
	}
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg="stdio server restarted" connector=s restarts=1`,
		`level=WARN msg="catalog refresh failed" connector=dead code=unavailable`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
}
