package config

import (
	"testing"
	"time"
)

func TestCallAdmission_DefaultIsFourInFlightAndNoBudget(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte("connectors: [{id: a, command: [srv]}]\n"), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Connectors[0].CallAdmission
	// As before callAdmission: 4 in flight, a call waits within its deadline.
	if got.MaxConcurrency != 4 || got.Budget != nil || got.PerCaller || got.MaxQueueSize != 4096 || got.QueueTimeout != 10*time.Minute || got.RetryAfter != time.Second {
		t.Fatalf("default rule = %+v", got)
	}
}

func TestCallAdmission_BudgetPerCallerWithoutConcurrency(t *testing.T) {
	src := `connectors:
  - id: a
    command: [srv]
    callAdmission:
      budget: {maxCalls: 60, windowMs: 60000}
      partition: caller
      maxPartitions: 10
      retryAfterMs: 250
`
	cfg, err := Parse("c.yaml", []byte(src), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Connectors[0].CallAdmission
	if got.MaxConcurrency != 0 || got.Budget == nil || *got.Budget != (CallBudget{MaxCalls: 60, Window: time.Minute}) ||
		!got.PerCaller || got.MaxPartitions != 10 || got.RetryAfter != 250*time.Millisecond {
		t.Fatalf("rule = %+v budget %+v", got, got.Budget)
	}
}
