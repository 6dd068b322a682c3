package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// procKB reads a "Key:   N kB" line of /proc/<pid>/status.
func procKB(tb testing.TB, pid int, key string) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// maxSizeBody is a valid JSON-RPC request of exactly size bytes: tools/list
// with the padding in a params member the method ignores.
func maxSizeBody(size int) []byte {
	return paddedBody(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"`, `"}}`, size)
}

// maxSizeCall is a tools/call of exactly size bytes: skills with the
// padding in an argument the tool ignores, so only the SDK's and the
// argument decoding's copies count.
func maxSizeCall(size int) []byte {
	return paddedBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"skills","arguments":{"pad":"`, `"}}}`, size)
}

// maxSizeSearch is a tools/call of exactly size bytes whose padding is the
// search_tools query: the tool's own work on a 10 MiB query counts too.
func maxSizeSearch(size int) []byte {
	return paddedBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"`, `"}}}`, size)
}

func paddedBody(head, tail string, size int) []byte {
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// BenchmarkBodies_16ConcurrentMaxSize sends 16 max-size request bodies at
// once to a real server process and reports its peak RSS above idle, as a
// multiple of 16 × maxBodyBytes (target ≤ 1.5), for tools/list (the body
// ignored past its envelope) and tools/call (the body an argument).
func BenchmarkBodies_16ConcurrentMaxSize(b *testing.B) {
	for _, c := range []struct {
		name string
		body func(int) []byte
	}{{"tools_list", maxSizeBody}, {"tools_call", maxSizeCall}, {"tools_call_search", maxSizeSearch}} {
		b.Run(c.name, func(b *testing.B) { benchBodies(b, c.body) })
	}
}

func benchBodies(b *testing.B, mk func(int) []byte) {
	const maxBody = 10485760
	srv := startServer(b, "executor: {spares: 0}\n")
	pid := srv.cmd.Process.Pid
	body := mk(maxBody)
	post := func() int {
		req := testkit.MCPRequest(b, "http://"+srv.addr+"/mcp", bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(); code != http.StatusOK { // warm: first-use allocations
		b.Fatalf("a max-size body: HTTP %d", code)
	}
	time.Sleep(500 * time.Millisecond) // measured: the warm-up's memory settles before the idle baseline
	var worst float64
	b.ResetTimer()
	for range b.N {
		idle := procKB(b, pid, "VmRSS")
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) // reset VmHWM
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if code := post(); code != http.StatusOK {
					b.Errorf("HTTP %d", code)
				}
			})
		}
		wg.Wait()
		peak := procKB(b, pid, "VmHWM")
		worst = max(worst, float64((peak-idle)*1024)/float64(16*maxBody))
		time.Sleep(200 * time.Millisecond) // measured: the bodies' memory settles before the next idle baseline
	}
	b.ReportMetric(worst, "peak-idle/16bodies")
}
