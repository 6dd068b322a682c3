package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
)

// Under versionNegotiation auto the SDK's Connect sends server/discover
// first and falls back to initialize on any error answer, all under the
// caller's context. A downstream that never answers an unknown method — it
// drops the request, holds the POST, or opens a stream that never carries
// the answer — would hold Connect until the caller's deadline. discoverBound
// gives the discover alone DiscoverTimeout: past it, the request is
// cancelled and the SDK is handed a JSON-RPC error for it (a late real
// answer finds no pending call and is ignored), so it falls back to
// initialize on the same connection; the connector remembers, and its later
// connections start at initialize.

// discoverMethod is the 2026-07-28 probe (SEP-2575).
const discoverMethod = "server/discover"

// discoverBound is one connector's bound on its server/discover requests.
type discoverBound struct {
	timeout time.Duration // DiscoverTimeout; tests shorten it
	// silent: a discover went unanswered; later connects use initialize.
	silent atomic.Bool
}

// unanswered is the JSON-RPC error handed to the SDK in place of an answer.
func (b *discoverBound) unanswered(id jsonrpc.ID) *jsonrpc.Response {
	b.silent.Store(true)
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
		Message: "connecta: no answer to server/discover within " + b.timeout.String() + "; using initialize"}}
}

// roundTrip is captureTransport's path for a discover POST (HTTP): the
// bound covers the response headers and the body; a timeout before the
// answer becomes an error answer (a JSON body, or an SSE event after what
// the stream carried).
func (b *discoverBound) roundTrip(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	id, ok := requestID(req)
	if !ok {
		return base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	var fired atomic.Bool
	timer := time.AfterFunc(b.timeout, func() { fired.Store(true); cancel() })
	timedOut := func() bool { return fired.Load() && req.Context().Err() == nil }
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		cancel()
		if timedOut() {
			return b.errorResponse(req, id), nil
		}
		return nil, err
	}
	sse := strings.HasPrefix(strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Type"))), "text/event-stream")
	body := &discoverBody{rc: resp.Body, stop: func() { timer.Stop(); cancel() }, timedOut: timedOut,
		late: func(started bool) []byte { return b.errorBytes(id, sse, started) }}
	if sse {
		body.watch = newAnswerWatch(id)
	}
	resp.Body = body
	return resp, nil
}

// errorResponse is a whole HTTP answer carrying the error (no headers came).
func (b *discoverBound) errorResponse(req *http.Request, id jsonrpc.ID) *http.Response {
	body := b.errorBytes(id, false, false)
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}

// errorBytes encodes the error as a JSON body, or as an SSE event; after
// bytes of the stream (started) the event begins with a blank line, which
// ends whatever event the stream had begun.
func (b *discoverBound) errorBytes(id jsonrpc.ID, sse, started bool) []byte {
	data, err := jsonrpc.EncodeMessage(b.unanswered(id))
	if err != nil {
		return nil
	}
	if !sse {
		return data
	}
	var out bytes.Buffer
	if started {
		out.WriteString("\n\n")
	}
	out.WriteString("event: message\ndata: ")
	out.Write(data)
	out.WriteString("\n\n")
	return out.Bytes()
}

// discoverBody is a discover's response body under the bound: when the
// timeout cancels the read, the reader yields the error answer and ends.
// On an SSE answer the body also ends right after the event that answers
// the discover: the SDK takes that event and then drains the body to its
// end, and a server that keeps the stream open (the spec says it SHOULD
// close it) would otherwise hold the drain until the bound fired and be
// marked silent although it had answered.
type discoverBody struct {
	rc       io.ReadCloser
	stop     func()
	timedOut func() bool
	late     func(started bool) []byte
	started  bool
	tail     *bytes.Reader // the error answer, once timed out
	watch    *answerWatch  // SSE only
	answered bool          // the watch saw the answer: the body has ended
}

func (d *discoverBody) Read(p []byte) (int, error) {
	if d.tail != nil {
		return d.tail.Read(p)
	}
	if d.answered {
		return 0, io.EOF
	}
	n, err := d.rc.Read(p)
	if n > 0 {
		d.started = true
		if d.watch != nil && d.watch.feed(p[:n]) {
			d.answered = true
			d.stop()
			return n, nil
		}
	}
	switch {
	case err == io.EOF:
		d.stop()
	case err != nil && d.timedOut():
		d.tail = bytes.NewReader(d.late(d.started))
		if n == 0 {
			return d.tail.Read(p)
		}
		return n, nil
	}
	return n, err
}

func (d *discoverBody) Close() error {
	d.stop()
	return d.rc.Close()
}

// maxWatchedEvent bounds what answerWatch holds of one SSE event: a
// server/discover answer is a few KiB; past this the watch gives up and
// the stream is read to its end (or to the bound) as before.
const maxWatchedEvent = 1 << 20

// answerWatch follows an SSE stream's events and reports the one, named
// "message" or not named (as the SDK reads them), carrying the JSON-RPC
// response to id.
type answerWatch struct {
	id     jsonrpc.ID
	events rawmcp.Events
}

func newAnswerWatch(id jsonrpc.ID) *answerWatch {
	return &answerWatch{id: id, events: rawmcp.Events{Max: maxWatchedEvent}}
}

// feed reads more of the stream and reports whether an event in it ended
// as the answer.
func (w *answerWatch) feed(p []byte) bool {
	return w.events.Feed(p, func(name string, data []byte) bool {
		if name != "" && name != "message" {
			return false
		}
		msg, err := jsonrpc.DecodeMessage(data)
		resp, ok := msg.(*jsonrpc.Response)
		return err == nil && ok && resp.ID == w.id
	})
}

// requestID is the JSON-RPC id of a POST's body.
func requestID(req *http.Request) (jsonrpc.ID, bool) {
	raw, _, ok := rawmcp.RequestHead(req, MaxResponseBodyBytes)
	if !ok {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(raw)
	return id, err == nil
}

// transport bounds the discover on a stdio or in-process connection, where
// the answer is a message read off the connection: a pump reads the
// connection so that an error answer can be handed over when the timer
// fires first. The HTTP connection is not wrapped (the SDK needs its own
// type there); captureTransport bounds its discover POST instead.
func (b *discoverBound) transport(inner mcp.Transport) mcp.Transport {
	return discoverTransport{inner: inner, b: b}
}

type discoverTransport struct {
	inner mcp.Transport
	b     *discoverBound
}

func (t discoverTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	readCtx, cancel := context.WithCancel(context.Background())
	c := &discoverConn{Connection: conn, b: t.b, in: make(chan readResult), late: make(chan jsonrpc.Message),
		closed: make(chan struct{}), cancel: cancel, waiting: map[any]*time.Timer{}}
	go c.pump(readCtx)
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

// discoverConn hands the SDK what the connection reads, and an error
// answer for a discover still unanswered when its timer fires. The pump is
// the connection's: it ends at the first read error or at Close.
type discoverConn struct {
	mcp.Connection
	b         *discoverBound
	in        chan readResult // from the pump; closed after its last result
	late      chan jsonrpc.Message
	closed    chan struct{}
	closeOnce sync.Once
	cancel    context.CancelFunc

	mu      sync.Mutex
	waiting map[any]*time.Timer // discover request id → its timer, until answered
}

func (c *discoverConn) pump(ctx context.Context) {
	defer close(c.in)
	for {
		msg, err := c.Connection.Read(ctx)
		select {
		case c.in <- readResult{msg, err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *discoverConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case r, ok := <-c.in:
		if !ok {
			return nil, io.EOF
		}
		if resp, isResp := r.msg.(*jsonrpc.Response); isResp {
			c.answered(resp.ID)
		}
		return r.msg, r.err
	case msg := <-c.late:
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *discoverConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != discoverMethod {
		return c.Connection.Write(ctx, msg)
	}
	id := req.ID
	c.mu.Lock()
	c.waiting[id.Raw()] = time.AfterFunc(c.b.timeout, func() {
		if !c.answered(id) {
			return
		}
		select {
		case c.late <- c.b.unanswered(id):
		case <-c.closed:
		}
	})
	c.mu.Unlock()
	if err := c.Connection.Write(ctx, msg); err != nil {
		c.answered(id) // the SDK has the error; no answer is awaited
		return err
	}
	return nil
}

// answered forgets a discover's timer; it reports whether id was awaited.
func (c *discoverConn) answered(id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.waiting[id.Raw()]
	if ok {
		t.Stop()
		delete(c.waiting, id.Raw())
	}
	return ok
}

func (c *discoverConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.cancel()
	})
	return c.Connection.Close()
}
