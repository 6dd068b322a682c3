package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// The server's admission maps internal/admission's refusals to its own
// (overloaded, shutting down, a free cancel) and counts them; FIFO order and
// the queue mechanics are internal/admission's tests.
func TestAdmission_RefusalsAndFreeCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, err := newAdmission(RequestLimits{MaxActive: 1, MaxQueue: 1, QueueTimeout: 5 * time.Second, RetryAfter: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		release, err := a.acquire(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		// One waiter queues; a second is refused at once (queue full).
		queued := make(chan error, 1)
		go func() {
			r, err := a.acquire(t.Context(), "")
			if err == nil {
				r()
			}
			queued <- err
		}()
		synctest.Wait()
		if _, err := a.acquire(t.Context(), ""); !errors.Is(err, errOverloaded) {
			t.Fatalf("queue full: %v, want overloaded", err)
		}
		release()
		release() // idempotent
		if err := <-queued; err != nil {
			t.Fatalf("queued waiter: %v", err)
		}
		// Queue timeout.
		hold, _ := a.acquire(t.Context(), "")
		if _, err := a.acquire(t.Context(), ""); !errors.Is(err, errOverloaded) {
			t.Fatalf("timeout: %v", err)
		}
		// A cancel is free: not a rejection.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		before := a.snapshot().Totals.Rejected
		if _, err := a.acquire(ctx, ""); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel: %v", err)
		}
		if s := a.snapshot(); s.Totals.Rejected != before || s.Totals.Cancelled != 1 {
			t.Fatalf("snapshot after cancel %+v", s)
		}
		hold()
		if s := a.snapshot(); s.Active != 0 || s.Queued != 0 {
			t.Fatalf("leaked permits: %+v", s)
		}
		// Close refuses the queue and everything after.
		a.close()
		if _, err := a.acquire(t.Context(), ""); !errors.Is(err, errShuttingDown) {
			t.Fatalf("after close: %v", err)
		}
	})
}

func TestProject_FlatAndEnvelope(t *testing.T) {
	v := json.RawMessage(`{"results":[{"id":1,"n":{"a":2}},{"id":2}],"total":9007199254740993,"x":{"y":"<&>"}}`)
	for _, tc := range []struct {
		fields []string
		want   string
	}{
		{[]string{"total", "x.y"}, `{"total":9007199254740993,"x.y":"<&>"}`},
		{[]string{"results[].id"}, `{"results[].id":[1,2]}`},
		{[]string{"results[].n.a"}, `{"data":{"results[].n.a":[2]},"$connecta":{"type":"field_projection","unmatchedFields":[],"partialFields":["results[].n.a"],"hint":"` + fieldsHint + `"}}`},
		{[]string{"nope", "$connecta"}, `{"data":{},"$connecta":{"type":"field_projection","unmatchedFields":["nope","$connecta"],"hint":"` + fieldsHint + `"}}`},
	} {
		got, err := project(v, tc.fields)
		if err != nil || string(got) != tc.want {
			t.Errorf("%v:\n got %s (%v)\nwant %s", tc.fields, got, err, tc.want)
		}
	}
}

func TestClamp_CodepointSafe(t *testing.T) {
	s := strings.Repeat("é", 300) // 600 bytes
	got := jstext.Clamp(s, jstext.MaxEchoBytes)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > jstext.MaxEchoBytes+len("…") {
		t.Fatalf("clamp %d bytes valid=%v", len(got), utf8.ValidString(got))
	}
}

func TestInstructions_Bounded(t *testing.T) {
	if n := jstext.Len(instructions); n > MaxInstructionsChars {
		t.Fatalf("instructions are %d characters", n)
	}
	if len(usageSkill) >= MaxUsageSkillBytes {
		t.Fatalf("usage skill is %d bytes", len(usageSkill))
	}
}

func FuzzParseCallArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"address":"a.b","args":{"x":[1,2]},"fields":["a[].b"],"resultMode":"value","timeoutMs":5}`,
		`{"address":1}`, `[]`, `null`, `{"timeoutMs":1e308}`, `{"reason":"` + strings.Repeat("x", 600) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseCallArgs(raw, true, time.Second)
		if err == nil && (c.address == "" && !strings.Contains(string(raw), `"address"`)) {
			t.Fatalf("accepted without address: %s", raw)
		}
		if err == nil && c.timeout <= 0 {
			t.Fatalf("non-positive timeout from %s", raw)
		}
	})
}

func FuzzProject(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[{"c":1},{"d":2}]}}`), "a.b[].c")
	f.Add([]byte(`[1,2]`), "x")
	f.Add([]byte(`{"a":"\ud800"}`), "a")
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		if !json.Valid(raw) {
			return
		}
		out, err := project(raw, strings.Split(path, ","))
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid projection %s", out)
		}
	})
}

func TestHTTPServer_WriteTimeoutExceedsAdmissionPlusDeadline(t *testing.T) {
	s := &Server{opts: Options{Requests: RequestLimits{QueueTimeout: 5 * time.Second}, ExecutionTimeout: 30 * time.Second, HostCallTimeout: 15 * time.Second}}
	if got, min := s.writeTimeout(), 35*time.Second; got <= min {
		t.Fatalf("write timeout %s must exceed %s", got, min)
	}
}

// An execute_code request may wait for request admission, then for an
// executor slot, then run to its wall deadline: the write timeout must cover
// all three or the response of a long program is cut off.
func TestHTTPServer_WriteTimeoutCoversExecutorQueue(t *testing.T) {
	s := &Server{opts: Options{
		Requests:         RequestLimits{QueueTimeout: 5 * time.Second},
		ExecutionTimeout: 30 * time.Second, HostCallTimeout: 15 * time.Second,
		ExecutorQueueTimeout: 20 * time.Second,
	}}
	if got, min := s.writeTimeout(), 55*time.Second; got <= min {
		t.Fatalf("write timeout %s must exceed %s", got, min)
	}
}

// An overload rejection leaves one payload-free WARN line naming the reason.
func TestAdmission_RejectionIsLogged(t *testing.T) {
	a, _ := newAdmission(RequestLimits{MaxActive: 1, QueueTimeout: time.Hour, RetryAfter: time.Second}, nil)
	var buf bytes.Buffer
	a.log = slog.New(slog.NewTextHandler(&buf, nil))
	r, _ := a.acquire(context.Background(), "")
	defer r()
	if _, err := a.acquire(context.Background(), ""); !errors.Is(err, errOverloaded) {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(buf.String(), `level=WARN msg="request rejected: server overloaded" reason=queue_full`) {
		t.Fatalf("log: %s", buf.String())
	}
}
