package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Catalog configures connectors' catalogs: how long a listing is fresh, how
// long a stale one may still be served when its downstream is out of reach,
// and tool pinning (docs/DECISIONS.md "Catalogs").
type Catalog struct {
	TTL   time.Duration // catalog.ttlMs: a listing is fresh this long
	Stale time.Duration // catalog.staleMs: served after a failed refresh until this old
	// Pin is catalog.pin, the default of every connector's catalog.pin.
	Pin string
	// ApproveFirst: the first catalog a connector ever serves under
	// quarantine is approved automatically.
	ApproveFirst bool
}

// Pinning modes of catalog.pin.
const (
	PinOff        = "off"        // reports nothing
	PinWarn       = "warn"       // reports and audits drift, hides nothing
	PinQuarantine = "quarantine" // hides new or changed tools until approved
)

// PinModes lists catalog.pin's values.
var PinModes = []string{PinOff, PinWarn, PinQuarantine}

// Catalog defaults.
const (
	DefaultCatalogTTL   = 300000 * time.Millisecond
	DefaultCatalogStale = 3600000 * time.Millisecond
	DefaultCatalogPin   = PinWarn
)

func defaultCatalog() Catalog {
	return Catalog{TTL: DefaultCatalogTTL, Stale: DefaultCatalogStale, Pin: DefaultCatalogPin, ApproveFirst: true}
}

// CatalogPin is a connector's effective pinning mode: its own catalog.pin,
// else the top-level one.
func (c *Config) CatalogPin(cc *Connector) string {
	if cc != nil && cc.CatalogPin != "" {
		return cc.CatalogPin
	}
	return c.Catalog.Pin
}

// Quarantined reports whether any connector runs under pin: quarantine.
func (c *Config) Quarantined() bool {
	for i := range c.Connectors {
		if c.CatalogPin(&c.Connectors[i]) == PinQuarantine {
			return true
		}
	}
	return false
}

// catalog decodes the top-level catalog section (n is its node).
func (d *decoder) catalog(fs *catalogShape, n *yaml.Node, c *Config) {
	x := &c.Catalog
	d.integers(
		numField{fs.TTL, 0, maxTTLMs, msInto(&x.TTL)},
		numField{fs.Stale, 0, maxTTLMs, msInto(&x.Stale)},
	)
	if e := fs.Pin; e.given() {
		if p, ok := d.pin(e.val, e.path); ok {
			x.Pin = p
		}
	}
	if e := fs.ApproveFirst; e.given() {
		if v, ok := d.boolean(e.val, e.path); ok {
			x.ApproveFirst = v
		}
	}
	if x.Stale < x.TTL {
		if fs.Stale.given() {
			n = fs.Stale.val
		}
		d.fail(n, fs.Stale.path, "%d is below %s (%d): a catalog goes stale only after it stops being fresh", x.Stale.Milliseconds(), fs.TTL.path, x.TTL.Milliseconds())
	}
}

// pin decodes a catalog.pin mode (the top-level one or a connector's).
func (d *decoder) pin(n *yaml.Node, field string) (string, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	if !slices.Contains(PinModes, s) {
		d.fail(n, field, "%q is not one of %s", clip(s), strings.Join(PinModes, ", "))
		return "", false
	}
	return s, true
}

// checkQuarantineStore refuses quarantine on memory: — a restart would
// forget every approval and approve the next catalog as a first one.
func (d *decoder) checkQuarantineStore(c *Config, catalogNode *yaml.Node, top *catalogShape) {
	if c.Store.URL.Reveal() != "memory:" {
		return
	}
	const why = "quarantine needs a durable store (store.url sqlite:PATH or postgres://…): on memory: a restart would forget every approval"
	if c.Catalog.Pin == PinQuarantine && catalogNode != nil {
		d.fail(catalogNode, top.Pin.path, "%s", why)
	}
	for i := range c.Connectors {
		if c.Connectors[i].CatalogPin == PinQuarantine {
			d.fail(d.conns[i].pin.val, d.conns[i].pin.path, "%s", why)
		}
	}
}

// checkPerCallerQuarantine refuses quarantine on a per-caller connector:
// its catalogs are each caller's own, so their approvals would be per
// caller too, and `connecta catalog approve` approves a connector's one
// catalog — a changed tool would stay hidden from everyone.
func (d *decoder) checkPerCallerQuarantine(c *Config, catalogNode *yaml.Node, top *catalogShape) {
	const why = "quarantine cannot apply to a connector with oauth.grants or credential.per: caller (its catalogs are each caller's own, approvals are the connector's): use pin: warn or off for it"
	for i := range c.Connectors {
		cc := &c.Connectors[i]
		switch {
		case !cc.PerCaller():
		case cc.CatalogPin == PinQuarantine:
			d.fail(d.conns[i].pin.val, d.conns[i].pin.path, "%s", why)
		case cc.CatalogPin == "" && c.Catalog.Pin == PinQuarantine && catalogNode != nil:
			d.fail(catalogNode, top.Pin.path, "%s (connector %s: set %s)", why, cc.ID, d.conns[i].pin.path)
		}
	}
}
