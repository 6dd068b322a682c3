// Package caps drops Linux capabilities: a thread's bounding, inheritable
// and ambient sets before it forks sandbox children (so an execve by root
// gains nothing), and every set of every thread of a child that somehow
// starts with some.
package caps

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lastCap is the highest capability this kernel knows.
func lastCap() int {
	for c := 0; c < 64; c++ {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil {
			return c - 1
		}
	}
	return 63
}

// DropForExec clears the calling thread's bounding, ambient and inheritable
// sets and keeps its effective and permitted ones (the forking thread may
// still need them, say to create namespaces). A process this thread then
// forks and executes, even as uid 0, starts with no capability at all
// (capabilities(7): P'(permitted) = (P(inheritable) & F(inheritable)) |
// (F(permitted) & P'(bounding)) | P'(ambient)). The caller must hold the
// thread (runtime.LockOSThread) and never give it back to the scheduler.
// Without CAP_SETPCAP (not root) there is nothing to drop and it does
// nothing.
func DropForExec() error {
	if !hasAny() {
		return nil
	}
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("caps: PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("caps: PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	hdr, data := capHeader(), [2]unix.CapUserData{}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("caps: capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("caps: capset: %w", err)
	}
	return nil
}

// DropAll clears every capability set (bounding, ambient, effective,
// permitted, inheritable) on every thread of the process. A process with
// none has nothing to do; one with some in a cgo build, where Go cannot
// reach every thread, gets an error and must not run.
func DropAll() error {
	if !hasAny() {
		return nil
	}
	for c := 0; c <= lastCap(); c++ {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); e != 0 && e != unix.EINVAL {
			return fmt.Errorf("caps: PR_CAPBSET_DROP %d on every thread: %w", c, e)
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 && e != unix.EINVAL {
		return fmt.Errorf("caps: PR_CAP_AMBIENT_CLEAR_ALL on every thread: %w", e)
	}
	hdr, data := capHeader(), [2]unix.CapUserData{}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("caps: capset on every thread: %w", e)
	}
	if hasAny() {
		return errors.New("caps: capabilities remain after dropping them")
	}
	return nil
}

func capHeader() unix.CapUserHeader {
	return unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
}

// hasAny reports whether the calling thread holds any capability in any
// set, by system calls (no /proc read: this runs in every child): capget for
// the effective, permitted and inheritable sets, PR_CAPBSET_READ for the
// bounding set. The ambient set needs no look: it is a subset of permitted.
func hasAny() bool {
	hdr, data := capHeader(), [2]unix.CapUserData{}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		// A service manager's filter may refuse capget: ask /proc.
		s, err := Read("/proc/thread-self/status")
		return err != nil || s != (Sets{}) // unknown: try to drop
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return true
		}
	}
	for c := 0; c < 64; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			return false // past the last capability
		}
		if in != 0 {
			return true
		}
	}
	return false
}

// Sets are the capability masks of /proc/<pid>/status.
type Sets struct{ Inh, Prm, Eff, Bnd, Amb uint64 }

// Read parses the Cap* lines of a /proc status file.
func Read(path string) (Sets, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Sets{}, err
	}
	var s Sets
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "CapInh":
			dst = &s.Inh
		case "CapPrm":
			dst = &s.Prm
		case "CapEff":
			dst = &s.Eff
		case "CapBnd":
			dst = &s.Bnd
		case "CapAmb":
			dst = &s.Amb
		default:
			continue
		}
		if *dst, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
			return Sets{}, fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	return s, nil
}
