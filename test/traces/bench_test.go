package traces_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/contract"
)

// BenchmarkTracing_ExecuteCode: one execute_code of three host calls to a
// loopback downstream, served by four live connectas side by side:
// tracing off (no endpoint, twice: off2/off is the run's noise), on (sampled 1.0, exporting to the test's OTLP
// receiver) and with a dead collector (connection refused: spans dropped
// and counted). Each iteration calls all four in turn (the order rotates),
// so the ratios on/off and dead/off are of the same run and the same load:
//
//	go test -tags slimchild -run '^$' -bench Tracing -benchtime 300x ./test/traces/
func BenchmarkTracing_ExecuteCode(b *testing.B) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	down := newDownstream(b)
	variants := []struct {
		name string
		l    *live
		took time.Duration
	}{
		{name: "off", l: start(b, "", down.srv.URL)},
		{name: "off2", l: start(b, "", down.srv.URL)}, // A-A: the run's own noise
		{name: "on", l: start(b, newReceiver(b).endpoint(), down.srv.URL)},
		{name: "dead", l: start(b, deadURL, down.srv.URL)},
	}
	meta := mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}
	run := func(l *live) time.Duration {
		t0 := time.Now()
		r, err := l.cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: meta, Name: contract.ToolName, Arguments: map[string]any{"code": program}})
		if err != nil || r.IsError {
			b.Fatalf("call: %v %v", err, r)
		}
		return time.Since(t0)
	}
	for i := range variants {
		run(variants[i].l) // warm: catalog, sessions
	}
	b.ResetTimer()
	for i := range b.N {
		for k := range variants {
			v := &variants[(i+k)%len(variants)]
			v.took += run(v.l)
		}
	}
	b.StopTimer()
	off := float64(variants[0].took) / float64(b.N)
	for _, v := range variants {
		b.ReportMetric(float64(v.took)/float64(b.N)/1e6, v.name+"-ms/call")
	}
	for _, v := range variants[1:] {
		b.ReportMetric(float64(v.took)/float64(b.N)/off, v.name+"/off")
	}
}
