package contract

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/guest"
	"github.com/connecta-dev/connecta/test/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Benchmarks over HTTP: go-sdk client → /mcp → contract → supervisor → a
// real child → loopback fixture MCP server.
//
//	go test ./internal/contract/ -run '^$' -bench ExecuteCode -benchtime 200x

const (
	benchOnePlusOne = `async () => 1 + 1`
	benchFiveCalls  = `async () => { const r = []; for (let i = 0; i < 5; i++) r.push(await connecta.call("reader.echo", { i, pad: "x" })); return r.map((x) => x.i) }`
)

func benchSequential(b *testing.B, code string) {
	e := testEnv(b)
	cs := e.client(b, epDefault)
	if r := exec(b, cs, code, false); r.IsError {
		b.Fatal(textOf(r))
	}
	lat := make([]time.Duration, 0, b.N)
	cpu := startCPU()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"code": code}})
		if err != nil || r.IsError {
			b.Fatalf("%v %s", err, textOf(r))
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	cpu.report(b)
	reportPercentiles(b, lat)
}

// cpuMeter reports CPU per request: the server process itself, and the
// sandbox children it reaped (spawn, engine load, run, exit) — the cost that
// caps throughput on a 2-core machine.
type cpuMeter struct{ self, children time.Duration }

func startCPU() cpuMeter {
	return cpuMeter{self: testkit.ProcessCPU(), children: testkit.ChildrenCPU()}
}

func (m cpuMeter) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64((testkit.ProcessCPU()-m.self).Microseconds())/1000/n, "parent-cpu-ms/op")
	b.ReportMetric(float64((testkit.ChildrenCPU()-m.children).Microseconds())/1000/n, "child-cpu-ms/op")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.95), "p95-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

func benchClients(b *testing.B, code string, clients int) {
	e := testEnv(b)
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i] = e.client(b, epDefault)
	}
	if r := exec(b, sessions[0], code, false); r.IsError {
		b.Fatal(textOf(r))
	}
	var next sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	errs := 0
	cpu := startCPU()
	b.ResetTimer()
	start := time.Now()
	for _, cs := range sessions {
		next.Add(1)
		go func() {
			defer next.Done()
			for range work {
				t0 := time.Now()
				r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"code": code}})
				d := time.Since(t0)
				mu.Lock()
				if err != nil || r.IsError {
					errs++
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	next.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if errs > 0 {
		b.Logf("%d of %d requests failed (admission overload counts here)", errs, b.N)
	}
	cpu.report(b)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	reportPercentiles(b, lat)
}

func BenchmarkExecuteCode_OnePlusOne(b *testing.B) { benchSequential(b, benchOnePlusOne) }
func BenchmarkExecuteCode_FiveCalls(b *testing.B)  { benchSequential(b, benchFiveCalls) }

func BenchmarkExecuteCode_Clients(b *testing.B) {
	for _, code := range []struct{ name, src string }{{"OnePlusOne", benchOnePlusOne}, {"FiveCalls", benchFiveCalls}} {
		for _, n := range []int{4, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", code.name, n), func(b *testing.B) { benchClients(b, code.src, n) })
		}
	}
}

// BenchmarkPreludeCost measures what the trusted prelude adds to one run in
// the engine (in process, no child): the per-execution price of X11.
func BenchmarkPreludeCost(b *testing.B) {
	eng := testEngine(b)
	for _, c := range []struct{ name, prelude string }{{"none", ""}, {"prelude", Prelude(testSecret)}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				out, err := eng.Run(context.Background(), guest.Program{Code: benchOnePlusOne, Prelude: c.prelude,
					Providers: []guest.Provider{{Name: ProviderName, Functions: providerFunctions}}}, &scriptedHost{framer: newFramer(testSecret)})
				if err != nil || out.Err != nil {
					b.Fatal(err, out.Err)
				}
			}
		})
	}
}
