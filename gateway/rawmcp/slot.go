package rawmcp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Slot receives the raw JSON-RPC result of the requests written with a
// context that carries it (WithSlot); concurrent calls each carry their own,
// so they never mix. The zero value is ready to use.
type Slot struct {
	// ProgressToken, when set, is the progress token the request carries:
	// the transport counts the notifications/progress for it that it reads
	// before the result (ProgressSeen), so the caller can wait until the
	// SDK's handler, which runs on another goroutine, has delivered them.
	ProgressToken string

	mu       sync.Mutex
	result   []byte
	got      bool
	progress int
	forget   []func() // drop pending registrations whose answer never came
}

// ProgressSeen is how many notifications/progress for ProgressToken the
// transport read while the slot was pending.
func (s *Slot) ProgressSeen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}

func (s *Slot) sawProgress() {
	s.mu.Lock()
	s.progress++
	s.mu.Unlock()
}

// progressToken returns the progressToken of a notifications/progress
// message's params, "" for anything else.
func progressToken(method string, params []byte) string {
	if method != "notifications/progress" {
		return ""
	}
	var p struct {
		Token any `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	t, _ := p.Token.(string)
	return t
}

// Release forgets the slot's pending requests; call it when the call ends.
func (s *Slot) Release() {
	s.mu.Lock()
	fs := s.forget
	s.forget = nil
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Result returns a copy of the captured result bytes; ok is false when no
// successful response was seen.
func (s *Slot) Result() (result []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.got
}

func (s *Slot) set(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.result = append([]byte(nil), b...)
	s.got = true
}

type slotKey struct{}

// WithSlot returns ctx carrying s: the requests written with it fill s.
func WithSlot(ctx context.Context, s *Slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

func slotFrom(ctx context.Context) *Slot {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s
}

// Transport wraps a stdio or in-process transport so that the raw result of
// each request reaches the Slot of the context it was written with (the SDK
// passes the caller's context down to Connection.Write). Streamable HTTP is
// read off the wire by Sniff instead: the SDK drives its HTTP session through
// an unexported method a wrapper would hide.
func Transport(inner mcp.Transport) mcp.Transport { return rawTransport{inner: inner} }

type rawTransport struct{ inner mcp.Transport }

func (t rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: conn, pending: map[any]*Slot{}, tokens: map[string]*Slot{}}, nil
}

type rawConn struct {
	mcp.Connection
	mu      sync.Mutex
	pending map[any]*Slot    // request ID → slot
	tokens  map[string]*Slot // progress token → slot
}

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if slot := slotFrom(ctx); slot != nil {
			id, token := req.ID.Raw(), slot.ProgressToken
			c.mu.Lock()
			c.pending[id] = slot
			if token != "" {
				c.tokens[token] = slot
			}
			c.mu.Unlock()
			slot.mu.Lock()
			slot.forget = append(slot.forget, func() {
				c.mu.Lock()
				if c.pending[id] == slot {
					delete(c.pending, id)
				}
				if token != "" && c.tokens[token] == slot {
					delete(c.tokens, token)
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
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
		if token := progressToken(req.Method, req.Params); token != "" {
			c.mu.Lock()
			slot := c.tokens[token]
			c.mu.Unlock()
			if slot != nil {
				slot.sawProgress()
			}
		}
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
