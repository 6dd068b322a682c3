package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AccessRule is one entry of `access` (docs/DECISIONS.md "Access rules"): who
// it admits (exactly one callers form) and what they reach. A caller reaches
// the union of the rules that match it.
type AccessRule struct {
	// Callers: static auth.tokens names, an auth.oidc.callers-form rule
	// over the access token's claims, or every issued token.
	Tokens       []string
	OIDC         *Rule
	IssuedTokens bool

	// Connectors are configured ids; AllConnectors is "*".
	Connectors    []string
	AllConnectors bool
	// Tools are `*`-only globs over the whole address connector.tool, each
	// within Connectors; nil = every tool of them.
	Tools []string
	// Writes admits tools that are not read-only.
	Writes bool
	Line   int
}

// Access is the `access` key: nil when absent (every caller reaches
// everything); present, a caller reaches only what its rules give.
type Access struct {
	Rules []AccessRule
	Line  int
}

// access decodes `access` (after auth and connectors) and checks it
// against them (checkAccess).
func (d *decoder) access(l list[accessRuleShape], c *Config) {
	n := l.val
	c.Access = &Access{Line: l.key.Line}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, l.path, "expected a list of rules ({callers, connectors, tools?, writes?}), got %s", kindName(n))
		d.checkAccess(l, c, nil)
		return
	}
	var decoded []accessRuleAt
	each(d, l, func(_ int, item *yaml.Node, fs *accessRuleShape) {
		r := AccessRule{Line: item.Line}
		good := true
		var cs *accessCallersShape
		var connAt []int
		if e := fs.Callers; !e.given() {
			d.fail(item, e.path, "is required: {tokens: [NAME...]}, {oidc: {emails: [...]} or {claim: {name, value}}} or {issuedTokens: true}")
			good = false
		} else if cs = d.accessCallers(e, &r); cs == nil {
			good = false
		}
		if e := fs.Connectors; !e.given() {
			d.fail(item, e.path, `is required: connector ids, or ["*"] for every connector`)
			good = false
		} else if ids, ok := d.strList(e.val, e.path); !ok {
			good = false
		} else if len(ids) == 0 {
			d.fail(e.val, e.path, `must not be empty: connector ids, or ["*"] for every connector`)
			good = false
		} else {
			for k, id := range ids {
				if id == "*" {
					r.AllConnectors = true
				} else {
					r.Connectors = append(r.Connectors, id)
					connAt = append(connAt, k)
				}
			}
		}
		if e := fs.Tools; e.given() {
			globs, ok := d.strList(e.val, e.path)
			switch {
			case !ok:
				good = false
			case len(globs) == 0:
				d.fail(e.val, e.path, "must not be empty (leave it out to reach every tool of the rule's connectors)")
				good = false
			default:
				r.Tools = globs
			}
		}
		if e := fs.Writes; e.given() {
			if v, ok := d.boolean(e.val, e.path); ok {
				r.Writes = v
			} else {
				good = false
			}
		}
		if good {
			c.Access.Rules = append(c.Access.Rules, r)
			decoded = append(decoded, accessRuleAt{fs, cs, connAt})
		}
	})
	d.checkAccess(l, c, decoded)
}

// accessRuleAt is a decoded rule's shape: where checkAccess's findings
// are.
type accessRuleAt struct {
	rule    *accessRuleShape
	callers *accessCallersShape
	// connAt is each of the rule's Connectors' index in the file's list,
	// which also holds any "*".
	connAt []int
}

// accessCallers decodes a rule's callers, exactly one kind of caller, and
// returns their shape (nil when refused).
func (d *decoder) accessCallers(s section[accessCallersShape], r *AccessRule) *accessCallersShape {
	fs, ok := s.in(d)
	if !ok {
		return nil
	}
	if givenOf(fs.Tokens, fs.OIDC.field, fs.IssuedTokens) != 1 {
		d.fail(s.val, s.path, "give exactly one of tokens, oidc or issuedTokens (write another rule for another kind of caller)")
		return nil
	}
	if e := fs.Tokens; e.given() {
		names, ok := d.strList(e.val, e.path)
		if ok && len(names) == 0 {
			d.fail(e.val, e.path, "must name at least one auth.tokens entry")
			return nil
		}
		r.Tokens = names
		return okShape(fs, ok)
	}
	if fs.OIDC.given() {
		rule, ok := d.rule(fs.OIDC, true)
		if ok {
			r.OIDC = &rule
		}
		return okShape(fs, ok)
	}
	e := fs.IssuedTokens
	v, ok := d.boolean(e.val, e.path)
	if ok && !v {
		d.fail(e.val, e.path, "must be true (a rule that admits no caller is a mistake)")
		return nil
	}
	r.IssuedTokens = v
	return okShape(fs, ok)
}

// okShape is s when ok, else nil.
func okShape[T any](s *T, ok bool) *T {
	if !ok {
		return nil
	}
	return s
}

// checkAccess refuses rules that cannot mean what they say: access on a
// server without auth, a token name that is not configured, an oidc rule
// without auth.oidc, issuedTokens without accessTokens, an unknown
// connector, a glob outside its rule's connectors.
func (d *decoder) checkAccess(l list[accessRuleShape], c *Config, decoded []accessRuleAt) {
	a := c.Access
	if len(c.Auth.Tokens) == 0 && c.Auth.OIDC == nil && !c.AccessTokens.Enabled {
		d.fail(&yaml.Node{Line: a.Line, Column: 1}, l.path, "needs inbound auth (auth.tokens, auth.oidc or accessTokens): a server without auth has one caller, so there is nothing to tell apart")
		return
	}
	names := map[string]bool{}
	for _, t := range c.Auth.Tokens {
		names[t.Name] = true
	}
	ids := map[string]bool{}
	for _, cn := range c.Connectors {
		ids[cn.ID] = true
	}
	at := func(r AccessRule) *yaml.Node { return &yaml.Node{Line: r.Line, Column: 1} }
	item := func(f field, k int) string { return fmt.Sprintf("%s[%d]", f.path, k) }
	for i, r := range a.Rules {
		s, cs, connAt := decoded[i].rule, decoded[i].callers, decoded[i].connAt
		for k, name := range r.Tokens {
			if !names[name] {
				d.fail(at(r), item(cs.Tokens, k), "%q names no auth.tokens entry", clip(name))
			}
		}
		if r.OIDC != nil && c.Auth.OIDC == nil {
			d.fail(at(r), cs.OIDC.path, "needs auth.oidc")
		}
		if r.IssuedTokens && !c.AccessTokens.Enabled {
			d.fail(at(r), cs.IssuedTokens.path, "needs accessTokens (no token can be issued without it)")
		}
		for k, id := range r.Connectors {
			if !ids[id] {
				d.fail(at(r), item(s.Connectors, connAt[k]), "%q is not a configured connector id%s", clip(id), suggestID(id, c.Connectors))
			}
		}
		for k, g := range r.Tools {
			if !r.AllConnectors && !globWithin(g, r.Connectors) {
				d.fail(at(r), item(s.Tools, k), "%q matches no tool of the rule's connectors (%s): globs match the whole address connector.tool", clip(g), strings.Join(r.Connectors, ", "))
			}
		}
	}
}

// globWithin reports whether the `*`-only glob can match an address of one
// of the connectors: its literal start (before the first `*`) is
// compatible with "<id>.".
func globWithin(glob string, connectors []string) bool {
	lit, _, _ := strings.Cut(glob, "*")
	for _, id := range connectors {
		p := id + "."
		if strings.HasPrefix(lit, p) || strings.HasPrefix(p, lit) {
			return true
		}
	}
	return false
}

func suggestID(id string, cs []Connector) string {
	known := make([]string, len(cs))
	for i, c := range cs {
		known[i] = c.ID
	}
	if len(known) == 0 {
		return " (no connectors are configured)"
	}
	return suggest(id, known)
}
