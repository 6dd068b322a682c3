package gateway

import (
	"context"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoutes hands each downstream progress notification to the call
// that asked for it. A call with a Progress callback sends a token of its
// own (unique in this process); the connector's client delivers every
// notifications/progress here, and the token finds the callback. A token
// nobody holds (the call ended) is dropped.
type progressRoutes struct {
	mu      sync.Mutex
	next    uint64
	byToken map[string]func(message string)
}

func (p *progressRoutes) add(fn func(message string)) (token string, remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byToken == nil {
		p.byToken = map[string]func(string){}
	}
	p.next++
	token = "connecta-" + strconv.FormatUint(p.next, 10)
	p.byToken[token] = fn
	return token, func() {
		p.mu.Lock()
		delete(p.byToken, token)
		p.mu.Unlock()
	}
}

// deliver is the connectors' ProgressNotificationHandler.
func (p *progressRoutes) deliver(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	fn := p.byToken[token]
	p.mu.Unlock()
	if fn != nil {
		fn(req.Params.Message)
	}
}

type progressKey struct{}

func withProgress(ctx context.Context, fn func(message string)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// progressMeta asks the downstream for progress when the call has a
// callback: it returns the request's _meta and what to call when it ends.
func (g *Gateway) progressMeta(ctx context.Context) (mcp.Meta, func()) {
	fn, _ := ctx.Value(progressKey{}).(func(string))
	if fn == nil {
		return nil, func() {}
	}
	token, remove := g.progress.add(fn)
	return mcp.Meta{"progressToken": token}, remove
}
