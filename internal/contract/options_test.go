package contract

import (
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// testOptions fills the execute.* bounds a test leaves zero with config's
// defaults (contract has none of its own).
func testOptions(o Options) Options {
	if o.MaxHostCalls == 0 {
		o.MaxHostCalls = config.DefaultExecuteMaxHostCalls
	}
	if o.HostCallTimeout == 0 {
		o.HostCallTimeout = config.DefaultExecuteHostCallTimeout
	}
	if o.MaxEmittedBytes == 0 {
		o.MaxEmittedBytes = config.DefaultExecuteMaxEmittedBytes
	}
	if o.MaxEmittedBlocks == 0 {
		o.MaxEmittedBlocks = config.DefaultExecuteMaxEmittedBlocks
	}
	if o.MaxCodeBytes == 0 {
		o.MaxCodeBytes = config.ExecuteMaxCodeBytes
	}
	return o
}

// testPoolOptions fills the executor.* values a test leaves zero with
// config's defaults (the pool requires them).
func testPoolOptions(o supervisor.Options) supervisor.Options {
	if o.Slots == 0 {
		o.Slots = config.DefaultExecutorConcurrency
	}
	if o.QueueTimeout == 0 {
		o.QueueTimeout = config.DefaultExecutorQueueTimeout
	}
	if o.SpareIdle == 0 {
		o.SpareIdle = config.DefaultExecutorSpareIdle
	}
	l := &o.Limits
	if l.Wall == 0 {
		l.Wall = config.DefaultExecutorTimeout
	}
	if l.CPUTime == 0 {
		l.CPUTime = config.DefaultExecutorCPUTime
	}
	if l.HeapBytes == 0 {
		l.HeapBytes = config.DefaultExecutorMemoryLimitBytes
	}
	if l.StackBytes == 0 {
		l.StackBytes = config.DefaultExecutorMaxStackSizeBytes
	}
	return o
}

// TestNew_RefusesMissingBounds: the execute.* bounds come from config
// through app.New; a zero is refused with the option and key named.
func TestNew_RefusesMissingBounds(t *testing.T) {
	o := testOptions(Options{})
	o.MaxEmittedBlocks = 0
	o.Gateway, o.Discovery, o.Pool = nil, nil, nil
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("nil dependencies: %v", err)
	}
	err := requireOptions("contract", []requiredOption{{false, "A"}, {true, "MaxEmittedBlocks (execute.maxEmittedBlocks)"}, {true, "MaxCodeBytes (config.ExecuteMaxCodeBytes)"}})
	want := "contract: Options.MaxEmittedBlocks (execute.maxEmittedBlocks), Options.MaxCodeBytes (config.ExecuteMaxCodeBytes) required"
	if err == nil || err.Error() != want {
		t.Fatalf("requireOptions = %v, want %q", err, want)
	}
}
