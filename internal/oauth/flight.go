package oauth

import "context"

// flight is work the Manager finishes on its own once a token request is
// under way: a refresh (grant.go) or a callback's code exchange (flow.go).
// Either spends something at the authorization server — a refresh token it
// may rotate, a one-time code — so whoever asked for it must not be able to
// take the request with it when they leave: the answer would be lost and
// the grant (or the sign-in) with it.
type flight[T any] struct {
	done chan struct{} // closed when v and err are set
	v    T
	err  error
}

// fly returns the flight running under key in flights, or starts work as
// that key's flight: on a goroutine the Manager owns (Close waits for it),
// on a context that keeps ctx's values (the trace) but not its
// cancellation or deadline, bounded by TokenRequestTimeout. Callers asking
// for the same key meanwhile share the one flight. nil, with nothing
// started, once Close has begun.
func fly[T any](ctx context.Context, m *Manager, flights map[string]*flight[T], key string, work func(context.Context) (T, error)) *flight[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if f := flights[key]; f != nil {
		return f
	}
	f := &flight[T]{done: make(chan struct{})}
	flights[key] = f
	m.flying.Add(1)
	detached, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.tokenRequestTimeout)
	go func() {
		defer m.flying.Done()
		defer cancel()
		f.v, f.err = work(detached)
		m.mu.Lock()
		delete(flights, key)
		m.mu.Unlock()
		close(f.done)
	}()
	return f
}

// wait reports whether the flight ended (then f.v and f.err are its
// result) before ctx did; when ctx ends first, the flight goes on.
func (f *flight[T]) wait(ctx context.Context) bool {
	select {
	case <-f.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// Close waits for the flights — refreshes and callbacks — under way (each
// at most TokenRequestTimeout), so that what the authorization server
// issued is stored before the store closes. Afterwards a refresh fails
// unavailable and a callback asks the browser to come back, its flow
// untouched; fresh tokens and starting flows are not affected. Safe to call
// more than once.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.flying.Wait()
}
