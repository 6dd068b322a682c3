package gateway

import (
	"context"

	"github.com/connecta-dev/connecta/actor"
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

// forCaller is the connector a call from ctx's actor uses: c itself unless
// c is per-caller and the request names an actor.
func (c *connector) forCaller(ctx context.Context) *connector {
	if !c.spec.PerCaller || !c.who.IsZero() {
		return c
	}
	who := ActorFrom(ctx)
	if who.IsZero() {
		return c
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.callers[who]; cc != nil {
		return cc
	}
	if c.closed {
		return c
	}
	cc, err := newConnectorFor(c.g, c.spec, who)
	if err != nil { // the spec built c, so it builds its children
		c.logger.ErrorContext(ctx, "per-caller connector could not be built", "err", err)
		return c
	}
	cc.gate = c.gate // admission is the connector's (its own partitions per caller)
	cc.parent = c    // health is the connector's too
	if c.callers == nil {
		c.callers = map[actor.ID]*connector{}
	}
	c.callers[who] = cc
	return cc
}

// callerConnectors are c's per-caller children.
func (c *connector) callerConnectors() []*connector {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*connector, 0, len(c.callers))
	for _, cc := range c.callers {
		out = append(out, cc)
	}
	return out
}

// withoutCaller: a per-caller connector reached without an actor (doctor,
// a health probe) has nobody's grant or credential to send.
func (c *connector) withoutCaller() bool { return c.spec.PerCaller && c.who.IsZero() }
