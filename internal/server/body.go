package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sync/semaphore"
)

// The /mcp body is read by connecta, not by the SDK, so that
//
//   - a JSON-RPC batch is refused (HTTP 400, −32600) before admission, for
//     every protocol version and with or without MCP-Protocol-Version (the
//     SDK refuses batches only from 2025-06-18 and reads a request without
//     the header as 2025-03-26): one HTTP request is one unit of admission;
//   - a body that has not arrived within requests.bodyTimeoutMs of its
//     permit ends the request with 408, freeing the permit: slow senders
//     cannot hold every slot;
//   - the body is held once, in a buffer of its declared size, and that
//     buffer is let go as soon as the SDK has read it.
//
// Deadlines are the connection's read deadline, cleared the moment the body
// has been read: net/http's background read (which watches for the client
// going away once the body is consumed) would otherwise hit it and cancel
// the request.

// rpcInvalidRequest is JSON-RPC's "Invalid Request".
const rpcInvalidRequest = -32600

// batchMessage is the refusal's error message.
const batchMessage = "JSON-RPC batches are not supported: send one request per HTTP request."

// peekSize is how much of a body is read at a time before admission, while
// looking for its first non-blank byte.
const peekSize = 512

// peekedBody replays the bytes read before admission, then the rest. The
// JSON whitespace before the first value is dropped, not replayed: it means
// nothing, and a body of blanks must not be held.
type peekedBody struct {
	head    []byte
	rest    io.ReadCloser
	eof     bool  // the whole body is in head
	skipped int64 // leading blanks dropped, counted against the body limit
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.eof {
		return 0, io.EOF
	}
	return b.rest.Read(p)
}

func (b *peekedBody) Close() error { return b.rest.Close() }

// refuseBatches runs before admission: a declared oversize body is 413, a
// body that starts with '[' (after blanks) is a batch and refused, and a
// body whose first bytes do not come within the body timeout is 408.
func (s *Server) refuseBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := s.requestLimits()
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > lim.MaxBodyBytes {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("Request body exceeds %d bytes.", lim.MaxBodyBytes))
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(lim.BodyTimeout))
		head, skipped, eof, err := peekFirst(r.Body, lim.MaxBodyBytes)
		if eof {
			_ = rc.SetReadDeadline(time.Time{}) // see the package comment above
		}
		if err != nil {
			s.bodyFailed(w, err, lim)
			return
		}
		if len(head) > 0 && head[0] == '[' {
			writeBatchRefusal(w)
			return
		}
		if r.ContentLength >= 0 {
			r.ContentLength -= skipped
		}
		r.Body = &peekedBody{head: head, rest: r.Body, eof: eof, skipped: skipped}
		next.ServeHTTP(w, r)
	})
}

// peekFirst reads past the body's leading JSON whitespace, however much of
// it there is up to limit (errBodyTooLarge beyond), and returns what it read
// from the first non-blank byte on (empty at the end of a blank body), how
// many blanks it dropped, and whether the body ended.
func peekFirst(body io.Reader, limit int64) (head []byte, skipped int64, eof bool, err error) {
	buf := make([]byte, peekSize)
	for {
		n, err := body.Read(buf)
		blanks := int64(blankPrefix(buf[:n]))
		skipped += blanks
		if skipped > limit {
			return nil, skipped, false, errBodyTooLarge
		}
		if blanks < int64(n) {
			head = buf[blanks:n]
		}
		switch {
		case errors.Is(err, io.EOF):
			return head, skipped, true, nil
		case err != nil:
			return nil, skipped, false, err
		case head != nil:
			return head, skipped, false, nil
		}
	}
}

// blankPrefix is how many of b's first bytes are JSON whitespace.
func blankPrefix(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return i
		}
	}
	return len(b)
}

// bodyRead runs once the request holds a permit: the rest of the body must
// arrive within the body timeout, into one buffer.
func (s *Server) bodyRead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := s.requestLimits()
		pb, ok := r.Body.(*peekedBody)
		if !ok { // not a POST: nothing for the SDK to read
			next.ServeHTTP(w, r)
			return
		}
		var body []byte
		if pb.eof {
			body = pb.head
		} else {
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(lim.BodyTimeout))
			var err error
			body, err = readBody(pb, r.ContentLength, lim.MaxBodyBytes-pb.skipped)
			_ = rc.SetReadDeadline(time.Time{}) // see the package comment above
			if err != nil {
				s.bodyFailed(w, err, lim)
				return
			}
		}
		r.Body = &heldBody{b: body}
		r.ContentLength = int64(len(body))
		if len(body) < bigBodyBytes {
			next.ServeHTTP(w, r)
			return
		}
		// The SDK copies a body several times over while it decodes it;
		// large ones take turns at that, weighted by size, and their garbage
		// is collected as each ends, so memory stays near one held copy per
		// request rather than several per request times the GC's headroom.
		weight := min(int64(len(body)), s.bigBodies.capacity)
		if err := s.bigBodies.sem.Acquire(r.Context(), weight); err != nil {
			return // the client went away while waiting
		}
		next.ServeHTTP(w, r)
		s.bigBodies.sem.Release(weight)
		runtime.GC()
	})
}

// bigBodyBytes is where a body starts to take turns (bodyRead).
const bigBodyBytes = 1 << 20

// bigBodyGate admits large bodies into the SDK's decoding by total size.
type bigBodyGate struct {
	sem      *semaphore.Weighted
	capacity int64
}

func newBigBodyGate(maxBody int64) bigBodyGate {
	capacity := max(maxBody, bigBodyBytes)
	return bigBodyGate{sem: semaphore.NewWeighted(capacity), capacity: capacity}
}

// errBodyTooLarge is a body over requests.maxBodyBytes.
var errBodyTooLarge = errors.New("body too large")

// readBody reads the whole body into one buffer: of the declared length
// when there is one, else grown up to limit.
func readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared >= 0 {
		buf := make([]byte, declared)
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf, nil
	}
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errBodyTooLarge
	}
	return b.Bytes(), nil
}

// heldBody hands the SDK the body once and lets the buffer go at its end.
type heldBody struct{ b []byte }

func (h *heldBody) Read(p []byte) (int, error) {
	if len(h.b) == 0 {
		h.b = nil
		return 0, io.EOF
	}
	n := copy(p, h.b)
	h.b = h.b[n:]
	if len(h.b) == 0 {
		h.b = nil // the SDK has its copy now
	}
	return n, nil
}

func (h *heldBody) Close() error { h.b = nil; return nil }

// bodyFailed answers a body that did not arrive: 408 on the deadline, 413
// over the cap, 400 when the client sent less than it declared.
func (s *Server) bodyFailed(w http.ResponseWriter, err error, lim RequestLimits) {
	w.Header().Set("Connection", "close")
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.metrics.bodyTimeouts.Inc()
		writeJSONError(w, http.StatusRequestTimeout, "body_timeout", fmt.Sprintf("The request body did not arrive within %d ms.", lim.BodyTimeout.Milliseconds()))
	case errors.Is(err, errBodyTooLarge):
		writeJSONError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("Request body exceeds %d bytes.", lim.MaxBodyBytes))
	default:
		writeJSONError(w, http.StatusBadRequest, "bad_body", "The request body could not be read.")
	}
}

// writeBatchRefusal is HTTP 400 with JSON-RPC −32600 and a null id.
func writeBatchRefusal(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	body, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      *int   `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{rpcInvalidRequest, batchMessage}})
	_, _ = w.Write(body)
}
