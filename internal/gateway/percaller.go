package gateway

import (
	"context"
	"slices"
	"time"

	"github.com/connecta-dev/connecta/internal/actor"
)

// Per-caller connectors (ConnectorSpec.PerCaller, config `oauth.grants` or
// `credential.per: caller`): each actor that calls one gets a child
// connector of its own — its own HTTP transport carrying that actor's grant
// or credential, its own catalog (persisted under store.CatalogKey{connector,
// actor}, with its own staleness and drift) and its own sessions. The child
// is chosen once per call from the request's actor (WithActor), so nothing a
// child holds is ever used for another actor. The configured connector
// itself keeps health and the call gate; a request without an actor reaches
// it, and it has no grant or credential to send.

type actorKey struct{}

// WithActor returns ctx carrying the calling actor (the server sets it on
// every request; a program's host calls carry their execution's).
func WithActor(ctx context.Context, who actor.ID) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

// ActorFrom is the actor ctx carries; the zero ID when none.
func ActorFrom(ctx context.Context) actor.ID {
	who, _ := ctx.Value(actorKey{}).(actor.ID)
	return who
}

// callerChild is one actor's child of a per-caller connector and its use:
// the calls holding it and when the last one let go. Guarded by the
// configured connector's mu.
type callerChild struct {
	c        *connector
	inUse    int
	lastUsed time.Time
}

// release ends one call's hold on the child (nil: a call that took the
// configured connector itself, which nothing evicts).
func (h *callerChild) release() {
	if h == nil {
		return
	}
	p := h.c.parent
	p.mu.Lock()
	h.inUse--
	h.lastUsed = p.g.now()
	p.mu.Unlock()
}

// forCaller is the connector a call from ctx's actor uses: c itself unless
// c is per-caller and the request names an actor. The caller releases the
// hold when its use ends; a held child is never evicted.
//
// Children are bounded: one idle for CallerChildIdle is closed (its
// sessions and cached catalog go; the catalog stays in the store, so the
// actor's next call adopts it from there), and past MaxCallerChildren the
// least recently used idle ones are closed first. Without that, every
// subject that ever signed in kept a transport, sessions and a catalog.
func (c *connector) forCaller(ctx context.Context) (*connector, *callerChild) {
	if !c.spec.PerCaller || !c.who.IsZero() {
		return c, nil
	}
	who := ActorFrom(ctx)
	if who.IsZero() {
		return c, nil
	}
	now := c.g.now()
	c.mu.Lock()
	var evicted []*connector
	ch := c.callers[who]
	if ch == nil {
		if c.closed {
			c.mu.Unlock()
			return c, nil
		}
		cc, err := newConnectorFor(c.g, c.spec, who)
		if err != nil { // the spec built c, so it builds its children
			c.mu.Unlock()
			c.logger.ErrorContext(ctx, "per-caller connector could not be built", "err", err)
			return c, nil
		}
		cc.gate = c.gate // admission is the connector's (its own partitions per caller)
		cc.parent = c    // health is the connector's too
		// A grant changed before this child existed: a stored copy older
		// than that is not its catalog.
		cc.cat.notBefore = c.cat.notBefore
		evicted = c.evictLocked(now, MaxCallerChildren-1)
		if c.callers == nil {
			c.callers = map[actor.ID]*callerChild{}
		}
		ch = &callerChild{c: cc}
		c.callers[who] = ch
	} else if now.Sub(c.lastSweep) >= CallerChildIdle/4 {
		evicted = c.evictLocked(now, MaxCallerChildren)
	}
	ch.inUse++
	ch.lastUsed = now
	if len(evicted) > 0 {
		// Closing may spend sessionDeleteTimeout per session on a slow
		// downstream: not on this call's time. The gateway owns the
		// goroutine (Add under mu, before close can mark c closed and
		// Close can wait).
		c.g.wg.Add(1)
		go func() {
			defer c.g.wg.Done()
			for _, cc := range evicted {
				cc.close()
			}
		}()
	}
	c.mu.Unlock()
	return ch.c, ch
}

// evictLocked removes the children idle for CallerChildIdle, then the least
// recently used idle ones until at most keep remain, and returns them for
// the caller to close outside mu. A child a call holds is never removed.
func (c *connector) evictLocked(now time.Time, keep int) []*connector {
	c.lastSweep = now
	var out []*connector
	var idle []actor.ID
	for who, ch := range c.callers {
		if ch.inUse > 0 {
			continue
		}
		if now.Sub(ch.lastUsed) >= CallerChildIdle {
			out = append(out, ch.c)
			delete(c.callers, who)
			continue
		}
		idle = append(idle, who)
	}
	if over := len(c.callers) - keep; over > 0 && len(idle) > 0 {
		slices.SortFunc(idle, func(a, b actor.ID) int { return c.callers[a].lastUsed.Compare(c.callers[b].lastUsed) })
		for _, who := range idle[:min(over, len(idle))] {
			out = append(out, c.callers[who].c)
			delete(c.callers, who)
		}
	}
	return out
}

// callerConnectors are c's per-caller children.
func (c *connector) callerConnectors() []*connector {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*connector, 0, len(c.callers))
	for _, ch := range c.callers {
		out = append(out, ch.c)
	}
	return out
}

// withoutCaller: a per-caller connector reached without an actor (doctor,
// a health probe) has nobody's grant or credential to send.
func (c *connector) withoutCaller() bool { return c.spec.PerCaller && c.who.IsZero() }
