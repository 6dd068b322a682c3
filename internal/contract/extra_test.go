package contract

import (
	"context"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
)

func TestP4_NoCrossRunLeakage(t *testing.T) {
	e := testEnv(t)
	cs := e.client(t, epDefault)
	if r := exec(t, cs, `async () => { globalThis.leak = 41; Object.prototype.polluted = 1; return typeof leak }`, false); textOf(r) != `{"result":"number"}` {
		t.Fatal(textOf(r))
	}
	if r := exec(t, cs, `async () => [typeof leak, typeof ({}).polluted]`, false); textOf(r) != `{"result":["undefined","undefined"]}` {
		t.Fatal(textOf(r))
	}
}

// S6: a program's call and a top-level call reach the same invocation
// service: same refusal, same activity record apart from the source.
func TestS6_SameInvocationPathAsTopLevel(t *testing.T) {
	e := testEnv(t)
	cs := e.client(t, epDefault)
	before := e.snapshot()
	r := exec(t, cs, `async () => { try { await connecta.call("reader.write") } catch (err) { return err.code } }`, false)
	if textOf(r) != `{"result":"destructive_tool_requires_approval"}` {
		t.Fatal(textOf(r))
	}
	scope := e.gw.NewScope()
	defer scope.Close()
	_, ge := e.gw.Invoke(context.Background(), scope, gateway.CallRequest{Address: "reader.write", Front: gateway.FrontDoorTopLevel, Source: "call_tool"})
	if ge == nil || ge.Code != gateway.CodeDestructiveNeedsApproval {
		t.Fatalf("%+v", ge)
	}
	c := &check{env: e, before: before}
	ev := c.events()
	if len(ev) != 2 {
		t.Fatalf("%d events", len(ev))
	}
	sources := map[string]bool{}
	for _, x := range ev {
		sources[x.Source] = true
		if x.ErrorCode != string(gateway.CodeDestructiveNeedsApproval) || x.Friction != "destructive_reroute" || x.Address != "reader.write" {
			t.Fatalf("%+v", x)
		}
	}
	if !sources["execute_code"] || !sources["call_tool"] {
		t.Fatalf("%v", sources)
	}
	if e.fixture.count("write") != before.hits["write"] {
		t.Fatal("refused call reached the downstream")
	}
}
