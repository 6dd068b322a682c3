package gateway

import (
	"context"

	"github.com/connecta-dev/connecta/internal/gateway/validate"
)

// maxPassThroughLogged bounds the triples remembered for logging; past it a
// pass-through is still counted (connecta_validation_passthrough_total) but
// no longer logged, so a downstream cycling tool names cannot grow memory.
const maxPassThroughLogged = 4096

type passThroughKey struct {
	connector, tool string
	reason          validate.Reason
}

// validationPassedThrough logs, once per (connector, tool, reason), that a
// call's arguments went to the downstream unvalidated. The validator has
// already counted it.
func (g *Gateway) validationPassedThrough(ctx context.Context, connector, tool string, reason validate.Reason) {
	key := passThroughKey{connector, tool, reason}
	g.passMu.Lock()
	if g.passLogged[key] || len(g.passLogged) >= maxPassThroughLogged {
		g.passMu.Unlock()
		return
	}
	if g.passLogged == nil {
		g.passLogged = map[passThroughKey]bool{}
	}
	g.passLogged[key] = true
	g.passMu.Unlock()
	g.logger.WarnContext(ctx, "argument validation passed through: the downstream judges these arguments",
		"connector", connector, "tool", tool, "reason", string(reason))
}
