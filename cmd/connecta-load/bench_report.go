package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

func msf(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func times(d, floor time.Duration) string {
	if floor <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f×", float64(d)/float64(floor))
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// write prints the run as the Markdown table docs/benchmarks.md records.
func (r *benchResult) write(w io.Writer) error {
	var b strings.Builder
	f := r.FloorCPU
	fmt.Fprintf(&b, "Machine: %s; %s. Load average before / after: %s / %s.\n\n", r.Machine, r.GoVersion, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "Floor: a static hello-world (same build flags) spawned through the supervisor's spawn path costs %s of CPU and %s of wall per process.\n\n", msf(r.FloorCPU), msf(r.FloorWall))
	if r.Vs != nil && r.OnePlusOne == nil { // --vs-only
		r.Vs.write(&b, r.FloorCPU)
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("| figure | measured | × hello-world |\n| --- | --- | --- |\n")
	row := func(name, val, x string) { fmt.Fprintf(&b, "| %s | %s | %s |\n", name, val, x) }
	row("child CPU per `1+1` program (sequential)", msf(r.ChildCPU1), times(r.ChildCPU1, f))
	row("parent CPU per `1+1` execution (sequential)", msf(r.ParentCPU1), times(r.ParentCPU1, f))
	row("total CPU per `1+1` request (sequential)", msf(r.ChildCPU1+r.ParentCPU1), times(r.ChildCPU1+r.ParentCPU1, f))
	row("child CPU per five-call program (sequential)", msf(r.ChildCPU5), times(r.ChildCPU5, f))
	row("parent CPU per five-call execution (sequential)", msf(r.ParentCPU5), times(r.ParentCPU5, f))
	row("`1+1` sequential p50 / p95 / p99", fmt.Sprintf("%s / %s / %s", msf(r.OnePlusOne.pct(50)), msf(r.OnePlusOne.pct(95)), msf(r.OnePlusOne.pct(99))), "")
	row("five calls (loopback HTTP downstream) sequential p50 / p95 / p99", fmt.Sprintf("%s / %s / %s", msf(r.FiveCall.pct(50)), msf(r.FiveCall.pct(95)), msf(r.FiveCall.pct(99))), "")
	for _, p := range r.Loop {
		val := fmt.Sprintf("%.0f req/s", p.PerSec)
		if p.Failed > 0 {
			val += fmt.Sprintf(" (%d failed)", p.Failed)
		}
		row(fmt.Sprintf("%s, %d client(s), closed loop", p.Program, p.Clients), val+fmt.Sprintf("; total CPU %s per request", msf(p.Total)), times(p.Total, f))
	}
	row("server RSS idle / peak", fmt.Sprintf("%s / %s", mb(r.RSSIdle), mb(r.RSSPeak)), "")
	row("child peak RSS (`1+1`)", mb(r.ChildHWM), "")
	row("process start → first answer (empty cache / warm cache)", fmt.Sprintf("%s / %s", msf(r.ColdStart), msf(r.WarmStart)), "")
	for _, k := range r.Budget {
		row(fmt.Sprintf("child CPU at a CPU-budget kill: `%s`", k.Program), fmt.Sprintf("%s (answered in %s: %s)", msf(k.ChildCPU), msf(k.Wall), strings.ReplaceAll(k.Text, "|", "\\|")), "")
	}
	if r.Streaming != nil {
		r.Streaming.write(&b)
	}
	writeStores(&b, r.Stores)
	writeTracing(&b, r.Tracing)
	if r.Vs != nil {
		r.Vs.write(&b, r.FloorCPU)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
