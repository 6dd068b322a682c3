package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/jcs"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

// Pinning modes (catalog.pin; docs/DECISIONS.md "Catalogs").
const (
	PinOff        = "off"
	PinWarn       = "warn"
	PinQuarantine = "quarantine"
)

// CatalogStore is what persisted catalogs need of the store: the catalogs,
// the approvals and the audit trail.
type CatalogStore interface {
	store.Catalogs
	store.Audit
}

// Audit actions written by catalogs.
const (
	AuditCatalogDrift   = "catalog.drift"
	AuditCatalogApprove = "catalog.approve"
	// SystemActor is the actor of approvals connecta makes itself (the
	// automatic approval of a connector's first catalog).
	SystemActor = "connecta"
)

// fingerprintFields are the parts of a definition a fingerprint covers.
var fingerprintFields = []string{"name", "title", "description", "annotations", "inputSchema", "outputSchema"}

// Fingerprint is the SHA-256 (hex) of the RFC 8785 canonical JSON of a tool
// definition's name, title, description, annotations, inputSchema and
// outputSchema (absent fields stay absent). A definition that does not
// canonicalize (not JSON, a number out of range) hashes its exact bytes
// instead, under a prefix, so it still pins.
func Fingerprint(definition json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(definition, &fields) == nil {
		obj := make(map[string]any, len(fingerprintFields))
		for _, k := range fingerprintFields {
			if v, ok := fields[k]; ok {
				obj[k] = v
			}
		}
		var b bytes.Buffer
		if jcs.Append(&b, obj) == nil {
			sum := sha256.Sum256(b.Bytes())
			return hex.EncodeToString(sum[:])
		}
	}
	sum := sha256.Sum256(append([]byte("raw:"), definition...))
	return hex.EncodeToString(sum[:])
}

// catalogFingerprint covers every tool's fingerprint, in name order: equal
// fingerprints mean an unchanged catalog.
func catalogFingerprint(tools []Tool, fps []string) string {
	idx := make([]int, len(tools))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return tools[idx[a]].Name < tools[idx[b]].Name })
	h := sha256.New()
	for _, i := range idx {
		h.Write([]byte(tools[i].Name))
		h.Write([]byte{0})
		h.Write([]byte(fps[i]))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// maxDriftNames bounds the tool names a drift report keeps per kind (the
// counts stay exact).
const maxDriftNames = 100

// Drift is what changed between a connector's previous catalog and the one
// it serves now (docs/DECISIONS.md "Catalogs"): counts as /health shows them,
// and up to maxDriftNames names of each kind for the console and the audit.
type Drift struct {
	UnclassifiedTools   int       `json:"unclassifiedTools"`
	UnservedTools       int       `json:"unservedTools"`
	AnnotationConflicts int       `json:"annotationConflicts"`
	SchemaChanges       int       `json:"schemaChanges"`
	ObservedAt          time.Time `json:"observedAt"`
	Names               struct {
		Unclassified []string `json:"unclassified,omitempty"`
		Unserved     []string `json:"unserved,omitempty"`
		Conflicts    []string `json:"conflicts,omitempty"`
		Schema       []string `json:"schema,omitempty"`
		Added        []string `json:"added,omitempty"`
		Changed      []string `json:"changed,omitempty"`
	} `json:"-"`
}

// DriftKinds are the kind label values of connecta_catalog_drift_tools.
var DriftKinds = []string{"unclassified", "unserved", "annotation_conflict", "schema_change"}

func (d *Drift) counts() [4]int {
	return [4]int{d.UnclassifiedTools, d.UnservedTools, d.AnnotationConflicts, d.SchemaChanges}
}

func (d *Drift) empty() bool { return d.counts() == [4]int{} }

// driftMeta is the stored form: the report with its names, and the
// downstream's ttlMs of that load (so another replica knows how long the
// stored copy is fresh).
type driftMeta struct {
	Drift *driftStored `json:"drift,omitempty"`
	TTLMs int64        `json:"ttlMs,omitempty"`
	// FPs are the tools' fingerprints in listing order, so a reload need
	// not canonicalize every definition again (the store is trusted with
	// approvals already).
	FPs []string `json:"fps,omitempty"`
}

type driftStored struct {
	Counts     [4]int    `json:"counts"`
	ObservedAt time.Time `json:"observedAt"`
	Names      [6][]string
}

func (d *Drift) stored() *driftStored {
	if d == nil {
		return nil
	}
	n := d.Names
	return &driftStored{Counts: d.counts(), ObservedAt: d.ObservedAt, Names: [6][]string{n.Unclassified, n.Unserved, n.Conflicts, n.Schema, n.Added, n.Changed}}
}

func (s *driftStored) drift() *Drift {
	if s == nil {
		return nil
	}
	d := &Drift{UnclassifiedTools: s.Counts[0], UnservedTools: s.Counts[1], AnnotationConflicts: s.Counts[2], SchemaChanges: s.Counts[3], ObservedAt: s.ObservedAt}
	d.Names.Unclassified, d.Names.Unserved, d.Names.Conflicts, d.Names.Schema, d.Names.Added, d.Names.Changed = s.Names[0], s.Names[1], s.Names[2], s.Names[3], s.Names[4], s.Names[5]
	return d
}

func addName(list *[]string, name string) {
	if len(*list) < maxDriftNames {
		*list = append(*list, name)
	}
}

// computeDrift compares a load with the previous one (prev nil: the first
// observation, where only the state kinds — unclassified, contradictory
// hints — can be non-zero).
func (c *connector) computeDrift(prev, next *catalogEntry, at time.Time) *Drift {
	d := &Drift{ObservedAt: at}
	for i := range next.all {
		t := &next.all[i]
		if !c.readOnly[t.Name] && !c.approval[t.Name] && unclassified(t.Annotations) {
			d.UnclassifiedTools++
			addName(&d.Names.Unclassified, t.Name)
		}
		conflict := contradictory(t.Annotations)
		if prev == nil {
			if conflict {
				d.AnnotationConflicts++
				addName(&d.Names.Conflicts, t.Name)
			}
			continue
		}
		p, ok := prev.lookupAll(t.Name)
		if !ok {
			addName(&d.Names.Added, t.Name)
			continue
		}
		if prev.fps[prev.allByName[t.Name]] != next.fps[i] {
			addName(&d.Names.Changed, t.Name)
		}
		if conflict || annotatedReadOnly(p.Annotations) != annotatedReadOnly(t.Annotations) {
			d.AnnotationConflicts++
			addName(&d.Names.Conflicts, t.Name)
		}
		if !sameJSON(p.InputSchema, t.InputSchema) || !sameJSON(p.OutputSchema, t.OutputSchema) {
			d.SchemaChanges++
			addName(&d.Names.Schema, t.Name)
		}
	}
	if prev != nil {
		for i := range prev.all {
			if _, ok := next.allByName[prev.all[i].Name]; !ok {
				d.UnservedTools++
				addName(&d.Names.Unserved, prev.all[i].Name)
			}
		}
	}
	return d
}

// unclassified: no usable annotations, so the read-only predicate fails
// closed (destructive) by default rather than by the downstream's word.
func unclassified(a *Annotations) bool {
	return a == nil || (a.ReadOnlyHint == nil && a.DestructiveHint == nil)
}

// contradictory: read-only and destructive at once.
func contradictory(a *Annotations) bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint
}

// sameJSON compares two JSON texts by their canonical forms (key order and
// spacing do not count as a change).
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	ca, errA := jcs.Canonical(a)
	cb, errB := jcs.Canonical(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

// driftDetail is the audit record's text: the counts and the changed names.
func driftDetail(d *Drift) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unclassifiedTools=%d unservedTools=%d annotationConflicts=%d schemaChanges=%d",
		d.UnclassifiedTools, d.UnservedTools, d.AnnotationConflicts, d.SchemaChanges)
	for _, part := range []struct {
		label string
		names []string
	}{{"added", d.Names.Added}, {"changed", d.Names.Changed}, {"unserved", d.Names.Unserved}, {"schema", d.Names.Schema}, {"conflicts", d.Names.Conflicts}} {
		if len(part.names) > 0 {
			fmt.Fprintf(&b, "; %s: %s", part.label, strings.Join(clipNames(part.names), ", "))
		}
	}
	return b.String()
}

// clipNames keeps an audit detail short: ten names, each clamped, then a
// count.
func clipNames(names []string) []string {
	out := make([]string, 0, min(len(names), 10)+1)
	for _, n := range names[:min(len(names), 10)] {
		out = append(out, jstext.Clamp(n, jstext.MaxIdentityBytes))
	}
	if len(names) > 10 {
		out = append(out, fmt.Sprintf("… %d more", len(names)-10))
	}
	return out
}

// ToolDiff is one tool whose current definition is not the approved one.
type ToolDiff struct {
	Tool string `json:"tool"`
	// Status: "new" (never approved), "changed" (approved with another
	// fingerprint) or "unserved" (approved, no longer listed; it stays
	// approved and is callable again if it returns unchanged).
	Status string      `json:"status"`
	Fields []FieldDiff `json:"fields,omitempty"`
}

// FieldDiff is one fingerprinted field of a changed tool: its approved and
// current canonical JSON ("" when absent).
type FieldDiff struct {
	Field    string `json:"field"`
	Approved string `json:"approved"`
	Current  string `json:"current"`
}

// CatalogDiff is a connector's stored catalog against its approvals.
type CatalogDiff struct {
	Connector string     `json:"connector"`
	FetchedAt time.Time  `json:"fetchedAt,omitzero"`
	Tools     int        `json:"tools"`    // listed in the stored catalog
	Approved  int        `json:"approved"` // of those, approved as listed
	Pending   []ToolDiff `json:"pending"`  // new and changed: hidden under quarantine
	Unserved  []ToolDiff `json:"unserved,omitempty"`
}

// ErrNoCatalog: the store holds no catalog for the connector yet (it has
// not been loaded since persisted catalogs exist).
var ErrNoCatalog = errors.New("no catalog is stored for this connector yet")

// storedTools decodes a stored catalog's definitions; known are the
// fingerprints stored beside them (used when they match one for one).
func storedTools(connectorID string, raw []byte, known ...string) ([]Tool, []string, error) {
	var defs []json.RawMessage
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, nil, fmt.Errorf("stored catalog of %q is malformed: %w", connectorID, err)
	}
	tools := make([]Tool, 0, len(defs))
	fps := make([]string, 0, len(defs))
	reuse := len(known) == len(defs)
	for i, d := range defs {
		t, ok := toolFromRaw(connectorID, d)
		if !ok {
			reuse = false // indexes no longer line up
			continue
		}
		tools = append(tools, t)
		if reuse {
			fps = append(fps, known[i])
		} else {
			fps = append(fps, Fingerprint(t.Definition))
		}
	}
	return tools, fps, nil
}

// storedForDiff is a connector's stored catalog, decoded, with its
// approvals by tool.
type storedForDiff struct {
	sc     store.StoredCatalog
	tools  []Tool
	fps    []string
	byTool map[string]store.ToolApproval
	list   []store.ToolApproval
}

func readForDiff(ctx context.Context, st CatalogStore, connectorID string) (*storedForDiff, error) {
	key := store.CatalogKey{Connector: connectorID}
	sc, err := st.GetCatalog(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoCatalog
	}
	if err != nil {
		return nil, err
	}
	var meta driftMeta
	if len(sc.Drift) > 0 && json.Unmarshal(sc.Drift, &meta) != nil {
		meta = driftMeta{}
	}
	tools, fps, err := storedTools(connectorID, sc.Tools, meta.FPs...)
	if err != nil {
		return nil, err
	}
	approvals, err := st.ListApprovals(ctx, key)
	if err != nil {
		return nil, err
	}
	d := &storedForDiff{sc: sc, tools: tools, fps: fps, byTool: make(map[string]store.ToolApproval, len(approvals)), list: approvals}
	for _, a := range approvals {
		d.byTool[a.Tool] = a
	}
	return d, nil
}

// diff says, field by field, what of the stored catalog is not approved.
func (d *storedForDiff) diff(connectorID string) CatalogDiff {
	out := CatalogDiff{Connector: connectorID, FetchedAt: d.sc.FetchedAt, Tools: len(d.tools), Pending: []ToolDiff{}}
	listed := make(map[string]bool, len(d.tools))
	for i, t := range d.tools {
		listed[t.Name] = true
		a, ok := d.byTool[t.Name]
		switch {
		case !ok:
			out.Pending = append(out.Pending, ToolDiff{Tool: t.Name, Status: "new", Fields: fieldDiffs(nil, t.Definition)})
		case a.Fingerprint != d.fps[i]:
			out.Pending = append(out.Pending, ToolDiff{Tool: t.Name, Status: "changed", Fields: fieldDiffs(a.Definition, t.Definition)})
		default:
			out.Approved++
		}
	}
	for _, a := range d.list {
		if !listed[a.Tool] {
			out.Unserved = append(out.Unserved, ToolDiff{Tool: a.Tool, Status: "unserved"})
		}
	}
	return out
}

// DiffCatalog reads a connector's stored catalog and its approvals and says,
// field by field, what is not approved. ErrNoCatalog when none is stored.
func DiffCatalog(ctx context.Context, st CatalogStore, connectorID string) (CatalogDiff, error) {
	d, err := readForDiff(ctx, st, connectorID)
	if err != nil {
		return CatalogDiff{Connector: connectorID}, err
	}
	return d.diff(connectorID), nil
}

// fieldDiffs lists the fingerprinted fields whose canonical JSON differs.
func fieldDiffs(approved, current json.RawMessage) []FieldDiff {
	a, c := fieldMap(approved), fieldMap(current)
	var out []FieldDiff
	for _, f := range fingerprintFields {
		if a[f] != c[f] {
			out = append(out, FieldDiff{Field: f, Approved: a[f], Current: c[f]})
		}
	}
	return out
}

func fieldMap(def json.RawMessage) map[string]string {
	out := map[string]string{}
	var fields map[string]json.RawMessage
	if len(def) == 0 || json.Unmarshal(def, &fields) != nil {
		return out
	}
	for _, f := range fingerprintFields {
		v, ok := fields[f]
		if !ok {
			continue
		}
		if cv, err := jcs.Canonical(v); err == nil {
			out[f] = string(cv)
		} else {
			out[f] = string(v)
		}
	}
	return out
}

// ApproveTools approves the named tools of a connector's stored catalog as
// currently listed (no names: every pending tool), one audit record per
// approval, and returns the names it approved (already approved ones are
// left alone). A name not in the stored catalog is an error naming it.
func ApproveTools(ctx context.Context, st CatalogStore, connectorID string, tools []string, actor string) ([]string, error) {
	d, err := readForDiff(ctx, st, connectorID)
	if err != nil {
		return nil, err
	}
	diff, all, fps := d.diff(connectorID), d.tools, d.fps
	index := make(map[string]int, len(all))
	for i, t := range all {
		index[t.Name] = i
	}
	pending := make(map[string]bool, len(diff.Pending))
	for _, p := range diff.Pending {
		pending[p.Tool] = true
	}
	want := tools
	if len(want) == 0 {
		for _, p := range diff.Pending {
			want = append(want, p.Tool)
		}
	}
	var missing []string
	for _, name := range want {
		if _, ok := index[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("connector %q does not list %s (see `connecta catalog diff %s`)", connectorID, strings.Join(quoteAll(missing), ", "), connectorID)
	}
	now := time.Now()
	var as []store.ToolApproval
	var done []string
	for _, name := range want {
		if !pending[name] || slices.Contains(done, name) {
			continue
		}
		i := index[name]
		as = append(as, store.ToolApproval{CatalogKey: store.CatalogKey{Connector: connectorID}, Tool: name,
			Fingerprint: fps[i], Definition: all[i].Definition, ApprovedAt: now, ApprovedBy: actor})
		done = append(done, name)
	}
	if len(as) == 0 {
		return nil, nil
	}
	if err := st.PutApprovals(ctx, as, true); err != nil {
		return nil, err
	}
	for _, a := range as {
		if err := st.AppendAudit(ctx, store.AuditRecord{OccurredAt: now, Actor: actor, Action: AuditCatalogApprove,
			Target: "connector:" + connectorID, Detail: "tool " + jstext.Clamp(a.Tool, jstext.MaxIdentityBytes) + " fingerprint " + a.Fingerprint[:16]}); err != nil {
			return done, fmt.Errorf("approved, but the audit record was not written: %w", err)
		}
	}
	return done, nil
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
