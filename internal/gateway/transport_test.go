package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/test/testkit"
)

func TestE2_RetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		ms   int64
		ok   bool
		name string
	}{
		{"7", 7000, true, "seconds"},
		{" 0 ", 0, true, "zero"},
		{"-1", 0, false, "negative"},
		{"soon", 0, false, "garbage"},
		{"", 0, false, "absent"},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30000, true, "http date"},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true, "past date"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, ok := parseRetryAfter(tc.in, now)
			if ms != tc.ms || ok != tc.ok {
				t.Fatalf("parseRetryAfter(%q) = %d, %v", tc.in, ms, ok)
			}
		})
	}
}

func TestE1_TransportCodeAndOrigin(t *testing.T) {
	if got := transportCode(&wrapped{syscall.ECONNREFUSED}); got != "ECONNREFUSED" {
		t.Fatalf("errno name = %q", got)
	}
	if got := transportCode(errors.New("EOF")); got != "" {
		t.Fatalf("invented a code: %q", got)
	}
	if got := originOf("https://user:pw@mcp.example.com:8443/mcp?token=x"); got != "https://mcp.example.com:8443" {
		t.Fatalf("origin = %q", got)
	}
	if got := originOf("https://" + strings.Repeat("a", 300) + ".example/mcp"); got != "" {
		t.Fatalf("origin over 253 bytes kept: %q", got)
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "dial: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestCappedBodyCutsOff(t *testing.T) {
	ex := &rawmcp.Exchange{}
	body := &cappedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), left: 10, ex: ex}
	b, err := io.ReadAll(body)
	if !errors.Is(err, errBodyTooLarge) || len(b) != 10 || !ex.Snapshot().BodyCapped {
		t.Fatalf("read %d bytes, err %v", len(b), err)
	}
	exact := &cappedBody{rc: io.NopCloser(strings.NewReader("0123456789")), left: 10}
	if b, err := io.ReadAll(exact); err != nil || len(b) != 10 {
		t.Fatalf("a body of exactly the cap failed: %v", err)
	}
}

func TestAuthorize(t *testing.T) {
	env := newTestGateway(t, time.Second,
		inProcessSpec("demo", nil),
		ConnectorSpec{ID: "hdr", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer secret-value"}, CredentialRefs: []string{"${credential:hdr}"}},
	)
	cases := []struct {
		id, want string
	}{
		{"demo", `{"connector":"demo","recovery":"unavailable"`},
		{"hdr", `{"connector":"hdr","recovery":"operator_config","credential":{"configKey":"connectors.hdr.headers","references":["${credential:hdr}"]}`},
	}
	for _, tc := range cases {
		obj, gerr := env.g.Authorize(context.Background(), tc.id)
		if gerr != nil {
			t.Fatal(gerr)
		}
		b, _ := json.Marshal(obj)
		if !strings.HasPrefix(string(b), tc.want) || strings.Contains(string(b), "secret-value") {
			t.Fatalf("authorize(%s) = %s", tc.id, b)
		}
	}
	if _, gerr := env.g.Authorize(context.Background(), "ghost"); gerr == nil || gerr.Retryable {
		t.Fatalf("unknown connector: %v", gerr)
	}
}

func TestClose_EndsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	m := newMisbehavingHTTP(t)
	// No deadline is under test: the stdio server is a process started
	// inside the first call's deadline, which a loaded machine (-race) can
	// spend past 2 s.
	env := newTestGateway(t, 30*time.Second, inProcessSpec("t", nil), ConnectorSpec{ID: "h", URL: m.url()}, stdioSpec("s"))
	for _, a := range []string{"t.read_items", "h.read_items", "s.read_items"} {
		if _, gerr := env.call(t, a, "", false); gerr != nil {
			t.Fatal(errJSON(t, gerr))
		}
	}
	if err := env.g.Close(); err != nil {
		t.Fatal(err)
	}
	m.srv.CloseClientConnections()
	testkit.GoroutinesAtMost(t, 10*time.Second, before+2) // the httptest server's own
	if _, gerr := env.call(t, "t.read_items", "", false); gerr == nil {
		t.Fatal("call after Close succeeded")
	}
}

func FuzzToolFromRaw(f *testing.F) {
	f.Add([]byte(`{"name":"a","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`))
	f.Add([]byte(`{"name":1}`))
	f.Add([]byte(`{"name":"x","annotations":{"readOnlyHint":"yes"},"inputSchema":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tool, ok := toolFromRaw("c", raw)
		if ok && (tool.Name == "" || string(tool.Definition) != string(raw)) {
			t.Fatalf("bad tool %+v", tool)
		}
		if ok && annotatedReadOnly(tool.Annotations) && *tool.Annotations.ReadOnlyHint != true {
			t.Fatal("predicate")
		}
	})
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"{\"a\":1}"}]}`))
	f.Add([]byte(`{"content":[],"structuredContent":{"b":[1]}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := parseResult(raw)
		v := p.unwrap(raw)
		if json.Valid(raw) && !json.Valid(v) {
			t.Fatalf("unwrap(%q) = %q is not JSON", raw, v)
		}
		_ = p.errorText()
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("120")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT")
	f.Add("Sun Nov  6 08:49:37 1994")
	f.Add("99999999999999999999999")
	f.Add("+7")
	f.Fuzz(func(t *testing.T, v string) {
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		ms, ok := parseRetryAfter(v, now)
		if !ok {
			if ms != 0 {
				t.Fatalf("refused %q with %d", v, ms)
			}
			return
		}
		if ms < 0 || ms > MaxRetryAfterMs {
			t.Fatalf("parseRetryAfter(%q) = %d outside [0, %d]", v, ms, MaxRetryAfterMs)
		}
		if t := strings.TrimSpace(v); t != "" && t[0] >= '0' && t[0] <= '9' && ms%1000 != 0 {
			panic("delay-seconds must give whole seconds")
		}
	})
}

func TestS5_ExactBytesOverHTTP(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	res, gerr := env.call(t, "h.read_items", "", false)
	if gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	if want := `{"z":1,"a":{"n":12345678901234567890},"html":"\u003c\u0026\u003e"}`; string(res.Value) != want {
		t.Fatalf("value = %s, want %s", res.Value, want)
	}
}

func TestE2_RetryableHeuristicOnDownstreamProse(t *testing.T) {
	cases := map[string]bool{
		"upstream rate limit hit": true, "Rate-Limited": true, "ratelimit": true, "RATE_LIMIT": true,
		"ETIMEDOUT: timed out": true, "HTTP 503": true, "temporarily down": true, "ECONNRESET": true,
		"boom: widget 7 is broken": false, "accurate limit": true, "separate": false, "": false,
	}
	for text, want := range cases {
		if got := looksRetryable(text); got != want {
			t.Errorf("looksRetryable(%q) = %v, want %v", text, got, want)
		}
	}
}
