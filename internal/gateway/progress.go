package gateway

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress is one downstream progress notification as the downstream sent
// it: its progress value, its total (0 when it gave none) and its message.
type Progress struct {
	Progress, Total float64
	Message         string
}

// progressDrainWait bounds how long a call that has its result waits for
// the progress notifications read before that result to reach its
// callback. The SDK reads them in order but hands them to the handler on
// another goroutine, so the last one can still be on its way when the
// result returns; this is a bound for a stuck handler, not a delay paid.
const progressDrainWait = 2 * time.Second

// progressRoutes hands each downstream progress notification to the call
// that asked for it. A call with a Progress callback sends a token of its
// own (unique in this process); the connector's client delivers every
// notifications/progress here, and the token finds the callback. A token
// nobody holds (the call ended) is dropped.
type progressRoutes struct {
	mu      sync.Mutex
	next    uint64
	byToken map[string]*progressRoute
}

type progressRoute struct {
	fn        func(Progress)
	delivered int
	changed   chan struct{} // closed and replaced at each delivery
}

func (p *progressRoutes) add(fn func(Progress)) (token string, remove func(seen int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byToken == nil {
		p.byToken = map[string]*progressRoute{}
	}
	p.next++
	token = "connecta-" + strconv.FormatUint(p.next, 10)
	r := &progressRoute{fn: fn, changed: make(chan struct{})}
	p.byToken[token] = r
	return token, func(seen int) {
		// The transport counted seen notifications for this token before
		// the result; wait until the handler has delivered as many.
		timer := time.NewTimer(progressDrainWait)
		defer timer.Stop()
		for {
			p.mu.Lock()
			done, changed := r.delivered >= seen, r.changed
			if done {
				delete(p.byToken, token)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			select {
			case <-changed:
			case <-timer.C:
				p.mu.Lock()
				delete(p.byToken, token)
				p.mu.Unlock()
				return
			}
		}
	}
}

// deliver is the connectors' ProgressNotificationHandler. Deliveries of one
// connection come one at a time, in the order they were read.
func (p *progressRoutes) deliver(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	r := p.byToken[token]
	p.mu.Unlock()
	if r == nil {
		return
	}
	r.fn(Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	p.mu.Lock()
	r.delivered++
	close(r.changed)
	r.changed = make(chan struct{})
	p.mu.Unlock()
}

type progressKey struct{}

func withProgress(ctx context.Context, fn func(Progress)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// progressMeta asks the downstream for progress when the call has a
// callback: it returns the request's _meta, the token for the call's
// rawmcp.Slot (which counts the notifications read before the result) and
// what to call with that count when the call ends.
func (g *Gateway) progressMeta(ctx context.Context) (mcp.Meta, string, func(seen int)) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	if fn == nil {
		return nil, "", func(int) {}
	}
	token, remove := g.progress.add(fn)
	return mcp.Meta{"progressToken": token}, token, remove
}
