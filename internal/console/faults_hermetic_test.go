package console_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/idptest"
	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

// startTwinHarness is the harness on the hermetic identity provider, for
// the faults only it can inject.
func startTwinHarness(t *testing.T) (*harness, *idptest.Provider) {
	t.Helper()
	var twin *idptest.Provider
	h := startHarnessOn(t, "", false, func(t testing.TB, o oidctest.Options) oidctest.AuthServer {
		twin = oidctest.StartTwin(t, o)
		return twin
	})
	return h, twin
}

// A sign-in whose ID token names another issuer, or whose code exchange the
// provider fails, is a clear page and no session; the provider back to
// normal, the next sign-in works.
func TestConsole_SignInRefusesBadProviderAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, twin := startTwinHarness(t)
	if op, status, _ := h.signIn(ctx, "alice"); status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("first sign-in: %d", status)
	}

	twin.SetIssuer("https://impostor.example")
	op, status, page := h.signIn(ctx, "alice")
	if status != http.StatusBadRequest || op.cookie != "" || !strings.Contains(page, "could not be verified") {
		t.Fatalf("ID token of another issuer: %d cookie=%q %s", status, op.cookie, page)
	}
	twin.SetIssuer("")

	twin.FailTokens(1, http.StatusServiceUnavailable, "temporarily_unavailable")
	op, status, page = h.signIn(ctx, "alice")
	if status != http.StatusBadGateway || op.cookie != "" || !strings.Contains(page, "did not accept the sign-in") {
		t.Fatalf("code exchange failed: %d cookie=%q %s", status, op.cookie, page)
	}

	if op, status, _ := h.signIn(ctx, "alice"); status != http.StatusSeeOther || op.cookie == "" {
		t.Fatalf("sign-in after the faults: %d", status)
	}
}

// The provider down before anyone signed in: the sign-in page says it
// cannot be reached (nothing is cached to fall back on).
func TestConsole_SignInWithTheProviderDown(t *testing.T) {
	h, twin := startTwinHarness(t)
	twin.Stop()
	res, err := http.Get(h.base + "/operator/signin")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, res.Body)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(b.String(), "could not be reached") {
		t.Fatalf("sign-in with the provider down: %d %s", res.StatusCode, b.String())
	}
}

// A console request is traced (its connecta.console span), so what the
// console logs while serving it names that trace, as every other request's
// log lines do: the sign-in's "identity provider unreachable" carries
// traceId and spanId.
func TestConsole_LogLinesOfATracedRequestNameItsTrace(t *testing.T) {
	var twin *idptest.Provider
	// A collector that is not there: spans are dropped, the trace is still
	// the request's.
	h := startHarnessOn(t, "telemetry: {otlp: {endpoint: \"http://127.0.0.1:9\"}}\n", false, func(t testing.TB, o oidctest.Options) oidctest.AuthServer {
		twin = oidctest.StartTwin(t, o)
		return twin
	})
	twin.Stop()
	res, err := http.Get(h.base + "/operator/signin")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("sign-in with the provider down: %d", res.StatusCode)
	}
	for line := range strings.Lines(h.logs.String()) {
		if strings.Contains(line, `msg="console: identity provider unreachable"`) {
			if !strings.Contains(line, " traceId=") || !strings.Contains(line, " spanId=") {
				t.Fatalf("the console's log line names no trace: %s", line)
			}
			return
		}
	}
	t.Fatalf("no \"identity provider unreachable\" line in the log:\n%s", h.logs.String())
}
