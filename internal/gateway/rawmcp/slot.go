package rawmcp

import (
	"context"
	"encoding/json"
	"fmt"
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

	// OnInput, when set, is called once the downstream has sent a request
	// for input — elicitation/create or sampling/createMessage — while the
	// slot's request is pending, and the SDK has sent its answer (a JSON-RPC
	// error: connecta declares no such capability). It ends the call at once
	// instead of waiting for a downstream that may wait for better input.
	// Firing only after the answer is out keeps ending the call's stream
	// from dropping the request unanswered.
	OnInput func()

	mu       sync.Mutex
	input    string // the first input request's method
	answered bool   // OnInput has run
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

// InputRequested returns the method of the first input request the
// downstream sent while the slot was pending, "" when none came.
func (s *Slot) InputRequested() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.input
}

// isInputRequest reports whether method asks the client for input.
func isInputRequest(method string) bool {
	return method == "elicitation/create" || method == "sampling/createMessage"
}

// sawInputRequest records the input request's method (the first one wins).
func (s *Slot) sawInputRequest(method string) {
	s.mu.Lock()
	if s.input == "" {
		s.input = method
	}
	s.mu.Unlock()
}

// inputAnswered runs OnInput once the SDK's answer has been sent.
func (s *Slot) inputAnswered() {
	s.mu.Lock()
	first := !s.answered
	s.answered = true
	s.mu.Unlock()
	if first && s.OnInput != nil {
		s.OnInput()
	}
}

// onRelease adds f to what Release runs.
func (s *Slot) onRelease(f func()) {
	s.mu.Lock()
	s.forget = append(s.forget, f)
	s.mu.Unlock()
}

// Awaiting pairs a downstream's input requests, read off a call's HTTP
// stream, with the client's answers, written as POSTs of their own; one per
// connector. The zero value is ready to use.
type Awaiting struct {
	mu sync.Mutex
	m  map[string]*Slot
}

func awaitKey(session string, id any) string { return session + "\x00" + fmt.Sprint(id) }

func (a *Awaiting) expect(session string, id any, slot *Slot) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if a.m == nil {
		a.m = map[string]*Slot{}
	}
	m := a.m // made once, never replaced
	a.mu.Unlock()
	holdUntilRelease(&a.mu, m, awaitKey(session, id), slot)
}

// holdUntilRelease files slot under k in m (guarded by mu) until the slot
// is released; a later slot filed under the same k is not removed.
func holdUntilRelease[K comparable](mu *sync.Mutex, m map[K]*Slot, k K, slot *Slot) {
	mu.Lock()
	m[k] = slot
	mu.Unlock()
	slot.onRelease(func() {
		mu.Lock()
		if m[k] == slot {
			delete(m, k)
		}
		mu.Unlock()
	})
}

// pending reports whether any input request awaits its answer.
func (a *Awaiting) pending() bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m) > 0
}

// answered fires the slot waiting for the answer to (session, id).
func (a *Awaiting) answered(session string, id any) {
	k := awaitKey(session, id)
	a.mu.Lock()
	slot := a.m[k]
	delete(a.m, k)
	a.mu.Unlock()
	if slot != nil {
		slot.inputAnswered()
	}
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
	return &rawConn{Connection: conn, pending: map[any]*Slot{}, tokens: map[string]*Slot{}, inputs: map[any]*Slot{}}, nil
}

type rawConn struct {
	mcp.Connection
	mu      sync.Mutex
	pending map[any]*Slot    // request ID → slot
	tokens  map[string]*Slot // progress token → slot
	inputs  map[any]*Slot    // the downstream's input request ID → the call it ends
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
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		c.mu.Lock()
		slot := c.inputs[resp.ID.Raw()]
		delete(c.inputs, resp.ID.Raw())
		c.mu.Unlock()
		err := c.Connection.Write(ctx, msg)
		if slot != nil {
			slot.inputAnswered()
		}
		return err
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && isInputRequest(req.Method) {
		// A stdio or in-process request names no call it belongs to: it is
		// the pending call's when exactly one is pending.
		if slot := c.onlyPending(); slot != nil {
			slot.sawInputRequest(req.Method)
			holdUntilRelease(&c.mu, c.inputs, req.ID.Raw(), slot)
		}
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

// onlyPending returns the one slot with requests pending, nil when there are
// none or several.
func (c *rawConn) onlyPending() *Slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	var only *Slot
	for _, s := range c.pending {
		if only != nil && s != only {
			return nil
		}
		only = s
	}
	return only
}
