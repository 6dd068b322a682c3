package supervisor

import (
	"context"
	"testing"
	"time"
)

// The watchdog's liveness check: a pool whose every slot is held is alive
// (busy is healthy); a closed pool is not.
func TestAlive_BusyPoolIsAliveClosedPoolIsNot(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 0}, "ok")
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !p.Alive(ctx) {
		t.Fatal("a pool with every slot busy must be alive")
	}
	l.Release()
	p.Close()
	if p.Alive(ctx) {
		t.Fatal("a closed pool reports alive")
	}
}
