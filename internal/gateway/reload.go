package gateway

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// registry is one generation of configured connectors. A scope holds the
// generation it opened on, so a reload never changes the connectors an
// execution in flight sees. A generation is live while it is current or
// held; a connector is closed once no live generation contains it.
type registry struct {
	byID  map[string]*connector
	order []string

	users    int  // open scopes and calls on this generation; guarded by Gateway.regMu
	replaced bool // a reload installed a newer generation
}

func (r *registry) lookup(id string) *connector { return r.byID[id] }

// current is the generation new work starts on.
func (g *Gateway) current() *registry {
	g.regMu.RLock()
	defer g.regMu.RUnlock()
	return g.reg
}

// hold pins the current generation until release.
func (g *Gateway) hold() *registry {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	g.reg.users++
	return g.reg
}

func (g *Gateway) release(r *registry) {
	g.regMu.Lock()
	r.users--
	var closing []*connector
	if r.replaced && r.users == 0 {
		closing = g.endGeneration(r)
	}
	g.regMu.Unlock()
	g.retireConnectors(closing)
}

// endGeneration drops a dead generation's claim on its connectors and
// returns those no live generation contains. Called with regMu held.
func (g *Gateway) endGeneration(r *registry) []*connector {
	var out []*connector
	for _, c := range r.byID {
		c.gens--
		if c.gens == 0 {
			out = append(out, c)
		}
	}
	return out
}

// retireConnectors closes connectors no generation in use needs, on a
// goroutine Close waits for.
func (g *Gateway) retireConnectors(cs []*connector) {
	if len(cs) == 0 {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for _, c := range cs {
			c.close()
			g.regMu.Lock()
			delete(g.live, c)
			g.regMu.Unlock()
		}
	}()
}

// buildRegistry validates specs and builds a generation, reusing the
// connectors of prev whose spec is unchanged (their sessions, catalogs and
// health carry over).
func (g *Gateway) buildRegistry(specs []ConnectorSpec, prev *registry) (*registry, error) {
	r := &registry{byID: map[string]*connector{}}
	for i := range specs {
		spec := specs[i]
		if spec.ID == "" || strings.Contains(spec.ID, ".") {
			return nil, fmt.Errorf("gateway: connector %d: invalid id %q", i, spec.ID)
		}
		if _, dup := r.byID[spec.ID]; dup {
			return nil, fmt.Errorf("gateway: duplicate connector id %q", spec.ID)
		}
		if prev != nil {
			if old := prev.byID[spec.ID]; old != nil && sameSpec(old.spec, spec) {
				r.byID[spec.ID] = old
				r.order = append(r.order, spec.ID)
				continue
			}
		}
		c, err := newConnector(g, spec)
		if err != nil {
			return nil, fmt.Errorf("gateway: connector %q: %w", spec.ID, err)
		}
		if prev != nil {
			// Another change to the connector keeps its admission state when
			// the rule is the same: a reload never resets a live budget.
			if old := prev.byID[spec.ID]; old != nil && reflect.DeepEqual(old.spec.Admission, spec.Admission) {
				c.gate = old.gate
			}
		}
		r.byID[spec.ID] = c
		r.order = append(r.order, spec.ID)
	}
	return r, nil
}

// sameSpec compares two specs; in-process constructors compare by presence
// (a func is never DeepEqual to another).
func sameSpec(a, b ConnectorSpec) bool {
	if (a.InProcess == nil) != (b.InProcess == nil) {
		return false
	}
	a.InProcess, b.InProcess = nil, nil
	return reflect.DeepEqual(a, b)
}

// ReloadResult says what a reload changed, by connector id.
type ReloadResult struct {
	Added, Removed, Changed []string
}

// errClosedReload is a reload after Close.
var errClosedReload = errors.New("gateway: closed")

// Reload installs a new set of connectors atomically. Unchanged connectors
// keep their sessions, catalogs and health; new work sees the new set at
// once; work already in flight (a scope, a call) finishes on the set it
// started with, and the connectors only it used are closed after it. An
// invalid set changes nothing.
func (g *Gateway) Reload(specs []ConnectorSpec) (ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.life.Err() != nil {
		return ReloadResult{}, errClosedReload
	}
	prev := g.current()
	next, err := g.buildRegistry(specs, prev)
	if err != nil {
		return ReloadResult{}, err
	}
	var res ReloadResult
	for _, id := range next.order {
		switch old := prev.byID[id]; {
		case old == nil:
			res.Added = append(res.Added, id)
		case old != next.byID[id]:
			res.Changed = append(res.Changed, id)
		}
	}
	for _, id := range prev.order {
		if next.byID[id] == nil {
			res.Removed = append(res.Removed, id)
		}
	}
	g.regMu.Lock()
	for _, c := range next.byID {
		c.gens++
		g.live[c] = struct{}{}
	}
	g.reg = next
	prev.replaced = true
	var closing []*connector
	if prev.users == 0 {
		closing = g.endGeneration(prev)
	}
	g.regMu.Unlock()
	g.retireConnectors(closing)
	g.metrics.zero(res.Added)
	return res, nil
}
