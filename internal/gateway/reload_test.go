package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// A reload installs the new connector set at once for new work; a scope
// opened before it keeps the set it started with, and a dropped connector
// closes (its process stops) only when that scope ends. An unchanged
// connector is kept as it is: session, catalog and health.
func TestReload_NewWorkSeesTheNewSetInFlightWorkKeepsItsOwn(t *testing.T) {
	env := newTestGateway(t, 10*time.Second, stdioSpec("a"), inProcessSpec("keep", nil))
	if _, gerr := env.call(t, "a.read_items", "", false); gerr != nil {
		t.Fatal(errJSON(t, gerr))
	}
	kept := env.g.lookup("keep")
	oldA := env.g.lookup("a")
	inFlight := env.g.NewScope()

	res, err := env.g.Reload([]ConnectorSpec{inProcessSpec("keep", nil), inProcessSpec("b", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"b"}) || !slices.Equal(res.Removed, []string{"a"}) || len(res.Changed) != 0 {
		t.Fatalf("reload result %+v", res)
	}
	var ids []string
	for _, c := range env.g.Connectors() {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"keep", "b"}) {
		t.Fatalf("connectors after reload %v", ids)
	}
	if env.g.lookup("keep") != kept {
		t.Fatal("an unchanged connector was rebuilt")
	}
	if _, gerr := env.call(t, "b.read_items", "", false); gerr != nil {
		t.Fatalf("new connector: %s", errJSON(t, gerr))
	}
	if _, gerr := env.call(t, "a.read_items", "", false); gerr == nil || gerr.Code != CodeUnknownAddress {
		t.Fatalf("removed connector for new work: %v", gerr)
	}
	// The scope opened before the reload still reaches a.
	if _, gerr := env.g.Invoke(context.Background(), inFlight, CallRequest{Address: "a.read_items", Front: FrontDoorProgram, Source: "execute_code"}); gerr != nil {
		t.Fatalf("in-flight scope after reload: %s", errJSON(t, gerr))
	}
	oldA.mu.Lock()
	closed := oldA.closed
	oldA.mu.Unlock()
	if closed {
		t.Fatal("a dropped connector closed while a scope still used it")
	}
	inFlight.Close()
	testkit.Eventually(t, 5*time.Second, func() bool {
		oldA.mu.Lock()
		closed, proc := oldA.closed, oldA.proc
		oldA.mu.Unlock()
		return closed && proc != nil && proc.ExitText() != ""
	}, "the dropped connector's process did not stop after its last scope")

	// An invalid set changes nothing.
	if _, err := env.g.Reload([]ConnectorSpec{inProcessSpec("x", nil), inProcessSpec("x", nil)}); err == nil {
		t.Fatal("duplicate ids accepted")
	}
	if len(env.g.Connectors()) != 2 {
		t.Fatal("a refused reload changed the set")
	}
}
