package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connector states as /health reports them.
const (
	StateOK      = "ok"
	StateFailed  = "failed"
	StateUnknown = "unknown"
)

// ConnectorState is one connector's /health entry, from its last real
// contact (a catalog load or a call); health never contacts a downstream
// itself.
type ConnectorState struct {
	State         string     `json:"state"`
	LastContactAt *time.Time `json:"lastContactAt,omitempty"`
	LastOutcome   string     `json:"lastOutcome,omitempty"` // "success" or "failure"
	ToolCount     *int       `json:"toolCount,omitempty"`
	LastErrorCode string     `json:"lastErrorCode,omitempty"` // when the last outcome was a failure
	// ProtocolVersion is the MCP version negotiated at the connector's last
	// connect (absent before any).
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

// failsConnector lists the codes that mean the downstream itself is out of
// reach (docs/DECISIONS.md: unavailable, timeout, catalog_lookup_failed,
// auth_required); any other outcome is an answer from a live downstream.
func failsConnector(code Code) bool {
	switch code {
	case CodeUnavailable, CodeTimeout, CodeCatalogLookupFailed, CodeAuthRequired:
		return true
	}
	return false
}

func (c *connector) state() ConnectorState {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health
	s := ConnectorState{State: StateUnknown, ProtocolVersion: c.proto}
	if e := c.cat.entry; e != nil {
		n := len(e.tools)
		s.ToolCount = &n
	}
	switch {
	case h.lastSuccess.IsZero() && h.lastFailure.IsZero():
		return s
	case h.lastFailure.After(h.lastSuccess):
		at := h.lastFailure.UTC()
		s.LastContactAt, s.LastOutcome, s.LastErrorCode = &at, "failure", string(h.lastCode)
		s.State = StateOK
		if failsConnector(h.lastCode) {
			s.State = StateFailed
		}
	default:
		at := h.lastSuccess.UTC()
		s.LastContactAt, s.LastOutcome, s.State = &at, "success", StateOK
	}
	return s
}

// ConnectorStates returns every configured connector's state by id.
func (g *Gateway) ConnectorStates() map[string]ConnectorState {
	reg := g.current()
	out := make(map[string]ConnectorState, len(reg.order))
	for _, id := range reg.order {
		out[id] = reg.byID[id].state()
	}
	return out
}

// upCollector serves connecta_connector_up{connector}: 0 while a connector's
// state is failed, 1 otherwise (ok, or unknown before any contact — not
// known to be down), read at scrape time so it never drifts from /health.
type upCollector struct {
	g    *Gateway
	desc *prometheus.Desc
}

func newUpCollector(g *Gateway) *upCollector {
	return &upCollector{g: g, desc: prometheus.NewDesc("connecta_connector_up",
		"1 unless the connector's last contact failed (unavailable, timeout, catalog_lookup_failed, auth_required).",
		[]string{"connector"}, nil)}
}

func (u *upCollector) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

func (u *upCollector) Collect(ch chan<- prometheus.Metric) {
	for id, s := range u.g.ConnectorStates() {
		v := 1.0
		if s.State == StateFailed {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(u.desc, prometheus.GaugeValue, v, id)
	}
}
