package guest

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// Runs leave nothing behind: no goroutine, no memory mapping (every
// instance's linear memory is unmapped on close), whatever way they end.
func TestP4_NoLeaks(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	programs := []Program{
		{Code: "async () => 1"},
		{Code: "await new Promise(() => {})"},
		{Code: "await connecta.call('hang')", Limits: Limits{Wall: 50 * time.Millisecond}},
		{Code: "for (;;) {}", Limits: Limits{CPUTime: 20 * time.Millisecond}},
		{Code: "const a = []; for (;;) a.push(new Array(1e4).fill(1))", Limits: Limits{HeapBytes: 4 << 20, CPUTime: 5 * time.Second}},
		{Code: "{{{"},
	}
	runAll := func() {
		for _, p := range programs {
			p.Providers = connectaProvider
			h := &testHost{reply: func(context.Context, Call, func(Reply)) {}}
			if _, err := e.Run(context.Background(), p, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	runAll() // warm up lazily started runtime machinery
	goroutines, maps := runtime.NumGoroutine(), mappings()
	for i := 0; i < 5; i++ {
		runAll()
	}
	if !testkit.Poll(10*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines }) { // a leak never ends; a loaded machine is only slow
		t.Errorf("goroutines %d, before %d", runtime.NumGoroutine(), goroutines)
	}
	// The Go heap may map a few new arenas; 30 leaked instances would add 30.
	if m := mappings(); m > maps+8 {
		t.Errorf("memory mappings %d, before %d", m, maps)
	}
}

func mappings() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
