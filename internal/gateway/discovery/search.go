package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/lexical"
	"github.com/connecta-dev/connecta/internal/gateway/schema"
)

// defaultInputSchema stands in for a tool that declares no input schema.
var defaultInputSchema = json.RawMessage(`{"type":"object"}`)

// row is one page entry before it is shaped for a front door.
type row struct {
	connector *gateway.ConnectorInfo
	fields    gateway.Object
}

// Search runs one search (S1, S1a, S2, S3) and returns the page as ordered
// JSON: the flat page for gateway.FrontDoorProgram, the grouped page for
// gateway.FrontDoorTopLevel. Bound violations are *gateway.Error
// invalid_args before any catalog loads; a page over 256,000 bytes is
// result_too_large (a program's page measured as its serialized value, the
// top level's as its complete tool result).
func (s *Service) Search(ctx context.Context, front gateway.FrontDoor, p SearchParams) (json.RawMessage, *gateway.Error) {
	if e := p.validate(); e != nil {
		return nil, e
	}
	raw := ""
	if p.Query != nil {
		raw = *p.Query
	}
	safety := p.Safety
	if safety == "" {
		safety = SafetyAll
	}
	limit := DefaultLimit
	if p.Limit != nil {
		limit = *p.Limit
	}
	offset := 0
	if p.Offset != nil {
		offset = *p.Offset
	}
	withKeys := p.IncludeSchemas != "" && (p.IncludeSchemaKeys == nil || *p.IncludeSchemaKeys)

	// Scope: only the named catalog loads; unscoped fans out in registry
	// order. A connector the caller's view hides is not there at all.
	view := gateway.ViewFrom(ctx)
	all := view.VisibleConnectors(s.catalog.Connectors())
	var scoped *gateway.ConnectorInfo
	var connectors []*gateway.ConnectorInfo
	if p.Connector != "" {
		for i := range all {
			if all[i].ID == p.Connector {
				scoped = &all[i]
				connectors = []*gateway.ConnectorInfo{scoped}
				break
			}
		}
	} else {
		connectors = make([]*gateway.ConnectorInfo, len(all))
		for i := range all {
			connectors[i] = &all[i]
		}
	}
	ids := make([]string, len(connectors))
	for i, c := range connectors {
		ids[i] = c.ID
	}
	loaded := s.loadCatalogs(ctx, ids, routeName(front, false))
	if ctx.Err() != nil {
		return nil, cancelledError()
	}
	s.hideTools(view, ids, loaded)

	// Safety filter, then one index per searchable catalog.
	filtered := make([][]entry, len(loaded))
	cats := make([]*lexical.Catalog, len(loaded))
	unavailable := 0
	for i, l := range loaded {
		if l.err != nil {
			unavailable++
			cats[i] = lexical.FailedCatalog()
			continue
		}
		ix := s.index(ids[i], view.ToolFilterKey(ids[i]), safety, l.tools)
		filtered[i], cats[i] = ix.entries, ix.cat
	}

	q := lexical.ParseQuery(raw)
	ranked := lexical.Search(q, cats)
	matches := ranked.Matches
	total := len(matches)
	start := min(offset, total)
	end := min(start+limit, total)
	page := matches[start:end]

	rows := make([]row, len(page))
	refs := make([]lexical.Ref, len(page))
	for i, m := range page {
		e := filtered[m.Catalog][m.Doc]
		rows[i] = s.searchRow(connectors[m.Catalog], e.tool, e.readOnly, p, withKeys)
		refs[i] = m.Ref
	}

	var nextOffset *int
	if end < total {
		n := end
		nextOffset = &n
	}
	tail := gateway.Object{
		{Key: "total", Value: total},
		{Key: "offset", Value: offset},
		{Key: "limit", Value: limit},
		{Key: "hasMore", Value: nextOffset != nil},
	}
	if nextOffset != nil {
		tail = append(tail, gateway.Field{Key: "nextOffset", Value: *nextOffset})
	}
	if ranked.Partial && total > 0 {
		tail = append(tail, gateway.Field{Key: "matchMode", Value: "partial"})
	}
	if qa := s.queryAnalysis(q, ranked, refs, p, safety, scoped, loaded, connectors, unavailable, total); qa != nil {
		tail = append(tail, gateway.Field{Key: "queryAnalysis", Value: qa})
	}

	var out gateway.Object
	if front == gateway.FrontDoorProgram {
		tools := make([]gateway.Object, len(rows))
		for i, r := range rows {
			f := r.fields
			if t := connectorTitle(r.connector); t != "" {
				f = append(f, gateway.Field{Key: "connectorTitle", Value: t})
			}
			f = appendGuide(f, r.connector)
			tools[i] = f
		}
		out = append(gateway.Object{{Key: "tools", Value: tools}}, tail...)
	} else {
		out = append(gateway.Object{{Key: "connectors", Value: groupRows(rows)}}, tail...)
	}
	body, err := gateway.Object(out).MarshalJSON()
	if err != nil {
		return nil, unserializable("search", err)
	}
	if size := len(body); size > MaxResultBytes {
		return nil, resultTooLarge(size, searchTooLargeHint)
	}
	return body, nil
}

// entry is one searchable tool and its read-only class.
type entry struct {
	tool     *gateway.Tool
	readOnly bool
}

// catalogIndex is one catalog filtered by a safety class and indexed.
type catalogIndex struct {
	pos     []int    // entries[k] is the listing's tool pos[k]
	names   []string // snapshot of the listing it was built from
	descs   []string
	ro      []bool
	entries []entry
	cat     *lexical.Catalog
}

// indexKey: a listing's index depends on the connector, the view's tool
// filter there ("" = every tool) and the safety class.
type indexKey struct{ connector, filter, safety string }

// maxIndexes bounds the index cache; it is cleared when full.
const maxIndexes = 64

// index returns the safety-filtered lexical index of one listing, reusing
// the one built for the same listing (same names, descriptions and
// read-only classes) by an earlier search. The catalog hands out a fresh
// copy of its listing on every load, so the cache is keyed by connector and
// safety class and verified by content; a reused index is re-pointed at the
// current copy, whose schemas and annotations the rows show.
func (s *Service) index(connector, filter, safety string, tools []gateway.Tool) *catalogIndex {
	key := indexKey{connector, filter, safety}
	if len(tools) > 0 {
		s.mu.Lock()
		ix := s.indexes[key]
		s.mu.Unlock()
		if ix != nil && ix.sameListing(tools, s.catalog.ReadOnly) {
			return ix.over(tools)
		}
	}
	ix := &catalogIndex{names: make([]string, len(tools)), descs: make([]string, len(tools)), ro: make([]bool, len(tools))}
	docs := make([]lexical.Document, 0, len(tools))
	for j := range tools {
		t := &tools[j]
		ix.names[j], ix.descs[j] = t.Name, t.Description
		ro := s.catalog.ReadOnly(t)
		ix.ro[j] = ro
		if (safety == SafetyReadOnly && !ro) || (safety == SafetyApprovalRequired && ro) {
			continue
		}
		ix.pos = append(ix.pos, j)
		ix.entries = append(ix.entries, entry{tool: t, readOnly: ro})
		docs = append(docs, lexical.Document{Name: t.Name, Description: t.Description})
	}
	ix.cat = lexical.NewCatalog(docs)
	if len(tools) > 0 {
		s.mu.Lock()
		if len(s.indexes) >= maxIndexes {
			clear(s.indexes)
		}
		s.indexes[key] = ix
		s.mu.Unlock()
	}
	return ix
}

// over is ix for another copy of the same listing: the lexical index is
// shared, the entries point into tools. ix itself is never modified (it is
// shared between concurrent searches).
func (ix *catalogIndex) over(tools []gateway.Tool) *catalogIndex {
	out := *ix
	out.entries = make([]entry, len(ix.pos))
	for k, j := range ix.pos {
		out.entries[k] = entry{tool: &tools[j], readOnly: ix.ro[j]}
	}
	return &out
}

// sameListing guards the cache against a different listing.
// The read-only class is re-read so the safety filter is never stale.
func (ix *catalogIndex) sameListing(tools []gateway.Tool, readOnly func(*gateway.Tool) bool) bool {
	if len(ix.names) != len(tools) {
		return false
	}
	for i := range tools {
		if ix.names[i] != tools[i].Name || ix.descs[i] != tools[i].Description || ix.ro[i] != readOnly(&tools[i]) {
			return false
		}
	}
	return true
}

// groupRows groups page rows by connector in page order (top level).
func groupRows(rows []row) []gateway.Object {
	var groups []gateway.Object
	var tools [][]gateway.Object
	index := map[string]int{}
	for _, r := range rows {
		i, ok := index[r.connector.ID]
		if !ok {
			i = len(groups)
			index[r.connector.ID] = i
			g := gateway.Object{{Key: "id", Value: r.connector.ID}}
			if t := connectorTitle(r.connector); t != "" {
				g = append(g, gateway.Field{Key: "title", Value: t})
			}
			g = appendGuide(g, r.connector)
			groups = append(groups, g)
			tools = append(tools, nil)
		}
		tools[i] = append(tools[i], r.fields)
	}
	for i := range groups {
		groups[i] = append(groups[i], gateway.Field{Key: "tools", Value: tools[i]})
	}
	if groups == nil {
		groups = []gateway.Object{}
	}
	return groups
}

func appendGuide(f gateway.Object, c *gateway.ConnectorInfo) gateway.Object {
	if !hasGuide(c) {
		return f
	}
	f = append(f, gateway.Field{Key: "guide", Value: skillName(c.ID)})
	if sum := GuideSummary(c); sum != "" {
		f = append(f, gateway.Field{Key: "guideSummary", Value: sum})
	}
	return f
}

// outputSchema is the declared output schema, else the S9 observation.
func (s *Service) outputSchema(t *gateway.Tool) (json.RawMessage, bool) {
	if len(t.OutputSchema) > 0 && !isNull(t.OutputSchema) {
		return t.OutputSchema, false
	}
	if obs := s.catalog.ObservedOutputSchema(t); len(obs) > 0 && !isNull(obs) {
		return obs, true
	}
	return nil, false
}

// rendered is one schema as a row carries it.
type rendered struct {
	value     any // compact text, or the exact JSON
	truncated bool
	doc       *schema.Doc
}

func renderSchema(raw json.RawMessage, format string, describe bool) rendered {
	doc := schema.Parse(raw)
	if format == FormatJSON {
		return rendered{value: exactJSON(raw, doc), doc: doc}
	}
	shape := doc.Search()
	if describe {
		shape = doc.Describe()
	}
	return rendered{value: shape.Text, truncated: shape.Truncated, doc: doc}
}

// exactJSON is the schema as the downstream sent it, compacted; bytes that
// are not JSON stand in as {"type":"object"} rather than corrupting the page.
func exactJSON(raw json.RawMessage, doc *schema.Doc) json.RawMessage {
	if !doc.Valid() {
		return defaultInputSchema
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return defaultInputSchema
	}
	return b.Bytes()
}

func inputSchemaOf(t *gateway.Tool) json.RawMessage {
	if len(t.InputSchema) == 0 || isNull(t.InputSchema) {
		return defaultInputSchema
	}
	return t.InputSchema
}

// annotationsOf returns the tool's annotations verbatim from its listed
// definition when present, else as parsed; nil when it declared none.
func annotationsOf(t *gateway.Tool) any {
	if len(t.Definition) > 0 {
		var def struct {
			Annotations json.RawMessage `json:"annotations"`
		}
		if json.Unmarshal(t.Definition, &def) == nil && len(def.Annotations) > 0 {
			if isNull(def.Annotations) {
				return nil
			}
			var b bytes.Buffer
			if json.Compact(&b, def.Annotations) == nil {
				return json.RawMessage(b.Bytes())
			}
		}
	}
	if t.Annotations == nil {
		return nil
	}
	return t.Annotations
}

// guideReasons are the machine-readable reasons a guided connector's guide
// matters for this tool (none without a guide).
func guideReasons(c *gateway.ConnectorInfo, readOnly, truncated bool) []string {
	if !hasGuide(c) {
		return nil
	}
	var reasons []string
	if !readOnly {
		reasons = append(reasons, "approval_required")
	}
	if truncated {
		reasons = append(reasons, "schema_truncated")
	}
	return reasons
}

// searchRow builds a row's fields in the contract's order.
func (s *Service) searchRow(c *gateway.ConnectorInfo, t *gateway.Tool, readOnly bool, p SearchParams, withKeys bool) row {
	f := gateway.Object{
		{Key: "name", Value: t.Name},
		{Key: "address", Value: t.Address()},
	}
	if d := summarizeDescription(t.Description, p.FullDescriptions, SearchDescriptionLen); d != "" {
		f = append(f, gateway.Field{Key: "description", Value: d})
	}
	var in, out rendered
	var outRaw json.RawMessage
	var observed bool
	if p.IncludeSchemas != "" {
		in = renderSchema(inputSchemaOf(t), p.IncludeSchemas, false)
		outRaw, observed = s.outputSchema(t)
		f = append(f, gateway.Field{Key: "inputSchema", Value: in.value})
		if in.truncated {
			f = append(f, gateway.Field{Key: "inputSchemaTruncated", Value: true})
		}
		if outRaw != nil {
			out = renderSchema(outRaw, p.IncludeSchemas, false)
			f = append(f, gateway.Field{Key: "outputSchema", Value: out.value})
			if observed {
				f = append(f, gateway.Field{Key: "outputSchemaSource", Value: "observed"})
			}
			if out.truncated {
				f = append(f, gateway.Field{Key: "outputSchemaTruncated", Value: true})
			}
		}
		if withKeys {
			if !in.truncated {
				if k, ok := in.doc.Keys(); ok {
					f = append(f, gateway.Field{Key: "inputKeys", Value: k.Properties},
						gateway.Field{Key: "requiredInputKeys", Value: k.Required})
				}
			}
			if outRaw != nil && !out.truncated {
				if k, ok := out.doc.Keys(); ok && len(k.Properties) > 0 {
					f = append(f, gateway.Field{Key: "outputKeys", Value: k.Properties})
				}
			}
		}
	}
	if a := annotationsOf(t); a != nil {
		f = append(f, gateway.Field{Key: "annotations", Value: a})
	}
	if reasons := guideReasons(c, readOnly, in.truncated || out.truncated); len(reasons) > 0 {
		f = append(f, gateway.Field{Key: "guideRequired", Value: true},
			gateway.Field{Key: "guideRequiredReasons", Value: reasons})
	}
	return row{connector: c, fields: f}
}

// queryAnalysis is the bounded no-match analysis, or nil when the search
// needs none.
func (s *Service) queryAnalysis(q lexical.Query, ranked *lexical.Result, page []lexical.Ref, p SearchParams,
	safety string, scoped *gateway.ConnectorInfo, loaded []catalogResult, connectors []*gateway.ConnectorInfo,
	unavailable, total int,
) gateway.Object {
	unknownConnector := p.Connector != "" && scoped == nil
	reports := q.Unsearchable
	if !reports {
		if len(q.Terms) > 0 {
			reports = ranked.Partial
		} else {
			reports = unknownConnector || unavailable > 0
		}
	}
	if !reports {
		return nil
	}
	a := ranked.Analyze(page)
	qa := gateway.Object{
		{Key: "representedTerms", Value: a.Represented},
		{Key: "otherResultTerms", Value: a.OtherResult},
		{Key: "unmatchedTerms", Value: a.Unmatched},
	}
	if a.Truncated {
		qa = append(qa, gateway.Field{Key: "truncated", Value: true})
	}
	if p.Connector != "" {
		qa = append(qa, gateway.Field{Key: "connectorScope", Value: p.Connector})
	}
	if unknownConnector {
		qa = append(qa, gateway.Field{Key: "unknownConnector", Value: true})
	}
	if unavailable > 0 {
		qa = append(qa, gateway.Field{Key: "unavailableConnectorCount", Value: unavailable})
	}
	if scoped != nil && len(loaded) == 1 && loaded[0].err != nil {
		qa = append(qa, gateway.Field{Key: "catalogError", Value: catalogFailure(loaded[0].err)})
	}
	if total == 0 && scoped != nil && hasGuide(scoped) {
		qa = append(qa, gateway.Field{Key: "guide", Value: skillName(scoped.ID)})
		if sum := GuideSummary(scoped); sum != "" {
			qa = append(qa, gateway.Field{Key: "guideSummary", Value: sum})
		}
	}
	if g := guidance(q, p, safety, scoped, connectors, unavailable, total, ranked.Partial); g != "" {
		qa = append(qa, gateway.Field{Key: "guidance", Value: g})
	}
	return qa
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// guidance is the one sentence chosen by case.
func guidance(q lexical.Query, p SearchParams, safety string, scoped *gateway.ConnectorInfo,
	connectors []*gateway.ConnectorInfo, unavailable, total int, partial bool,
) string {
	safetyLabel := ""
	switch safety {
	case SafetyReadOnly:
		safetyLabel = "read-only "
	case SafetyApprovalRequired:
		safetyLabel = "approval-required "
	}
	filterRecovery := ""
	if safety != SafetyAll {
		filterRecovery = " Change safety to inspect the other tools."
	}
	unavailableCatalogs := strconv.Itoa(unavailable) + " connector catalog" + plural(unavailable, " was", "s were") + " unavailable"
	if p.Connector != "" && scoped == nil {
		return `Connector "` + p.Connector + `" is not configured in this deployment. Omit connector to search all configured tools.`
	}
	if q.Unsearchable {
		if scoped != nil && unavailable > 0 {
			return `Connector "` + scoped.ID + `" could not be searched because its catalog was unavailable. Inspect catalogError for the typed reason and recovery detail.`
		}
		return "The query contained no searchable lexical terms. Use 2–4 ASCII action/object terms, or browse with an empty query."
	}
	if len(q.Terms) == 0 {
		if unavailable == 0 {
			return ""
		}
		if scoped != nil {
			return `Connector "` + scoped.ID + `" could not be browsed because its catalog was unavailable. Inspect catalogError for the typed reason and recovery detail.`
		}
		return unavailableCatalogs + ", so this browse is incomplete. Scope by connector to see the typed reason."
	}
	if total == 0 {
		if scoped != nil {
			if unavailable > 0 {
				return `Connector "` + scoped.ID + `" could not be searched because its catalog was unavailable. Inspect catalogError for the typed reason and recovery detail.`
			}
			return `No matching ` + safetyLabel + `capability was found on connector "` + scoped.ID +
				`". Refine terms or browse it with an empty query.` + filterRecovery
		}
		// Connector identity is never indexed; a miss whose terms name
		// connectors says so and suggests a scoped empty browse.
		var named []string
		for _, c := range connectors {
			for _, t := range q.Terms {
				if lexical.MatchesTerm(c.ID, t) || (c.Title != "" && lexical.MatchesTerm(c.Title, t)) {
					named = append(named, c.ID)
					break
				}
			}
		}
		if len(named) > 0 {
			shown := named[:min(len(named), MaxIdentityConnectors)]
			quoted := make([]string, len(shown))
			for i, id := range shown {
				quoted[i] = `"` + id + `"`
			}
			more := ""
			if extra := len(named) - MaxIdentityConnectors; extra > 0 {
				more = " and " + strconv.Itoa(extra) + " more"
			}
			where := ""
			if unavailable > 0 {
				where = " in the catalogs that answered"
			}
			return "No matching " + safetyLabel + "capability was found" + where +
				", but the query names configured connector" + plural(len(named), "", "s") + " " +
				strings.Join(quoted, ", ") + more +
				". Scope by connector and browse with an empty query to list the tools there." + filterRecovery
		}
		if unavailable == 0 {
			return "No matching " + safetyLabel + "capability is configured in this deployment. Refine terms, scope by connector, or browse with an empty query." + filterRecovery
		}
		return "No matching " + safetyLabel + "capability was found in the catalogs that answered; " + unavailableCatalogs +
			". Refine terms, scope by connector, or browse with an empty query." + filterRecovery
	}
	if !partial {
		return ""
	}
	if scoped != nil {
		return `No single tool on connector "` + scoped.ID + `" matched every term. Split distinct intents into separate searches.`
	}
	if unavailable == 0 {
		return "No single tool matched every term. Split distinct intents into separate searches."
	}
	return "No single tool matched every term in the catalogs that answered. Split distinct intents into separate searches."
}
