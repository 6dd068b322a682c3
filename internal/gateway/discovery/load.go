package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// catalogResult is one connector's catalog for this request, or why not.
type catalogResult struct {
	tools []gateway.Tool
	err   *gateway.Error
}

// loadCatalogs reads each named catalog under its own deadline, at most
// s.concurrency at once, each settling in its input slot: a failed catalog
// is a failure there, not a failed discovery. Every goroutine it starts has
// ended when it returns.
func (s *Service) loadCatalogs(ctx context.Context, ids []string, route string) []catalogResult {
	out := make([]catalogResult, len(ids))
	if len(ids) == 0 {
		return out
	}
	sem := make(chan struct{}, s.concurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			out[i] = catalogResult{err: cancelledError()}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = s.loadOne(ctx, id, route)
		}()
	}
	wg.Wait()
	return out
}

func (s *Service) loadOne(ctx context.Context, id, route string) catalogResult {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tools, err := s.catalog.Tools(cctx, id)
	if err == nil {
		return catalogResult{tools: tools}
	}
	var typed *gateway.Error
	switch {
	case ctx.Err() != nil:
		return catalogResult{err: cancelledError()}
	case errors.As(err, &typed):
		return catalogResult{err: typed}
	case errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil:
		return catalogResult{err: &gateway.Error{
			Code:      gateway.CodeTimeout,
			Message:   fmt.Sprintf("%s probe of %q timed out after %dms", route, id, s.timeout.Milliseconds()),
			Retryable: true,
		}}
	}
	return catalogResult{err: &gateway.Error{
		Code:      gateway.CodeCatalogLookupFailed,
		Message:   jstext.Clamp(err.Error(), jstext.MaxEchoBytes),
		Retryable: false,
	}}
}

func cancelledError() *gateway.Error {
	return &gateway.Error{Code: gateway.CodeCancelled, Message: "Discovery was cancelled.", Retryable: false}
}

// catalogFailure is the bounded typed subset a discovery result may echo
// about a failed catalog: code, clamped message, retryable, retryAfterMs.
func catalogFailure(e *gateway.Error) gateway.Object {
	obj := gateway.Object{
		{Key: "code", Value: e.Code},
		{Key: "message", Value: jstext.Clamp(e.Message, jstext.MaxEchoBytes)},
		{Key: "retryable", Value: e.Retryable},
	}
	if e.RetryAfterMs != nil {
		obj = append(obj, gateway.Field{Key: "retryAfterMs", Value: *e.RetryAfterMs})
	}
	return obj
}

// hideTools drops from each loaded listing the tools the caller's view
// hides (gateway.View), so that ranking, totals, suggestions and rows are
// exactly those of a catalog without them.
func (s *Service) hideTools(view *gateway.View, ids []string, loaded []catalogResult) {
	if view == nil {
		return
	}
	for i := range loaded {
		if loaded[i].err == nil {
			loaded[i].tools = view.VisibleTools(ids[i], loaded[i].tools, s.catalog.ReadOnly)
		}
	}
}
