package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// defaultVsRounds is how many interleaved rounds --vs runs: each round
// measures both binaries, in alternating order, so load drift on a shared
// machine falls on both alike.
const defaultVsRounds = 3

// vsSide is one binary's totals over every round of the comparison.
type vsSide struct {
	Bin                   string
	Seq                   int           // sequential 1+1 programs measured
	ChildCPU, ParentCPU   time.Duration // summed over Seq
	LoopOK                int           // 1+1 answered in the closed loops
	LoopTime              time.Duration // their total length
	LoopChild, LoopParent time.Duration // CPU over the closed loops
	ChildHWM              int64         // largest child peak RSS seen
}

func (s *vsSide) perSeq(d time.Duration) time.Duration { return d / time.Duration(max(s.Seq, 1)) }
func (s *vsSide) perSec() float64                      { return float64(s.LoopOK) / s.LoopTime.Seconds() }

// vsResult is the --vs comparison: this binary (A) against another (B).
type vsResult struct {
	Rounds     int
	Clients    int
	A, B       vsSide
	LoadBefore string
	LoadAfter  string
}

// benchVs serves both binaries side by side (each its own directory and
// cache, both warm) and measures them in interleaved rounds: sequential
// 1+1 (child and parent CPU per program), 1+1 in a closed loop at the
// largest client count (throughput), and the child's peak RSS.
func benchVs(ctx context.Context, c benchConfig, connectors string, logf func(string, ...any)) (*vsResult, error) {
	r := &vsResult{Rounds: c.VsRounds, Clients: c.Clients[len(c.Clients)-1], A: vsSide{Bin: c.Connecta}, B: vsSide{Bin: c.Vs}, LoadBefore: loadAverage()}
	type running struct {
		name string // A or B
		side *vsSide
		srv  *benchServer
		cl   *rawClient
	}
	var sides []running
	for i, s := range []*vsSide{&r.A, &r.B} {
		dir, err := os.MkdirTemp("", "connecta-bench-vs-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		// Twice: the first start fills the compilation cache.
		srv, err := startServer(ctx, s.Bin, dir, connectors)
		if err != nil {
			return nil, fmt.Errorf("--vs %s: %w", s.Bin, err)
		}
		srv.stop()
		if srv, err = startServer(ctx, s.Bin, dir, connectors); err != nil {
			return nil, fmt.Errorf("--vs %s: %w", s.Bin, err)
		}
		defer srv.stop()
		sides = append(sides, running{string(rune('A' + i)), s, srv, newRawClient(srv.url, 2*MaxClients)})
	}
	time.Sleep(time.Second) // spares settle
	n := max(c.Sequential/r.Rounds, 1)
	for round := range r.Rounds {
		order := []running{sides[0], sides[1]}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, x := range order {
			logf("--vs round %d/%d: %s (%s)", round+1, r.Rounds, x.name, x.side.Bin)
			before, err := readCPU(x.srv.pid)
			if err != nil {
				return nil, err
			}
			if _, err := x.cl.sequential(ctx, ProgramOnePlusOne, n); err != nil {
				return nil, fmt.Errorf("--vs %s: 1+1: %w", x.side.Bin, err)
			}
			d, err := cpuSince(x.srv.pid, before)
			if err != nil {
				return nil, err
			}
			x.side.Seq += n
			x.side.ChildCPU += d.children
			x.side.ParentCPU += d.self

			if before, err = readCPU(x.srv.pid); err != nil {
				return nil, err
			}
			_, ok, _ := x.cl.closedLoop(ctx, ProgramOnePlusOne, r.Clients, c.Duration)
			if d, err = cpuSince(x.srv.pid, before); err != nil {
				return nil, err
			}
			x.side.LoopOK += ok
			x.side.LoopTime += c.Duration
			x.side.LoopChild += d.children
			x.side.LoopParent += d.self

			hwm, err := childPeak(ctx, x.cl, x.srv.pid, 10)
			if err != nil {
				return nil, err
			}
			x.side.ChildHWM = max(x.side.ChildHWM, hwm)
		}
	}
	r.LoadAfter = loadAverage()
	return r, nil
}

func quotient(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// write prints the comparison as a Markdown table: each figure for A and B,
// × the hello-world floor of the same run, and A ÷ B.
func (r *vsResult) write(b *strings.Builder, floor time.Duration) {
	fmt.Fprintf(b, "\n### This binary (A) against --vs (B), %d interleaved rounds\n\n", r.Rounds)
	fmt.Fprintf(b, "A: `%s`; B: `%s`. Load average before / after: %s / %s.\n\n", r.A.Bin, r.B.Bin, r.LoadBefore, r.LoadAfter)
	b.WriteString("| figure | A | B | A ÷ B |\n| --- | --- | --- | --- |\n")
	cpu := func(name string, a, bb time.Duration) {
		fmt.Fprintf(b, "| %s | %s (%s) | %s (%s) | %s |\n", name, msf(a), times(a, floor), msf(bb), times(bb, floor), quotient(float64(a), float64(bb)))
	}
	cpu("child CPU per `1+1` (sequential; × hello-world)", r.A.perSeq(r.A.ChildCPU), r.B.perSeq(r.B.ChildCPU))
	cpu("parent CPU per `1+1` (sequential)", r.A.perSeq(r.A.ParentCPU), r.B.perSeq(r.B.ParentCPU))
	cpu("total CPU per `1+1` (sequential)", r.A.perSeq(r.A.ChildCPU+r.A.ParentCPU), r.B.perSeq(r.B.ChildCPU+r.B.ParentCPU))
	perOK := func(s *vsSide) time.Duration { return (s.LoopChild + s.LoopParent) / time.Duration(max(s.LoopOK, 1)) }
	cpu(fmt.Sprintf("total CPU per `1+1` at %d clients", r.Clients), perOK(&r.A), perOK(&r.B))
	fmt.Fprintf(b, "| `1+1` at %d clients, closed loop | %.0f req/s | %.0f req/s | %s |\n", r.Clients, r.A.perSec(), r.B.perSec(), quotient(r.A.perSec(), r.B.perSec()))
	fmt.Fprintf(b, "| child peak RSS (`1+1`) | %s | %s | %s |\n", mb(r.A.ChildHWM), mb(r.B.ChildHWM), quotient(float64(r.A.ChildHWM), float64(r.B.ChildHWM)))
}
