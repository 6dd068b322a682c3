package gateway

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK gap (go-sdk issue #967): the client offers no raw result bytes and
// no HTTP facts. Three files answer it and nothing else: rawconn.go (the raw
// JSON-RPC result of stdio and in-process calls), rawhttp.go (the same read
// off a streamable HTTP response, SSE included) and transport.go (status,
// Retry-After, errno and the body cap, per request). They reach their callers
// through context values (rawSlot, exchange) because the SDK passes the
// caller's context down. Delete them when the SDK closes the gap.
//
// The SDK client decodes results into Go values (maps), which reorders keys,
// turns big integers into floats and drops the difference between a missing
// and a false annotation. The gateway needs the exact bytes: the listed tool
// definitions (S9 and validator caches key on them) and the structured
// result (S5 passes it through). rawTransport wraps any transport and hands
// the raw JSON-RPC result of a request to the rawSlot carried by the context
// the request was written with — the SDK passes the caller's context down to
// Connection.Write, so concurrent calls never mix.

type rawSlot struct {
	mu     sync.Mutex
	result []byte
	got    bool
	forget []func() // drop pending registrations whose answer never came
}

// release forgets the slot's pending requests; call it when the call ends.
func (s *rawSlot) release() {
	s.mu.Lock()
	fs := s.forget
	s.forget = nil
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (s *rawSlot) set(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = append([]byte(nil), b...)
	s.got = true
}

func (s *rawSlot) get() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.got
}

type rawSlotKey struct{}

func withRawSlot(ctx context.Context, s *rawSlot) context.Context {
	return context.WithValue(ctx, rawSlotKey{}, s)
}

type rawTransport struct{ inner mcp.Transport }

func (t rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: conn, pending: map[any]*rawSlot{}}, nil
}

type rawConn struct {
	mcp.Connection
	mu      sync.Mutex
	pending map[any]*rawSlot // request ID → slot
}

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if slot, _ := ctx.Value(rawSlotKey{}).(*rawSlot); slot != nil {
			id := req.ID.Raw()
			c.mu.Lock()
			c.pending[id] = slot
			c.mu.Unlock()
			slot.mu.Lock()
			slot.forget = append(slot.forget, func() {
				c.mu.Lock()
				if c.pending[id] == slot {
					delete(c.pending, id)
				}
				c.mu.Unlock()
			})
			slot.mu.Unlock()
			err := c.Connection.Write(ctx, msg)
			if err != nil {
				c.mu.Lock()
				delete(c.pending, req.ID.Raw())
				c.mu.Unlock()
			}
			return err
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		c.mu.Lock()
		slot := c.pending[resp.ID.Raw()]
		delete(c.pending, resp.ID.Raw())
		c.mu.Unlock()
		if slot != nil && resp.Error == nil {
			slot.set(resp.Result)
		}
	}
	return msg, nil
}
