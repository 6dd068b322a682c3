package config

import (
	"time"
)

// CallAdmission is a connector's downstream call admission rule
// (docs/DECISIONS.md "Call admission"): what may reach the downstream as
// tools/call attempts. With PerCaller every actor has its own instance of the
// rule (its own concurrency, queue and budget).
type CallAdmission struct {
	MaxConcurrency int           // calls in flight; 0 = no concurrency bound (a budget-only rule)
	MaxQueueSize   int           // waiters behind MaxConcurrency; 0 fails fast
	QueueTimeout   time.Duration // longest wait in that queue
	RetryAfter     time.Duration // the hint of queue and partition refusals (and of a downstream 429 without Retry-After)
	Budget         *CallBudget   // nil: no budget
	PerCaller      bool          // partition: caller
	MaxPartitions  int           // actors tracked at once (PerCaller only)
}

// CallBudget is a rolling window: at most MaxCalls attempts in any Window.
type CallBudget struct {
	MaxCalls int
	Window   time.Duration
}

// Call admission defaults and bounds.
const (
	DefaultCallAdmissionMaxQueueSize  = 32
	DefaultCallAdmissionQueueTimeout  = 5000 * time.Millisecond
	DefaultCallAdmissionRetryAfter    = 1000 * time.Millisecond
	DefaultCallAdmissionMaxPartitions = 1024

	maxCallQueue          = 4096
	maxCallBudgetCalls    = 100_000
	maxCallBudgetWindowMs = 86_400_000 // one day
	maxCallPartitions     = 100_000
)

// DefaultCallAdmission is the rule of a connector without callAdmission:
// DefaultConnectorMaxConcurrency calls in flight and no budget, as before
// callAdmission existed — a call waits for a slot within its own deadline
// (the longest queue and wait the keys allow, which no call outlives), so
// the default refuses nothing that used to wait.
func DefaultCallAdmission() CallAdmission {
	return CallAdmission{
		MaxConcurrency: DefaultConnectorMaxConcurrency,
		MaxQueueSize:   maxCallQueue,
		QueueTimeout:   maxWaitMs * time.Millisecond,
		RetryAfter:     DefaultCallAdmissionRetryAfter,
		MaxPartitions:  DefaultCallAdmissionMaxPartitions,
	}
}

// callAdmission decodes connectors[i].callAdmission into c (which holds the
// default rule) and refuses the retired connector key maxConcurrency.
func (d *decoder) callAdmission(fs *connectorShape, c *Connector) {
	c.CallAdmission = DefaultCallAdmission()
	if e := fs.MaxConcurrency; e.given() {
		d.fail(e.key, e.path, "was replaced by callAdmission.maxConcurrency; write callAdmission: {maxConcurrency: %s}", clip(e.val.Value))
	}
	if !fs.CallAdmission.given() {
		return
	}
	r := CallAdmission{
		MaxQueueSize:  DefaultCallAdmissionMaxQueueSize,
		QueueTimeout:  DefaultCallAdmissionQueueTimeout,
		RetryAfter:    DefaultCallAdmissionRetryAfter,
		MaxPartitions: DefaultCallAdmissionMaxPartitions,
	}
	a, ok := fs.CallAdmission.in(d)
	if !ok {
		return // not a mapping: already reported
	}
	d.integers(
		numField{a.MaxConcurrency, 1, 1024, intInto(&r.MaxConcurrency)},
		numField{a.MaxQueueSize, 0, maxCallQueue, intInto(&r.MaxQueueSize)},
		numField{a.QueueTimeout, 1, maxWaitMs, msInto(&r.QueueTimeout)},
		numField{a.RetryAfter, 0, maxMs, msInto(&r.RetryAfter)},
		numField{a.MaxPartitions, 1, maxCallPartitions, intInto(&r.MaxPartitions)},
	)
	hasConcurrency := a.MaxConcurrency.given()
	for _, q := range []field{a.MaxQueueSize, a.QueueTimeout} {
		if q.given() && !hasConcurrency {
			d.fail(q.key, q.path, "needs maxConcurrency (a queue forms only behind a concurrency limit)")
		}
	}
	if a.Budget.given() {
		r.Budget = d.callBudget(a.Budget)
	}
	if p := a.Partition; p.given() {
		if s, ok := d.str(p.val, p.path); ok {
			switch s {
			case "connector":
			case "caller":
				r.PerCaller = true
			default:
				d.fail(p.val, p.path, "%q is not connector or caller", clip(s))
			}
		}
	}
	if m := a.MaxPartitions; m.given() && !r.PerCaller {
		d.fail(m.key, m.path, "applies only with partition: caller")
	}
	if !hasConcurrency && !a.Budget.given() {
		d.fail(fs.CallAdmission.val, fs.CallAdmission.path, "must bound something: set maxConcurrency, budget or both")
	}
	c.CallAdmission = r
}

func (d *decoder) callBudget(s section[callBudgetShape]) *CallBudget {
	b := &CallBudget{}
	before := len(d.errs)
	fs, ok := s.in(d)
	if !ok {
		return nil
	}
	d.integers(
		numField{fs.MaxCalls, 1, maxCallBudgetCalls, intInto(&b.MaxCalls)},
		numField{fs.Window, 1, maxCallBudgetWindowMs, msInto(&b.Window)},
	)
	for _, k := range []field{fs.MaxCalls, fs.Window} {
		if !k.given() {
			d.fail(s.val, k.path, "is required (budget: {maxCalls, windowMs})")
		}
	}
	if len(d.errs) != before {
		return nil
	}
	return b
}
