package guest

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/ipc"
	quickjswasm "github.com/connecta-dev/connecta/internal/quickjs.wasm"
	"github.com/connecta-dev/connecta/test/testkit"
	"github.com/tetratelabs/wazero"
)

// BenchmarkRun_OnePlusOne: fresh instance + init + setup + `1+1` + close.
func BenchmarkRun_OnePlusOne(b *testing.B) {
	e := newTestEngine(b, EngineOptions{})
	h := &testHost{}
	prog := Program{Code: "async () => 1 + 1", Providers: connectaProvider}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU()
	defer func() { reportCPU(b, cpu0, 1) }()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out, err := e.Run(context.Background(), prog, h)
		lat = append(lat, time.Since(t0))
		if err != nil || string(out.Value) != "2" {
			b.Fatal(err, out)
		}
	}
	reportPercentiles(b, lat)
}

// BenchmarkCompile_WarmCache: a new Engine (runtime + host modules +
// CompileModule) from a warm on-disk cache, as a sandbox child starts.
func BenchmarkCompile_WarmCache(b *testing.B) {
	newTestEngine(b, EngineOptions{}) // warm
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU()
	defer func() { reportCPU(b, cpu0, 1) }()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		e, err := NewEngine(context.Background(), EngineOptions{CacheDir: testCacheDir, MaxArgBytes: ipc.MaxPayloadBytes, MaxResultChars: ipc.MaxResultChars})
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
	reportPercentiles(b, lat)
}

// BenchmarkHostCall_RoundTrip: one awaited host call (JSON both ways,
// answered at once) inside a running program.
func BenchmarkHostCall_RoundTrip(b *testing.B) {
	e := newTestEngine(b, EngineOptions{})
	h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
		settle(Reply{Value: json.RawMessage(`{"ok":true,"n":1}`)})
	}}
	const calls = 200
	prog := Program{Code: "async () => { let n = 0; for (let i = 0; i < " + strconv.Itoa(calls) + "; i++) n += (await connecta.call('a.b', {i})).n; return n; }",
		Providers: connectaProvider, Limits: Limits{CPUTime: time.Minute}}
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU()
	defer func() { reportCPU(b, cpu0, calls) }()
	for i := 0; i < b.N; i++ {
		out, err := e.Run(context.Background(), prog, h)
		if err != nil || string(out.Value) != strconv.Itoa(calls) {
			b.Fatal(err, out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls)/1000, "µs/call")
}

// BenchmarkMemory_RSS reports the RSS an idle instance adds, and what one
// holding ~16 MiB of JS heap adds and gives back on close.
func BenchmarkMemory_RSS(b *testing.B) {
	e := newTestEngine(b, EngineOptions{})
	measure := func(code string, n int) (perInstance, after float64) {
		runtime.GC()
		base := rssBytes()
		var wg sync.WaitGroup
		waiting := make(chan struct{}, n)
		release := make(chan struct{})
		h := &testHost{reply: func(_ context.Context, c Call, settle func(Reply)) {
			waiting <- struct{}{}
			go func() { <-release; settle(Reply{Value: json.RawMessage(`1`)}) }()
		}}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.Run(context.Background(), Program{Code: code, Providers: connectaProvider, Limits: Limits{CPUTime: time.Minute}}, h); err != nil {
					b.Error(err)
				}
			}()
		}
		for i := 0; i < n; i++ {
			<-waiting
		}
		held := rssBytes()
		close(release)
		wg.Wait()
		runtime.GC()
		return float64(held-base) / float64(n), float64(rssBytes()-base) / float64(n)
	}
	// One measurement however large b.N is: the metric is the point.
	idle, _ := measure("async () => { const o = {a: [1, 2, 3]}; return await connecta.call('x'); }", 16)
	big, after := measure("async () => { const a = []; for (let i = 0; i < 16; i++) a.push(new Uint8Array(1 << 20).fill(1)); return await connecta.call('x') + a.length; }", 4)
	b.ReportMetric(idle/(1<<20), "MiB/idle-instance")
	b.ReportMetric(big/(1<<20), "MiB/16MiB-instance")
	b.ReportMetric(after/(1<<20), "MiB/after-close")
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func reportCPU(b *testing.B, start time.Duration, perOp int) {
	b.ReportMetric(float64((testkit.ProcessCPU()-start).Microseconds())/float64(b.N*perOp), "cpu-µs/op")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
}

// BenchmarkFib27 calibrates the machine: the prototype measured 38 ms
// on a quieter 2-vCPU EPYC when the engine build was first measured.
func BenchmarkFib27(b *testing.B) {
	e := newTestEngine(b, EngineOptions{})
	prog := Program{Code: "async () => { function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } return fib(27); }", Limits: Limits{CPUTime: time.Minute}}
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := e.Run(context.Background(), prog, &testHost{})
		if err != nil || string(out.Value) != "196418" {
			b.Fatal(err, out)
		}
		cpu += out.CPUTime
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "guest-cpu-ms/op")
}

// BenchmarkCompile_WarmCacheModuleOnly isolates wazero's part of
// BenchmarkCompile_WarmCache: a new runtime and CompileModule from the warm
// on-disk cache (what the prototype's "compile from cache" measured).
func BenchmarkCompile_WarmCacheModuleOnly(b *testing.B) {
	newTestEngine(b, EngineOptions{}) // warm
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cache, err := wazero.NewCompilationCacheWithDir(testCacheDir)
		if err != nil {
			b.Fatal(err)
		}
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithDebugInfoEnabled(false).WithCompilationCache(cache))
		if _, err := rt.CompileModule(ctx, quickjswasm.Binary()); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		rt.Close(ctx)
	}
	reportPercentiles(b, lat)
}
