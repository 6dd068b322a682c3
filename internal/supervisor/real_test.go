package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sharedCacheDir is one compilation cache for every real-engine pool of this
// test binary (and of later runs): a fresh directory costs a cold compile.
func sharedCacheDir(tb testing.TB) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("connecta-supervisor-test-cache-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// newRealPool starts a pool of real sandbox children (sandbox.MaybeRunChild
// in TestMain) with one warm spare.
func newRealPool(tb testing.TB, opts Options) (*Pool, *logBuf) {
	tb.Helper()
	base := runtime.NumGoroutine()
	opts.CacheDir = sharedCacheDir(tb)
	if opts.Spares == 0 && opts.MaxSpares == 0 && opts.SpareIdle == 0 {
		opts.Spares = 1 // tests of the spares themselves set them explicitly
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	lb := &logBuf{}
	opts.Logger = slog.New(slog.NewTextHandler(lb, nil))
	p, err := New(context.Background(), testOptions(opts))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.Close()
		if t, ok := tb.(*testing.T); ok {
			assertNoChildren(t)
			assertGoroutinesBack(t, base)
		}
	})
	return p, lb
}

// requireEngine skips while the engine cannot run a program yet.
func requireEngine(t *testing.T, p *Pool) {
	t.Helper()
	res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil || string(res.Value) != "2" {
		t.Fatalf("1+1: %+v %s", res.Err, res.Value)
	}
}

func TestReal_ProgramWithHostCallsAndLogs(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	h := newTestHost()
	l, _ := p.Acquire(context.Background())
	res, err := l.Run(context.Background(), Job{
		Code: `async () => {
			console.log("hello", {a: 1});
			const r = await Promise.all([t.echo(1), t.echo("x"), t.echo({k: [1, 2]})]);
			let caught;
			try { await t.fail(); } catch (e) { caught = e.message; }
			return {r, caught};
		}`,
		Providers: []Provider{{Name: "t", Functions: []string{"echo", "fail"}}},
	}, h)
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	if string(res.Value) != `{"r":[[1],["x"],[{"k":[1,2]}]],"caught":"downstream exploded"}` {
		t.Fatalf("value %s", res.Value)
	}
	if res.Logs != `hello {"a":1}` || strings.Join(h.seen(), "|") != `hello {"a":1}` {
		t.Fatalf("logs %q / %v", res.Logs, h.seen())
	}
	if res.HostCalls != 4 {
		t.Fatalf("host calls %d", res.HostCalls)
	}
}

// A QuickJS builtin that never polls the interrupt handler is ended by the
// parent's CPU watchdog at the budget plus its grace, with the engine's own
// budget text, never by the wall deadline; the next execution works.
func TestReal_L5_BuiltinLoopEndedByCPUWatch(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	const budget = 100 * time.Millisecond
	codes := []string{
		`async () => { console.log("before"); return Array.prototype.indexOf.call({length: 2**53-1}, 1); }`,
		`async () => { console.log("before"); return new Array(2**31).join(""); }`,
	}
	for _, code := range codes {
		res, err := run(t, p, code, newTestHost(), Limits{Wall: time.Minute, CPUTime: budget})
		if err != nil || res.Err == nil || res.Err.Kind != ErrCPU || res.Err.Message != "Execution exceeded the 100ms guest CPU budget." {
			t.Fatalf("%.60s: %v %+v", code, err, res)
		}
		if res.Logs != "before" {
			t.Fatalf("logs %q", res.Logs)
		}
		if res.ChildCPU < budget || res.ChildCPU > budget+250*time.Millisecond {
			t.Errorf("%.60s: ended at %v of child CPU, want within %v + 250ms", code, res.ChildCPU, budget)
		}
		t.Logf("%.60s: ended at %v of child CPU (budget %v)", code, res.ChildCPU, budget)
	}
	if n := counter(t, p.m.kills.WithLabelValues(killCPUBudget)); n != float64(len(codes)) {
		t.Fatalf("cpu_budget kills %v", n)
	}
	if n := counter(t, p.m.kills.WithLabelValues(killDeadline)); n != 0 {
		t.Fatalf("deadline kills %v", n)
	}
	res, err := run(t, p, "async () => 9", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "9" {
		t.Fatal(err, res)
	}
}

// A program the engine stops itself (it polls) is answered by the engine,
// not killed: the watchdog's grace lies beyond the engine's own check.
func TestReal_L5_PollingLoopEndedByTheEngine(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	res, err := run(t, p, "async () => { for (;;) {} }", newTestHost(), Limits{Wall: time.Minute, CPUTime: 100 * time.Millisecond})
	if err != nil || res.Err == nil || res.Err.Kind != ErrCPU || res.Err.Message != "Execution exceeded the 100ms guest CPU budget." {
		t.Fatalf("%v %+v", err, res)
	}
	if res.CPUTime < 100*time.Millisecond {
		t.Fatalf("the engine reported %v of guest CPU: not its own answer", res.CPUTime)
	}
	if n := counter(t, p.m.kills.WithLabelValues(killCPUBudget)); n != 0 {
		t.Fatalf("cpu_budget kills %v", n)
	}
}

func TestReal_CancelMidProgram(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	h := newTestHost()
	ctx, cancel := context.WithCancel(context.Background())
	l, _ := p.Acquire(ctx)
	// Cancel once the host call is in flight (the log alone does not say so).
	_, err := l.Run(ctx, Job{
		Code:      `async () => { console.log("waiting"); return await t.slow(); }`,
		Providers: []Provider{{Name: "t", Functions: []string{"slow"}}},
	}, &callStartedHost{testHost: h, onCall: cancel})
	ee := execErr(t, err, CodeCancelled)
	if ee.Logs != "waiting" || len(h.cancelled) != 1 {
		t.Fatalf("%+v, cancelled host calls %d", ee, len(h.cancelled))
	}
	res, err := run(t, p, "async () => 9", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "9" {
		t.Fatal(err, res)
	}
}

func TestReal_L6_OversizedHostResultFailsThatCall(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	l, _ := p.Acquire(context.Background())
	res, err := l.Run(context.Background(), Job{
		Code: fmt.Sprintf(`async () => {
			let msg;
			try { await t.big%d(); } catch (e) { msg = e.message; }
			const ok = await t.big1000();
			return {msg, ok: ok.length};
		}`, MaxHostResultBytes+1),
		Providers: []Provider{{Name: "t", Functions: []string{fmt.Sprintf("big%d", MaxHostResultBytes+1), "big1000"}}},
	}, newTestHost())
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	want := fmt.Sprintf(`{"msg":"Host result from t.big%d exceeds the 258048-byte serialized bridge limit.","ok":998}`, MaxHostResultBytes+1)
	if string(res.Value) != want {
		t.Fatalf("value %s", res.Value)
	}
}

// Hostile programs run under the full hardening (seccomp on outside -race):
// each ends with the engine's own error, never a crash of the child (which
// would mean the allow-list denied something the runtime needed).
func TestReal_HostileProgramsUnderSeccomp(t *testing.T) {
	if testing.Short() {
		t.Skip("several seconds of guest CPU")
	}
	p, _ := newRealPool(t, Options{Slots: 2, Spares: 2, MaxQueue: 8})
	requireEngine(t, p)
	cases := map[string]ErrorKind{
		`async () => { for(;;){} }`:                                                               ErrCPU,
		`async () => { for(;;){ try { for(;;){} } catch (e) {} } }`:                               ErrCPU,
		`async () => { const a = []; for(;;) a.push(new Array(1e5)); }`:                           ErrOutOfMemory,
		`async () => { const f = () => f(); f(); }`:                                               ErrThrown,
		`async () => { let s = "x"; for(;;) s += s; }`:                                            ErrThrown,
		`async () => { new ArrayBuffer(128 * 1024 * 1024); }`:                                     ErrThrown,
		`async () => JSON.parse("[".repeat(1e5))`:                                                 ErrThrown,
		`async () => { await new Promise(() => {}); }`:                                            ErrStall,
		`async () => /(a+)+b/.test("a".repeat(40))`:                                               ErrCPU,
		`async () => (await Promise.all(Array.from({length: 2000}, (_, i) => t.echo(i)))).length`: "",
	}
	var wg sync.WaitGroup
	for code, want := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			res, err := l.Run(context.Background(), Job{Code: code, Providers: []Provider{{Name: "t", Functions: []string{"echo"}}}}, newTestHost())
			if err != nil {
				t.Errorf("%s: %v", code, err)
				return
			}
			if res.Err != nil && (res.Err.Kind == ErrCrash || res.Err.Kind == ErrProtocol || res.Err.Kind == ErrInternal) {
				t.Errorf("%s: sandbox failure %s: %s", code, res.Err.Kind, res.Err.Message)
				return
			}
			if want == "" && res.Err != nil {
				t.Errorf("%s: %s %s", code, res.Err.Kind, res.Err.Message)
			}
			// The exact kind is the engine's business (guest tests); here
			// only "failed cleanly" matters.
			if want != "" && res.Err == nil {
				t.Errorf("%s: got %+v, want %s", code, res.Err, want)
			}
		}()
	}
	wg.Wait()
	res, err := run(t, p, "async () => 9", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "9" {
		t.Fatal(err, res)
	}
}

// A real spare, as spawned: empty environment, cwd /, its own process group,
// no new privileges, seccomp filter mode (outside -race), and no descriptors
// beyond stdio, the two IPC pipes and the runtime's poller: the same for
// this binary re-executed and for the slim child from its memfd (which
// closes the descriptor it was executed from).
func TestHardening_SpareProcessState(t *testing.T) {
	t.Run("self", func(t *testing.T) { spareProcessState(t, Options{Slots: 1}, raceEnabled) })
	// The slim child is never a race build: its seccomp filter is always on.
	t.Run("slim", func(t *testing.T) { spareProcessState(t, Options{Slots: 1, Child: slimChild(t)}, false) })
}

func spareProcessState(t *testing.T, opts Options, relaxed bool) {
	p, _ := newRealPool(t, opts)
	requireEngine(t, p)
	// The 1+1 child may still be exiting: wait for the spare alone.
	waitFor(t, func() bool { return counter(t, p.m.spares) == 1 && len(liveChildren()) == 1 })
	pid := liveChildren()[0]
	proc := func(name string) string {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if env := proc("environ"); env != "" {
		t.Fatalf("environment %q", env)
	}
	if cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); cwd != "/" {
		t.Fatalf("cwd %q", cwd)
	}
	status := proc("status")
	// No capability in any set, even when the server runs as root (it does
	// in this repository's CI).
	sets := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if os.Getuid() == 0 { // an ordinary user cannot shrink its bounding set
		sets = append(sets, "CapBnd")
	}
	for _, set := range sets {
		if !strings.Contains(status, set+":\t0000000000000000\n") {
			t.Errorf("%s not empty: %s", set, status)
		}
	}
	if !strings.Contains(status, "NoNewPrivs:\t1") {
		t.Fatal("no_new_privs not set")
	}
	if !relaxed && !strings.Contains(status, "Seccomp:\t2") {
		t.Fatal("no seccomp filter")
	}
	stat := proc("stat")
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if f[2] != strconv.Itoa(pid) {
		t.Fatalf("process group %s, want its own (%d)", f[2], pid)
	}
	fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		n, _ := strconv.Atoi(fd.Name())
		switch {
		case n <= 2 && (target == "/dev/null" || strings.HasPrefix(target, "pipe:")):
		case n == 3 || n == 4:
			if !strings.HasPrefix(target, "pipe:") {
				t.Errorf("fd %d is %s", n, target)
			}
		case n == 5 || n == 6:
			// The sealed code and snapshot, each its own read-only
			// description: never a path into the cache directory.
			want := map[int]string{5: "/memfd:connecta-code", 6: "/memfd:connecta-snapshot"}[n]
			if !strings.HasPrefix(target, want) {
				t.Errorf("fd %d is %s, want %s", n, target, want)
			}
			if info := proc("fdinfo/" + fd.Name()); !regexp.MustCompile(`(?m)^flags:\s+0[0-7]*[0]$`).MatchString(info) {
				t.Errorf("fd %d is not read-only: %s", n, info)
			}
		case strings.HasPrefix(target, "anon_inode:"): // epoll, eventfd
		case strings.HasPrefix(target, "/sys/fs/cgroup/"): // the runtime's GOMAXPROCS watch
		default:
			t.Errorf("unexpected descriptor %d → %s", n, target)
		}
	}
}

// callStartedHost runs onCall as each host call starts, then serves it.
type callStartedHost struct {
	*testHost
	onCall func()
}

func (h *callStartedHost) Call(ctx context.Context, provider, fn string, args json.RawMessage) (json.RawMessage, error) {
	h.onCall()
	return h.testHost.Call(ctx, provider, fn, args)
}

// panicHost panics in every host call.
type panicHost struct{ *testHost }

func (h *panicHost) Call(context.Context, string, string, json.RawMessage) (json.RawMessage, error) {
	panic("host bug")
}

// A host function that panics fails that call only; the pool goes on.
func TestReal_HostPanicFailsThatCallOnly(t *testing.T) {
	p, lb := newRealPool(t, Options{Slots: 1})
	requireEngine(t, p)
	l, _ := p.Acquire(context.Background())
	res, err := l.Run(context.Background(), Job{
		Code:      `async () => { try { await t.boom(); return "no"; } catch (e) { return e.message; } }`,
		Providers: []Provider{{Name: "t", Functions: []string{"boom"}}},
	}, &panicHost{testHost: newTestHost()})
	if err != nil || res.Err != nil || string(res.Value) != `"Host call failed."` {
		t.Fatalf("%v %+v", err, res)
	}
	if !strings.Contains(lb.String(), "host call panicked") {
		t.Fatalf("panic not logged: %s", lb.String())
	}
	res, err = run(t, p, "async () => 9", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "9" {
		t.Fatal(err, res)
	}
}

// Two programs stuck in builtins that never poll no longer hold both default
// slots for the wall deadline: they end at the CPU budget, and a program
// queued behind them runs instead of failing executor_overloaded.
func TestReal_L5_L7_NonPollingProgramsDoNotLockTheExecutor(t *testing.T) {
	p, _ := newRealPool(t, Options{Slots: 2, Spares: 2, MaxQueue: 1, QueueTimeout: 5 * time.Second})
	requireEngine(t, p)
	lim := Limits{CPUTime: 100 * time.Millisecond} // the wall deadline stays 30 s, past QueueTimeout
	var wg sync.WaitGroup
	for range 2 {
		l, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := l.Run(context.Background(), Job{Code: `async () => Array.prototype.includes.call({length: 2**53-1}, 1)`, Limits: lim}, newTestHost())
			if err != nil || res.Err == nil || res.Err.Kind != ErrCPU {
				t.Errorf("hostile run: %v %+v", err, res)
			}
		}()
	}
	res, err := run(t, p, "async () => 7", newTestHost(), Limits{})
	if err != nil || string(res.Value) != "7" {
		t.Fatalf("queued run: %v %+v", err, res)
	}
	wg.Wait()
}
