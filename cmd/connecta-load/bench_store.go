package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/test/pgtest"
)

// storeRounds interleaves the stores' series so a drift in the machine's
// speed lands on all of them alike.
const storeRounds = 4

// storePoint is the five-call program on one store.url.
type storePoint struct {
	Store   string // memory:, sqlite:, postgres (the URL is not shown)
	Latency latencies
	CPU     time.Duration // parent + children per program
	Note    string        // why it was not measured
}

// benchStores serves the bench configuration once per store (memory:,
// sqlite: on a file, PostgreSQL: postgresURL, or a throwaway cluster when
// empty and the server binaries are installed) and runs the five-call
// program n times on each, in interleaved rounds. Five calls write five
// activity events to the store (off the request path, in batches).
func benchStores(ctx context.Context, c benchConfig, connectors string, logf func(string, ...any)) ([]storePoint, error) {
	pgURL, note := c.Postgres, ""
	if pgURL == "" {
		cl, err := pgtest.Launch()
		if err != nil {
			note = "not measured: " + err.Error()
		} else {
			defer cl.Close()
			if pgURL, err = cl.CreateDatabase(ctx); err != nil {
				note = "not measured: " + err.Error()
			}
		}
	}
	type target struct {
		name, url string
		srv       *benchServer
		cl        *rawClient
		pt        *storePoint
	}
	var targets []*target
	var out []storePoint
	for _, name := range []string{"memory:", "sqlite:", "postgres"} {
		out = append(out, storePoint{Store: name})
	}
	for i := range out {
		t := &target{name: out[i].Store, pt: &out[i]}
		switch t.name {
		case "memory:":
			t.url = "memory:"
		case "sqlite:":
			t.url = "sqlite:" + filepath.Join(os.TempDir(), fmt.Sprintf("connecta-bench-%d.db", os.Getpid()))
			defer os.Remove(strings.TrimPrefix(t.url, "sqlite:"))
			defer os.Remove(strings.TrimPrefix(t.url, "sqlite:") + "-wal")
			defer os.Remove(strings.TrimPrefix(t.url, "sqlite:") + "-shm")
		case "postgres":
			if pgURL == "" {
				t.pt.Note = note
				continue
			}
			t.url = pgURL
		}
		dir, err := os.MkdirTemp("", "connecta-bench-store-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		// The store section follows the connector list as another top-level key.
		srv, err := startServer(ctx, c.Connecta, dir, connectors+"store: {url: \""+t.url+"\"}\n")
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", t.name, err)
		}
		defer srv.stop()
		t.srv, t.cl = srv, newRawClient(srv.url, 2)
		if _, err := t.cl.sequential(ctx, ProgramFiveCall, 5); err != nil {
			return nil, fmt.Errorf("store %s warm-up: %w", t.name, err)
		}
		targets = append(targets, t)
	}
	per := max(1, c.Sequential/storeRounds)
	logf("stores: %d × five calls on each of %d stores, in %d interleaved rounds", per*storeRounds, len(targets), storeRounds)
	cpu := make(map[string]time.Duration)
	for range storeRounds {
		for _, t := range targets {
			before, err := readCPU(t.srv.pid)
			if err != nil {
				return nil, err
			}
			lat, err := t.cl.sequential(ctx, ProgramFiveCall, per)
			if err != nil {
				return nil, fmt.Errorf("store %s: %w", t.name, err)
			}
			time.Sleep(150 * time.Millisecond) // the activity batch of the last program lands
			d, err := cpuSince(t.srv.pid, before)
			if err != nil {
				return nil, err
			}
			t.pt.Latency = append(t.pt.Latency, lat...)
			cpu[t.name] += d.self + d.children
		}
	}
	for _, t := range targets {
		t.pt.CPU = cpu[t.name] / time.Duration(per*storeRounds)
	}
	return out, nil
}

// writeStores prints the store table: each store against memory:.
func writeStores(b *strings.Builder, pts []storePoint) {
	if len(pts) == 0 {
		return
	}
	base := pts[0]
	b.WriteString("\nThe five-call program on each `store.url` (same machine, interleaved rounds; ratios against `memory:`):\n\n")
	b.WriteString("| store | p50 / p95 | × memory: p50 | total CPU per program | × memory: CPU |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range pts {
		if p.Note != "" {
			fmt.Fprintf(b, "| %s | %s | | | |\n", p.Store, strings.ReplaceAll(p.Note, "|", "\\|"))
			continue
		}
		fmt.Fprintf(b, "| %s | %s / %s | %s | %s | %s |\n", p.Store, msf(p.Latency.pct(50)), msf(p.Latency.pct(95)),
			ratio(p.Latency.pct(50), base.Latency.pct(50)), msf(p.CPU), ratio(p.CPU, base.CPU))
	}
}

func ratio(d, base time.Duration) string {
	if base <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", float64(d)/float64(base))
}
