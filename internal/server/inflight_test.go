package server

import (
	"context"
	"encoding/json"
	"testing"
)

// A cancel acts only on exactly one in-flight request of the actor with the
// id; the same id under another actor, or a finished request, is not it.
func TestInflight_CancelsOnlyAUniqueMatch(t *testing.T) {
	in := NewMemoryInflight()
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	ctxC, cancelC := context.WithCancel(context.Background())
	doneA := in.Register("alice", "1", cancelA)
	doneB := in.Register("alice", "1", cancelB)
	defer in.Register("bob", "1", cancelC)()
	if got := in.Cancel("alice", "1"); got != CancelAmbiguous || ctxA.Err() != nil || ctxB.Err() != nil {
		t.Fatalf("two of alice's: %s", got)
	}
	doneB()
	if got := in.Cancel("alice", "2"); got != CancelUnknown {
		t.Fatalf("an id nobody has: %s", got)
	}
	if got := in.Cancel("alice", "1"); got != CancelMatched || ctxA.Err() == nil || ctxC.Err() != nil {
		t.Fatalf("alice's one: %s (bob's ended: %v)", got, ctxC.Err())
	}
	doneA()
	if got := in.Cancel("alice", "1"); got != CancelUnknown {
		t.Fatalf("after it ended: %s", got)
	}
}

// JSON-RPC ids match by value and type: "1" is not 1, 1.0 is 1.
func TestRPCIDKey_ByValueAndType(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`1`, `1.0`, true}, {`1`, `"1"`, false}, {`"a\u0062"`, `"ab"`, true}, {`-2`, `-2e0`, true},
	} {
		ka, kb := rpcIDKey(json.RawMessage(tc.a)), rpcIDKey(json.RawMessage(tc.b))
		if ka == "" || kb == "" || (ka == kb) != tc.same {
			t.Errorf("%s %q vs %s %q: same %v", tc.a, ka, tc.b, kb, ka == kb)
		}
	}
	for _, bad := range []string{``, `null`, `{}`, `[1]`, `true`} {
		if k := rpcIDKey(json.RawMessage(bad)); k != "" {
			t.Errorf("%s → %q, want no id", bad, k)
		}
	}
}

// rpcIDKey reads ids from untrusted bodies: it never panics, and equal keys
// come only from ids JSON decodes to equal values of one type.
func FuzzRPCIDKey(f *testing.F) {
	for _, s := range []string{`1`, `"1"`, `1e400`, `-0`, `"\ud800"`, `null`, `{"a":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		k := rpcIDKey(raw)
		if k == "" {
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%q gave key %q but is not JSON", raw, k)
		}
		switch v.(type) {
		case string, float64:
		default:
			t.Fatalf("%q (%T) gave key %q", raw, v, k)
		}
	})
}
