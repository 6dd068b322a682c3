package gateway

import (
	"context"
	"errors"
	"fmt"
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
	State         string       `json:"state"`
	LastContactAt *time.Time   `json:"lastContactAt,omitempty"`
	LastOutcome   string       `json:"lastOutcome,omitempty"` // "success" or "failure"
	ToolCount     *int         `json:"toolCount,omitempty"`
	LastErrorCode string       `json:"lastErrorCode,omitempty"` // when the last outcome was a failure
	Catalog       CatalogState `json:"catalog"`
	// ProtocolVersion is the MCP version negotiated at the connector's last
	// connect (absent before any).
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

// Catalog states (connectorStates.<id>.catalog.state).
const (
	CatalogFresh = "fresh" // loaded within its TTL
	CatalogStale = "stale" // a refresh failed; the last catalog, younger than staleMs, is served
	CatalogNone  = "none"  // nothing to serve
)

// CatalogState is what /health says of a connector's catalog.
type CatalogState struct {
	State string `json:"state"`
	AgeMs *int64 `json:"ageMs,omitempty"`
}

// catalogState is computed at read time: an entry past staleMs is none even
// before a refresh has dropped it. Called with c.mu held.
func (c *connector) catalogStateLocked(now time.Time) (CatalogState, *catalogEntry) {
	e := c.cat.entry
	if e == nil {
		return CatalogState{State: CatalogNone}, nil
	}
	age := now.Sub(e.fetchedAt)
	if age >= c.g.stale {
		return CatalogState{State: CatalogNone}, nil
	}
	ms := max(age.Milliseconds(), 0)
	st := CatalogState{State: CatalogFresh, AgeMs: &ms}
	if e.stale || age >= e.ttl {
		st.State = CatalogStale
	}
	return st, e
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
	var e *catalogEntry
	s.Catalog, e = c.catalogStateLocked(c.g.now())
	if e != nil {
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

// CatalogDrift is /health's catalogDrift: each connector whose pin is not
// off and whose catalog drift has been observed (from its last load or the
// store's copy).
func (g *Gateway) CatalogDrift() map[string]Drift {
	reg := g.current()
	out := map[string]Drift{}
	for _, id := range reg.order {
		c := reg.byID[id]
		c.mu.Lock()
		if e := c.cat.entry; e != nil && e.drift != nil && c.pin != PinOff {
			out[id] = *e.drift
		}
		c.mu.Unlock()
	}
	return out
}

// catalogCollector serves, read at scrape time from the served entries:
// connecta_catalog_age_seconds{connector} (only while a catalog is served),
// connecta_catalog_drift_tools{connector, kind} and
// connecta_catalog_quarantined_tools{connector} (every configured connector,
// 0 from start, so an alert on it has a series to read).
type catalogCollector struct {
	g                   *Gateway
	age, drift, quarant *prometheus.Desc
}

func newCatalogCollector(g *Gateway) *catalogCollector {
	return &catalogCollector{g: g,
		age: prometheus.NewDesc("connecta_catalog_age_seconds",
			"Age of the catalog a connector serves (absent while none is served).", []string{"connector"}, nil),
		drift: prometheus.NewDesc("connecta_catalog_drift_tools",
			"Tools in the last catalog drift report, by kind (unclassified, unserved, annotation_conflict, schema_change).", []string{"connector", "kind"}, nil),
		quarant: prometheus.NewDesc("connecta_catalog_quarantined_tools",
			"Listed tools hidden until an operator approves them (catalog.pin: quarantine).", []string{"connector"}, nil),
	}
}

func (m *catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.age
	ch <- m.drift
	ch <- m.quarant
}

func (m *catalogCollector) Collect(ch chan<- prometheus.Metric) {
	reg := m.g.current()
	now := m.g.now()
	for _, id := range reg.order {
		c := reg.byID[id]
		c.mu.Lock()
		st, e := c.catalogStateLocked(now)
		var counts [4]int
		quarantined := 0
		if e != nil {
			quarantined = e.quarantined
			if e.drift != nil && c.pin != PinOff {
				counts = e.drift.counts()
			}
		}
		c.mu.Unlock()
		if st.AgeMs != nil {
			ch <- prometheus.MustNewConstMetric(m.age, prometheus.GaugeValue, float64(*st.AgeMs)/1000, id)
		}
		for i, kind := range DriftKinds {
			ch <- prometheus.MustNewConstMetric(m.drift, prometheus.GaugeValue, float64(counts[i]), id, kind)
		}
		ch <- prometheus.MustNewConstMetric(m.quarant, prometheus.GaugeValue, float64(quarantined), id)
	}
}

// DiffCatalog is DiffCatalog on the gateway's store for a configured
// connector.
func (g *Gateway) DiffCatalog(ctx context.Context, connectorID string) (CatalogDiff, error) {
	if g.lookup(connectorID) == nil {
		return CatalogDiff{}, fmt.Errorf("unknown connector %q", connectorID)
	}
	if g.opts.Store == nil {
		return CatalogDiff{}, errors.New("catalogs are not persisted (no store)")
	}
	return DiffCatalog(ctx, g.opts.Store, connectorID)
}

// ApproveTools approves tools of a configured connector (ApproveTools) and
// has this process re-read its approvals before it serves the catalog again.
func (g *Gateway) ApproveTools(ctx context.Context, connectorID string, tools []string, actor string) ([]string, error) {
	c := g.lookup(connectorID)
	if c == nil {
		return nil, fmt.Errorf("unknown connector %q", connectorID)
	}
	if g.opts.Store == nil {
		return nil, errors.New("catalogs are not persisted (no store)")
	}
	done, err := ApproveTools(ctx, g.opts.Store, connectorID, tools, actor)
	c.mu.Lock()
	c.cat.recheck = true
	c.mu.Unlock()
	return done, err
}
