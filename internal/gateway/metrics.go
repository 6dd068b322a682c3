package gateway

import (
	"errors"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/observe"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on the registerer the caller passes; no globals.
// Connector labels come from configuration only (an unknown connector
// never becomes a label).
type metrics struct {
	calls     *prometheus.CounterVec
	callSecs  *prometheus.HistogramVec
	refreshes *prometheus.CounterVec
	refreshS  *prometheus.HistogramVec
	queueWait *prometheus.HistogramVec
	// denied: connecta_access_denied_total{connector}, calls a caller's
	// view hid (access rules).
	deniedC *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, observer *observe.Observer, validator *validate.Validator) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	// Recovered panics (a bug in observation or validation: the call went on
	// without it) are counted here and logged where they happen.
	var extra []prometheus.Collector
	for _, c := range []struct {
		name   string
		panics func() uint64
	}{{"observe", observer.Panics}, {"validate", validator.Panics}} {
		extra = append(extra, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "connecta_recovered_panics_total",
			Help:        "Panics recovered in output observation or argument validation (the call went on without it).",
			ConstLabels: prometheus.Labels{"component": c.name},
		}, func() float64 { return float64(c.panics()) }))
	}
	// Checks that passed through unvalidated, by reason (each reason at 0
	// from start); the gateway logs the first per connector and tool.
	for _, reason := range validate.Reasons() {
		extra = append(extra, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "connecta_validation_passthrough_total",
			Help:        "Argument checks that passed through unvalidated (the downstream judged the arguments), by reason.",
			ConstLabels: prometheus.Labels{"reason": string(reason)},
		}, func() float64 { return float64(validator.Passthroughs(reason)) }))
	}
	m := &metrics{
		calls: outcomesByConnector("connecta_downstream_calls_total",
			"Downstream tools/call attempts by connector and outcome (success or the E2 code)."),
		callSecs: latencyByConnector("connecta_downstream_call_duration_seconds",
			"Connector time of downstream tools/call attempts."),
		refreshes: outcomesByConnector("connecta_catalog_refreshes_total",
			"Catalog (tools/list) refreshes by connector and outcome."),
		refreshS: latencyByConnector("connecta_catalog_refresh_duration_seconds",
			"Duration of catalog (tools/list) refreshes."),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "connecta_downstream_queue_wait_seconds",
			Help:    "Time admitted downstream tools/call attempts waited in their connector's call admission queue.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10},
		}, []string{"connector"}),
		deniedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "connecta_access_denied_total",
			Help: "Calls refused because the caller's access rules hide the connector or tool (answered as unknown), by connector.",
		}, []string{"connector"}),
	}
	for _, c := range append([]prometheus.Collector{m.calls, m.callSecs, m.refreshes, m.refreshS, m.queueWait, m.deniedC}, extra...) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("gateway: metrics already registered on this registry")
			}
			return nil, err
		}
	}
	return m, nil
}

// outcomesByConnector counts downstream requests by connector and outcome.
func outcomesByConnector(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"connector", "outcome"})
}

// latencyByConnector is a histogram of downstream request time by
// connector: 5 ms doubling to about 20 s, one scale for calls and refreshes
// so their dashboards compare.
func latencyByConnector(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.005, 2, 13)}, []string{"connector"})
}

// zero makes every series an alert rule reads exist at 0 from start, for
// each configured connector: call outcomes (success and the codes a
// dispatched call can end with) and refresh outcomes.
func (m *metrics) zero(connectors []string) {
	if m == nil {
		return
	}
	outcomes := []Code{CodeAuthRequired, CodeRateLimited, CodeUnavailable, CodeTimeout, CodeCancelled,
		CodeConnectorCallFailed, CodeNotFound, CodeInputRequiredUnsupported, CodeInvalidArgs}
	for _, id := range connectors {
		m.calls.WithLabelValues(id, "success")
		for _, o := range outcomes {
			m.calls.WithLabelValues(id, string(o))
		}
		m.refreshes.WithLabelValues(id, "success")
		m.refreshes.WithLabelValues(id, "failure")
		m.queueWait.WithLabelValues(id)
		m.deniedC.WithLabelValues(id)
	}
}

func (m *metrics) denied(connector string) {
	if m == nil {
		return
	}
	m.deniedC.WithLabelValues(connector).Inc()
}

func (m *metrics) call(connector, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(connector, outcome).Inc()
	m.callSecs.WithLabelValues(connector).Observe(d.Seconds())
}

func (m *metrics) catalogRefresh(connector, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.refreshes.WithLabelValues(connector, outcome).Inc()
	m.refreshS.WithLabelValues(connector).Observe(d.Seconds())
}
