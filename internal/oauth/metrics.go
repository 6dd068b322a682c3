package oauth

import (
	"github.com/prometheus/client_golang/prometheus"
)

// refreshOutcomes are the pinned outcome labels; every configured OAuth
// connector has all three at zero from the start.
var refreshOutcomes = []string{"ok", "failed", "invalid_grant"}

type metrics struct {
	refreshes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "connecta_oauth_refreshes_total",
		Help: "Downstream OAuth access-token refreshes by connector and outcome (ok, failed, invalid_grant).",
	}, []string{"connector", "outcome"})}
	if err := reg.Register(m.refreshes); err != nil {
		return nil, err
	}
	return m, nil
}

// zero makes a connector's series exist at 0.
func (m *metrics) zero(connector string) {
	if m == nil {
		return
	}
	for _, o := range refreshOutcomes {
		m.refreshes.WithLabelValues(connector, o)
	}
}

func (m *metrics) refreshed(connector, outcome string) {
	if m != nil {
		m.refreshes.WithLabelValues(connector, outcome).Inc()
	}
}
