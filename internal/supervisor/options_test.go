package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The values config ships for executor.* (the pool has no defaults of its
// own: tests pass them explicitly, through testOptions).
const (
	testQueueTimeout = 5 * time.Second
	testSpareIdle    = 30 * time.Second
	testWall         = 30 * time.Second
	testCPUTime      = 250 * time.Millisecond
	testHeapBytes    = 64 << 20
	testStackBytes   = 1 << 20
)

// testOptions fills the required options a test leaves zero with the
// values config ships.
func testOptions(o Options) Options {
	if o.Slots == 0 {
		o.Slots = 2
	}
	if o.QueueTimeout == 0 {
		o.QueueTimeout = testQueueTimeout
	}
	if o.SpareIdle == 0 {
		o.SpareIdle = testSpareIdle
	}
	o.Limits = o.Limits.or(Limits{Wall: testWall, CPUTime: testCPUTime, HeapBytes: testHeapBytes, StackBytes: testStackBytes})
	return o
}

// TestNew_RefusesMissingRequiredOptions: the pool takes its configurable
// values from the caller (config is their one home) and names what is missing.
func TestNew_RefusesMissingRequiredOptions(t *testing.T) {
	_, err := New(context.Background(), Options{DisableCache: true})
	if err == nil {
		t.Fatal("New accepted zero Options")
	}
	for _, want := range []string{"Options.Slots (executor.concurrency)", "Options.QueueTimeout", "Options.SpareIdle", "Options.Limits.Wall", "Options.Limits.CPUTime", "Options.Limits.HeapBytes", "Options.Limits.StackBytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	o := testOptions(Options{DisableCache: true})
	o.Limits.Wall = 0
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "Options.Limits.Wall (executor.timeoutMs) required") {
		t.Fatalf("one missing field: %v", err)
	}
}
