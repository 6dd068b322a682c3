package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/test/testkit"
)

// BenchmarkP4_FiveCallProgramOverLoopback is what a session per execution
// costs end to end: execute_code running five connecta.call()s against a
// go-sdk server over loopback HTTP, on a connector with sharedSession: true,
// on one with a session per execution (versionNegotiation: legacy: one more
// initialize and notifications/initialized per run; the DELETE is off the
// caller's path) and on the default, which speaks 2026-07-28 to this server
// over one reused connection.
func BenchmarkP4_FiveCallProgramOverLoopback(b *testing.B) {
	sharedPool(b)
	down := newDownstream(b)
	url := down.url + "/mcp"
	h := newHarness(b, harnessOptions{code: withCode, extra: []gateway.ConnectorSpec{
		{ID: "shared", URL: url, SharedSession: true},
		{ID: "fresh", URL: url, LegacyVersion: true},
		{ID: "stateless", URL: url},
	}})
	cs := h.connect(b, "")
	for _, id := range []string{"shared", "fresh", "stateless"} {
		code := `async () => { for (let i = 0; i < 5; i++) await connecta.call("` + id + `.echo", {i}); return 5 }`
		args, _ := json.Marshal(map[string]string{"code": code})
		b.Run(id, func(b *testing.B) {
			if res := call(b, cs, "execute_code", string(args)); res.IsError {
				b.Fatalf("warm-up: %s", textOf(b, res))
			}
			reqs, cpu := down.requests.Load(), testkit.ProcessCPU()
			b.ResetTimer()
			for range b.N {
				if res := call(b, cs, "execute_code", string(args)); res.IsError {
					b.Fatalf("%s", textOf(b, res))
				}
			}
			b.StopTimer()
			// Every HTTP request the downstream was sent (the DELETE of a
			// session included), and this process's CPU (gateway, server,
			// the in-process downstream and the bench client; not the
			// sandbox child, the same in every variant).
			n := float64(b.N)
			b.ReportMetric(float64(down.requests.Load()-reqs)/n, "downstream-req/op")
			b.ReportMetric(float64(testkit.ProcessCPU()-cpu)/float64(time.Millisecond)/n, "cpu-ms/op")
		})
	}
}
