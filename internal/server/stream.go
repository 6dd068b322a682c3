//lint:file-ignore SA1019 MCP logging is deprecated upstream (SEP-2577) but remains in the protocol versions served; program output streams through it until its replacement exists.

package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway"
)

// metaLogLevel is the per-request log level key of _meta: in stateless
// HTTP, logging/setLevel cannot persist from one request to the next.
const metaLogLevel = mcp.MetaKeyLogLevel

// metaLogLevelMiddleware makes a tools/call's
// _meta["io.modelcontextprotocol/logLevel"] stream under the session
// protocols too. The SDK honours that key only under 2026-07-28; before it,
// ServerSession.Log sends nothing until logging/setLevel has set the
// session's level — never, on a stateless HTTP request, and on stdio only
// after the client set one. The request stream filters at the request's
// own level (ConsoleEntry), so the session's floor is opened to debug here:
// over stdio exactly what HTTP sends.
func metaLogLevelMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && call.Session != nil {
			if _, level := streamWants(call.Params.Meta); level != "" {
				if ip := call.Session.InitializeParams(); ip == nil || ip.ProtocolVersion < mcpStatelessVersion {
					_, _ = next(ctx, "logging/setLevel", &mcp.ServerRequest[*mcp.SetLoggingLevelParams]{
						Session: call.Session, Params: &mcp.SetLoggingLevelParams{Level: "debug"}})
				}
			}
		}
		return next(ctx, method, req)
	}
}

// mcpStatelessVersion is the first protocol version whose requests carry
// their log level in _meta for the SDK to honour.
const mcpStatelessVersion = "2026-07-28"

// levelRanks ranks the MCP logging levels, lowest first.
var levelRanks = map[mcp.LoggingLevel]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// levelRank is l's rank; -1 for none.
func levelRank(l mcp.LoggingLevel) int {
	if r, ok := levelRanks[l]; ok {
		return r
	}
	return -1
}

// consoleLevel maps a console method to the MCP level its entries are sent
// at (log → info, warn → warning).
func consoleLevel(method string) mcp.LoggingLevel {
	switch method {
	case "warn":
		return "warning"
	case "error":
		return "error"
	case "debug":
		return "debug"
	}
	return "info"
}

// streamWants reads what a request's _meta asks to be streamed: a progress
// token, a log level, or neither (then the reply is the ordinary JSON one,
// byte for byte). One function decides both the response's content type and
// what the handler sends, so the two never disagree.
func streamWants(meta map[string]any) (token any, level mcp.LoggingLevel) {
	if t, ok := meta["progressToken"]; ok {
		switch t.(type) {
		case string, float64, int, int64, int32:
			token = t
		}
	}
	if l, ok := meta[metaLogLevel].(string); ok {
		if levelRank(mcp.LoggingLevel(l)) >= 0 {
			level = mcp.LoggingLevel(l)
		}
	}
	return token, level
}

// maxStreamEvents bounds one request's queued notifications. The child caps
// console entries (X4: 200 and a marker), so only downstream progress can
// approach it; what passes the bound is dropped, never the result.
const maxStreamEvents = 4096

// requestStream is one request's channel of notifications back to its
// client while the work runs: progress (one counter per request, whatever
// the source) and log messages. Events are queued and sent on a goroutine
// of the request's own, so a slow client never stalls a program's run; close
// sends what is queued before the result is written.
type requestStream struct {
	// ctx is the SDK handler's context: it names the request the
	// notification belongs to, which routes it onto that request's response.
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	level   mcp.LoggingLevel

	// gate, on HTTP, holds the SDK's per-event flushes while the sender
	// runs; the sender flushes once at the end of each burst.
	gate *flushGate

	mu       sync.Mutex
	queue    []streamEvent
	progress float64
	sent     bool // a progress notification was queued
	running  bool
	closed   bool
	idle     chan struct{} // closed when the sender has emptied the queue and stopped
	more     chan struct{} // wakes a sender that lingers at the end of a burst
}

// burstWait is how long the sender lingers for the next event before it
// flushes: a program's console lines come a few microseconds apart, so a
// loop's lines share one write, and a line that stands alone is delayed by
// this much.
const burstWait = time.Millisecond

type streamEvent struct {
	progress float64 // > 0: a progress notification with this value
	total    float64 // the downstream's total, 0 when none
	passed   bool    // progress is the downstream's own value
	message  string
	level    mcp.LoggingLevel // "" for progress
}

// newRequestStream returns nil when the request asked for nothing.
func newRequestStream(ctx context.Context, session *mcp.ServerSession, meta map[string]any) *requestStream {
	token, level := streamWants(meta)
	if session == nil || (token == nil && level == "") {
		return nil
	}
	return &requestStream{ctx: ctx, session: session, token: token, level: level, more: make(chan struct{}, 1)}
}

// ConsoleEntry is one console entry a program's child accepted: progress
// with the entry's text, and a log message at the mapped level when that is
// at or above the requested one.
func (st *requestStream) ConsoleEntry(method, text string) {
	if st.token != nil {
		st.enqueue(streamEvent{message: text}, true)
	}
	if l := consoleLevel(method); st.level != "" && levelRank(l) >= levelRank(st.level) {
		st.enqueue(streamEvent{message: text, level: l}, false)
	}
}

// Progress is one downstream progress notification inside a program: it
// advances the counter and carries no text (no downstream text passes the
// program).
func (st *requestStream) Progress() {
	if st.token != nil {
		st.enqueue(streamEvent{}, true)
	}
}

// forward is one downstream progress notification of a top-level call: it
// passes as the downstream sent it (progress, total, message), as its result
// does; only the token is the caller's.
func (st *requestStream) forward(p gateway.Progress) {
	if st.token != nil {
		st.enqueue(streamEvent{progress: p.Progress, total: p.Total, message: p.Message, passed: true}, true)
	}
}

func (st *requestStream) enqueue(e streamEvent, progress bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || len(st.queue) >= maxStreamEvents {
		return
	}
	if progress {
		// A downstream's own value passes when it keeps increasing (as the
		// protocol requires); otherwise, and for a program's entries, the
		// request's counter advances by one.
		if !e.passed || (st.sent && e.progress <= st.progress) {
			e.progress = st.progress + 1
		}
		st.progress, st.sent = e.progress, true
	}
	st.queue = append(st.queue, e)
	if !st.running {
		st.running = true
		st.idle = make(chan struct{})
		go st.send(st.idle)
		return
	}
	st.wake()
}

// wake signals a lingering sender (st.mu held or not: the channel holds one).
func (st *requestStream) wake() {
	select {
	case st.more <- struct{}{}:
	default:
	}
}

// send drains the queue, then stops (the next event starts it again).
func (st *requestStream) send(idle chan struct{}) {
	defer close(idle)
	lingered := false
	for {
		st.mu.Lock()
		if len(st.queue) == 0 {
			if st.gate != nil && !lingered && !st.closed {
				// The end of a burst, perhaps: wait a moment for the next
				// event before paying for a write.
				st.mu.Unlock()
				t := time.NewTimer(burstWait)
				select {
				case <-st.more:
				case <-t.C:
				}
				t.Stop()
				lingered = true
				continue
			}
			if st.gate != nil && lingered {
				// Flush outside the lock (a slow client must not block the
				// run's enqueue); only the sender writes while it runs.
				st.mu.Unlock()
				st.gate.flushNow()
				lingered = false
				st.mu.Lock()
				if len(st.queue) > 0 {
					st.mu.Unlock()
					continue
				}
			}
			st.running = false
			st.mu.Unlock()
			return
		}
		lingered = false
		e := st.queue[0]
		st.queue = st.queue[1:]
		st.mu.Unlock()
		// A failed send means the client is gone; the request's own
		// cancellation ends the work, so there is nothing to do here.
		if e.level != "" {
			_ = st.session.Log(st.ctx, &mcp.LoggingMessageParams{Level: e.level, Data: e.message})
		} else {
			_ = st.session.NotifyProgress(st.ctx, &mcp.ProgressNotificationParams{ProgressToken: st.token, Progress: e.progress, Total: e.total, Message: e.message})
		}
	}
}

// close accepts no more events and waits until the queued ones are sent:
// every notification precedes the result on the response.
func (st *requestStream) close() {
	st.mu.Lock()
	st.closed = true
	idle := st.idle
	running := st.running
	st.mu.Unlock()
	st.wake() // a lingering sender flushes and stops at once
	if running {
		<-idle
	}
}

type streamKey struct{}

// ProgramNotifier is what execute_code's contract streams to (a program's
// console entries and call progress, sent as MCP notifications while it
// runs): nil when the request asked for no progress and no log level.
func ProgramNotifier(ctx context.Context) interface {
	ConsoleEntry(method, text string)
	Progress()
} {
	if st, ok := ctx.Value(streamKey{}).(*requestStream); ok && st != nil {
		return st
	}
	return nil
}

func streamFrom(ctx context.Context) *requestStream {
	st, _ := ctx.Value(streamKey{}).(*requestStream)
	return st
}

// flushGate coalesces an event stream's flushes: the SDK flushes after every
// event, and while the request's sender is running (it writes every
// notification, and it alone writes then) those flushes wait; the sender
// flushes once at the end of each burst. The result's flush is never held:
// requestStream.close stops the sender first.
type flushGate struct {
	http.ResponseWriter
	stream atomic.Pointer[requestStream] // set once the request's stream exists
}

func (g *flushGate) Flush() {
	if st := g.stream.Load(); st != nil && st.sending() {
		return
	}
	g.flushNow()
}

func (g *flushGate) flushNow() { _ = http.NewResponseController(g.ResponseWriter).Flush() }

func (g *flushGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// sending reports a running sender.
func (st *requestStream) sending() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.running
}
