package supervisor

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on the Registerer passed in Options (never the
// global one); with none they still count, unexported.
type metrics struct {
	slots, inUse, queued prometheus.Gauge
	queueWait            prometheus.Histogram
	admissions           prometheus.Counter
	rejections           *prometheus.CounterVec // reason: queue_full|timeout|cancelled|closed
	executions           *prometheus.CounterVec // outcome: ok|error|deadline|crash|protocol|cancelled|closed
	duration             prometheus.Histogram
	spawnDuration        prometheus.Histogram
	spares               prometheus.Gauge
	sparesMinimum        prometheus.Gauge
	sparesTarget         prometheus.Gauge
	busy                 prometheus.Gauge
	kills                *prometheus.CounterVec // reason: deadline|cpu_budget|cancel|shutdown|protocol|linger|startup
	crashes              *prometheus.CounterVec // phase: startup|run
	guestCPU             prometheus.Histogram
	guestHeap            prometheus.Histogram
	snapshotFallbacks    prometheus.Counter
	childInfo            *prometheus.GaugeVec // kind: embedded|self; 1 for the pool's
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	m := &metrics{
		slots:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_executor_slots", Help: "Concurrent executions allowed (L7)."}),
		inUse:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_executor_slots_in_use", Help: "Executions holding a slot."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_executor_queued", Help: "Executions waiting for a slot."}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "connecta_executor_queue_wait_seconds",
			Help: "Time from acquire to admission.", Buckets: latency}),
		admissions: prometheus.NewCounter(prometheus.CounterOpts{Name: "connecta_executor_admissions_total", Help: "Executions admitted."}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connecta_executor_rejections_total",
			Help: "Admission failures by reason."}, []string{"reason"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connecta_executor_executions_total",
			Help: "Finished executions by outcome."}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "connecta_executor_execution_duration_seconds",
			Help: "Execution wall time, run sent to outcome.", Buckets: latency}),
		spawnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "connecta_sandbox_spawn_duration_seconds",
			Help: "Child spawn to ready.", Buckets: latency}),
		spares: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_sandbox_spares", Help: "Children ready and idle."}),
		sparesMinimum: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_sandbox_spares_minimum",
			Help: "Warm children the pool keeps at least (executor.spares)."}),
		sparesTarget: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_sandbox_spares_target",
			Help: "Warm children the pool keeps now: the minimum, grown toward demand up to executor.maxSpares."}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connecta_sandbox_busy", Help: "Children running a program."}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connecta_sandbox_kills_total",
			Help: "Children killed by reason."}, []string{"reason"}),
		crashes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connecta_sandbox_crashes_total",
			Help: "Children that died on their own, before ready (startup) or mid-run (run)."}, []string{"phase"}),
		guestCPU: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "connecta_guest_cpu_seconds",
			Help: "Guest CPU time per execution.", Buckets: []float64{.0001, .0005, .001, .005, .01, .025, .05, .1, .25, .5, 1}}),
		guestHeap: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "connecta_guest_peak_heap_bytes",
			Help: "Peak JS heap per execution.", Buckets: prometheus.ExponentialBuckets(64<<10, 4, 9)}),
		snapshotFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "connecta_sandbox_snapshot_fallbacks_total",
			Help: "Children that initialized afresh because the persisted snapshot did not verify."}),
		childInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "connecta_sandbox_child_info",
			Help: "1 for what sandbox children execute: embedded (the slim child) or self (this binary re-executed)."}, []string{"kind"}),
	}
	m.setChild("")
	for _, r := range []string{"queue_full", "timeout", "cancelled", "closed"} {
		m.rejections.WithLabelValues(r)
	}
	for _, o := range []string{outcomeOK, outcomeError, outcomeDeadline, outcomeCrash, outcomeProtocol, outcomeCancelled, outcomeClosed} {
		m.executions.WithLabelValues(o)
	}
	for _, r := range []string{killDeadline, killCPUBudget, killCancel, killShutdown, killProtocol, killLinger, killStartup} {
		m.kills.WithLabelValues(r)
	}
	m.crashes.WithLabelValues("startup")
	m.crashes.WithLabelValues("run")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.slots, m.inUse, m.queued, m.queueWait, m.admissions, m.rejections,
		m.executions, m.duration, m.spawnDuration, m.spares, m.sparesMinimum, m.sparesTarget, m.busy, m.kills, m.crashes, m.guestCPU, m.guestHeap, m.snapshotFallbacks, m.childInfo} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("supervisor: registering metrics: %w", err)
		}
	}
	return m, nil
}

// setChild marks kind as the pool's child (both kinds exist from start).
func (m *metrics) setChild(kind string) {
	for _, k := range []string{ChildEmbedded, ChildSelf} {
		v := 0.0
		if k == kind {
			v = 1
		}
		m.childInfo.WithLabelValues(k).Set(v)
	}
}

// Execution outcomes and kill reasons (metric label values).
const (
	outcomeOK        = "ok"
	outcomeError     = "error" // the program failed on its own
	outcomeDeadline  = "deadline"
	outcomeCrash     = "crash"
	outcomeProtocol  = "protocol"
	outcomeCancelled = "cancelled"
	outcomeClosed    = "closed"

	killDeadline  = "deadline"
	killCPUBudget = "cpu_budget" // over the guest CPU budget + cpuGrace (cpuWatch)
	killCancel    = "cancel"
	killShutdown  = "shutdown"
	killProtocol  = "protocol"
	killLinger    = "linger"  // did not exit after done
	killStartup   = "startup" // not ready in time, or broke the protocol before ready
)
