package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	admissionq "github.com/connecta-dev/connecta/internal/admission"
)

// admission is L7: Slots concurrent leases, then a strict FIFO queue of at
// most MaxQueue waiters, each waiting at most QueueTimeout. The queue is
// internal/admission's; this maps its refusals to *ExecError and metrics.
type admission struct {
	q               *admissionq.Queue
	slots, maxQueue int
	timeout         time.Duration
	m               *metrics
	log             *slog.Logger
}

// Totals count admission decisions since start.
type Totals struct {
	Admitted, Queued, Rejected, Cancelled, Closed int64
}

// Snapshot is the admission state (for /health and tests).
type Snapshot struct {
	Slots, MaxQueue int
	QueueTimeout    time.Duration
	Active, Queued  int
	Closed          bool
	Totals          Totals
	QueueWaitCount  int64
	QueueWaitTotal  time.Duration
	QueueWaitMax    time.Duration
}

func newAdmission(slots, maxQueue int, timeout time.Duration, m *metrics, log *slog.Logger) *admission {
	m.slots.Set(float64(slots))
	q := admissionq.New(admissionq.Options{Active: slots, MaxQueue: maxQueue, QueueTimeout: timeout,
		OnChange: func(active, queued int) {
			m.inUse.Set(float64(active))
			m.queued.Set(float64(queued))
		}})
	return &admission{q: q, slots: slots, maxQueue: maxQueue, timeout: timeout, m: m, log: log}
}

func (a *admission) overloaded(ctx context.Context, msg string) error {
	a.log.WarnContext(ctx, "execution rejected: executor overloaded", "reason", msg, "slots", a.slots, "maxQueue", a.maxQueue)
	return &ExecError{Code: CodeOverloaded, Message: msg, Retryable: true, RetryAfterMs: a.timeout.Milliseconds()}
}

// acquire takes a slot or fails with *ExecError.
func (a *admission) acquire(ctx context.Context) error {
	waited, err := a.q.Acquire(ctx)
	var c *admissionq.Cancelled
	switch {
	case err == nil:
		a.m.admissions.Inc()
		a.m.queueWait.Observe(waited.Seconds())
		return nil
	case errors.Is(err, admissionq.ErrClosed):
		a.m.rejections.WithLabelValues("closed").Inc()
		return &ExecError{Code: CodeClosed, Message: msgClosed}
	case errors.Is(err, admissionq.ErrQueueFull):
		a.m.rejections.WithLabelValues("queue_full").Inc()
		return a.overloaded(ctx, msgQueueFull)
	case errors.Is(err, admissionq.ErrTimeout):
		a.m.rejections.WithLabelValues("timeout").Inc()
		return a.overloaded(ctx, msgAdmissionTimeout(a.timeout))
	case errors.As(err, &c):
		a.m.rejections.WithLabelValues("cancelled").Inc()
		if c.Queued {
			return &ExecError{Code: CodeCancelled, Message: msgCancelledQueued}
		}
		return &ExecError{Code: CodeCancelled, Message: msgCancelledBefore}
	}
	return err
}

// release returns a slot, handing it straight to the head waiter.
func (a *admission) release() { a.q.Release() }

// close refuses new acquisitions and fails every waiter with executor_closed.
func (a *admission) close() { a.q.Close() }

func (a *admission) snapshot() Snapshot {
	s := a.q.Snapshot()
	t := s.Totals
	return Snapshot{
		Slots: s.MaxActive, MaxQueue: s.MaxQueue, QueueTimeout: s.QueueTimeout,
		Active: s.Active, Queued: s.Queued, Closed: s.Closed,
		Totals:         Totals{Admitted: t.Admitted, Queued: t.Queued, Rejected: t.Rejected, Cancelled: t.Cancelled, Closed: t.Closed},
		QueueWaitCount: s.WaitCount, QueueWaitTotal: s.WaitTotal, QueueWaitMax: s.WaitMax,
	}
}
