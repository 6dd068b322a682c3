package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// tracingPoint is the five-call program on one telemetry setting.
type tracingPoint struct {
	Name    string // off, off again, on, dead collector
	Latency latencies
	CPU     time.Duration // parent + children per program, over the whole run
	// Spans: what the receiver decoded (on); Dropped: the server's
	// connecta_trace_spans_dropped_total at the end (dead).
	Spans, Dropped int64
}

// benchTracing serves the bench configuration four times side by side —
// tracing off, off again (the A-A pair: the run's own noise), on (sampled
// 1.0, exporting OTLP/HTTP to a live receiver here that decodes every
// export) and with a dead collector (connection refused: spans dropped and
// counted) — and runs the five-call program n times on each, interleaved
// call by call in a rotating order, so load drift lands on all four alike.
// CPU is each process's (and its children's) over the whole run, so the
// export goroutine's work counts, whenever it ran.
func benchTracing(ctx context.Context, c benchConfig, connectors string, logf func(string, ...any)) ([]tracingPoint, error) {
	rcv, err := newOTLPReceiver()
	if err != nil {
		return nil, err
	}
	defer rcv.close()
	deadPort, err := pickFreePort() // nothing listens there
	if err != nil {
		return nil, err
	}
	telemetry := func(endpoint string) string {
		return fmt.Sprintf("telemetry: {otlp: {endpoint: %q}, sampleRatio: 1.0}\n", endpoint)
	}
	type target struct {
		extra string
		srv   *benchServer
		cl    *rawClient
		pt    *tracingPoint
	}
	out := []tracingPoint{{Name: "off"}, {Name: "off again (A-A)"}, {Name: "on → live OTLP receiver"}, {Name: "on → dead collector"}}
	targets := []*target{{extra: ""}, {extra: ""}, {extra: telemetry(rcv.url)}, {extra: telemetry(fmt.Sprintf("http://127.0.0.1:%d", deadPort))}}
	for i, t := range targets {
		t.pt = &out[i]
		dir, err := os.MkdirTemp("", "connecta-bench-tracing-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		srv, err := startServer(ctx, c.Connecta, dir, connectors+t.extra)
		if err != nil {
			return nil, fmt.Errorf("tracing %s: %w", t.pt.Name, err)
		}
		defer srv.stop()
		t.srv, t.cl = srv, newRawClient(srv.url, 2)
		if _, err := t.cl.sequential(ctx, ProgramFiveCall, 5); err != nil {
			return nil, fmt.Errorf("tracing %s warm-up: %w", t.pt.Name, err)
		}
	}
	time.Sleep(time.Second) // spares settle
	n := c.Sequential
	logf("tracing: %d × five calls on each of off, off again, on, dead collector, interleaved call by call", n)
	before := make([]cpuTimes, len(targets))
	for i, t := range targets {
		if before[i], err = readCPU(t.srv.pid); err != nil {
			return nil, err
		}
	}
	for i := range n {
		for k := range targets {
			t := targets[(i+k)%len(targets)]
			lat, err := t.cl.sequential(ctx, ProgramFiveCall, 1)
			if err != nil {
				return nil, fmt.Errorf("tracing %s: %w", t.pt.Name, err)
			}
			t.pt.Latency = append(t.pt.Latency, lat...)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the last export batch (≤ 1 s) goes out
	for i, t := range targets {
		d, err := cpuSince(t.srv.pid, before[i])
		if err != nil {
			return nil, err
		}
		t.pt.CPU = (d.self + d.children) / time.Duration(n)
	}
	out[2].Spans = rcv.spans.Load()
	out[3].Dropped = droppedSpans(ctx, targets[3].srv.url)
	return out, nil
}

// otlpReceiver is an OTLP/HTTP endpoint that decodes each export with the
// OTLP protobuf types and counts its spans, as a collector would take them.
type otlpReceiver struct {
	url   string
	hs    *http.Server
	spans atomic.Int64
}

func newOTLPReceiver() (*otlpReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String()}
	r.hs = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil || req.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		for _, rs := range msg.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.spans.Add(int64(len(ss.GetSpans())))
			}
		}
		reply, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(reply)
	})}
	go func() { _ = r.hs.Serve(ln) }()
	return r, nil
}

func (r *otlpReceiver) close() { _ = r.hs.Close() }

// droppedSpans reads connecta_trace_spans_dropped_total from the server's
// /metrics (beside /mcp); -1 when it cannot.
func droppedSpans(ctx context.Context, mcpURL string) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(mcpURL, "/mcp")+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "connecta_trace_spans_dropped_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

// writeTracing prints the tracing table: each setting against off.
func writeTracing(b *strings.Builder, pts []tracingPoint) {
	if len(pts) == 0 {
		return
	}
	base := pts[0]
	fmt.Fprintf(b, "\nTracing: the five-call program (%d per setting) on four servers side by side, interleaved call by call; ratios against `off` of the same run (`off again` against `off` is the run's own noise):\n\n", len(base.Latency))
	b.WriteString("| telemetry | p50 / p95 | × off p50 | mean | × off mean | total CPU per program | × off CPU | spans |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range pts {
		spans := ""
		switch {
		case p.Spans > 0:
			spans = fmt.Sprintf("%d received", p.Spans)
		case p.Dropped != 0:
			spans = fmt.Sprintf("%d dropped and counted", p.Dropped)
		}
		fmt.Fprintf(b, "| %s | %s / %s | %s | %s | %s | %s | %s | %s |\n", p.Name, msf(p.Latency.pct(50)), msf(p.Latency.pct(95)),
			ratio(p.Latency.pct(50), base.Latency.pct(50)), msf(p.Latency.mean()), ratio(p.Latency.mean(), base.Latency.mean()),
			msf(p.CPU), ratio(p.CPU, base.CPU), spans)
	}
}
