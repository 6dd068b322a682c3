package supervisor

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// A scripted child for the protocol and kill tests: the test binary re-execs
// itself with fakeChildMarker (selected only through Options.testChildArgv,
// which production code cannot set) and obeys the run's Code as a script of
// ";"-separated steps. The real child is exercised by the real-engine tests.
const fakeChildMarker = "__supervisor_fake_child__"

// fakeArgv makes a testChildArgv selecting a start-up behaviour:
// "ok" (send ready), "die" (exit 3 before ready), "garbage" (junk before
// ready), "slow" (never ready), "closeout" (close its output, never exit).
func fakeArgv(startup string) func(mode string) []string {
	return func(mode string) []string {
		return []string{fakeChildMarker, mode, startup, strconv.Itoa(os.Getpid())}
	}
}

func runFakeChild(args []string) int {
	mode, startup := args[0], args[1]
	if mode == ipc.ModeWarm {
		return 0
	}
	in := os.NewFile(ipc.ChildInFD, "in")
	out := os.NewFile(ipc.ChildOutFD, "out")
	w := ipc.NewWriter(out)
	r := ipc.NewReader(in)
	switch startup {
	case "die":
		fmt.Fprintln(os.Stderr, "fake child: dying before ready")
		return 3
	case "garbage":
		out.Write([]byte("\x00\x00\x00\x05hello"))
		select {}
	case "slow":
		select {}
	case "closeout": // end the stream but live on
		out.Close()
		select {}
	}
	if err := w.Write(&ipc.Message{Type: ipc.TypeReady}); err != nil {
		return 1
	}
	m, err := r.Read()
	if err != nil {
		return 0
	}
	f := &fakeRun{w: w, out: out, replies: map[uint32]chan *ipc.Message{}}
	go f.readReplies(r)
	var value json.RawMessage = json.RawMessage(`null`)
	for _, step := range strings.Split(m.Run.Code, ";") {
		op, arg, _ := strings.Cut(step, ":")
		switch op {
		case "value":
			value = json.RawMessage(arg)
		case "log":
			w.Write(&ipc.Message{Type: ipc.TypeLog, Level: "log", Text: arg})
		case "marker": // the engine's truncation marker, flagged
			w.Write(&ipc.Message{Type: ipc.TypeLog, Level: "log", Text: arg, Marker: true})
		case "logn": // logn:<count>x<size>
			n, size, _ := strings.Cut(arg, "x")
			cnt, _ := strconv.Atoi(n)
			sz, _ := strconv.Atoi(size)
			for i := range cnt {
				w.Write(&ipc.Message{Type: ipc.TypeLog, Level: "log", Text: fmt.Sprintf("%d:%s", i, strings.Repeat("L", sz))})
			}
		case "logflood":
			for {
				if w.Write(&ipc.Message{Type: ipc.TypeLog, Level: "log", Text: "flood"}) != nil {
					return 0
				}
			}
		case "calls": // calls:N:fn — N concurrent calls; value = their replies in order
			n, fn, _ := strings.Cut(arg, ":")
			cnt, _ := strconv.Atoi(n)
			value = f.calls(cnt, fn)
		case "call": // one call, args given
			fn, a, _ := strings.Cut(arg, ":")
			value = f.callArgs(fn, json.RawMessage(a))
		case "bigargs":
			n, _ := strconv.Atoi(arg)
			value = f.callArgs("echo", json.RawMessage(`["`+strings.Repeat("a", n)+`"]`))
		case "garbage":
			out.Write([]byte("this is not a frame at all, just bytes"))
			select {}
		case "oversize":
			hdr := make([]byte, 4)
			binary.BigEndian.PutUint32(hdr, 1<<20)
			out.Write(hdr)
			select {}
		case "badjson":
			out.Write([]byte("\x00\x00\x00\x03{{{"))
			select {}
		case "unknown":
			w.Write(&ipc.Message{Type: "bogus"})
			select {}
		case "ready":
			w.Write(&ipc.Message{Type: ipc.TypeReady})
			select {}
		case "dupcall":
			w.Write(&ipc.Message{Type: ipc.TypeCall, ID: 9, Provider: "t", Function: "slow", Args: json.RawMessage(`[]`)})
			w.Write(&ipc.Message{Type: ipc.TypeCall, ID: 9, Provider: "t", Function: "slow", Args: json.RawMessage(`[]`)})
			select {}
		case "crash":
			code, _ := strconv.Atoi(arg)
			os.Stderr.WriteString("HEAD-OF-STDERR" + strings.Repeat("e", 20000) + "TAIL-OF-STDERR\n")
			os.Exit(code)
		case "crashincall": // start a call, then die while it is in flight
			w.Write(&ipc.Message{Type: ipc.TypeCall, ID: 1, Provider: "t", Function: "slow", Args: json.RawMessage(`[]`)})
			// Another process cannot see the host take the call; the pause
			// puts the exit while it is in flight (the host's slow call waits
			// for the run to end).
			time.Sleep(100 * time.Millisecond)
			os.Exit(9)
		case "hang":
			select {}
		case "spin":
			//lint:ignore SA5002 a child that burns CPU forever is the point
			for {
			}
		case "sleep":
			ms, _ := strconv.Atoi(arg)
			time.Sleep(time.Duration(ms) * time.Millisecond) // a deliberately slow program
		case "pid":
			value = json.RawMessage(fmt.Sprintf(`{"pid":%d}`, os.Getpid()))
		case "twodone":
			// One write, so the second frame is out before the parent's
			// EOF can end us.
			f1, _ := ipc.Encode(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Value: json.RawMessage(`1`)}})
			f2, _ := ipc.Encode(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Value: json.RawMessage(`2`)}})
			w.WriteFrame(append(f1, f2...))
			select {}
		case "oom": // the engine's own memory budget failure
			w.Write(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Err: &ipc.ProgramError{Kind: "out_of_memory", Message: "InternalError: out of memory"}, PeakHeapBytes: 1 << 20}})
			return 0
		case "fail":
			w.Write(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Err: &ipc.ProgramError{Kind: "thrown", Message: arg}, LogPrefix: "child logs", LogEntries: 1, LogChars: 10}})
			return 0
		}
	}
	w.Write(&ipc.Message{Type: ipc.TypeDone, Done: &ipc.Done{Value: value}})
	return 0
}

type fakeRun struct {
	w       *ipc.Writer
	out     *os.File
	mu      sync.Mutex
	next    uint32
	replies map[uint32]chan *ipc.Message
}

func (f *fakeRun) readReplies(r *ipc.Reader) {
	for {
		m, err := r.Read()
		if err != nil {
			os.Exit(0) // EOF-as-death, as the real child
		}
		f.mu.Lock()
		ch := f.replies[m.ID]
		delete(f.replies, m.ID)
		f.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (f *fakeRun) start(fn string, args json.RawMessage) chan *ipc.Message {
	f.mu.Lock()
	f.next++
	id := f.next
	ch := make(chan *ipc.Message, 1)
	f.replies[id] = ch
	f.mu.Unlock()
	f.w.Write(&ipc.Message{Type: ipc.TypeCall, ID: id, Provider: "t", Function: fn, Args: args})
	return ch
}

func replyJSON(m *ipc.Message) json.RawMessage {
	if m.OK {
		if len(m.Value) == 0 {
			return json.RawMessage(`{"ok":true}`)
		}
		return json.RawMessage(`{"ok":true,"value":` + string(m.Value) + `}`)
	}
	b, _ := json.Marshal(map[string]any{"ok": false, "err": m.Err})
	return b
}

func (f *fakeRun) callArgs(fn string, args json.RawMessage) json.RawMessage {
	return replyJSON(<-f.start(fn, args))
}

func (f *fakeRun) calls(n int, fn string) json.RawMessage {
	chs := make([]chan *ipc.Message, n)
	for i := range chs {
		chs[i] = f.start(fn, json.RawMessage(fmt.Sprintf("[%d]", i)))
	}
	parts := make([]string, n)
	for i, ch := range chs {
		parts[i] = string(replyJSON(<-ch))
	}
	return json.RawMessage("[" + strings.Join(parts, ",") + "]")
}
