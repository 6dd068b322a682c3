package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/connecta-dev/connecta/test/testkit"
)

// gateOf builds one connector's gate on the real clock (inside a synctest
// bubble, the bubble's fake one).
func gateOf(t *testing.T, rule *CallAdmission, shared SharedBudgets) *callGate {
	t.Helper()
	g := &Gateway{now: time.Now, opts: Options{SharedBudgets: shared}}
	return newCallGate(g, "tracker", rule)
}

func mustAdmit(t *testing.T, cg *callGate, ctx context.Context, actor string) func() {
	t.Helper()
	release, gerr, err := cg.admit(ctx, actor)
	if err != nil || gerr != nil {
		t.Fatalf("admit(%q): %v %v", actor, gerr, err)
	}
	return release
}

func mustRefuse(t *testing.T, cg *callGate, actor string, wantMs int64) *Error {
	t.Helper()
	_, gerr, err := cg.admit(context.Background(), actor)
	if err != nil || gerr == nil {
		t.Fatalf("admit(%q) = %v %v, want rate_limited", actor, gerr, err)
	}
	if gerr.Code != CodeRateLimited || !gerr.Retryable || gerr.RetryAfterMs == nil || *gerr.RetryAfterMs != wantMs {
		t.Fatalf("refusal %s, want rate_limited retryable with retryAfterMs %d", errJSON(t, gerr), wantMs)
	}
	return gerr
}

// The 4th call of a budget of 3 per 2 s waits exactly until the oldest call
// leaves the window; a later one, exactly less.
func TestCallAdmission_ExhaustedBudgetRetriesExactlyWhenTheOldestCallLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cg := gateOf(t, &CallAdmission{RetryAfter: time.Second, Budget: &CallBudget{MaxCalls: 3, Window: 2 * time.Second}}, nil)
		mustAdmit(t, cg, context.Background(), "")()
		time.Sleep(300 * time.Millisecond)
		mustAdmit(t, cg, context.Background(), "")()
		mustAdmit(t, cg, context.Background(), "")()
		mustRefuse(t, cg, "", 1700) // the first call, at 0, leaves at 2000
		time.Sleep(1200 * time.Millisecond)
		mustRefuse(t, cg, "", 500)
		time.Sleep(500 * time.Millisecond) // 2000: the first call has left
		mustAdmit(t, cg, context.Background(), "")()
		mustRefuse(t, cg, "", 300) // the two at 300 leave at 2300
		s := cg.snapshot()
		if s.Totals.Admitted != 4 || s.Totals.RateLimited != 3 || s.Rules[0].Budget.Scope != "process" {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestCallAdmission_QueueRefusalsCarryTheRuleHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		full := gateOf(t, &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 0, QueueTimeout: time.Second, RetryAfter: 1500 * time.Millisecond}, nil)
		release := mustAdmit(t, full, context.Background(), "")
		mustRefuse(t, full, "", 1500) // fail fast: no queue
		release()

		slow := gateOf(t, &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 4, QueueTimeout: 250 * time.Millisecond, RetryAfter: 900 * time.Millisecond}, nil)
		release = mustAdmit(t, slow, context.Background(), "")
		start := time.Now()
		mustRefuse(t, slow, "", 900) // queue timeout
		if waited := time.Since(start); waited != 250*time.Millisecond {
			t.Fatalf("waited %v in the queue, want the 250ms timeout", waited)
		}
		release()
		s := slow.snapshot()
		if s.Totals.Rejected != 1 || s.Totals.Queued != 1 || s.Active != 0 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

// A call cancelled while queued takes no budget entry: the next call still
// finds the one left.
func TestCallAdmission_CancelWhileQueuedCostsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cg := gateOf(t, &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 4, QueueTimeout: time.Minute, RetryAfter: time.Second,
			Budget: &CallBudget{MaxCalls: 2, Window: time.Hour}}, nil)
		release := mustAdmit(t, cg, context.Background(), "")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, gerr, err := cg.admit(ctx, "")
			if gerr != nil {
				err = gerr
			}
			done <- err
		}()
		synctest.Wait()
		if q := cg.snapshot().Queued; q != 1 {
			t.Fatalf("queued = %d", q)
		}
		cancel()
		if err := <-done; !errors.Is(err, errAdmissionCancelled) {
			t.Fatalf("cancelled while queued: %v", err)
		}
		release()
		mustAdmit(t, cg, context.Background(), "")() // the second entry is still there
		mustRefuse(t, cg, "", time.Hour.Milliseconds())
		if s := cg.snapshot(); s.Totals.Cancelled != 1 || s.Totals.Admitted != 2 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

func TestCallAdmission_PerCallerPartitionsAreIndependentAndEvictedOnlyWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cg := gateOf(t, &CallAdmission{RetryAfter: 700 * time.Millisecond, PerCaller: true, MaxPartitions: 2,
			Budget: &CallBudget{MaxCalls: 1, Window: time.Second}}, nil)
		mustAdmit(t, cg, context.Background(), "alice")()
		mustRefuse(t, cg, "alice", 1000)
		mustAdmit(t, cg, context.Background(), "bob")() // bob's own budget
		// Both partitions still have a call in their window: a third actor
		// is refused with the rule's hint rather than resetting either.
		e := mustRefuse(t, cg, "carol", 700)
		if !strings.Contains(e.Message, "partitions") {
			t.Fatalf("message %q", e.Message)
		}
		time.Sleep(time.Second) // both windows empty: idle, evictable
		mustAdmit(t, cg, context.Background(), "carol")()
		if s := cg.snapshot(); s.Partitions != 1 || s.Totals.Rejected != 1 || s.Totals.RateLimited != 1 || s.Totals.Admitted != 3 {
			t.Fatalf("snapshot %+v", s)
		}
	})
}

// A partition holding a permit is never evicted, even with an empty window.
func TestCallAdmission_APartitionInUseIsNeverEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cg := gateOf(t, &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 0, QueueTimeout: time.Second, RetryAfter: time.Second, PerCaller: true, MaxPartitions: 1}, nil)
		release := mustAdmit(t, cg, context.Background(), "alice")
		mustRefuse(t, cg, "bob", 1000)
		mustRefuse(t, cg, "alice", 1000) // alice's queue still holds her permit
		release()
		mustAdmit(t, cg, context.Background(), "bob")()
	})
}

type fakeBudgets struct {
	err   error
	calls int
}

func (f *fakeBudgets) TakeCall(context.Context, string, string, int, time.Duration) (bool, time.Duration, error) {
	f.calls++
	return false, 0, f.err
}

// With the store down, a shared budget admits nothing: unavailable, store.
func TestCallAdmission_SharedBudgetWithTheStoreDownIsUnavailable(t *testing.T) {
	cg := gateOf(t, &CallAdmission{MaxConcurrency: 2, MaxQueueSize: 2, QueueTimeout: time.Second, RetryAfter: time.Second,
		Budget: &CallBudget{MaxCalls: 5, Window: time.Minute}}, &fakeBudgets{err: errors.New("connection refused")})
	_, gerr, err := cg.admit(context.Background(), "")
	if err != nil || gerr == nil || gerr.Code != CodeUnavailable || !gerr.Retryable {
		t.Fatalf("admit = %v %v", gerr, err)
	}
	if got := errJSON(t, gerr); !strings.Contains(got, `"details":{"component":"store"}`) {
		t.Fatalf("error %s", got)
	}
	if s := cg.snapshot(); s.Active != 0 || s.Totals.Admitted != 0 || s.Rules[0].Budget.Scope != "replicas" {
		t.Fatalf("the permit was kept or counted: %+v", s)
	}
}

// End to end through Invoke on a real (in-process) go-sdk server that
// counts what reaches it: the budget counts tools/call attempts only (the
// catalog load is not one), refusals never reach it, and each caller has
// its own budget.
func TestCallAdmission_OnlyAdmittedCallsReachTheDownstream(t *testing.T) {
	var counters serverCounters
	spec := inProcessSpec("t", &counters)
	spec.Admission = &CallAdmission{RetryAfter: time.Second, PerCaller: true, MaxPartitions: 8, Budget: &CallBudget{MaxCalls: 2, Window: time.Hour}}
	env := newTestGateway(t, 5*time.Second, spec)
	invoke := func(actor string) *Error {
		_, gerr := env.g.Invoke(context.Background(), nil, CallRequest{Address: "t.read_items", Source: "call_tool", Actor: actor})
		return gerr
	}
	for i, want := range []Code{"", "", CodeRateLimited, CodeRateLimited} {
		if gerr := invoke("alice"); (gerr == nil) != (want == "") || (gerr != nil && gerr.Code != want) {
			t.Fatalf("alice call %d: %v", i+1, gerr)
		}
	}
	if gerr := invoke("bob"); gerr != nil {
		t.Fatalf("bob: %v", errJSON(t, gerr))
	}
	if n := counters.calls.Load(); n != 3 {
		t.Fatalf("%d calls reached the downstream, want 3", n)
	}
	events := env.activity.Recent(10)
	if events[1].ErrorCode != "rate_limited" || events[1].Actor != "alice" {
		t.Fatalf("refusal event %+v", events[1])
	}
	want := `
# HELP connecta_downstream_admissions_total Downstream tools/call admission decisions by connector and outcome (admitted, queued, rejected, rate_limited, cancelled).
# TYPE connecta_downstream_admissions_total counter
connecta_downstream_admissions_total{connector="t",outcome="admitted"} 3
connecta_downstream_admissions_total{connector="t",outcome="cancelled"} 0
connecta_downstream_admissions_total{connector="t",outcome="queued"} 0
connecta_downstream_admissions_total{connector="t",outcome="rate_limited"} 2
connecta_downstream_admissions_total{connector="t",outcome="rejected"} 0
`
	if err := testutil.GatherAndCompare(env.registry, strings.NewReader(want), "connecta_downstream_admissions_total"); err != nil {
		t.Fatal(err)
	}
}

// Every connector's admission series exist at zero before any call.
func TestCallAdmission_MetricsAtZeroFromStart(t *testing.T) {
	spec := inProcessSpec("t", nil)
	spec.Admission = &CallAdmission{MaxConcurrency: 2, MaxQueueSize: 1, QueueTimeout: time.Second, RetryAfter: time.Second}
	env := newTestGateway(t, 30*time.Second, spec) // no deadline under test: the calls must succeed
	mfs, err := env.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, mf := range mfs {
		seen[mf.GetName()] += len(mf.GetMetric())
	}
	if seen["connecta_downstream_admissions_total"] != len(admissionOutcomes) || seen["connecta_downstream_queue_wait_seconds"] != 1 {
		t.Fatalf("series %v", seen)
	}
	// Each admitted call under a concurrency rule observes its queue wait.
	for range 2 {
		if _, gerr := env.call(t, "t.read_items", "", false); gerr != nil {
			t.Fatal(errJSON(t, gerr))
		}
	}
	if mfs, err = env.registry.Gather(); err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "connecta_downstream_queue_wait_seconds" {
			if n := mf.GetMetric()[0].GetHistogram().GetSampleCount(); n != 2 {
				t.Fatalf("queue wait observations = %d, want 2", n)
			}
			return
		}
	}
	t.Fatal("no connecta_downstream_queue_wait_seconds")
}

// A reload that keeps the rule keeps the budget (a changed title must not
// reset it); one that changes the rule starts a new one.
func TestCallAdmission_ReloadKeepsALiveBudget(t *testing.T) {
	var counters serverCounters
	spec := inProcessSpec("t", &counters)
	spec.Admission = &CallAdmission{RetryAfter: time.Second, Budget: &CallBudget{MaxCalls: 1, Window: time.Hour}}
	env := newTestGateway(t, 5*time.Second, spec)
	if _, gerr := env.call(t, "t.read_items", "", false); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	retitled := spec
	retitled.Title = "Renamed"
	if _, err := env.g.Reload([]ConnectorSpec{retitled}); err != nil {
		t.Fatal(err)
	}
	if _, gerr := env.call(t, "t.read_items", "", false); gerr == nil || gerr.Code != CodeRateLimited {
		t.Fatalf("after a reload keeping the rule: %v", gerr)
	}
	if n := counters.calls.Load(); n != 1 {
		t.Fatalf("%d calls reached the downstream", n)
	}
}

// A tool result with isError is the downstream's answer, never its limit.
func TestCallAdmission_IsErrorResultIsNeverReinterpreted(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url()})
	_, gerr := env.call(t, "h.fails_ratelimit", "", false)
	if gerr == nil || gerr.Code != CodeConnectorCallFailed || gerr.RetryAfterMs != nil {
		t.Fatalf("isError result: %v", gerr)
	}
}

func TestCallAdmission_DownstreamLimitWithoutRetryAfterUsesTheRuleHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule *CallAdmission
		want int64
	}{
		{"rule hint", &CallAdmission{MaxConcurrency: 4, MaxQueueSize: 1, QueueTimeout: time.Second, RetryAfter: 2500 * time.Millisecond}, 2500},
		{"no rule", nil, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMisbehavingHTTP(t)
			env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url(), Admission: tc.rule})
			m.set("call:status=429")
			_, gerr := env.call(t, "h.read_items", "", false)
			if gerr == nil || gerr.Code != CodeRateLimited || gerr.RetryAfterMs == nil || *gerr.RetryAfterMs != tc.want {
				t.Fatalf("429 without Retry-After: %s", errJSON(t, gerr))
			}
		})
	}
}

func TestCallAdmission_RetryAfterClampedToAnHour(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]int64{
		"7":                                     7000,
		"3600":                                  3_600_000,
		"3601":                                  3_600_000,
		"99999999999999999999":                  3_600_000,
		now.Add(2 * time.Hour).Format(http1123): 3_600_000,
		now.Add(1500 * time.Millisecond).Format(http1123): 1000, // HTTP dates have whole seconds
	} {
		if got, ok := parseRetryAfter(in, now); !ok || got != want {
			t.Errorf("parseRetryAfter(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"+7", "-0", "7.5", "1e3", "Tue, 32 Dec 2026 00:00:00 GMT"} {
		if got, ok := parseRetryAfter(in, now); ok {
			t.Errorf("parseRetryAfter(%q) = %d, accepted", in, got)
		}
	}
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

// Over loopback HTTP to a go-sdk server that counts the calls reaching it:
// a call cancelled while queued behind the one permit never reaches it and
// takes no budget entry, so the budget of 2 still admits one more call.
func TestCallAdmission_CancelledQueuedCallConsumesNothingDownstream(t *testing.T) {
	m := newMisbehavingHTTP(t)
	env := newTestGateway(t, 5*time.Second, ConnectorSpec{ID: "h", URL: m.url(),
		Admission: &CallAdmission{MaxConcurrency: 1, MaxQueueSize: 4, QueueTimeout: time.Minute, RetryAfter: time.Second, Budget: &CallBudget{MaxCalls: 2, Window: time.Hour}}})
	if _, err := env.g.Tools(context.Background(), "h"); err != nil { // the catalog load is not a call
		t.Fatal(err)
	}
	holder := env.g.NewScope()
	held := make(chan *Error, 1)
	go func() {
		_, gerr := env.g.Invoke(context.Background(), holder, CallRequest{Address: "h.hang", Source: "execute_code", Timeout: time.Minute})
		held <- gerr
	}()
	c := env.g.lookup("h")
	testkit.Eventually(t, 10*time.Second, func() bool { return m.callPOST.Load() > 0 }, "the holder's call never reached the downstream")
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan *Error, 1)
	go func() {
		_, gerr := env.g.Invoke(ctx, nil, CallRequest{Address: "h.read_items", Source: "call_tool"})
		queued <- gerr
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { return c.gate.snapshot().Queued > 0 }, "the second call never queued")
	cancel()
	if gerr := <-queued; gerr == nil || gerr.Code != CodeCancelled {
		t.Fatalf("cancelled while queued: %v", gerr)
	}
	holder.Close()
	if gerr := <-held; gerr == nil || gerr.Code != CodeCancelled {
		t.Fatalf("holder: %v", gerr)
	}
	if _, gerr := env.call(t, "h.read_items", "", false); gerr != nil {
		t.Fatalf("the budget's second entry: %s", errJSON(t, gerr))
	}
	if _, gerr := env.call(t, "h.read_items", "", false); gerr == nil || gerr.Code != CodeRateLimited {
		t.Fatalf("third call: %v", gerr)
	}
	if n := m.callPOST.Load(); n != 2 {
		t.Fatalf("%d tools/call requests reached the downstream, want 2 (hang, read_items)", n)
	}
	if s := c.gate.snapshot(); s.Totals.Cancelled != 1 || s.Totals.Admitted != 2 || s.Totals.RateLimited != 1 {
		t.Fatalf("snapshot %+v", s)
	}
}
