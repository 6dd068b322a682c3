package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/server"
	"github.com/connecta-dev/connecta/test/pgtest"
)

// downstreamCalls reads /health admission.downstreamCalls.down.
func downstreamCalls(t *testing.T, h *harness) map[string]any {
	t.Helper()
	_, body := h.get(t, "/health")
	var report struct {
		Admission struct {
			DownstreamCalls map[string]map[string]any `json:"downstreamCalls"`
		} `json:"admission"`
	}
	if err := json.Unmarshal(body, &report); err != nil {
		t.Fatal(err)
	}
	d, ok := report.Admission.DownstreamCalls["down"]
	if !ok {
		t.Fatalf("/health has no admission.downstreamCalls.down: %s", body)
	}
	return d
}

// A budget of 3 per 2 s lets exactly 3 of a program's 10 calls reach the
// downstream; the 4th is rate_limited, retryable, with a retryAfterMs no
// larger than the window (its exact value: the gateway's synctest test).
func TestCallAdmission_BudgetLetsThreeOfAProgramsTenCallsReachTheDownstream(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withCode, callAdmission: "{budget: {maxCalls: 3, windowMs: 2000}}"})
	cs := h.connect(t, "")
	if d := downstreamCalls(t, h); d["totals"].(map[string]any)["admitted"] != float64(0) {
		t.Fatalf("before any call: %v", d)
	}
	code := `async () => { const out = []; for (let i = 0; i < 10; i++) { try { await connecta.call("down.echo", {i}); out.push("ok") } ` +
		`catch (e) { out.push({code: e.code, retryable: e.retryable, retryAfterMs: e.details && e.details.retryAfterMs}) } } return out }`
	b, _ := json.Marshal(map[string]string{"code": code})
	res := call(t, cs, "execute_code", string(b))
	var out struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(textOf(t, res)), &out); err != nil || len(out.Result) != 10 {
		t.Fatalf("program: %s", textOf(t, res))
	}
	if _, n := h.down.args(); n != 3 {
		t.Fatalf("%d calls reached the downstream, want 3", n)
	}
	for i, r := range out.Result[:3] {
		if string(r) != `"ok"` {
			t.Fatalf("call %d: %s", i+1, r)
		}
	}
	var fourth struct {
		Code         string
		Retryable    bool
		RetryAfterMs float64
	}
	if err := json.Unmarshal(out.Result[3], &fourth); err != nil || fourth.Code != "rate_limited" || !fourth.Retryable ||
		fourth.RetryAfterMs <= 0 || fourth.RetryAfterMs > 2000 {
		t.Fatalf("4th call: %s", out.Result[3])
	}
	d := downstreamCalls(t, h)
	totals := d["totals"].(map[string]any)
	if totals["admitted"] != float64(3) || totals["rateLimited"] != float64(7) || d["partitions"] != float64(1) {
		t.Fatalf("/health downstreamCalls.down = %v", d)
	}
	rule := d["rules"].([]any)[0].(map[string]any)
	if rule["partition"] != "connector" || rule["budget"].(map[string]any)["scope"] != "process" || rule["maxConcurrency"] != nil {
		t.Fatalf("rule %v", rule)
	}
	_, metrics := h.get(t, "/metrics")
	for _, line := range []string{
		`connecta_downstream_admissions_total{connector="down",outcome="admitted"} 3`,
		`connecta_downstream_admissions_total{connector="down",outcome="rate_limited"} 7`,
		`connecta_downstream_admissions_total{connector="down",outcome="queued"} 0`,
	} {
		if !strings.Contains(string(metrics), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// With partition: caller, each actor has its own budget.
func TestCallAdmission_CallersHaveIndependentBudgets(t *testing.T) {
	h := newHarness(t, harnessOptions{
		tokens:        []server.Token{{Name: "alice", Value: "alice-token-0123456789abcdef0123"}, {Name: "bob", Value: "bob-token-0123456789abcdef012345"}},
		callAdmission: "{budget: {maxCalls: 1, windowMs: 60000}, partition: caller}",
	})
	alice, bob := h.connect(t, "alice-token-0123456789abcdef0123"), h.connect(t, "bob-token-0123456789abcdef012345")
	if res := call(t, alice, "call_tool", `{"address":"down.echo"}`); res.IsError {
		t.Fatalf("alice: %s", textOf(t, res))
	}
	e := failureOf(t, call(t, alice, "call_tool", `{"address":"down.echo"}`))
	if e["code"] != "rate_limited" || e["retryable"] != true || e["retryAfterMs"].(float64) <= 0 || e["retryAfterMs"].(float64) > 60000 {
		t.Fatalf("alice's second call: %v", e)
	}
	if res := call(t, bob, "call_tool", `{"address":"down.echo"}`); res.IsError {
		t.Fatalf("bob, on his own budget: %s", textOf(t, res))
	}
	// call_destructive_tool takes its permit on the same path: bob's budget
	// is spent.
	if e := failureOf(t, call(t, bob, "call_destructive_tool", `{"address":"down.delete_item"}`)); e["code"] != "rate_limited" {
		t.Fatalf("bob's destructive call: %v", e)
	}
	if _, n := h.down.args(); n != 2 {
		t.Fatalf("%d calls reached the downstream, want 2", n)
	}
	if d := downstreamCalls(t, h); d["partitions"] != float64(2) {
		t.Fatalf("partitions: %v", d)
	}
}

// Two replicas on one PostgreSQL share one budget: 3 calls in total reach
// the downstream, whichever replica takes them; with the store down a
// shared budget admits nothing (unavailable, component store).
func TestCallAdmission_TwoReplicasOnOnePostgresShareOneBudget(t *testing.T) {
	pg := pgtest.Start(t)
	u := pg.Database(t)
	rule := "{maxConcurrency: 2, budget: {maxCalls: 3, windowMs: 60000}}"
	a := newHarness(t, harnessOptions{storeURL: u, callAdmission: rule})
	b := newHarness(t, harnessOptions{storeURL: u, callAdmission: rule, down: a.down})
	ca, cb := a.connect(t, ""), b.connect(t, "")
	refused := 0
	for i := range 6 {
		cs := ca
		if i%2 == 1 {
			cs = cb
		}
		res := call(t, cs, "call_tool", `{"address":"down.echo"}`)
		if res.IsError {
			if e := failureOf(t, res); e["code"] != "rate_limited" || e["retryAfterMs"].(float64) <= 0 || e["retryAfterMs"].(float64) > 60000 {
				t.Fatalf("call %d: %v", i+1, e)
			}
			refused++
		}
	}
	if _, n := a.down.args(); n != 3 || refused != 3 {
		t.Fatalf("%d calls reached the downstream (%d refused), want 3 in total", n, refused)
	}
	if s := downstreamCalls(t, b)["rules"].([]any)[0].(map[string]any)["budget"].(map[string]any)["scope"]; s != "replicas" {
		t.Fatalf("scope %v", s)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	e := failureOf(t, call(t, ca, "call_tool", `{"address":"down.echo"}`))
	details, _ := e["details"].(map[string]any)
	if e["code"] != "unavailable" || e["retryable"] != true || details["component"] != "store" {
		t.Fatalf("store down: %v", e)
	}
	if _, n := a.down.args(); n != 3 {
		t.Fatalf("a call reached the downstream unbudgeted (%d)", n)
	}
}

// BenchmarkCallAdmission_Budget is what a budget adds to one call_tool call
// over HTTP to a loopback downstream: none (the default 4 in flight), a
// budget kept in the process, and one shared through PostgreSQL (one store
// round trip per call). Read the ratios of one run.
func BenchmarkCallAdmission_Budget(b *testing.B) {
	// A window of 1 ms admits every call and keeps the ring short (50).
	big := "{maxConcurrency: 4, budget: {maxCalls: 50, windowMs: 1}}"
	cases := []struct {
		name, rule string
		pg         bool
	}{{"default", "", false}, {"budget_in_process", big, false}, {"budget_postgres", big, true}}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			o := harnessOptions{callAdmission: bc.rule}
			if bc.pg {
				c, err := pgtest.Launch()
				if err != nil {
					b.Skip(err)
				}
				defer c.Close()
				if o.storeURL, err = c.CreateDatabase(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			h := newHarness(b, o)
			cs := h.connect(b, "")
			call(b, cs, "call_tool", `{"address":"down.echo"}`)
			for b.Loop() {
				if res := call(b, cs, "call_tool", `{"address":"down.echo"}`); res.IsError {
					b.Fatal(textOf(b, res))
				}
			}
		})
	}
}
