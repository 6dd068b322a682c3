package discovery

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// resolvedAddress splits a canonical address `<connectorId>.<toolName>` (A1)
// against the configured connectors; ok is false when the prefix names no
// connector or the tool part is empty.
func resolvedAddress(connectors []gateway.ConnectorInfo, address string) (c *gateway.ConnectorInfo, tool string, ok bool) {
	i := strings.IndexByte(address, '.')
	if i <= 0 || i == len(address)-1 {
		return nil, "", false
	}
	id := address[:i]
	for k := range connectors {
		if connectors[k].ID == id {
			return &connectors[k], address[i+1:], true
		}
	}
	return nil, "", false
}

// Describe answers connecta.describe (S4): {tools:[…]} in request order, one
// entry per address; an unknown address or failed catalog is an entry with
// error and typed errorDetails, never a failed call. front keys the misses'
// recovery (function "connecta.search" for programs, tool "search_tools" at
// the top level).
func (s *Service) Describe(ctx context.Context, front gateway.FrontDoor, p DescribeParams) (json.RawMessage, *gateway.Error) {
	if e := p.validate(); e != nil {
		return nil, e
	}
	format := p.Format
	if format == "" {
		format = FormatCompact
	}
	view := gateway.ViewFrom(ctx) // what the view hides is not there (gateway.View)
	all := view.VisibleConnectors(s.catalog.Connectors())
	type target struct {
		connector *gateway.ConnectorInfo
		tool      string
		ok        bool
	}
	targets := make([]target, len(p.Addresses))
	var ids []string
	slot := map[string]int{}
	for i, a := range p.Addresses {
		c, tool, ok := resolvedAddress(all, a)
		targets[i] = target{c, tool, ok}
		if ok {
			if _, seen := slot[c.ID]; !seen {
				slot[c.ID] = len(ids)
				ids = append(ids, c.ID)
			}
		}
	}
	loaded := s.loadCatalogs(ctx, ids, routeName(front, true))
	if ctx.Err() != nil {
		return nil, cancelledError()
	}
	s.hideTools(view, ids, loaded)

	cells := suggestionCellBudget
	entries := make([]gateway.Object, len(p.Addresses))
	for i, a := range p.Addresses {
		t := targets[i]
		if !t.ok {
			e := gateway.UnknownAddress(front, a)
			entries[i] = failedEntry(a, e)
			continue
		}
		cat := loaded[slot[t.connector.ID]]
		if cat.err != nil {
			msg := jstext.Clamp(cat.err.Message, jstext.MaxEchoBytes)
			entries[i] = gateway.Object{
				{Key: "address", Value: jstext.Clamp(a, jstext.MaxEchoBytes)},
				{Key: "error", Value: msg},
				{Key: "errorDetails", Value: catalogFailure(cat.err)},
			}
			continue
		}
		var tool *gateway.Tool
		for k := range cat.tools {
			if cat.tools[k].Name == t.tool {
				tool = &cat.tools[k]
				break
			}
		}
		if tool == nil {
			e := gateway.UnknownTool(front, t.connector.ID, t.tool)
			if sugg := suggestions(t.connector.ID, t.tool, cat.tools, &cells); len(sugg) > 0 {
				e.Details = append(e.Details, gateway.Field{Key: "suggestions", Value: sugg})
			}
			entries[i] = failedEntry(a, e)
			continue
		}
		entries[i] = s.describeEntry(a, t.connector, tool, format, p.FullDescriptions)
	}
	body, err := gateway.Object{{Key: "tools", Value: entries}}.MarshalJSON()
	if err != nil {
		return nil, unserializable("describe", err)
	}
	if len(body) > MaxResultBytes {
		return nil, resultTooLarge(len(body), describeTooLargeHint)
	}
	return body, nil
}

// failedEntry is {address (clamped), error, errorDetails}.
func failedEntry(address string, e *gateway.Error) gateway.Object {
	return gateway.Object{
		{Key: "address", Value: jstext.Clamp(address, jstext.MaxEchoBytes)},
		{Key: "error", Value: e.Message},
		{Key: "errorDetails", Value: e},
	}
}

func (s *Service) describeEntry(address string, c *gateway.ConnectorInfo, t *gateway.Tool, format string, full bool) gateway.Object {
	in := renderSchema(inputSchemaOf(t), format, true)
	outRaw, observed := s.outputSchema(t)
	var out rendered
	if outRaw != nil {
		out = renderSchema(outRaw, format, true)
	}
	f := gateway.Object{
		{Key: "address", Value: address},
		{Key: "name", Value: t.Name},
	}
	if d := summarizeDescription(t.Description, full, DescribeDescriptionLn); d != "" {
		f = append(f, gateway.Field{Key: "description", Value: d})
	}
	f = appendGuide(f, c)
	if reasons := guideReasons(c, s.catalog.ReadOnly(t), in.truncated || out.truncated); len(reasons) > 0 {
		f = append(f, gateway.Field{Key: "guideRequired", Value: true},
			gateway.Field{Key: "guideRequiredReasons", Value: reasons})
	}
	f = append(f, gateway.Field{Key: "inputSchema", Value: in.value})
	if in.truncated {
		f = append(f, gateway.Field{Key: "inputSchemaTruncated", Value: true})
	}
	if out.truncated {
		f = append(f, gateway.Field{Key: "outputSchemaTruncated", Value: true})
	}
	if outRaw != nil {
		f = append(f, gateway.Field{Key: "outputSchema", Value: out.value})
		if observed {
			f = append(f, gateway.Field{Key: "outputSchemaSource", Value: "observed"})
		}
	}
	if a := annotationsOf(t); a != nil {
		f = append(f, gateway.Field{Key: "annotations", Value: a})
	}
	return f
}

// suggestions are up to three canonical addresses whose tool names are close
// to the attempted one (containment either way, or an edit distance within
// max(2, 40% of the longer name)), nearest first, catalog order on ties.
// Descriptions never influence them. cells bounds the edit-distance work.
func suggestions(connectorID, attempted string, tools []gateway.Tool, cells *int) []string {
	type cand struct {
		address  string
		distance int
		order    int
	}
	att := strings.ToLower(attempted)
	attU := utf16.Encode([]rune(att))
	var cands []cand
	for i := range tools {
		name := tools[i].Name
		address := connectorID + "." + name
		if len(address) > jstext.MaxEchoBytes {
			continue // a clipped address would no longer be canonical
		}
		lower := strings.ToLower(name)
		nameU := utf16.Encode([]rune(lower))
		longest := max(len(attU), jstext.Len(name))
		threshold := max(2, longest*2/5)
		contains := strings.Contains(att, lower) || strings.Contains(lower, att)
		d := abs(len(attU) - len(nameU)) // lower bound
		if d <= threshold && *cells >= len(attU)*len(nameU) {
			*cells -= len(attU) * len(nameU)
			d = editDistance(attU, nameU)
		} else if !contains {
			continue
		}
		if contains || d <= threshold {
			cands = append(cands, cand{address, d, i})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].distance != cands[j].distance {
			return cands[i].distance < cands[j].distance
		}
		return cands[i].order < cands[j].order
	})
	var out []string
	for _, c := range cands[:min(len(cands), MaxSuggestions)] {
		out = append(out, c.address)
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func editDistance(a, b []uint16) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := range a {
		cur[0] = i + 1
		for j := range b {
			sub := prev[j]
			if a[i] != b[j] {
				sub++
			}
			cur[j+1] = min(prev[j+1]+1, cur[j]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
