package supervisor

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// sweepProgram enumerates, in the guest, every function property (values,
// getters and setters) of Array, %TypedArray%, String, RegExp, JSON and
// Object and of their prototypes, and calls each with every hostile shape:
// array-likes of length 2**53-1, sparse arrays of length 2**32-1, a 16 Mi
// character string and a long needle, a 16 MiB typed array, regexps that
// match everywhere or backtrack, and extreme lengths: every function with
// every shape, in order. It runs calls [FROM, FROM+PER_RUN), logging each
// index before the call (logs are streamed, so the parent knows which call
// was running when a run ended), and returns where it stopped. FILTER, when
// not empty, keeps the calls whose function ("Array.prototype.join") or call
// ("Array.prototype.join #5") it names.
const sweepProgram = `async () => {
  const FROM = %d, PER_RUN = %d, FILTER = %s;
  const TypedArray = Object.getPrototypeOf(Int8Array);
  const roots = [
    ["Array", Array], ["Array.prototype", Array.prototype],
    ["TypedArray", TypedArray], ["TypedArray.prototype", TypedArray.prototype],
    ["String", String], ["String.prototype", String.prototype],
    ["RegExp", RegExp], ["RegExp.prototype", RegExp.prototype],
    ["JSON", JSON], ["Object", Object], ["Object.prototype", Object.prototype],
  ];
  const fns = [];
  for (const [label, o] of roots) {
    for (const k of Reflect.ownKeys(o)) {
      const d = Object.getOwnPropertyDescriptor(o, k);
      const name = label + "." + (typeof k === "symbol" ? "[" + k.description + "]" : k);
      if (typeof d.value === "function") fns.push([name, d.value]);
      if (typeof d.get === "function") fns.push([name + " get", d.get]);
      if (typeof d.set === "function") fns.push([name + " set", d.set]);
    }
  }
  const S = "x".repeat(2 ** 12).repeat(2 ** 12); // 2**24 one-character appends would cost ~100 ms
  const N = "x".repeat(2 ** 20) + "y";
  const TA = new Int32Array(2 ** 22);
  const H = () => ({length: 2 ** 53 - 1});
  const A = () => new Array(2 ** 32 - 1);
  const cb = () => undefined;
  const shapes = [
    () => [H(), [N, 0]],
    () => [H(), [1, 2]],
    () => [H(), [2 ** 53 - 1, -(2 ** 53)]],
    () => [H(), [-(2 ** 53), 2 ** 53 - 1]],
    () => [H(), [cb, 0]],
    () => [A(), []],
    () => [A(), [cb, 0]],
    () => [A(), [N, 2 ** 32 - 2]],
    () => [S, [N, 0]],
    () => [S, [2 ** 30, S]],
    () => [S, [/(?:)/g, "$&$&"]],
    () => [S, [/(x+x+)+y/, N]],
    () => [TA, [N, 0]],
    () => [TA, [cb, 0]],
    () => [TA, [2 ** 53 - 1, -(2 ** 53)]],
    () => [/(?:)/g, [S, "$&$&"]],
    () => [/(x+x+)+y/, [S]],
    () => [undefined, [H(), cb]],
    () => [undefined, [A(), null, 10]],
    () => [undefined, [S, S]],
    () => [undefined, [{raw: H()}, 2 ** 32 - 1]],
    () => [Int32Array, [H(), cb]],
  ];
  const calls = [];
  for (const [name, fn] of fns) {
    shapes.forEach((shape, i) => {
      const call = name + " #" + i;
      if (!FILTER.length || FILTER.includes(name) || FILTER.includes(call)) calls.push([call, fn, shape]);
    });
  }
  const total = calls.length;
  const upto = Math.min(FROM + PER_RUN, total);
  for (let k = FROM; k < upto; k++) {
    const [call, fn, shape] = calls[k];
    console.log(k + " " + call);
    const [self, args] = shape();
    try { Reflect.apply(fn, self, args); } catch (e) {}
  }
  return {next: upto, total};
}`

// sweepEnd is how one run of the sweep ended.
type sweepEnd struct {
	call     string // the call that was running ("k name #shape")
	kind     ErrorKind
	childCPU time.Duration
}

// TestL5_BudgetBindsOnEveryBuiltin calls every builtin function of the
// contract's hostile surface with huge inputs (see sweepProgram) and proves
// each call ends within the CPU budget + 250 ms of child CPU: by returning or
// throwing, by running out of memory, or by the budget with exactly the
// engine's text, and never by the wall deadline. A run that ends for CPU in
// the middle of its calls is retried from that call, so every call that ends
// a run for CPU had the whole budget to itself. -short makes a few calls
// known to loop in C without polling the engine, and a few that poll or end.
func TestL5_BudgetBindsOnEveryBuiltin(t *testing.T) {
	const budget = 100 * time.Millisecond
	var filter []string
	if testing.Short() {
		filter = []string{
			"Array.prototype.indexOf #1", "Array.prototype.includes #1", "Array.prototype.join #5",
			"Array.prototype.copyWithin #0", "String.prototype.indexOf #8", "JSON.stringify #18",
			"Array.prototype.map #0", "Array.from #17", "String.prototype.repeat #9", "Object.keys #17",
		}
	}
	filterJSON, _ := json.Marshal(filter)
	if filter == nil {
		filterJSON = []byte("[]")
	}
	p, _ := newRealPool(t, Options{Slots: 1, Spares: 1})
	requireEngine(t, p)
	const perRun = 150 // under the 200 console entries a run keeps
	var ends []sweepEnd
	calls, runs, setupEnds := 0, 0, 0
	for from, total := 0, math.MaxInt; from < total; runs++ { // the total is learnt from a run that completes
		code := fmt.Sprintf(sweepProgram, from, perRun, filterJSON)
		res, err := run(t, p, code, newTestHost(), Limits{CPUTime: budget})
		if err != nil {
			t.Fatalf("from %d: %v", from, err)
		}
		// The program's setup (its 16 MiB string and typed array) shares
		// the run's budget, and a loaded machine once took it all before
		// the first call (-race, 4 CPU hogs): no call ran, so the run is
		// run again, a few times at most.
		if res.Err != nil && res.Err.Kind == ErrCPU && res.Logs == "" && setupEnds < 3 {
			setupEnds++
			t.Logf("from %d: the budget ended in the setup, before any call (%v of child CPU): once more", from, res.ChildCPU)
			continue
		}
		if res.Err == nil {
			var v struct{ Next, Total int }
			if err := json.Unmarshal(res.Value, &v); err != nil || (v.Next <= from && from < v.Total) {
				t.Fatalf("from %d: value %s (%v)", from, res.Value, err)
			}
			calls += v.Next - from
			from, total = v.Next, v.Total
			continue
		}
		logs := strings.Split(res.Logs, "\n")
		last := logs[len(logs)-1]
		k, err := strconv.Atoi(strings.Fields(last + " x")[0])
		if err != nil || k < from {
			t.Fatalf("from %d: ended (%s: %s) with logs %q", from, res.Err.Kind, res.Err.Message, res.Logs)
		}
		switch res.Err.Kind {
		case ErrCPU:
			if want := ipc.CPUBudgetMessage(budget); res.Err.Message != want {
				t.Errorf("%s: ended with %q, want %q", last, res.Err.Message, want)
			}
		case ErrOutOfMemory, ErrInternal:
			// Out of memory escaping the harness's own catch, or a trap.
		default:
			t.Errorf("%s: ended by %s: %s", last, res.Err.Kind, res.Err.Message)
		}
		if res.ChildCPU > budget+250*time.Millisecond {
			t.Errorf("%s: ended at %v of child CPU, over the budget %v + 250ms", last, res.ChildCPU, budget)
		}
		if k > from {
			// Earlier calls of this run shared the budget: give this one its own.
			calls += k - from
			from = k
			continue
		}
		ends = append(ends, sweepEnd{call: last, kind: res.Err.Kind, childCPU: res.ChildCPU})
		calls++
		from = k + 1
	}
	var worst time.Duration
	byKind := map[ErrorKind][]string{}
	for _, e := range ends {
		byKind[e.kind] = append(byKind[e.kind], e.call)
		if e.kind == ErrCPU {
			worst = max(worst, e.childCPU)
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	t.Logf("%d calls in %d runs; %d ended their run alone; most child CPU at a budget end %v (budget %v)", calls, runs, len(ends), worst, budget)
	for _, k := range kinds {
		t.Logf("ended by %s (%d): %s", k, len(byKind[ErrorKind(k)]), strings.Join(byKind[ErrorKind(k)], "; "))
	}
	if n := counter(t, p.m.kills.WithLabelValues(killDeadline)); n != 0 {
		t.Errorf("%v wall-deadline kills", n)
	}
}
