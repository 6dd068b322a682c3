package gateway

import (
	"context"
	"sync"
)

// P4: nothing survives an execution. An HTTP connector opens a downstream
// MCP session per scope (one execution, or one top-level call) on first
// use and closes it when the scope closes, so a stateful downstream (a
// browser page, a cursor, a subscription) never carries one program's state
// into the next. sharedSession: true is the operator's statement that the
// downstream is stateless; then every scope uses the connector's one
// session. A stdio connector is one process and so always one shared
// session; the in-process demo is stateless and shared too. Catalog
// listings use the connector's own session whatever the setting: tools/list
// carries no program state.

// scopedSessions are one scope's downstream sessions, by connector.
type scopedSessions struct {
	mu     sync.Mutex
	closed bool
	byID   map[string]*scopedSession
}

// scopedSession is one connector's session within a scope; tok serializes
// connecting, so parallel host calls of one program share one session.
type scopedSession struct {
	tok chan struct{}
	ls  *liveSession
}

// perScope reports whether c's calls get a session per scope. Under
// 2026-07-28 there is no session state to isolate: every scope shares the
// connector's one connection (per connector and so per credential: the
// grant or header is the connector's).
func (c *connector) perScope() bool {
	return c.kind == kindHTTP && !c.spec.SharedSession && !c.isStateless()
}

// session returns the scope's live session for c, connecting on first use
// (and again after the previous one died).
func (s *Scope) session(ctx context.Context, c *connector) (*liveSession, error) {
	s.sess.mu.Lock()
	if s.sess.closed {
		s.sess.mu.Unlock()
		return nil, context.Canceled
	}
	if s.sess.byID == nil {
		s.sess.byID = map[string]*scopedSession{}
	}
	e := s.sess.byID[c.spec.ID]
	if e == nil {
		e = &scopedSession{tok: make(chan struct{}, 1)}
		s.sess.byID[c.spec.ID] = e
	}
	s.sess.mu.Unlock()

	select {
	case e.tok <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.tok }()
	if e.ls != nil && !e.ls.dead.Load() {
		return e.ls, nil
	}
	ls, err := c.connect(ctx, true)
	if err != nil {
		return nil, err
	}
	s.sess.mu.Lock()
	closed := s.sess.closed
	if !closed {
		e.ls = ls
	}
	s.sess.mu.Unlock()
	if closed { // the scope closed while connecting
		c.g.closeLater(ls)
		return nil, context.Canceled
	}
	return ls, nil
}

// forget drops a scope's session after a transport failure or a lost
// downstream session, so the scope's next call reconnects.
func (s *Scope) forget(c *connector, ls *liveSession) {
	s.sess.mu.Lock()
	e := s.sess.byID[c.spec.ID]
	mine := e != nil && e.ls == ls
	s.sess.mu.Unlock()
	if mine && !ls.dead.Swap(true) {
		c.g.closeLater(ls)
	}
}

// closeSessions ends every session of the scope. Closing one sends the
// downstream its session DELETE; that runs on a goroutine the gateway
// waits for, so a scope's owner never waits on a downstream to close.
func (s *Scope) closeSessions() {
	s.sess.mu.Lock()
	s.sess.closed = true
	var open []*liveSession
	for _, e := range s.sess.byID {
		if e.ls != nil && !e.ls.dead.Swap(true) {
			open = append(open, e.ls)
		}
	}
	s.sess.byID = nil
	s.sess.mu.Unlock()
	for _, ls := range open {
		s.g.closeLater(ls)
	}
}

// closeLater closes a session on a goroutine Close waits for. Once Close
// waits, a session closes on the caller's goroutine instead: a WaitGroup
// must not grow while it is waited on (the race detector caught a scope
// closing as the gateway did).
func (g *Gateway) closeLater(ls *liveSession) {
	g.lateMu.Lock()
	if g.lateClosed {
		g.lateMu.Unlock()
		ls.close()
		return
	}
	g.wg.Add(1)
	g.lateMu.Unlock()
	go func() {
		defer g.wg.Done()
		ls.close()
	}()
}
