package sandbox

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/caps"
	"github.com/connecta-dev/connecta/internal/ipc"
)

// Resource limits of a child. NOFILE covers stdio, the two IPC pipes and the
// runtime's own poller descriptors; nothing else is ever opened after load.
const (
	childNoFile = 32
	// childMemoryLimit is the Go heap (not the guest's linear memory, which
	// is mmapped outside it) at which the child's garbage collector starts.
	// Below it the GC is off: a child allocates about 3 MiB in its life of
	// milliseconds, and collecting it cost ~15% of the child's CPU and more
	// RSS (mark bitmaps, worker stacks) than it freed. The limit only
	// matters when the compilation cache is unusable (an in-memory compile
	// allocates tens of MiB) or a run moves unusually large frames.
	childMemoryLimit = 32 << 20
)

// hardenEarly runs before anything else in a child: no capabilities,
// parent-death signal (and a check that the parent did not die before it was
// armed), no new privileges, not dumpable, its own process group, no core
// files, the CPU backstop, an empty environment, cwd /.
func hardenEarly(a ipc.ChildArgs) error {
	// The parent's forking thread has no bounding or inheritable set, so a
	// child it starts as root already has nothing; this is for any other
	// way a child is started, and refuses to run when it cannot drop them.
	if err := caps.DropAll(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_PDEATHSIG: %w", err)
	}
	if a.ParentPID != 0 && os.Getppid() != a.ParentPID {
		return fmt.Errorf("parent %d already gone", a.ParentPID)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_DUMPABLE: %w", err)
	}
	if unix.Getpgrp() != os.Getpid() {
		if err := unix.Setpgid(0, 0); err != nil {
			return fmt.Errorf("setpgid: %w", err)
		}
	}
	if err := setRlimit(unix.RLIMIT_CORE, 0, 0); err != nil {
		return err
	}
	if a.CPULimitSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL from the kernel one second later.
		if err := setRlimit(unix.RLIMIT_CPU, a.CPULimitSeconds, a.CPULimitSeconds+1); err != nil {
			return err
		}
	}
	closeInheritedFDs(a)
	os.Clearenv()
	if err := os.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(childMemoryLimit)
	return nil
}

// closeInheritedFDs closes descriptors our parent inherited without
// close-on-exec (a test harness's, or a service manager's) and passed on to us
// unknowingly. Kept: stdio, the IPC pipes, the code and snapshot descriptors
// when the arguments say the parent sent them (always in warm mode), and what
// the Go runtime opened itself before main (its poller and the cgroup
// CPU-limit files).
func closeInheritedFDs(a ipc.ChildArgs) {
	keep := func(fd int) bool {
		switch fd {
		case ipc.ChildCodeFD:
			return a.Mode == ipc.ModeWarm || a.CompiledKey != ""
		case ipc.ChildSnapshotFD:
			return a.Mode == ipc.ModeWarm || a.Snapshot
		}
		return fd <= ipc.ChildOutFD
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || keep(fd) {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "/sys/fs/cgroup/") {
			continue
		}
		_ = unix.Close(fd)
	}
}

// hardenLate runs after the compiled module is mapped and before any of it
// runs: no file growth (except in the warm-up child, which still writes the
// snapshot into its memfd), few descriptors, and the seccomp allow-list.
func hardenLate(a ipc.ChildArgs) error {
	if a.Mode != ipc.ModeWarm {
		if err := setRlimit(unix.RLIMIT_FSIZE, 0, 0); err != nil {
			return err
		}
	}
	if err := setRlimit(unix.RLIMIT_NOFILE, childNoFile, childNoFile); err != nil {
		return err
	}
	// The filter grants the poller's waits, never its creation
	// (epoll_create1, eventfd2): create it now, while that is still allowed.
	if err := initPoller(); err != nil {
		return err
	}
	if relaxedHardening {
		// Race and coverage builds need syscalls and memory the list does not
		// grant (docs/PITFALLS.md); every other layer stays.
		return nil
	}
	return installSeccomp()
}

// initPoller makes the Go runtime create its network poller, which it
// otherwise does lazily at the first pollable file or timer wait — in a
// program's run loop, after the filter, where it would die with "netpollinit
// failed". The re-executed gateway happened to create it before hardening;
// the slim child must on purpose. A pipe from os.Pipe is registered with the
// poller (non-blocking), which initialises it once for the process.
func initPoller() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("initialising the runtime poller: %w", err)
	}
	r.Close()
	w.Close()
	return nil
}

func setRlimit(res int, soft, hard uint64) error {
	if err := unix.Setrlimit(res, &unix.Rlimit{Cur: soft, Max: hard}); err != nil {
		return fmt.Errorf("setrlimit(%d): %w", res, err)
	}
	return nil
}

// allowedSyscalls is what the Go runtime, wazero's compiled code and the IPC
// pipes need once the module is loaded (found with strace -f over the hostile
// programs in the tests). Everything else fails with EPERM: no open, socket,
// exec, fork, ptrace, mount, bpf, ...
var allowedSyscalls = []string{
	// IPC and stderr on already-open descriptors
	"read", "write", "readv", "writev", "pread64", "close", "fcntl", "fstat", "lseek",
	// memory
	"mmap", "munmap", "madvise", "mremap", "brk", "mprotect",
	// threads and scheduling (clone is conditioned below)
	"futex", "sched_yield", "sched_getaffinity", "nanosleep", "clock_nanosleep",
	"gettid", "getpid", "getppid", "exit", "exit_group", "restart_syscall",
	"rseq", "set_robust_list", // glibc thread start (cgo builds)
	// signals (preemption and crashes)
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	// time (thread CPU time is a real syscall) and randomness
	"clock_gettime", "clock_getres", "gettimeofday", "time", "getrusage", "getrandom", "getrlimit",
	// the runtime's poller for the pipes
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl",
}

func seccompPolicy() seccomp.Policy {
	pid := uint64(os.Getpid())
	return seccomp.Policy{
		DefaultAction: seccomp.ActionErrno, // EPERM
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionAllow, Names: allowedSyscalls},
			{
				Action: seccomp.ActionAllow,
				NamesWithCondtions: []seccomp.NameWithConditions{
					// new threads only, never a new process
					{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD}}},
					// signals to ourselves only (preemption, crash re-raise)
					{Name: "tgkill", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: pid}}},
					{Name: "kill", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: pid}}},
					// reading limits only (glibc), never setting them
					{Name: "prlimit64", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.Equal, Value: 0}}},
				},
			},
			{
				// clone3 passes its flags in memory, where a filter cannot
				// look: answer ENOSYS so glibc's pthread_create (cgo builds)
				// falls back to clone, whose flags are checked above.
				Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS),
				Names:  []string{"clone3"},
			},
		},
	}
}

func installSeccomp() error {
	p := seccompPolicy()
	// No new executable mappings once the module is loaded.
	p.Syscalls = restrictExec(p.Syscalls)
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy:     p,
	})
}

// restrictExec moves mmap and mprotect from the plain allow group into
// conditioned rules that refuse PROT_EXEC.
func restrictExec(groups []seccomp.SyscallGroup) []seccomp.SyscallGroup {
	plain := groups[0].Names[:0:0]
	for _, n := range groups[0].Names {
		if n != "mmap" && n != "mprotect" {
			plain = append(plain, n)
		}
	}
	groups[0].Names = plain
	noExec := []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}}
	groups[1].NamesWithCondtions = append(groups[1].NamesWithCondtions,
		seccomp.NameWithConditions{Name: "mmap", Conditions: noExec},
		seccomp.NameWithConditions{Name: "mprotect", Conditions: noExec},
	)
	return groups
}
