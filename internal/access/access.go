// Package access turns the `access` rules (docs/DECISIONS.md "Access
// rules") into the per-caller gateway.View every door consults. A Policy is
// immutable: a reload builds a new one and swaps it in, so a request (and a
// program) keeps the view it started with.
//
// The hot path is a lookup: static token names and the issued-token rule
// are resolved when the Policy is built; an OIDC caller is matched against
// the OIDC rules only (a bit per rule) and the view for that set of rules
// is built once and shared; a narrowed issued token's view is built once
// per narrowing.
package access

import (
	"slices"
	"strings"
	"sync"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/inbound"
)

// Caller is who asks, as authentication established it.
type Caller struct {
	Who actor.ID
	// Claims of an OIDC access token (nil otherwise).
	Claims map[string]any
	// Connectors narrows an issued token (nil: not narrowed).
	Connectors []string
}

// Policy is a configuration's access rules, compiled. The nil *Policy is
// "no access key": every caller reaches everything (a nil view), except an
// issued token narrowed at creation, which reaches its list.
type Policy struct {
	rules  []config.AccessRule
	static map[string]*gateway.View // by token name
	issued *gateway.View
	none   *gateway.View // a caller no rule matches
	oidc   []int         // indexes of the OIDC rules

	mu       sync.Mutex
	byOIDC   map[string]*gateway.View // by the set of matching OIDC rules
	narrowed map[narrowKey]*gateway.View
}

type narrowKey struct{ base, ids string }

// maxCached bounds each view cache (distinct OIDC rule sets, distinct
// narrowings); past it the cache is cleared and refilled on demand.
const maxCached = 1024

// New compiles rules (already checked by package config); nil rules (no
// `access` key) give the nil Policy.
func New(a *config.Access) *Policy {
	if a == nil {
		return nil
	}
	p := &Policy{rules: slices.Clone(a.Rules), static: map[string]*gateway.View{},
		byOIDC: map[string]*gateway.View{}, narrowed: map[narrowKey]*gateway.View{}}
	var issued []int
	names := map[string][]int{}
	for i, r := range p.rules {
		for _, n := range r.Tokens {
			names[n] = append(names[n], i)
		}
		if r.IssuedTokens {
			issued = append(issued, i)
		}
		if r.OIDC != nil {
			p.oidc = append(p.oidc, i)
		}
	}
	for n, idx := range names {
		p.static[n] = p.build(idx)
	}
	p.issued = p.build(issued)
	p.none = p.build(nil)
	return p
}

// build is the view of the union of the rules at idx.
func (p *Policy) build(idx []int) *gateway.View {
	per := map[string][]gateway.Grant{}
	var star []gateway.Grant
	for _, i := range idx {
		r := p.rules[i]
		g := gateway.Grant{Globs: r.Tools, Writes: r.Writes}
		if r.AllConnectors {
			star = append(star, g)
			continue
		}
		for _, id := range r.Connectors {
			per[id] = append(per[id], g)
		}
	}
	return gateway.NewView(per, star)
}

// Configured reports whether access rules are in force.
func (p *Policy) Configured() bool { return p != nil }

// View is what c reaches. Safe for concurrent use; the same caller gets
// the same pointer while the Policy lives.
func (p *Policy) View(c Caller) *gateway.View {
	base := p.baseView(c)
	if c.Connectors == nil {
		return base
	}
	k := narrowKey{base: base.Key(), ids: strings.Join(c.Connectors, "\x00")}
	if p == nil {
		return base.Narrow(c.Connectors) // no rules: small, built per request
	}
	return memo(&p.mu, p.narrowed, k, func() *gateway.View { return base.Narrow(c.Connectors) })
}

// memo is m[k], built (under mu) on a miss; m holds at most maxCached views
// and is emptied when full (views are cheap to rebuild, callers many).
func memo[K comparable](mu *sync.Mutex, m map[K]*gateway.View, k K, build func() *gateway.View) *gateway.View {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := m[k]; ok {
		return v
	}
	if len(m) >= maxCached {
		clear(m)
	}
	v := build()
	m[k] = v
	return v
}

func (p *Policy) baseView(c Caller) *gateway.View {
	if p == nil {
		return nil
	}
	switch c.Who.Kind {
	case actor.Static:
		if v, ok := p.static[c.Who.ID]; ok {
			return v
		}
		return p.none
	case actor.Issued:
		return p.issued
	case actor.OIDC:
		return p.oidcView(c.Claims)
	}
	return p.none // local and stdio never meet a Policy (config refuses it)
}

func (p *Policy) oidcView(claims map[string]any) *gateway.View {
	var b strings.Builder
	var idx []int
	for _, i := range p.oidc {
		if inbound.MatchRule(*p.rules[i].OIDC, claims) {
			idx = append(idx, i)
			b.WriteByte(byte(i))
			b.WriteByte(byte(i >> 8))
		}
	}
	if len(idx) == 0 {
		return p.none
	}
	return memo(&p.mu, p.byOIDC, b.String(), func() *gateway.View { return p.build(idx) })
}

// Rules are the compiled rules as configured (the console's Access page).
func (p *Policy) Rules() []config.AccessRule {
	if p == nil {
		return nil
	}
	return slices.Clone(p.rules)
}
