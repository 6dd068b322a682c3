package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/demo"
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// Programs the bench runs beyond 1plus1 and fivecall.
const (
	// programSpin is plain code that the engine's interrupt handler ends.
	programSpin = `async () => { for (;;) {} }`
	// programIndexOf is a builtin that never polls the interrupt handler:
	// only a CPU budget enforced from outside the engine ends it in time.
	programIndexOf = `async () => Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)`
)

// benchConfig is one `connecta-load bench` run.
type benchConfig struct {
	Connecta   string        // the binary to serve (bin/connecta)
	Hello      string        // the floor program (bin/hello), built with the same flags
	FloorN     int           // hello-world spawns per floor measurement
	Sequential int           // calls per sequential series
	Duration   time.Duration // per closed-loop point
	Clients    []int
	StreamN    int    // cancellations and streamed programs measured
	Stores     bool   // the five-call program on memory:, sqlite: and PostgreSQL (the store backends' cost)
	Tracing    bool   // the five-call program with tracing off, off again, on and to a dead collector
	Postgres   string // PostgreSQL URL for the store series; "" = a throwaway cluster
	Vs         string // a second binary measured against Connecta, interleaved; "" = none
	VsOnly     bool   // only the floor and the --vs comparison
	VsRounds   int    // interleaved rounds of the comparison
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("connecta-load bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c benchConfig
	fs.StringVar(&c.Connecta, "connecta", "bin/connecta", "connecta binary to serve")
	fs.StringVar(&c.Hello, "hello", "bin/hello", "static hello-world built with the same flags")
	fs.IntVar(&c.FloorN, "floor", 200, "hello-world spawns per floor measurement")
	fs.IntVar(&c.Sequential, "requests", 200, "calls per sequential series")
	fs.DurationVar(&c.Duration, "duration", 5*time.Second, "length of each closed-loop point")
	fs.StringVar(&c.Vs, "vs", "", "a second connecta binary (the previous build) to measure against --connecta in interleaved rounds, printing the ratios")
	fs.IntVar(&c.VsRounds, "vs-rounds", defaultVsRounds, "interleaved rounds of the --vs comparison")
	fs.BoolVar(&c.VsOnly, "vs-only", false, "with --vs: measure only the floor and the comparison")
	clients := fs.String("clients", "1,4,8", "closed-loop client counts")
	fs.IntVar(&c.StreamN, "stream", 50, "cancellations, first-line and 100-line programs measured (streaming and cancellation)")
	fs.BoolVar(&c.Stores, "stores", true, "run the five-call program on each store.url: memory:, sqlite:, PostgreSQL")
	fs.BoolVar(&c.Tracing, "tracing", true, "run the five-call program with tracing off, off again (noise), on (sampled 1.0, to a live OTLP receiver) and to a dead collector, interleaved")
	fs.StringVar(&c.Postgres, "postgres", "", "PostgreSQL URL for the store series (default: a throwaway cluster when the server binaries are installed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > MaxClients {
			fmt.Fprintf(stderr, "connecta-load bench: --clients: %q\n", f)
			return 2
		}
		c.Clients = append(c.Clients, n)
	}
	if c.FloorN < 1 || c.Sequential < 1 || c.Duration <= 0 || c.StreamN < 1 || c.VsRounds < 1 {
		fmt.Fprintln(stderr, "connecta-load bench: --floor, --requests, --duration, --stream and --vs-rounds must be positive")
		return 2
	}
	r, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "connecta-load bench:", err)
		return 2
	}
	if err := r.write(stdout); err != nil {
		fmt.Fprintln(stderr, "connecta-load bench:", err)
		return 2
	}
	return 0
}

// benchResult is everything one run measured.
type benchResult struct {
	Machine, GoVersion, LoadBefore, LoadAfter string
	FloorCPU, FloorWall                       time.Duration // per hello-world spawn (mean of two measurements)

	ColdStart, WarmStart time.Duration // process start → first answer

	OnePlusOne, FiveCall       latencies
	ChildCPU1, ParentCPU1      time.Duration // per 1+1 execution, sequential
	ChildCPU5, ParentCPU5      time.Duration // per five-call execution, sequential
	Loop                       []loopPoint
	RSSIdle, RSSPeak, ChildHWM int64
	Budget                     []budgetKill
	Streaming                  *streamResult  // streaming and cancellation figures; nil when not measured
	Stores                     []storePoint   // store backend figures; nil when not measured
	Tracing                    []tracingPoint // tracing's cost; nil when not measured
	Vs                         *vsResult      // --vs; nil without it
}

type loopPoint struct {
	Program         string
	Clients         int
	PerSec          float64
	OK, Failed      int
	ChildCPU, Total time.Duration // per successful program
}

type budgetKill struct {
	Program  string
	ChildCPU time.Duration
	Wall     time.Duration
	Text     string
}

func bench(ctx context.Context, c benchConfig, progress io.Writer) (*benchResult, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(progress, "bench: "+format+"\n", args...) }
	r := &benchResult{Machine: machine(), GoVersion: runtime.Version(), LoadBefore: loadAverage()}
	for _, p := range []*string{&c.Connecta, &c.Hello, &c.Vs} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}

	// The floor first, while this process has no other child to reap.
	logf("hello-world floor: %d spawns through the supervisor's spawn path", c.FloorN)
	floorCPU, floorWall, err := supervisor.SpawnFloor(c.Hello, c.FloorN)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}

	downURL, stopDemo, err := serveMCP(demo.NewServer())
	if err != nil {
		return nil, err
	}
	defer stopDemo()
	tools, toolsURL, stopTools, err := serveBenchTools()
	if err != nil {
		return nil, err
	}
	defer stopTools()
	connectors := fmt.Sprintf("  - id: demo\n    url: %s\n  - id: bench\n    url: %s\n", downURL, toolsURL)
	// finish runs the --vs comparison, then the floor again.
	finish := func() (*benchResult, error) {
		if c.Vs != "" {
			if r.Vs, err = benchVs(ctx, c, connectors, logf); err != nil {
				return nil, err
			}
		}
		logf("hello-world floor again")
		floorCPU2, floorWall2, err := supervisor.SpawnFloor(c.Hello, c.FloorN)
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		r.FloorCPU, r.FloorWall = (floorCPU+floorCPU2)/2, (floorWall+floorWall2)/2
		r.LoadAfter = loadAverage()
		return r, nil
	}
	if c.VsOnly && c.Vs != "" {
		return finish()
	}
	dir, err := os.MkdirTemp("", "connecta-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// Cold: an empty compilation cache. Warm: the same cache, a new process.
	cold, err := startServer(ctx, c.Connecta, dir, connectors)
	if err != nil {
		return nil, err
	}
	r.ColdStart = cold.firstAnswer
	cold.stop()
	srv, err := startServer(ctx, c.Connecta, dir, connectors)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	r.WarmStart = srv.firstAnswer
	logf("server up: cold start %s, warm start %s", r.ColdStart, r.WarmStart)
	time.Sleep(time.Second) // let the spares settle
	if r.RSSIdle, _, err = memory(srv.pid); err != nil {
		return nil, err
	}
	cl := newRawClient(srv.url, 2*MaxClients)

	measure := func(code string, n int) (latencies, time.Duration, time.Duration, error) {
		before, err := readCPU(srv.pid)
		if err != nil {
			return nil, 0, 0, err
		}
		lat, err := cl.sequential(ctx, code, n)
		if err != nil {
			return nil, 0, 0, err
		}
		d, err := cpuSince(srv.pid, before)
		return lat, d.children / time.Duration(n), d.self / time.Duration(n), err
	}
	logf("sequential: %d × 1+1, %d × five calls", c.Sequential, c.Sequential)
	if _, err := cl.sequential(ctx, ProgramFiveCall, 5); err != nil { // catalog and sessions warm
		return nil, fmt.Errorf("five-call warm-up: %w", err)
	}
	if r.OnePlusOne, r.ChildCPU1, r.ParentCPU1, err = measure(ProgramOnePlusOne, c.Sequential); err != nil {
		return nil, fmt.Errorf("1+1: %w", err)
	}
	if r.FiveCall, r.ChildCPU5, r.ParentCPU5, err = measure(ProgramFiveCall, c.Sequential); err != nil {
		return nil, fmt.Errorf("five calls: %w", err)
	}

	for _, prog := range []struct{ name, code string }{{"1+1", ProgramOnePlusOne}, {"five calls", ProgramFiveCall}} {
		for _, n := range c.Clients {
			logf("closed loop: %s at %d clients for %s", prog.name, n, c.Duration)
			before, err := readCPU(srv.pid)
			if err != nil {
				return nil, err
			}
			perSec, ok, failed := cl.closedLoop(ctx, prog.code, n, c.Duration)
			d, err := cpuSince(srv.pid, before)
			if err != nil {
				return nil, err
			}
			p := loopPoint{Program: prog.name, Clients: n, PerSec: perSec, OK: ok, Failed: failed}
			if ok > 0 {
				p.ChildCPU, p.Total = d.children/time.Duration(ok), (d.self+d.children)/time.Duration(ok)
			}
			r.Loop = append(r.Loop, p)
		}
	}
	if _, r.RSSPeak, err = memory(srv.pid); err != nil {
		return nil, err
	}

	logf("child peak RSS: sampling the server's children over 20 programs")
	if r.ChildHWM, err = childPeak(ctx, cl, srv.pid, 20); err != nil {
		return nil, err
	}

	for _, prog := range []struct{ name, code string }{{"for (;;) {}", programSpin}, {"indexOf on a 2^53 array-like", programIndexOf}} {
		logf("CPU budget: %s", prog.name)
		k, err := budget(ctx, cl, srv.pid, prog.code)
		if err != nil {
			return nil, err
		}
		k.Program = prog.name
		r.Budget = append(r.Budget, k)
	}
	if r.Streaming, err = benchStreaming(ctx, srv, cl, tools, c.StreamN, logf); err != nil {
		return nil, err
	}

	if c.Stores {
		if r.Stores, err = benchStores(ctx, c, connectors, logf); err != nil {
			return nil, err
		}
	}

	if c.Tracing {
		if r.Tracing, err = benchTracing(ctx, c, connectors, logf); err != nil {
			return nil, err
		}
	}

	srv.stop()
	return finish()
}

func cpuSince(pid int, before cpuTimes) (cpuTimes, error) {
	after, err := readCPU(pid)
	return after.sub(before), err
}

// childPeak runs n programs while sampling every child of pid (spares
// included) for its peak RSS; the largest is the child's peak.
func childPeak(ctx context.Context, cl *rawClient, pid, n int) (int64, error) {
	var peak int64
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(3 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, c := range childrenOf(pid) {
				// Only a child past its exec: between fork and exec it
				// shares the server's memory (vfork), and its peak would
				// be the server's. Its argv is read first, so the peak
				// read after it is the child's own.
				if !isSandboxChild(c) {
					continue
				}
				if _, hwm, err := memory(c); err == nil {
					mu.Lock()
					peak = max(peak, hwm)
					mu.Unlock()
				}
			}
		}
	}()
	_, err := cl.sequential(ctx, ProgramOnePlusOne, n)
	close(done)
	wg.Wait()
	return peak, err
}

// isSandboxChild reports whether pid has executed the sandbox child (its
// argv[0] is the child's, whichever binary it runs).
func isSandboxChild(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.HasPrefix(string(b), "connecta-sandbox\x00")
}

// budget runs one program that can only end by its CPU budget and reports
// the CPU of the children reaped meanwhile (the run's child: a replacement
// spare is still alive when the answer arrives).
func budget(ctx context.Context, cl *rawClient, pid int, code string) (budgetKill, error) {
	time.Sleep(500 * time.Millisecond) // spares ready, nothing else reaping
	before, err := readCPU(pid)
	if err != nil {
		return budgetKill{}, err
	}
	t0 := time.Now()
	reply, err := cl.call(ctx, "execute_code", map[string]any{"code": code}, nil)
	wall := time.Since(t0)
	if err != nil {
		return budgetKill{}, err
	}
	time.Sleep(100 * time.Millisecond) // the killed child is reaped
	d, err := cpuSince(pid, before)
	return budgetKill{ChildCPU: d.children, Wall: wall, Text: clamp(reply.text(), 160)}, err
}

// serveMCP serves srv over streamable HTTP on a loopback port, with
// sessions, as a remote connector would be.
func serveMCP(srv *mcp.Server) (string, func(), error) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{SessionTimeout: time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/mcp", func() { _ = hs.Close() }, nil
}

// server is one running `connecta serve`.
type benchServer struct {
	cmd         *exec.Cmd
	pid         int
	url         string
	firstAnswer time.Duration
	stopOnce    sync.Once
	log         *os.File
}

// startServer writes the bench configuration (the embedded default's shape,
// its demo connector reached over loopback HTTP, plus the bench tools) and
// serves it; it returns once the first 1+1 answered.
func startServer(ctx context.Context, bin, dir, connectors string) (*benchServer, error) {
	port, err := pickFreePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "connecta.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:%d\nexecutor: {cacheDir: %q}\nconnectors:\n%s", port, filepath.Join(dir, "cache"), connectors)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	s := &benchServer{url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), log: logf}
	s.cmd = exec.Command(bin, "serve", "--config", cfg)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = append(os.Environ(), "GOGC=", "GOMEMLIMIT=")
	t0 := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.pid = s.cmd.Process.Pid
	cl := newRawClient(s.url, 1)
	deadline := t0.Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.run(cctx, ProgramOnePlusOne)
		cancel()
		if err == nil {
			s.firstAnswer = time.Since(t0)
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || s.cmd.ProcessState != nil {
			s.stop()
			return nil, fmt.Errorf("connecta did not answer within 60s: %w\n%s", err, tailFile(logf.Name()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *benchServer) stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
		s.log.Close()
	})
}

func tailFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func numCPU() int { return runtime.NumCPU() }
