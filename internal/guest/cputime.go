package guest

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling OS thread. Run locks its
// goroutine to one thread, so differences measure the guest (and the host
// functions it calls synchronously) and never the time spent waiting.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
