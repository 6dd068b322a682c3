package access_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/connecta-dev/connecta/internal/access"
	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/gateway"
)

// The model: the rules of docs/DECISIONS.md "Access rules" written as
// plainly as possible, independent of the compiled views. A caller reaches
// the union of matching rules; a tool needs a rule naming its connector (or
// "*"), a glob matching its whole address (or no globs) and writes unless it
// is read-only; a narrowed issued token reaches only its list of that.

type modelCaller struct {
	who    actor.ID
	claims map[string]any
	narrow []string // nil: not narrowed
}

func modelMatches(r config.AccessRule, c modelCaller) bool {
	switch c.who.Kind {
	case actor.Static:
		return slices.Contains(r.Tokens, c.who.ID)
	case actor.Issued:
		return r.IssuedTokens
	case actor.OIDC:
		if r.OIDC == nil {
			return false
		}
		if r.OIDC.Any {
			return true
		}
		if r.OIDC.Claim != nil {
			switch v := c.claims[r.OIDC.Claim.Name].(type) {
			case string:
				return v == r.OIDC.Claim.Value
			case []any:
				return slices.Contains(v, any(r.OIDC.Claim.Value))
			}
			return false
		}
		email, _ := c.claims["email"].(string)
		verified, _ := c.claims["email_verified"].(bool)
		return verified && slices.Contains(r.OIDC.Emails, strings.ToLower(email))
	}
	return false
}

var modelRegexps sync.Map // glob → *regexp.Regexp

func modelGlob(glob, address string) bool {
	re, ok := modelRegexps.Load(glob)
	if !ok {
		parts := strings.Split(glob, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re, _ = modelRegexps.LoadOrStore(glob, regexp.MustCompile(`^(?s:`+strings.Join(parts, ".*")+`)$`))
	}
	return re.(*regexp.Regexp).MatchString(address)
}

func modelConnector(rules []config.AccessRule, configured bool, c modelCaller, id string) bool {
	if c.narrow != nil && !slices.Contains(c.narrow, id) {
		return false
	}
	if !configured {
		return true
	}
	for _, r := range rules {
		if modelMatches(r, c) && (r.AllConnectors || slices.Contains(r.Connectors, id)) {
			return true
		}
	}
	return false
}

func modelTool(rules []config.AccessRule, configured bool, c modelCaller, id, tool string, readOnly bool) bool {
	if c.narrow != nil && !slices.Contains(c.narrow, id) {
		return false
	}
	if !configured {
		return true
	}
	for _, r := range rules {
		if !modelMatches(r, c) || !(r.AllConnectors || slices.Contains(r.Connectors, id)) || !(r.Writes || readOnly) {
			continue
		}
		if r.Tools == nil {
			return true
		}
		for _, g := range r.Tools {
			if modelGlob(g, id+"."+tool) {
				return true
			}
		}
	}
	return false
}

var (
	modelConnectors = []string{"tracker", "docs", "payments", "hr"}
	modelTools      = []string{"list_items", "list_users", "get_item", "delete_item", "a.b", "x*y", ""}
	modelGlobs      = []string{"*", "%s.*", "%s.list_*", "%s.get_*", "%s.*item*", "*.list_*", "%s.delete_item", "%s.a.b", "%s.x*y", "*_users", "%s.", "%s.*.*", "**"}
	modelGroups     = []string{"finance", "ops", "eng"}
	modelStatic     = []string{"laptop", "ci", "intern"}
)

func randomRules(r *rand.Rand) []config.AccessRule {
	n := r.IntN(6)
	rules := make([]config.AccessRule, 0, n)
	for range n {
		var rule config.AccessRule
		switch r.IntN(4) {
		case 0, 1:
			for _, s := range modelStatic {
				if r.IntN(2) == 0 {
					rule.Tokens = append(rule.Tokens, s)
				}
			}
			if rule.Tokens == nil {
				rule.Tokens = []string{modelStatic[0]}
			}
		case 2:
			rule.IssuedTokens = true
		default:
			switch r.IntN(3) {
			case 0:
				rule.OIDC = &config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: modelGroups[r.IntN(len(modelGroups))]}}
			case 1:
				rule.OIDC = &config.Rule{Emails: []string{"ops@example.com"}}
			default:
				rule.OIDC = &config.Rule{Any: true}
			}
		}
		if r.IntN(5) == 0 {
			rule.AllConnectors = true
		}
		for _, c := range modelConnectors {
			if r.IntN(3) == 0 {
				rule.Connectors = append(rule.Connectors, c)
			}
		}
		if !rule.AllConnectors && rule.Connectors == nil {
			rule.Connectors = []string{modelConnectors[r.IntN(len(modelConnectors))]}
		}
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(3) {
				g := modelGlobs[r.IntN(len(modelGlobs))]
				if strings.Contains(g, "%s") {
					pool := rule.Connectors
					if len(pool) == 0 {
						pool = modelConnectors
					}
					g = fmt.Sprintf(g, pool[r.IntN(len(pool))])
				}
				rule.Tools = append(rule.Tools, g)
			}
		}
		rule.Writes = r.IntN(2) == 0
		rules = append(rules, rule)
	}
	return rules
}

func randomCaller(r *rand.Rand) modelCaller {
	var c modelCaller
	switch r.IntN(3) {
	case 0:
		c.who = actor.StaticToken(modelStatic[r.IntN(len(modelStatic))])
	case 1:
		c.who = actor.IssuedToken(fmt.Sprint("t", r.IntN(3)))
		if r.IntN(2) == 0 {
			c.narrow = []string{}
			for _, id := range modelConnectors {
				if r.IntN(2) == 0 {
					c.narrow = append(c.narrow, id)
				}
			}
		}
	default:
		c.who = actor.OIDCSubject(fmt.Sprint("u", r.IntN(3)))
		c.claims = map[string]any{}
		var groups []any
		for _, g := range modelGroups {
			if r.IntN(2) == 0 {
				groups = append(groups, g)
			}
		}
		if r.IntN(4) == 0 && len(groups) > 0 {
			c.claims["groups"] = groups[0] // a string claim
		} else {
			c.claims["groups"] = groups
		}
		if r.IntN(2) == 0 {
			c.claims["email"], c.claims["email_verified"] = "OPS@example.com", r.IntN(2) == 0
		}
	}
	return c
}

// checkAgainstModel compares every connector and tool (both classes) of
// the universe through the view the policy gives the caller, and the
// listing filter, with the model.
func checkAgainstModel(t *testing.T, rules []config.AccessRule, configured bool, c modelCaller) {
	t.Helper()
	var p *access.Policy
	if configured {
		p = access.New(&config.Access{Rules: rules})
	}
	v := p.View(access.Caller{Who: c.who, Claims: c.claims, Connectors: c.narrow})
	again := p.View(access.Caller{Who: c.who, Claims: c.claims, Connectors: slices.Clone(c.narrow)})
	if again.Key() != v.Key() {
		t.Fatalf("the same caller got two views: %q and %q", v.Key(), again.Key())
	}
	for _, id := range modelConnectors {
		if got, want := v.ConnectorVisible(id), modelConnector(rules, configured, c, id); got != want {
			t.Fatalf("connector %s for %+v: view %v, model %v\nrules %+v", id, c, got, want, rules)
		}
		var listing []gateway.Tool
		ro := map[string]bool{}
		for i, name := range modelTools {
			for _, readOnly := range []bool{true, false} {
				if got, want := v.ToolVisible(id, id+"."+name, readOnly), modelTool(rules, configured, c, id, name, readOnly); got != want {
					t.Fatalf("tool %s.%s (readOnly %v) for %+v: view %v, model %v\nrules %+v", id, name, readOnly, c, got, want, rules)
				}
			}
			listing = append(listing, gateway.Tool{ConnectorID: id, Name: name})
			ro[name] = i%2 == 0
		}
		kept := v.VisibleTools(id, listing, func(t *gateway.Tool) bool { return ro[t.Name] })
		var want []string
		for _, name := range modelTools {
			if modelTool(rules, configured, c, id, name, ro[name]) {
				want = append(want, name)
			}
		}
		var got []string
		for _, t := range kept {
			got = append(got, t.Name)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listing of %s for %+v: %v, model %v", id, c, got, want)
		}
	}
}

// Random rule sets and callers: every answer of the views agrees with the
// model — nothing outside is ever visible, nothing inside is hidden.
func TestViewsAgreeWithTheModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		rules := randomRules(r)
		for range 5 {
			checkAgainstModel(t, rules, r.IntN(8) != 0, randomCaller(r))
		}
	}
}

func FuzzViewsAgreeWithTheModel(f *testing.F) {
	for i := range 8 {
		f.Add(uint64(i), uint64(i*7+1))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		r := rand.New(rand.NewPCG(a, b))
		rules := randomRules(r)
		checkAgainstModel(t, rules, a%8 != 0, randomCaller(r))
	})
}

// Two callers whose rules give the same reach on a connector share the
// filter key there (the discovery index cache is keyed by it), and a caller
// that sees all of a connector has the empty key.
func TestFilterKeysAreSharedByEqualReach(t *testing.T) {
	p := access.New(&config.Access{Rules: []config.AccessRule{
		{Tokens: []string{"a"}, Connectors: []string{"x", "y"}, Tools: []string{"x.list_*"}},
		{Tokens: []string{"b"}, Connectors: []string{"x"}, Tools: []string{"x.list_*", "x.list_*"}},
		{Tokens: []string{"c"}, Connectors: []string{"x"}, Writes: true},
	}})
	va := p.View(access.Caller{Who: actor.StaticToken("a")})
	vb := p.View(access.Caller{Who: actor.StaticToken("b")})
	vc := p.View(access.Caller{Who: actor.StaticToken("c")})
	if va.ToolFilterKey("x") != vb.ToolFilterKey("x") || va.ToolFilterKey("x") == "" {
		t.Errorf("equal reach, keys %q and %q", va.ToolFilterKey("x"), vb.ToolFilterKey("x"))
	}
	if vc.ToolFilterKey("x") != "" {
		t.Errorf("whole connector, key %q", vc.ToolFilterKey("x"))
	}
	if va.Key() == vb.Key() {
		t.Errorf("different views share a key: %q", va.Key())
	}
	none := p.View(access.Caller{Who: actor.StaticToken("zed")})
	if none == nil || none.ConnectorVisible("x") {
		t.Errorf("a caller no rule names reaches something")
	}
}

// The hot path with 20 rules: a caller's view (a map lookup for a static
// token, 20 rule matches for an OIDC caller) and one tool check with globs.
func BenchmarkView_20Rules(b *testing.B) {
	var rules []config.AccessRule
	for i := range 18 {
		rules = append(rules, config.AccessRule{Tokens: []string{fmt.Sprint("t", i)}, Connectors: []string{"payments"}, Tools: []string{fmt.Sprintf("payments.get_%d*", i)}})
	}
	rules = append(rules,
		config.AccessRule{Tokens: []string{"laptop"}, Connectors: []string{"tracker"}, Tools: []string{"tracker.list_*", "tracker.get_*", "tracker.search_*"}},
		config.AccessRule{OIDC: &config.Rule{Claim: &config.ClaimRule{Name: "groups", Value: "finance"}}, Connectors: []string{"payments"}, Writes: true})
	p := access.New(&config.Access{Rules: rules})
	laptop := access.Caller{Who: actor.StaticToken("laptop")}
	fin := access.Caller{Who: actor.OIDCSubject("f"), Claims: map[string]any{"groups": []any{"eng", "finance"}}}
	b.Run("static-view+tool", func(b *testing.B) {
		for range b.N {
			if !p.View(laptop).ToolVisible("tracker", "tracker.search_issues", true) {
				b.Fatal("hidden")
			}
		}
	})
	b.Run("oidc-view+tool", func(b *testing.B) {
		for range b.N {
			if !p.View(fin).ToolVisible("payments", "payments.add_comment", false) {
				b.Fatal("hidden")
			}
		}
	})
	b.Run("no-rules", func(b *testing.B) {
		var none *access.Policy
		for range b.N {
			if !none.View(laptop).ToolVisible("tracker", "tracker.search_issues", true) {
				b.Fatal("hidden")
			}
		}
	})
}
