package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/jstext"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/internal/sandbox"
	"github.com/connecta-dev/connecta/test/testkit"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	if len(os.Args) > 1 && os.Args[1] == fakeChildMarker {
		os.Exit(runFakeChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == orphanParentMarker {
		os.Exit(runOrphanParent(os.Args[2:]))
	}
	code := m.Run()
	removeSlimChild()
	os.Exit(code)
}

// testHost is a Host with a few named functions.
type testHost struct {
	mu        sync.Mutex
	logs      []string
	entered   chan string // function names of "slow" calls that reached the host
	cancelled chan string // function names whose ctx ended
}

func newTestHost() *testHost {
	return &testHost{entered: make(chan string, 64), cancelled: make(chan string, 64)}
}

func (h *testHost) Call(ctx context.Context, provider, fn string, args json.RawMessage) (json.RawMessage, error) {
	switch {
	case fn == "echo":
		return args, nil
	case fn == "undefined":
		return nil, nil
	case fn == "slow":
		h.entered <- fn
		<-ctx.Done()
		h.cancelled <- fn
		return nil, ctx.Err()
	case fn == "fail":
		return nil, errors.New("downstream exploded")
	case fn == "emptyerr":
		return nil, errors.New("")
	case fn == "bigerr":
		return nil, errors.New(strings.Repeat("E", 300000))
	case fn == "badjson":
		return json.RawMessage(`{not json`), nil
	case strings.HasPrefix(fn, "big"): // bigN: a JSON string of N bytes in all
		n, _ := strconv.Atoi(fn[3:])
		return json.RawMessage(`"` + strings.Repeat("r", n-2) + `"`), nil
	}
	return nil, fmt.Errorf("unknown function %s.%s", provider, fn)
}

func (h *testHost) Log(level, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, text)
}

func (h *testHost) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.logs...)
}

// logBuf is the pool's log, safe for its goroutines and the test.
type logBuf = testkit.Buffer

type fakePool struct {
	*Pool
	reg  *prometheus.Registry
	logs *logBuf
}

// newFakePool starts a pool of scripted children and checks, at cleanup, that
// it leaves no process and no goroutine behind.
func newFakePool(t *testing.T, opts Options, startup string) *fakePool {
	t.Helper()
	baseGoroutines := runtime.NumGoroutine()
	opts.testChildArgv = fakeArgv(startup)
	opts.DisableCache = true
	if opts.Spares == 0 && opts.MaxSpares == 0 && opts.SpareIdle == 0 {
		opts.Spares = 1 // tests of the spares themselves set them explicitly
	}
	reg := prometheus.NewRegistry()
	opts.Registry = reg
	lb := &logBuf{}
	opts.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := New(context.Background(), testOptions(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		assertNoChildren(t)
		assertGoroutinesBack(t, baseGoroutines)
	})
	return &fakePool{Pool: p, reg: reg, logs: lb}
}

// liveChildren lists our child processes from /proc (they run in their own
// process groups, so they are found by parent pid; zombies count as leaks).
func liveChildren() []int {
	me := os.Getpid()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) > 2 {
			if ppid, _ := strconv.Atoi(f[1]); ppid == me {
				out = append(out, pid)
			}
		}
	}
	return out
}

func assertNoChildren(t *testing.T) {
	t.Helper()
	if kids := liveChildren(); len(kids) > 0 {
		t.Errorf("leaked child processes after Close: %v", kids)
	}
}

func assertGoroutinesBack(t *testing.T, base int) {
	t.Helper()
	testkit.GoroutinesAtMost(t, 10*time.Second, base) // a leak never ends; a loaded machine is only slow
}

func run(t *testing.T, p *Pool, code string, h Host, lim Limits) (*Result, error) {
	t.Helper()
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l.Run(context.Background(), Job{Code: code, Limits: lim}, h)
}

func execErr(t *testing.T, err error, code string) *ExecError {
	t.Helper()
	var ee *ExecError
	if !errors.As(err, &ee) || ee.Code != code {
		t.Fatalf("want %s, got %v (%T)", code, err, err)
	}
	return ee
}

// counter reads a single counter or gauge.
func counter(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Counter != nil {
		return pb.Counter.GetValue()
	}
	return pb.Gauge.GetValue()
}

// ---- admission (L7) ----

func TestL7_AdmissionIsFIFO(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 2, QueueTimeout: 10 * time.Second}, "ok")
	first, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	leases := make(chan *Lease, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			l, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			leases <- l
		}()
		waitFor(t, func() bool { return p.Snapshot().Queued == i })
	}
	if s := p.Snapshot(); s.Active != 1 || s.Queued != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	first.Release()
	if got := <-order; got != 1 {
		t.Fatalf("admitted %d first", got)
	}
	(<-leases).Release()
	if got := <-order; got != 2 {
		t.Fatalf("admitted %d second", got)
	}
	(<-leases).Release()
	first.Release() // double release is harmless
	s := p.Snapshot()
	if s.Active != 0 || s.Queued != 0 || s.Totals.Admitted != 3 || s.Totals.Queued != 2 || s.QueueWaitCount != 2 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestL7_QueueFullIsRetryableOverload(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 1, QueueTimeout: 750 * time.Millisecond}, "ok")
	l, _ := p.Acquire(context.Background())
	defer l.Release()
	go p.Acquire(context.Background()) //nolint:errcheck // times out on its own
	waitFor(t, func() bool { return p.Snapshot().Queued == 1 })
	_, err := p.Acquire(context.Background())
	ee := execErr(t, err, CodeOverloaded)
	if ee.Message != "Executor queue is full." || !ee.Retryable || ee.RetryAfterMs != 750 {
		t.Fatalf("%+v", ee)
	}
	if counter(t, p.m.rejections.WithLabelValues("queue_full")) != 1 {
		t.Fatal("rejection not counted")
	}
}

func TestL7_ZeroQueueFailsFast(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 0, QueueTimeout: 321 * time.Millisecond}, "ok")
	l, _ := p.Acquire(context.Background())
	defer l.Release()
	_, err := p.Acquire(context.Background())
	ee := execErr(t, err, CodeOverloaded)
	if ee.Message != "Executor queue is full." || ee.RetryAfterMs != 321 || !ee.Retryable {
		t.Fatalf("%+v", ee)
	}
}

func TestL7_AdmissionTimeout(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 4, QueueTimeout: 25 * time.Millisecond}, "ok")
	l, _ := p.Acquire(context.Background())
	defer l.Release()
	_, err := p.Acquire(context.Background())
	ee := execErr(t, err, CodeOverloaded)
	if ee.Message != "Executor admission timed out after 25ms." || ee.RetryAfterMs != 25 {
		t.Fatalf("%+v", ee)
	}
	if p.Snapshot().Queued != 0 {
		t.Fatal("timed-out waiter left in the queue")
	}
}

func TestL7_CancelWhileQueued(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 4, QueueTimeout: 10 * time.Second}, "ok")
	l, _ := p.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := p.Acquire(ctx); errc <- err }()
	waitFor(t, func() bool { return p.Snapshot().Queued == 1 })
	next := make(chan *Lease, 1)
	go func() {
		l2, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		next <- l2
	}()
	waitFor(t, func() bool { return p.Snapshot().Queued == 2 })
	cancel()
	ee := execErr(t, <-errc, CodeCancelled)
	if ee.Message != "Execution was cancelled while queued." || ee.Retryable {
		t.Fatalf("%+v", ee)
	}
	waitFor(t, func() bool { return p.Snapshot().Queued == 1 })
	l.Release()
	(<-next).Release() // the next waiter is still admitted
	// A context already cancelled never queues.
	_, err := p.Acquire(ctx)
	if ee := execErr(t, err, CodeCancelled); ee.Message != "Execution was cancelled before admission." {
		t.Fatal(ee.Message)
	}
}

func TestL7_CloseFailsWaitersAndLaterAcquires(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 4, QueueTimeout: 10 * time.Second}, "ok")
	l, _ := p.Acquire(context.Background())
	errc := make(chan error, 2)
	for range 2 {
		go func() { _, err := p.Acquire(context.Background()); errc <- err }()
	}
	waitFor(t, func() bool { return p.Snapshot().Queued == 2 })
	p.Close()
	for range 2 {
		if ee := execErr(t, <-errc, CodeClosed); ee.Message != "Executor is shutting down." {
			t.Fatal(ee.Message)
		}
	}
	_, err := p.Acquire(context.Background())
	execErr(t, err, CodeClosed)
	_, err = l.Run(context.Background(), Job{Code: "value:1"}, newTestHost())
	execErr(t, err, CodeClosed)
	l.Release()
	p.Close() // idempotent
}

// ---- runs through scripted children ----

func TestRun_CallsLogsAndValue(t *testing.T) {
	p := newFakePool(t, Options{Slots: 2, MaxQueue: 2}, "ok")
	h := newTestHost()
	res, err := run(t, p.Pool, "log:first;log:second;calls:5:echo", h, Limits{})
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	want := `[{"ok":true,"value":[0]},{"ok":true,"value":[1]},{"ok":true,"value":[2]},{"ok":true,"value":[3]},{"ok":true,"value":[4]}]`
	if string(res.Value) != want {
		t.Fatalf("value %s", res.Value)
	}
	if got := h.seen(); strings.Join(got, "|") != "first|second" {
		t.Fatalf("logs forwarded: %v", got)
	}
	// A second execution works (new child).
	res, err = run(t, p.Pool, "value:2", h, Limits{})
	if err != nil || string(res.Value) != "2" {
		t.Fatal(err, res)
	}
	// The child's own failure is untyped, and its logs win.
	res, err = run(t, p.Pool, "fail:guest sad", h, Limits{})
	if err != nil || res.Err == nil || res.Err.Message != "guest sad" || res.Logs != "child logs" {
		t.Fatal(err, res)
	}
	if n := counter(t, p.m.executions.WithLabelValues(outcomeOK)); n != 2 {
		t.Fatalf("ok executions %v", n)
	}
}

func TestRun_LeaseRunsOnce(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	l, _ := p.Acquire(context.Background())
	if _, err := l.Run(context.Background(), Job{Code: "value:1"}, newTestHost()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(context.Background(), Job{Code: "value:1"}, newTestHost()); err == nil {
		t.Fatal("second Run accepted")
	}
	l.Release()
	if p.Snapshot().Active != 0 {
		t.Fatal("slot not released")
	}
}

func TestL6_HostResultBoundFailsThatCallOnly(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	res, err := run(t, p.Pool, fmt.Sprintf("calls:1:big%d", MaxHostResultBytes+1), h, Limits{})
	if err != nil || res.Err != nil {
		t.Fatal(err, res)
	}
	if !strings.Contains(string(res.Value), "exceeds the 258048-byte serialized bridge limit") || !strings.Contains(string(res.Value), "t.big") {
		t.Fatalf("value %.200s", res.Value)
	}
	// Exactly at the bound passes.
	res, err = run(t, p.Pool, fmt.Sprintf("calls:1:big%d", MaxHostResultBytes), h, Limits{})
	if err != nil || !strings.HasPrefix(string(res.Value), `[{"ok":true`) {
		t.Fatalf("at bound: %v %.100s", err, res.Value)
	}
}

func TestL6_ArgumentsOverBoundNeverReachTheHost(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	res, err := run(t, p.Pool, fmt.Sprintf("bigargs:%d", ipc.MaxPayloadBytes), newTestHost(), Limits{})
	if err != nil || !strings.Contains(string(res.Value), "Host call arguments exceeded the IPC limit.") {
		t.Fatalf("%v %.200s", err, res.Value)
	}
}

func TestX11_UnsendableRepliesStillSettle(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	cases := map[string]string{
		"bigerr":    "Host failure exceeded the bridge error limit.",
		"badjson":   "Host result from t.badjson could not be serialized.",
		"emptyerr":  "Host call failed.",
		"fail":      "downstream exploded",
		"undefined": `{"ok":true}`,
	}
	for fn, want := range cases {
		res, err := run(t, p.Pool, "calls:1:"+fn, newTestHost(), Limits{})
		if err != nil || res.Err != nil || !strings.Contains(string(res.Value), want) {
			t.Errorf("%s: %v %v %s", fn, err, res.Err, res.Value)
		}
	}
}

// ---- kill paths ----

func TestL3_WallDeadlineKills(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	for _, script := range []string{"log:before;hang", "log:before;spin"} {
		// A CPU budget far above the deadline: on a loaded machine the wall
		// timer can fire late enough for "spin" to reach the default budget.
		res, err := run(t, p.Pool, script, newTestHost(), Limits{Wall: 200 * time.Millisecond, CPUTime: time.Minute})
		if err != nil || res.Err == nil || res.Err.Kind != ErrDeadline || res.Err.Message != "Execution timed out after 200ms." {
			t.Fatalf("%s: %v %+v", script, err, res)
		}
		if res.Logs != "before" || res.Value != nil {
			t.Fatalf("logs %q value %s", res.Logs, res.Value)
		}
	}
	if n := counter(t, p.m.kills.WithLabelValues(killDeadline)); n != 2 {
		t.Fatalf("deadline kills %v", n)
	}
	res, err := run(t, p.Pool, "value:3", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "3" {
		t.Fatal("next execution", err, res)
	}
}

// A log frame flagged as the engine's truncation marker is never handed to
// the host's Log: it is not the program's entry, whatever its text (the
// child's done frame still carries it in the log prefix).
func TestRun_MarkerFramesStayInThePrefixOnly(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	res, err := run(t, p.Pool, "log:first;marker:[log TRUNCATED after 1 entries]", h, Limits{})
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if got := h.seen(); strings.Join(got, "|") != "first" {
		t.Fatalf("the host's Log saw %q, want only the program's entry", got)
	}
}

func TestL2_CancelAbortsHostCallsThenKills(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	ctx, cancel := context.WithCancel(context.Background())
	l, _ := p.Acquire(ctx)
	errc := make(chan error, 1)
	go func() { _, err := l.Run(ctx, Job{Code: "log:working;calls:2:slow"}, h); errc <- err }()
	waitFor(t, func() bool { return counter(t, p.m.busy) == 1 && len(h.seen()) == 1 })
	<-h.entered // both calls reached the host
	<-h.entered
	cancel()
	err := <-errc
	ee := execErr(t, err, CodeCancelled)
	if ee.Message != "Execution was cancelled." || ee.Logs != "working" || !ee.Started {
		t.Fatalf("%+v", ee)
	}
	// Both in-flight host calls saw their context end before Run returned.
	if len(h.cancelled) != 2 {
		t.Fatalf("cancelled host calls: %d", len(h.cancelled))
	}
	if counter(t, p.m.kills.WithLabelValues(killCancel)) != 1 || p.Snapshot().Active != 0 {
		t.Fatal("no kill or slot kept")
	}
}

func TestShutdown_KillsRunningWithLogs(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	l, _ := p.Acquire(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := l.Run(context.Background(), Job{Code: "log:step 1;hang"}, h); errc <- err }()
	waitFor(t, func() bool { return len(h.seen()) == 1 })
	p.Close()
	ee := execErr(t, <-errc, CodeClosed)
	if ee.Message != "Executor is shutting down." || ee.Logs != "step 1" {
		t.Fatalf("%+v", ee)
	}
	if counter(t, p.m.kills.WithLabelValues(killShutdown)) < 1 {
		t.Fatal("no shutdown kill")
	}
}

func TestCrash_MidRunReportsStatusAndStderrTail(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	res, err := run(t, p.Pool, "log:step 1;crash:17", newTestHost(), Limits{})
	if err != nil || res.Err == nil || res.Err.Kind != ErrCrash {
		t.Fatal(err, res)
	}
	msg := res.Err.Message
	if !strings.Contains(msg, "Sandbox exited unexpectedly (code 17).") || !strings.Contains(msg, "TAIL-OF-STDERR") ||
		strings.Contains(msg, "HEAD-OF-STDERR") || len(msg) > 8400 {
		t.Fatalf("message (%d bytes): %.300s", len(msg), msg)
	}
	if res.Logs != "step 1" {
		t.Fatalf("logs %q", res.Logs)
	}
	if counter(t, p.m.crashes.WithLabelValues("run")) != 1 {
		t.Fatal("crash not counted")
	}
}

func TestCrash_MidHostCallCancelsTheCall(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	res, err := run(t, p.Pool, "crashincall", h, Limits{})
	if err != nil || res.Err == nil || !strings.Contains(res.Err.Message, "(code 9)") {
		t.Fatal(err, res)
	}
	if len(h.cancelled) != 1 {
		t.Fatal("in-flight host call not cancelled")
	}
}

func TestProtocolViolationsKill(t *testing.T) {
	cases := map[string]string{
		"garbage":  "oversized frame", // "this" as a big-endian length is 1.9 GB
		"oversize": "oversized frame",
		"badjson":  "malformed frame",
		"unknown":  "malformed frame",
		"ready":    "unexpected ready frame",
		"dupcall":  "duplicate call id",
		"logflood": "log flood",
	}
	p := newFakePool(t, Options{Slots: 1}, "ok")
	for script, what := range cases {
		t.Run(script, func(t *testing.T) {
			res, err := run(t, p.Pool, "log:before;"+script, newTestHost(), Limits{Wall: 10 * time.Second})
			if err != nil || res.Err == nil || res.Err.Kind != ErrProtocol || !strings.Contains(res.Err.Message, what) {
				t.Fatalf("%v %+v", err, res.Err)
			}
			if !strings.HasPrefix(res.Logs, "before") {
				t.Fatalf("logs %q", res.Logs)
			}
		})
	}
	if n := counter(t, p.m.kills.WithLabelValues(killProtocol)); n != float64(len(cases)) {
		t.Fatalf("protocol kills %v", n)
	}
	res, err := run(t, p.Pool, "value:5", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "5" {
		t.Fatal("next execution", err, res)
	}
}

func TestProtocol_FrameAfterDoneKillsButKeepsResult(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	res, err := run(t, p.Pool, "twodone", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "1" {
		t.Fatal(err, res)
	}
	waitFor(t, func() bool { return counter(t, p.m.kills.WithLabelValues(killProtocol)) == 1 })
}

func TestX4_RetainedLogsAreBounded(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	h := newTestHost()
	res, err := run(t, p.Pool, "logn:3x3000;hang", h, Limits{Wall: 300 * time.Millisecond})
	if err != nil || res.Err == nil {
		t.Fatal(err, res)
	}
	if jstext.Len(res.Logs) != MaxLogChars || res.LogChars != 3*3002+2 || res.LogEntries != 3 {
		t.Fatalf("retained %d of %d (%d entries)", jstext.Len(res.Logs), res.LogChars, res.LogEntries)
	}
	if len(h.seen()) != 3 { // every entry was still forwarded as it arrived
		t.Fatal(len(h.seen()))
	}
}

func TestRun_ProgramTooLargeForAFrame(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	res, err := run(t, p.Pool, strings.Repeat("\x01", 128<<10), newTestHost(), Limits{})
	if err != nil || res.Err == nil || res.Err.Kind != ErrTooLarge {
		t.Fatal(err, res)
	}
}

// ---- spares ----

func TestSpares_DeathBeforeReadyBacksOff(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "die")
	// The third crash is counted before its log line is written: wait for
	// the line itself, not only the counter.
	waitFor(t, func() bool {
		return counter(t, p.m.crashes.WithLabelValues("startup")) >= 3 && strings.Contains(p.logs.String(), "backoff=400ms")
	})
	if !strings.Contains(p.logs.String(), "sandbox child failed before ready") {
		t.Fatalf("logs:\n%s", p.logs.String())
	}
	if !strings.Contains(p.logs.String(), "dying before ready") {
		t.Fatal("stderr tail not logged")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Run(ctx, Job{Code: "value:1"}, newTestHost())
	if ee := execErr(t, err, CodeCancelled); ee.Message != "Execution was cancelled while the sandbox was starting." {
		t.Fatal(ee.Message)
	}
	if backoff(1) != 100*time.Millisecond || backoff(4) != 800*time.Millisecond || backoff(9) != 5*time.Second || backoff(100) != 5*time.Second {
		t.Fatal("backoff formula")
	}
}

func TestSpares_GarbageBeforeReadyIsKilled(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, ReadyTimeout: time.Second}, "garbage")
	waitFor(t, func() bool { return counter(t, p.m.kills.WithLabelValues(killStartup)) >= 1 })
}

func TestSpares_IdleSpareDeathIsReplaced(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	waitFor(t, func() bool { return counter(t, p.m.spares) == 1 && len(liveChildren()) == 1 })
	kids := liveChildren()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	syscallKill(kids[0])
	waitFor(t, func() bool { return counter(t, p.m.crashes.WithLabelValues("startup")) == 1 })
	res, err := run(t, p.Pool, "value:8", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "8" {
		t.Fatal(err, res)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, cond, "condition not reached")
}

// A burst far above capacity: every caller gets a result or a typed
// admission error, nothing deadlocks or leaks (checked at cleanup), and the
// pool still works afterwards.
func TestL7_BurstFarAboveCapacity(t *testing.T) {
	p := newFakePool(t, Options{Slots: 2, Spares: 2, MaxQueue: 4, QueueTimeout: 2 * time.Second}, "ok")
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%10 == 0 {
				time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
			}
			key := "ok"
			l, err := p.Acquire(ctx)
			if err == nil {
				var res *Result
				res, err = l.Run(ctx, Job{Code: "log:x;calls:2:echo"}, newTestHost())
				if err == nil && res.Err != nil {
					key = string(res.Err.Kind)
				}
			}
			var ee *ExecError
			if errors.As(err, &ee) {
				key = ee.Code
			} else if err != nil {
				t.Errorf("untyped error %v", err)
			}
			mu.Lock()
			outcomes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if outcomes["ok"] == 0 || outcomes[CodeOverloaded] == 0 {
		t.Fatalf("outcomes %v", outcomes)
	}
	for k := range outcomes {
		if k != "ok" && k != CodeOverloaded && k != CodeCancelled {
			t.Fatalf("outcomes %v", outcomes)
		}
	}
	if s := p.Snapshot(); s.Active != 0 || s.Queued != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	res, err := run(t, p.Pool, "value:1", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "1" {
		t.Fatal(err, res)
	}
}

// blockingLogHost runs onFirst on the first console entry, then holds the
// run's goroutine long enough for the child to write every later entry: they
// are in the pipe (or the reader's buffer) when the run is ended.
type blockingLogHost struct {
	*testHost
	once    sync.Once
	onFirst func()
	hold    time.Duration
}

func (h *blockingLogHost) Log(level, text string) {
	h.testHost.Log(level, text)
	h.once.Do(func() {
		h.onFirst()
		time.Sleep(h.hold) // a slow host is the point: the run's deadline passes, the child's pipe fills
	})
}

func TestX4_LogsWrittenBeforeTheKillAreKept(t *testing.T) {
	const entries = 30
	want := make([]string, entries)
	for i := range want {
		want[i] = fmt.Sprintf("%d:%s", i, strings.Repeat("L", 10))
	}
	wantLogs := strings.Join(want, "\n")
	p := newFakePool(t, Options{Slots: 1}, "ok")
	code := fmt.Sprintf("logn:%dx10;hang", entries)

	t.Run("deadline", func(t *testing.T) {
		// The first entry holds the run past the wall deadline and its grace.
		h := &blockingLogHost{testHost: newTestHost(), onFirst: func() {}, hold: 600 * time.Millisecond}
		res, err := run(t, p.Pool, code, h, Limits{Wall: 50 * time.Millisecond})
		if err != nil || res.Err == nil || res.Err.Kind != ErrDeadline {
			t.Fatalf("%v %+v", err, res)
		}
		if res.Logs != wantLogs || res.LogEntries != entries {
			t.Fatalf("logs kept: %d entries, %q", res.LogEntries, res.Logs)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := &blockingLogHost{testHost: newTestHost(), onFirst: cancel, hold: 200 * time.Millisecond}
		l, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Run(ctx, Job{Code: code}, h)
		ee := execErr(t, err, CodeCancelled)
		if ee.Logs != wantLogs {
			t.Fatalf("logs kept: %q", ee.Logs)
		}
	})
}

// Close while a spare is starting is no start-up failure: no crash is
// counted and no retry is announced.
func TestSpares_CloseDuringStartupIsNoCrash(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "slow")
	waitFor(t, func() bool { return len(liveChildren()) == 1 })
	p.Close()
	if n := counter(t, p.m.crashes.WithLabelValues("startup")); n != 0 {
		t.Fatalf("startup crashes counted on Close: %v", n)
	}
	if strings.Contains(p.logs.String(), "failed before ready") {
		t.Fatalf("logs:\n%s", p.logs.String())
	}
}

// A child that ends its stream before ready but does not exit is killed
// after the grace, not waited for forever (which also hung Close).
func TestSpares_ClosedStreamBeforeReadyIsKilled(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "closeout")
	waitFor(t, func() bool { return counter(t, p.m.kills.WithLabelValues(killLinger)) >= 1 })
	waitFor(t, func() bool { return counter(t, p.m.crashes.WithLabelValues("startup")) >= 1 })
}

// A call frame that arrives once the caller has cancelled never reaches the
// host (L2), even when the run loop reads it before it sees the cancellation.
func TestL2_NoHostCallAfterCancel(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1}, "ok")
	for range 12 {
		ctx, cancel := context.WithCancel(context.Background())
		// Cancel on the log, then hold the run loop while the call frame
		// that follows the log arrives.
		h := &blockingLogHost{testHost: newTestHost(), onFirst: cancel, hold: 50 * time.Millisecond}
		var calls atomic.Int32
		ch := &countingHost{blockingLogHost: h, calls: &calls}
		l, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Run(ctx, Job{Code: "log:x;call:echo:[1];hang"}, ch)
		execErr(t, err, CodeCancelled)
		cancel()
		if n := calls.Load(); n != 0 {
			t.Fatalf("host calls after cancel: %d", n)
		}
	}
}

type countingHost struct {
	*blockingLogHost
	calls *atomic.Int32
}

func (h *countingHost) Call(ctx context.Context, provider, fn string, args json.RawMessage) (json.RawMessage, error) {
	h.calls.Add(1)
	return h.blockingLogHost.Call(ctx, provider, fn, args)
}

// When no child can become ready, a run fails after ReadyTimeout instead of
// holding its slot for as long as the caller's context lives.
func TestSpares_RunFailsWhenNoChildBecomesReady(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, ReadyTimeout: 200 * time.Millisecond}, "slow")
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Run(context.Background(), Job{Code: "hang"}, newTestHost())
	if err != nil || res.Err == nil || res.Err.Kind != ErrCrash || !strings.Contains(res.Err.Message, "did not become ready within 200ms") {
		t.Fatalf("%v %+v", err, res)
	}
}
