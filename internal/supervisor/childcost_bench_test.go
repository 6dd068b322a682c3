package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// buildStatic builds pkg as `make build` builds bin/connecta (static,
// -trimpath) into dir.
func buildStatic(b *testing.B, dir, name, pkg string) string {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go command")
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// BenchmarkChild_ConnectaVsHello is the child-cost figure (docs/benchmarks.md): the
// real bin/connecta (built like `make build`) spawned through the pool's own
// spawn path with the pool's cache directory, running `async () => 1+1` and
// reaped, against a static hello-world built the same way and spawned
// through the same path, one for one in the same loop. It reports each
// one's CPU (user + system of that process, from its rusage), the ratio
// (target ≤ 6×) and the child's peak RSS (target ≤ 16 MB). Peak RSS counts
// the binary's and the cached code's file pages the child mapped, which are
// shared page cache; child-ready-anon-MB (anonymous memory at ready, from
// smaps_rollup) is the part that is the child's own.
//
// Two children: "slim" is the production one (cmd/sandbox-child from its
// sealed memfd, Options.Child), "self" the whole gateway re-executed, as a
// build without the slim child runs.
func BenchmarkChild_ConnectaVsHello(b *testing.B) {
	dir := b.TempDir()
	connecta := buildStatic(b, dir, "connecta", "github.com/connecta-dev/connecta/cmd/connecta")
	slimBin := buildStatic(b, dir, "sandbox-child", "github.com/connecta-dev/connecta/cmd/sandbox-child")
	hello := buildStatic(b, dir, "hello", "github.com/connecta-dev/connecta/cmd/connecta-load/hello")
	bin, err := os.ReadFile(slimBin)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	b.Run("slim", func(b *testing.B) {
		childVsHello(b, dir, hello, Options{Child: Child{Binary: bin, SHA256: hex.EncodeToString(sum[:])}})
	})
	b.Run("self", func(b *testing.B) { childVsHello(b, dir, hello, Options{floorExe: connecta}) })
}

func childVsHello(b *testing.B, dir, hello string, opts Options) {
	// A private cache directory: the shared test one is pruned by other
	// packages' tests running at the same time.
	cache, err := os.MkdirTemp(dir, "cache-")
	if err != nil {
		b.Fatal(err)
	}
	opts.Slots, opts.Spares, opts.CacheDir = 1, 1, cache
	opts.Registry, opts.Logger = prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := New(context.Background(), testOptions(opts))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	frame, err := ipc.Encode(&ipc.Message{Type: ipc.TypeRun, Run: runOf(Job{Code: "async () => 1 + 1"}, p.opts.Limits)})
	if err != nil {
		b.Fatal(err)
	}
	var childCPU, helloCPU []time.Duration
	var maxRSS, maxAnon int64
	b.ResetTimer()
	for i := range b.N + 1 { // the first is a warm-up, not counted
		c, err := p.spawn(ipc.ModeServe)
		if err != nil {
			b.Fatal(err)
		}
		if in := <-c.in; in.err != nil || in.m.Type != ipc.TypeReady {
			tail, _ := c.stderr.String()
			b.Fatalf("not ready: %v; stderr: %s", in.err, tail)
		}
		maxAnon = max(maxAnon, anonKB(c.pid))
		runAndRetire(b, p, c, frame)
		if i == 0 {
			continue
		}
		ru := c.state.SysUsage().(*syscall.Rusage)
		childCPU = append(childCPU, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		maxRSS = max(maxRSS, ru.Maxrss)

		// The floor, interleaved so both see the same machine.
		cpu, _, err := SpawnFloor(hello, 1)
		if err != nil {
			b.Fatal(err)
		}
		helloCPU = append(helloCPU, cpu)
	}
	b.StopTimer()
	med := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	sum := func(d []time.Duration) (t time.Duration) {
		for _, x := range d {
			t += x
		}
		return t
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(sum(childCPU))/float64(b.N), "child-cpu-ms/op")
	b.ReportMetric(ms(sum(helloCPU))/float64(b.N), "hello-cpu-ms/op")
	b.ReportMetric(float64(sum(childCPU))/float64(max(sum(helloCPU), 1)), "x-hello")
	b.ReportMetric(ms(med(childCPU)), "child-cpu-p50-ms")
	b.ReportMetric(ms(med(helloCPU)), "hello-cpu-p50-ms")
	b.ReportMetric(float64(maxRSS)/1024, "child-peak-rss-MB")
	if maxAnon > 0 {
		b.ReportMetric(float64(maxAnon)/1024, "child-ready-anon-MB")
	}
}

// anonKB is the anonymous memory (KiB) of process pid from smaps_rollup,
// or 0 when it cannot be read.
func anonKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
