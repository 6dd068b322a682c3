package supervisor

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// cpuWatch enforces a run's guest CPU budget from outside the engine: the
// engine's own check depends on QuickJS polling its interrupt handler, and
// some builtins loop in C without polling (Array.prototype.indexOf on
// {length: 2**53-1}). It reads the child's process CPU clock (every thread,
// nanoseconds, no permission needed for our own child) from the moment the
// run frame is sent, and says when the run is over budget + cpuGrace.
type cpuWatch struct {
	clock int32
	base  time.Duration
	limit time.Duration
	ok    bool // the clock could be read at the start
	last  time.Duration
}

// processCPUClock is the kernel's CPU-time clock id of process pid
// (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) in linux/posix-timers.h).
func processCPUClock(pid int) int32 {
	return int32(^uint32(pid)<<3) | 2
}

func readClock(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

func newCPUWatch(pid int, budget time.Duration) *cpuWatch {
	w := &cpuWatch{clock: processCPUClock(pid), limit: budget + cpuGrace}
	w.base, w.ok = readClock(w.clock)
	return w
}

// used is the child's CPU since the start. Once the child is reaped its
// clock is gone: then its final CPU from the reaped rusage, or the last good
// reading while it is still being reaped.
func (w *cpuWatch) used(c *child) time.Duration {
	if !w.ok {
		return 0
	}
	if now, ok := readClock(w.clock); ok {
		w.last = now - w.base
	} else if total, ok := c.cpuTotal(); ok {
		w.last = total - w.base
	}
	return w.last
}

// check reports whether the child is over budget + grace and, if not, how
// long it cannot possibly take to get there: the child runs at most
// NumCPU threads at once, so the next look is (limit - used) / NumCPU of wall
// time away, never less than cpuCheckMin. A run that waits on host calls
// costs a reading every few hundred milliseconds.
func (w *cpuWatch) check(c *child) (over bool, next time.Duration) {
	if !w.ok {
		return false, 0
	}
	left := w.limit - w.used(c)
	if left <= 0 {
		return true, 0
	}
	return false, max(left/time.Duration(runtime.NumCPU()), cpuCheckMin)
}
