package config

import (
	"time"

	"go.yaml.in/yaml/v3"
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
func (d *decoder) callAdmission(fs map[string]entry, path string, c *Connector) {
	c.CallAdmission = DefaultCallAdmission()
	if e, ok := fs["maxConcurrency"]; ok {
		d.fail(e.key, path+".maxConcurrency", "was replaced by callAdmission.maxConcurrency; write callAdmission: {maxConcurrency: %s}", clip(e.val.Value))
	}
	e, ok := fs["callAdmission"]
	if !ok {
		return
	}
	path += ".callAdmission"
	r := CallAdmission{
		MaxQueueSize:  DefaultCallAdmissionMaxQueueSize,
		QueueTimeout:  DefaultCallAdmissionQueueTimeout,
		RetryAfter:    DefaultCallAdmissionRetryAfter,
		MaxPartitions: DefaultCallAdmissionMaxPartitions,
	}
	var afs map[string]entry
	d.section(e.val, path, []numField{
		{"maxConcurrency", 1, 1024, intInto(&r.MaxConcurrency)},
		{"maxQueueSize", 0, maxCallQueue, intInto(&r.MaxQueueSize)},
		{"queueTimeoutMs", 1, maxWaitMs, msInto(&r.QueueTimeout)},
		{"retryAfterMs", 0, maxMs, msInto(&r.RetryAfter)},
		{"maxPartitions", 1, maxCallPartitions, intInto(&r.MaxPartitions)},
	}, []string{"budget", "partition"}, func(fs map[string]entry) { afs = fs })
	if afs == nil {
		return // not a mapping: already reported
	}
	_, hasConcurrency := afs["maxConcurrency"]
	for _, k := range []string{"maxQueueSize", "queueTimeoutMs"} {
		if q, ok := afs[k]; ok && !hasConcurrency {
			d.fail(q.key, path+"."+k, "needs maxConcurrency (a queue forms only behind a concurrency limit)")
		}
	}
	if b, ok := afs["budget"]; ok {
		r.Budget = d.callBudget(b.val, path+".budget")
	}
	if p, ok := afs["partition"]; ok {
		if s, ok := d.str(p.val, path+".partition"); ok {
			switch s {
			case "connector":
			case "caller":
				r.PerCaller = true
			default:
				d.fail(p.val, path+".partition", "%q is not connector or caller", clip(s))
			}
		}
	}
	if m, ok := afs["maxPartitions"]; ok && !r.PerCaller {
		d.fail(m.key, path+".maxPartitions", "applies only with partition: caller")
	}
	if !hasConcurrency {
		if _, hasBudget := afs["budget"]; !hasBudget {
			d.fail(e.val, path, "must bound something: set maxConcurrency, budget or both")
		}
	}
	c.CallAdmission = r
}

func (d *decoder) callBudget(n *yaml.Node, path string) *CallBudget {
	b := &CallBudget{}
	var bfs map[string]entry
	before := len(d.errs)
	d.section(n, path, []numField{
		{"maxCalls", 1, maxCallBudgetCalls, intInto(&b.MaxCalls)},
		{"windowMs", 1, maxCallBudgetWindowMs, msInto(&b.Window)},
	}, nil, func(fs map[string]entry) { bfs = fs })
	if bfs == nil {
		return nil
	}
	for _, k := range []string{"maxCalls", "windowMs"} {
		if _, ok := bfs[k]; !ok {
			d.fail(n, path+"."+k, "is required (budget: {maxCalls, windowMs})")
		}
	}
	if len(d.errs) != before {
		return nil
	}
	return b
}
