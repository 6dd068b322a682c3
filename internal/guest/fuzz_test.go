package guest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// FuzzRun feeds random programs and random host replies: whatever the
// guest does and however the host answers (sync, async, never, twice,
// invalid JSON, errors), Run returns a well-formed Outcome and the engine
// keeps working.
func FuzzRun(f *testing.F) {
	for _, seed := range []struct {
		code    string
		replies []byte
	}{
		{"async () => 1 + 1", nil},
		{"async () => await connecta.search('q')", []byte{0}},
		{"async () => Promise.all([connecta.call(1), connecta.call(2), connecta.describe()])", []byte{4, 1, 2}},
		{"try { await connecta.call('x') } catch (e) { return e.message }", []byte{1, 'b', 'o', 'o', 'm'}},
		{"console.log('a', {b: 1}); return await connecta.emit()", []byte{2, '{', '"'}},
		{"await connecta.call(); for (;;) {}", []byte{5}},
		{"return await connecta.nope()", []byte{3}},
		{"const a = {}; a.a = a; return a", nil},
	} {
		f.Add(seed.code, seed.replies)
	}
	e := newTestEngine(f, EngineOptions{MemoryLimitBytes: 48 << 20})
	f.Fuzz(func(t *testing.T, code string, replies []byte) {
		var wg sync.WaitGroup
		defer wg.Wait()
		var mu sync.Mutex
		n := 0
		h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
			mu.Lock()
			i := n
			n++
			mu.Unlock()
			if len(replies) == 0 {
				settle(Reply{Value: c.Args})
				return
			}
			b := replies[i%len(replies)]
			rest := replies[i%len(replies):]
			switch b % 6 {
			case 0:
				settle(Reply{Value: c.Args})
			case 1:
				settle(Reply{Err: string(rest[1:])})
			case 2:
				settle(Reply{Value: json.RawMessage(rest[1:])})
			case 3: // never
			case 4:
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Millisecond) // late at an unknown point of the run: the race is the input
					settle(Reply{Value: json.RawMessage(`{"late":true}`)})
				}()
			case 5:
				settle(Reply{Value: json.RawMessage(`1`)})
				settle(Reply{Err: "again"})
			}
		}}
		out, err := e.Run(context.Background(), Program{
			Code:      code,
			Providers: connectaProvider,
			Limits:    Limits{CPUTime: 50 * time.Millisecond, Wall: 500 * time.Millisecond, HeapBytes: 16 << 20},
		}, h)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if out.Err != nil {
			switch out.Err.Kind {
			case ErrThrown, ErrSyntax, ErrCPU, ErrDeadline, ErrOutOfMemory, ErrStall, ErrResult:
			default:
				t.Fatalf("unexpected failure %s: %q", out.Err.Kind, out.Err.Message)
			}
			return
		}
		if out.Value != nil {
			if !json.Valid(out.Value) || !utf8.Valid(out.Value) {
				t.Fatalf("result is not valid JSON: %.200q", out.Value)
			}
			if n := utf16Len(string(out.Value)); n > ipc.MaxResultChars {
				t.Fatalf("result is %d UTF-16 units", n)
			}
		}
	})
}

// FuzzNormalize: normalization never panics and always yields a call of
// the normalized body.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"", "```", "```js\n```", "async", "/* x", "// y", "(", "return 1", "```js\nasync () => 1\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		got := Normalize(code)
		if got != "(\n"+NormalizeBody(code)+"\n)()" {
			t.Fatalf("Normalize(%q) = %q", code, got)
		}
	})
}
