package gateway

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// A View is what exists for one caller (docs/DECISIONS.md "Access rules").
// It is the ONE place the rule "what a caller cannot reach does not exist
// for it" lives: discovery's search and describe, Invoke (both front doors),
// authorize_connector, skills, the execute_code inventory and tools/list all
// ask the same View, so a connector or tool outside it answers byte for
// byte as one that is not configured. A nil *View sees everything (no
// access rules) and costs one nil check.
//
// A request carries its View on its context (WithView); a program keeps
// the View its execute_code request started with, so a reload never changes
// what a running program reaches. Views are immutable and shared: package
// access precomputes one per distinct caller and hands out the same pointer.
//
// Other filters with the same semantics (a quarantined tool, a per-caller
// connector without the caller's credential) belong here too: ToolVisible
// is the one predicate for a tool and ConnectorVisible the one for a
// connector, and every door already calls them.
type View struct {
	star       *reach            // what "*" rules give every connector; nil = nothing
	connectors map[string]*reach // by connector id, star merged in
	key        string            // identity of the whole filter (tools/list, caches)
}

// Grant is one rule's reach within a connector: address globs (nil = every
// tool) and whether tools that are not read-only are reachable.
type Grant struct {
	Globs  []string
	Writes bool
}

// reach is the union of the grants a view has for one connector.
type reach struct {
	grants []compiledGrant
	all    bool   // some grant reaches every tool, writes included
	key    string // canonical text of the grants ("" when all)
}

type compiledGrant struct {
	globs  []glob // nil = every tool
	writes bool
}

// NewView builds a view: perConnector maps connector ids to the grants the
// caller has there, star the grants it has on every connector ("*" rules).
// Globs are `*`-only patterns matched against the whole address.
func NewView(perConnector map[string][]Grant, star []Grant) *View {
	v := &View{connectors: make(map[string]*reach, len(perConnector))}
	if len(star) > 0 {
		v.star = newReach(star)
	}
	for id, gs := range perConnector {
		v.connectors[id] = newReach(append(slices.Clone(gs), star...))
	}
	var b strings.Builder
	if v.star != nil {
		b.WriteString("*=" + v.star.key + ";")
	}
	ids := make([]string, 0, len(v.connectors))
	for id := range v.connectors {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b.WriteString(strconv.Quote(id) + "=" + v.connectors[id].key + ";")
	}
	v.key = b.String()
	return v
}

func newReach(gs []Grant) *reach {
	r := &reach{}
	keys := make([]string, 0, len(gs))
	for _, g := range gs {
		cg := compiledGrant{writes: g.Writes}
		globs := slices.Clone(g.Globs)
		slices.Sort(globs)
		globs = slices.Compact(globs)
		for _, p := range globs {
			cg.globs = append(cg.globs, compileGlob(p))
		}
		if g.Globs == nil && g.Writes {
			r.all = true
		}
		r.grants = append(r.grants, cg)
		k := "r"
		if g.Writes {
			k = "w"
		}
		if g.Globs != nil {
			q := make([]string, len(globs))
			for i, p := range globs {
				q[i] = strconv.Quote(p)
			}
			k += "[" + strings.Join(q, ",") + "]"
		}
		keys = append(keys, k)
	}
	if !r.all {
		slices.Sort(keys)
		r.key = strings.Join(slices.Compact(keys), "|")
	}
	return r
}

func (v *View) reachOf(connectorID string) *reach {
	if r, ok := v.connectors[connectorID]; ok {
		return r
	}
	return v.star
}

// ConnectorVisible reports whether the connector exists for the caller.
func (v *View) ConnectorVisible(connectorID string) bool {
	return v == nil || v.reachOf(connectorID) != nil
}

// ToolVisible reports whether the tool at address (connector.tool) exists
// for the caller; readOnly is the gateway's fail-closed classification
// (Gateway.ReadOnly): a tool that is not read-only needs a grant with
// writes.
func (v *View) ToolVisible(connectorID, address string, readOnly bool) bool {
	if v == nil {
		return true
	}
	r := v.reachOf(connectorID)
	if r == nil {
		return false
	}
	if r.all {
		return true
	}
	for _, g := range r.grants {
		if !readOnly && !g.writes {
			continue
		}
		if g.globs == nil {
			return true
		}
		for _, p := range g.globs {
			if p.match(address) {
				return true
			}
		}
	}
	return false
}

// ToolFilterKey names the tool filter the view applies within one
// connector: "" when every tool of it is visible, otherwise a canonical
// text equal for every view with the same grants there (caches of filtered
// listings are keyed by it, so callers with equal grants share them).
func (v *View) ToolFilterKey(connectorID string) string {
	if v == nil {
		return ""
	}
	if r := v.reachOf(connectorID); r != nil {
		return r.key
	}
	return "none"
}

// Key is the identity of the whole view: equal keys, equal visibility
// ("" for the nil view).
func (v *View) Key() string {
	if v == nil {
		return ""
	}
	return v.key
}

// Narrow is the view intersected with a connector list (an issued token
// narrowed at creation): only the listed connectors remain, with what the
// view gave them. On the nil view it is the listed connectors, whole.
func (v *View) Narrow(ids []string) *View {
	per := map[string][]Grant{}
	for _, id := range ids {
		if v == nil {
			per[id] = []Grant{{Writes: true}}
			continue
		}
		if r := v.reachOf(id); r != nil {
			per[id] = r.source()
		}
	}
	return NewView(per, nil)
}

// source turns a reach back into grants (Narrow rebuilds from them).
func (r *reach) source() []Grant {
	out := make([]Grant, len(r.grants))
	for i, g := range r.grants {
		out[i].Writes = g.writes
		if g.globs != nil {
			out[i].Globs = make([]string, len(g.globs))
			for k, p := range g.globs {
				out[i].Globs[k] = p.src
			}
		}
	}
	return out
}

// VisibleConnectors is all without the connectors the view hides, in order.
func (v *View) VisibleConnectors(all []ConnectorInfo) []ConnectorInfo {
	if v == nil {
		return all
	}
	out := make([]ConnectorInfo, 0, len(all))
	for _, c := range all {
		if v.ConnectorVisible(c.ID) {
			out = append(out, c)
		}
	}
	return out
}

// VisibleTools is one connector's listing without the tools the view hides;
// the listing itself when nothing is hidden. readOnly is the gateway's
// classification.
func (v *View) VisibleTools(connectorID string, tools []Tool, readOnly func(*Tool) bool) []Tool {
	if v == nil || v.ToolFilterKey(connectorID) == "" {
		return tools
	}
	out := make([]Tool, 0, len(tools))
	for i := range tools {
		if v.ToolVisible(connectorID, tools[i].Address(), readOnly(&tools[i])) {
			out = append(out, tools[i])
		}
	}
	return out
}

type viewKey struct{}

// WithView returns ctx carrying the caller's view.
func WithView(ctx context.Context, v *View) context.Context {
	return context.WithValue(ctx, viewKey{}, v)
}

// ViewFrom is the view ctx carries; nil (everything) when none.
func ViewFrom(ctx context.Context) *View {
	v, _ := ctx.Value(viewKey{}).(*View)
	return v
}

// glob is a `*`-only pattern: `*` matches any run of characters (none
// included); every other character matches itself.
type glob struct {
	src   string
	parts []string // the literal runs between stars
}

func compileGlob(p string) glob { return glob{src: p, parts: strings.Split(p, "*")} }

// match reports whether s matches the whole pattern.
func (g glob) match(s string) bool {
	parts := g.parts
	if len(parts) == 1 { // no star
		return s == parts[0]
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	middle := parts[1 : len(parts)-1]
	for _, m := range middle {
		i := strings.Index(s, m)
		if i < 0 {
			return false
		}
		s = s[i+len(m):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// GlobMatch reports whether address matches the `*`-only pattern (the
// access rules' glob; config checks a rule's globs with it).
func GlobMatch(pattern, address string) bool { return compileGlob(pattern).match(address) }
