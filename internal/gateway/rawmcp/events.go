package rawmcp

import "bytes"

// Events splits a server-sent event stream, fed in chunks as a body is
// read, into events: lines end in LF or CRLF, an event's data lines are
// joined with LF, its event line names it, and other fields and comments
// are ignored. The sniffer here and the gateway's server/discover bound
// both read the SDK's streams through it.
type Events struct {
	// Max bounds what one event holds (its unfinished line and its data):
	// past it the splitter gives up and completes no more events. 0: no
	// bound (the SDK's own event-size limit stops the reading).
	Max int

	line []byte // the line read so far
	data []byte // the event's data so far
	name string // the event's name ("" is "message")
	off  bool   // gave up past Max
}

// Feed reads chunk and calls each for every event it completes that
// carries data, until each returns true; Feed then returns true and leaves
// the rest of chunk unread.
func (e *Events) Feed(chunk []byte, each func(name string, data []byte) bool) bool {
	for !e.off && len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			e.line = append(e.line, chunk...)
			e.checkMax()
			return false
		}
		e.line = append(e.line, chunk[:i]...)
		chunk = chunk[i+1:]
		if e.endLine(each) {
			return true
		}
	}
	return false
}

// End is the end of the stream: an unterminated last line, and the event
// it belongs to, are taken as complete.
func (e *Events) End(each func(name string, data []byte) bool) bool {
	if e.off {
		return false
	}
	if len(e.line) > 0 && e.endLine(each) {
		return true
	}
	return e.dispatch(each)
}

// Held is how many bytes the splitter holds for the current event.
func (e *Events) Held() int { return len(e.line) + len(e.data) }

func (e *Events) endLine(each func(name string, data []byte) bool) bool {
	line := bytes.TrimSuffix(e.line, []byte("\r"))
	e.line = e.line[:0]
	if len(line) == 0 {
		return e.dispatch(each)
	}
	if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
		if len(e.data) > 0 {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, bytes.TrimPrefix(v, []byte(" "))...)
		e.checkMax()
	} else if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
		e.name = string(bytes.TrimPrefix(v, []byte(" ")))
	}
	return false
}

// dispatch ends the current event.
func (e *Events) dispatch(each func(name string, data []byte) bool) bool {
	data, name := e.data, e.name
	e.data, e.name = e.data[:0], ""
	return len(data) > 0 && each(name, data)
}

func (e *Events) checkMax() {
	e.off = e.Max > 0 && e.Held() > e.Max
}
