package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Operator logs: kills (with reason), budget failures, cancellations and
// overload rejections each leave one payload-free line.
func TestOperatorLog_KillsBudgetsCancellationsOverload(t *testing.T) {
	p := newFakePool(t, Options{Slots: 1, MaxQueue: 0, QueueTimeout: 50 * time.Millisecond}, "ok")

	if res, err := run(t, p.Pool, "log:secret-log-text;hang", newTestHost(), Limits{Wall: 100 * time.Millisecond}); err != nil || res.Err == nil || res.Err.Kind != ErrDeadline {
		t.Fatalf("deadline: %v %+v", err, res)
	}
	if res, err := run(t, p.Pool, "oom", newTestHost(), Limits{}); err != nil || res.Err == nil || res.Err.Kind != ErrOutOfMemory {
		t.Fatalf("oom: %v %+v", err, res)
	}

	ctx, cancel := context.WithCancel(context.Background())
	l, _ := p.Acquire(ctx)
	_, err := p.Acquire(context.Background()) // the one slot is held, no queue
	execErr(t, err, CodeOverloaded)
	errc := make(chan error, 1)
	go func() { _, err := l.Run(ctx, Job{Code: "hang"}, newTestHost()); errc <- err }()
	waitFor(t, func() bool { return counter(t, p.m.busy) == 1 })
	cancel()
	execErr(t, <-errc, CodeCancelled)

	logs := p.logs.String()
	for _, want := range []string{
		`level=WARN msg="sandbox child killed" component=supervisor reason=deadline`,
		`level=INFO msg="sandbox child killed" component=supervisor reason=cancel`,
		`level=WARN msg="execution over budget" component=supervisor budget=out_of_memory`,
		`level=INFO msg="execution cancelled" component=supervisor`,
		`level=WARN msg="execution rejected: executor overloaded" component=supervisor reason="Executor queue is full."`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line %s in:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "secret-log-text") || strings.Contains(logs, "hang") {
		t.Errorf("a program's text or logs reached the operator log:\n%s", logs)
	}
}
