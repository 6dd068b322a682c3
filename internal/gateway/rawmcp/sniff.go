package rawmcp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Sniff wraps resp.Body so that, when req's context carries a Slot and req
// is a tools/call or tools/list POST answered 2xx, the matching JSON-RPC
// result fills the Slot as the SDK reads the body (a JSON body or SSE
// events). The sniffer sees the bytes before the SDK's reader does, so the
// Slot is filled before the call returns. maxRequestBytes bounds how much of
// the request body is read to find its id.
//
// An input request on the stream (elicitation/create, sampling/createMessage)
// is recorded on the Slot and in aw, so that Answered, seeing the SDK's
// answer go out, ends the call (Slot.OnInput).
func Sniff(req *http.Request, resp *http.Response, maxRequestBytes int64, aw *Awaiting) {
	slot := slotFrom(req.Context())
	if slot == nil || req.Method != http.MethodPost || resp.Body == nil || resp.StatusCode/100 != 2 {
		return
	}
	id, ok := callID(req, maxRequestBytes)
	if !ok {
		return
	}
	sse := strings.HasPrefix(strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Type"))), "text/event-stream")
	resp.Body = &rawSniffer{rc: resp.Body, slot: slot, id: id, sse: sse, aw: aw, session: req.Header.Get("Mcp-Session-Id")}
}

// callID returns the JSON-RPC id of a tools/call or tools/list request body.
func callID(req *http.Request, maxBytes int64) (any, bool) {
	id, method, ok := RequestHead(req, maxBytes)
	if !ok || (method != "tools/call" && method != "tools/list") {
		return nil, false
	}
	return id, true
}

// RequestHead returns the JSON-RPC id and method of a POST's body, read
// through GetBody so that the body stays whole for the real round trip; ok
// is false for a body without an id (a notification) or one that does not
// parse within maxBytes.
func RequestHead(req *http.Request, maxBytes int64) (id any, method string, ok bool) {
	if req.Body == nil || req.GetBody == nil {
		return nil, "", false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, "", false
	}
	defer body.Close()
	var head struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.NewDecoder(io.LimitReader(body, maxBytes)).Decode(&head) != nil || head.ID == nil {
		return nil, "", false
	}
	return head.ID, head.Method, true
}

// rawSniffer passes a response body through, picking out the JSON-RPC
// response whose id matches, from a JSON body or from SSE events.
type rawSniffer struct {
	rc   io.ReadCloser
	slot *Slot
	id   any
	sse  bool
	aw   *Awaiting
	// session is the request's Mcp-Session-Id: input request IDs are the
	// downstream session's.
	session string
	buf     []byte // JSON: the whole body
	events  Events // SSE
	done    bool
}

func (s *rawSniffer) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if !s.done && n > 0 {
		if s.sse {
			s.events.Feed(p[:n], s.event)
		} else {
			s.buf = append(s.buf, p[:n]...)
		}
	}
	if err == io.EOF && !s.done {
		if s.sse {
			s.events.End(s.event)
		} else {
			s.match(s.buf)
			s.buf = nil
		}
		s.done = true
	}
	return n, err
}

func (s *rawSniffer) Close() error { return s.rc.Close() }

// event matches an SSE event's data, whatever the event's name, and
// reports whether it was the response.
func (s *rawSniffer) event(_ string, data []byte) bool {
	s.match(data)
	return s.done
}

// match stores msg's result when it is the response to our request, and
// counts the progress notifications for the slot's token before it.
func (s *rawSniffer) match(msg []byte) {
	var resp struct {
		ID     any             `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(msg, &resp) != nil {
		return
	}
	if resp.ID != nil && resp.Result == nil && isInputRequest(resp.Method) {
		// A request on this call's stream is this call's.
		s.slot.sawInputRequest(resp.Method)
		s.aw.expect(s.session, resp.ID, s.slot)
		return
	}
	if resp.ID == nil && s.slot.ProgressToken != "" && progressToken(resp.Method, resp.Params) == s.slot.ProgressToken {
		s.slot.sawProgress()
		return
	}
	if resp.Result == nil || resp.ID != s.id {
		return
	}
	s.slot.set(resp.Result)
	s.done = true
	s.buf = nil
}

// Answered tells aw that req, when it is a POST carrying a JSON-RPC response
// (the client's answer to a downstream request), has been sent; call it
// after the round trip. Requests are read only while an input request
// awaits its answer.
func Answered(req *http.Request, aw *Awaiting, maxRequestBytes int64) {
	if !aw.pending() || req.Method != http.MethodPost || req.GetBody == nil {
		return
	}
	body, err := req.GetBody()
	if err != nil {
		return
	}
	defer body.Close()
	var msg struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.NewDecoder(io.LimitReader(body, maxRequestBytes)).Decode(&msg) != nil || msg.ID == nil || msg.Method != "" {
		return
	}
	aw.answered(req.Header.Get("Mcp-Session-Id"), msg.ID)
}
