package testkit

import (
	"syscall"
	"time"
)

// ProcessCPU is the user and system CPU time this process has used so far;
// ChildrenCPU that of its reaped children. Per-op CPU is what a benchmark
// reports on a loaded machine, where wall latencies mean little.
func ProcessCPU() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// ChildrenCPU: see ProcessCPU.
func ChildrenCPU() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
