package supervisor

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
	"github.com/connecta-dev/connecta/test/testkit"
)

// quietHost answers at once.
type quietHost struct{}

func (quietHost) Call(_ context.Context, _, _ string, args json.RawMessage) (json.RawMessage, error) {
	return args, nil
}
func (quietHost) Log(string, string) {}

const fiveCalls = `async () => { let s = 0; for (let i = 0; i < 5; i++) s += (await t.echo(i))[0]; return s; }`

var benchProviders = []Provider{{Name: "t", Functions: []string{"echo"}}}

func runOnce(b *testing.B, p *Pool, code string) {
	l, err := p.Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	res, err := l.Run(context.Background(), Job{Code: code, Providers: benchProviders}, quietHost{})
	if err != nil || res.Err != nil {
		b.Fatal(err, res.Err)
	}
}

// benchLatency measures one execution at a time with a warm spare waiting
// (steady state below capacity: no execution waits for a spawn), and
// reports the median.
func benchLatency(b *testing.B, code string) {
	p, _ := newRealPool(b, Options{Slots: 2, Spares: 2})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		testkit.Eventually(b, 10*time.Second, func() bool { return p.m.spares == nil || readGauge(p) >= 2 }, "the two warm spares were not back")
		b.StartTimer()
		start := time.Now()
		runOnce(b, p, code)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
}

func readGauge(p *Pool) float64 {
	var t testing.T
	return counter(&t, p.m.spares)
}

func BenchmarkPool_OnePlusOne(b *testing.B)    { benchLatency(b, "async () => 1 + 1") }
func BenchmarkPool_FiveHostCalls(b *testing.B) { benchLatency(b, fiveCalls) }

// benchThroughput drives the pool with 8 callers: the sustained rate is
// bounded by how fast children are spawned (one per execution).
func benchThroughput(b *testing.B, code string) {
	p, _ := newRealPool(b, Options{Slots: 2, Spares: 2, MaxQueue: 64, QueueTimeout: time.Minute})
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				runOnce(b, p, code)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "exec/s")
}

func BenchmarkPool_Throughput8_OnePlusOne(b *testing.B)    { benchThroughput(b, "async () => 1 + 1") }
func BenchmarkPool_Throughput8_FiveHostCalls(b *testing.B) { benchThroughput(b, fiveCalls) }

// runAndRetire runs frame (a run message) on the ready child c, waits for
// its done, and retires it until it has exited.
func runAndRetire(b *testing.B, p *Pool, c *child, frame []byte) {
	b.Helper()
	if err := c.w.WriteFrame(frame); err != nil {
		b.Fatal(err)
	}
	if in := <-c.in; in.err != nil || in.m.Type != ipc.TypeDone {
		b.Fatal("no done", in.err)
	}
	p.retire(c, true)
	<-c.exited
}

// benchChild spawns one child at a time, runs 1+1 and reaps it; it reports
// the child's own CPU (user+sys) from spawn to exit, its peak RSS, and the
// spawn→ready wall time.
func benchChild(b *testing.B, namespaces bool) {
	p, _ := newRealPool(b, Options{Slots: 1, Spares: 1, Namespaces: namespaces})
	frame, err := ipc.Encode(&ipc.Message{Type: ipc.TypeRun, Run: runOf(Job{Code: "async () => 1 + 1"}, p.opts.Limits)})
	if err != nil {
		b.Fatal(err)
	}
	var cpu, ready time.Duration
	var maxRSS int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		c, err := p.spawn(ipc.ModeServe)
		if err != nil {
			b.Fatal(err)
		}
		if in := <-c.in; in.err != nil || in.m.Type != ipc.TypeReady {
			b.Fatal("not ready", in.err)
		}
		ready += time.Since(start)
		runAndRetire(b, p, c, frame)
		ru := c.state.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		maxRSS = max(maxRSS, ru.Maxrss)
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "child-cpu-ms/op")
	b.ReportMetric(float64(ready.Microseconds())/1000/float64(b.N), "spawn-ready-ms/op")
	b.ReportMetric(float64(maxRSS)/1024, "peak-rss-MB")
	if p.nsRefused.Load() {
		b.Log("namespaces refused by the kernel; measured without")
	}
}

func BenchmarkChild_SpawnRunExit(b *testing.B)           { benchChild(b, false) }
func BenchmarkChild_SpawnRunExitNamespaces(b *testing.B) { benchChild(b, true) }

// benchForkExec isolates what namespaces add to a spawn: fork+exec+exit of
// /bin/true with and without CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWNS.
func benchForkExec(b *testing.B, flags uintptr) {
	for range b.N {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: flags}
		if err := cmd.Run(); err != nil {
			b.Skip("namespaces refused:", err)
		}
	}
}

func BenchmarkSpawn_ForkExec(b *testing.B) { benchForkExec(b, 0) }
func BenchmarkSpawn_ForkExecNamespaces(b *testing.B) {
	benchForkExec(b, syscall.CLONE_NEWNET|syscall.CLONE_NEWIPC|syscall.CLONE_NEWNS)
}
func BenchmarkSpawn_ForkExecNetNamespace(b *testing.B) { benchForkExec(b, syscall.CLONE_NEWNET) }

// benchBudgetEnd runs a program that spends the whole default guest CPU
// budget (250 ms) and reports the child's CPU from the run frame to the end
// (median and worst) and how far past the budget that is. "engine": a loop
// the engine's interrupt handler stops; "watchdog": a builtin that never
// polls it, ended by the parent's CPU watch. At most budgetEndRuns runs
// whatever b.N is (each costs ~0.3 s of CPU), so ns/op means little here.
func benchBudgetEnd(b *testing.B, code string) {
	const budgetEndRuns = 20
	p, _ := newRealPool(b, Options{Slots: 1, Spares: 1})
	var cpu []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i == budgetEndRuns {
			break
		}
		l, err := p.Acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		res, err := l.Run(context.Background(), Job{Code: code}, quietHost{})
		if err != nil || res.Err == nil || res.Err.Kind != ErrCPU || res.Err.Message != ipc.CPUBudgetMessage(testCPUTime) {
			b.Fatal(err, res)
		}
		cpu = append(cpu, res.ChildCPU)
	}
	b.StopTimer()
	slices.Sort(cpu)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(cpu[len(cpu)/2]), "child-cpu-p50-ms")
	b.ReportMetric(ms(cpu[len(cpu)-1]), "child-cpu-max-ms")
	b.ReportMetric(ms(cpu[len(cpu)-1]-testCPUTime), "max-over-budget-ms")
}

func BenchmarkPool_CPUBudgetEnd(b *testing.B) {
	b.Run("engine", func(b *testing.B) { benchBudgetEnd(b, "async () => { for (;;) {} }") })
	b.Run("watchdog", func(b *testing.B) { benchBudgetEnd(b, `async () => new Array(2**31).join("")`) })
}
