package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/connecta-dev/connecta/internal/store"
)

// Persisted catalogs and the approved view (docs/DECISIONS.md "Catalogs").
const (
	// DefaultCatalogStale is how long after its load a catalog may still be
	// served when refreshes fail (catalog.staleMs).
	DefaultCatalogStale = time.Hour
	// ApprovalRecheck is how often a quarantined connector re-reads its
	// approvals, so an approval made elsewhere (the CLI, another replica)
	// takes effect without waiting for the catalog's TTL.
	ApprovalRecheck = 5 * time.Second
	// staleRetry spaces refresh attempts while a stale catalog is served,
	// so an outage does not cost every request a failed tools/list.
	staleRetry = 5 * time.Second
	// maxDownstreamTTL bounds a downstream's ttlMs before it is compared.
	maxDownstreamTTL = 24 * time.Hour
)

// key is the connector's shared catalog, or a per-caller child's own
// (connector, actor).
func (c *connector) key() store.CatalogKey {
	k := store.CatalogKey{Connector: c.spec.ID}
	if !c.who.IsZero() {
		k.Actor = c.who.Key()
	}
	return k
}

// loadStored reads the store's copy. ok is false when the store could not
// be read (nil entry and ok true: none is stored).
// A stored copy whose fingerprint is known's is not decoded again: known
// itself is returned.
func (c *connector) loadStored(ctx context.Context, known *catalogEntry) (*catalogEntry, bool) {
	st := c.g.opts.Store
	if st == nil {
		return nil, true
	}
	sc, err := st.GetCatalog(ctx, c.key())
	if errors.Is(err, store.ErrNotFound) {
		return nil, true
	}
	if err != nil {
		c.logger.WarnContext(ctx, "stored catalog unreadable", "reason", err.Error())
		return nil, false
	}
	if known != nil && known.fingerprint == sc.Fingerprint && known.fetchedAt.Equal(sc.FetchedAt) {
		return known, true
	}
	var meta driftMeta
	if len(sc.Drift) > 0 && json.Unmarshal(sc.Drift, &meta) != nil {
		meta = driftMeta{}
	}
	tools, fps, err := storedTools(c.spec.ID, sc.Tools, meta.FPs...)
	if err != nil {
		c.logger.WarnContext(ctx, "stored catalog unreadable", "reason", err.Error())
		return nil, false
	}
	e := newEntry(tools, fps)
	e.fetchedAt = sc.FetchedAt
	e.drift = meta.Drift.drift()
	e.downTTL = time.Duration(meta.TTLMs) * time.Millisecond
	e.ttl = c.g.ttl
	if e.downTTL > 0 && e.downTTL < e.ttl {
		e.ttl = e.downTTL
	}
	if c.pin == PinOff {
		e.drift = nil
	}
	return e, true
}

// persist writes a successful load to the store and reports drift: compared
// with prev (the store's copy, or memory's when the store could not be
// read), an unchanged catalog keeps the previous report; a changed one, or
// a first one that is not clean, gets a new report and one audit record.
// The write is a compare-and-swap on the previous fingerprint, so of two
// replicas that load the same change only the one that records it audits.
func (c *connector) persist(ctx context.Context, e, prev *catalogEntry, storeRead bool) {
	audit := false
	switch {
	case c.pin == PinOff:
	case prev != nil && prev.fingerprint == e.fingerprint:
		e.drift = prev.drift
	default:
		e.drift = c.computeDrift(prev, e, e.fetchedAt)
		audit = prev != nil || !e.drift.empty()
	}
	st := c.g.opts.Store
	if st == nil {
		return
	}
	prevFP := ""
	if prev != nil && storeRead {
		prevFP = prev.fingerprint
	}
	meta, _ := json.Marshal(driftMeta{Drift: e.drift.stored(), TTLMs: e.downTTL.Milliseconds(), FPs: e.fps})
	defs := make([]json.RawMessage, len(e.all))
	for i := range e.all {
		defs[i] = e.all[i].Definition
	}
	tools, _ := json.Marshal(defs)
	won := false
	if storeRead {
		var err error
		won, err = st.PutCatalog(ctx, store.StoredCatalog{CatalogKey: c.key(), Tools: tools, Fingerprint: e.fingerprint, FetchedAt: e.fetchedAt, Drift: meta}, prevFP)
		if err != nil {
			c.logger.WarnContext(ctx, "catalog not persisted", "reason", err.Error())
		}
	}
	if !audit || (storeRead && !won) {
		return // another replica recorded this change (or nothing changed)
	}
	if err := st.AppendAudit(ctx, store.AuditRecord{OccurredAt: e.fetchedAt, Actor: SystemActor, Action: AuditCatalogDrift,
		Target: "connector:" + c.spec.ID, Detail: driftDetail(e.drift)}); err != nil {
		c.logger.WarnContext(ctx, "catalog drift not audited", "reason", err.Error())
	}
	c.logger.InfoContext(ctx, "catalog drift", "detail", driftDetail(e.drift))
}

// view sets e's served view. Outside quarantine it is the whole listing.
// Under quarantine a tool is served only while its fingerprint equals the
// approved one; with no approvals at all the first catalog is approved (and
// audited) unless approveFirst is off; approvals that cannot be read hide
// every tool (fail closed: counted as quarantined, never shown unapproved).
func (c *connector) view(ctx context.Context, e *catalogEntry) {
	e.tools, e.byName, e.quarantined = e.all, e.allByName, 0
	if c.pin != PinQuarantine {
		return
	}
	e.approvalsAt = c.g.now()
	approved, err := c.approvals(ctx, e)
	if err != nil {
		c.logger.WarnContext(ctx, "catalog approvals unreadable: every tool of the quarantined connector is hidden", "reason", err.Error())
		e.tools, e.byName, e.quarantined = nil, map[string]int{}, len(e.all)
		return
	}
	e.tools, e.byName = make([]Tool, 0, len(e.all)), make(map[string]int, len(e.all))
	for i := range e.all {
		if approved[e.all[i].Name] != e.fps[i] {
			e.quarantined++
			continue
		}
		e.byName[e.all[i].Name] = len(e.tools)
		e.tools = append(e.tools, e.all[i])
	}
	if e.quarantined > 0 {
		c.logger.WarnContext(ctx, "catalog tools quarantined until approved", "tools", e.quarantined)
	}
}

// approvals reads the approved fingerprints by tool, approving the first
// catalog when none exist.
func (c *connector) approvals(ctx context.Context, e *catalogEntry) (map[string]string, error) {
	st := c.g.opts.Store
	list, err := st.ListApprovals(ctx, c.key())
	if err != nil {
		return nil, err
	}
	if len(list) == 0 && !c.g.opts.NoFirstApproval && len(e.all) > 0 {
		now := c.g.now()
		for i := range e.all {
			list = append(list, store.ToolApproval{CatalogKey: c.key(), Tool: e.all[i].Name, Fingerprint: e.fps[i],
				Definition: e.all[i].Definition, ApprovedAt: now, ApprovedBy: SystemActor})
		}
		// Insert-if-absent: a replica that approved first keeps its rows,
		// and only the one whose rows were written audits.
		if err := st.PutApprovals(ctx, list, false); err != nil {
			return nil, err
		}
		if list, err = st.ListApprovals(ctx, c.key()); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(list, func(a store.ToolApproval) bool { return a.ApprovedAt.Equal(now.Truncate(time.Millisecond)) }) {
			if err := st.AppendAudit(ctx, store.AuditRecord{OccurredAt: now, Actor: SystemActor, Action: AuditCatalogApprove,
				Target: "connector:" + c.spec.ID, Detail: fmt.Sprintf("first catalog approved automatically (catalog.approveFirst): %d tools", len(e.all))}); err != nil {
				c.logger.WarnContext(ctx, "first approval not audited", "reason", err.Error())
			}
		}
	}
	out := make(map[string]string, len(list))
	for _, a := range list {
		out[a.Tool] = a.Fingerprint
	}
	return out, nil
}
