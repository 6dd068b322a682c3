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

// DropForExec clears the calling thread's bounding, ambient and inheritable
// sets and keeps its effective and permitted ones (the forking thread may
// still need them, say to create namespaces). A process this thread then
// forks and executes, even as uid 0, starts with no capability at all
// (capabilities(7): P'(permitted) = (P(inheritable) & F(inheritable)) |
// (F(permitted) & P'(bounding)) | P'(ambient)). The caller must hold the
// thread (runtime.LockOSThread) and never give it back to the scheduler.
// A thread without capabilities (an ordinary user) has nothing to drop; one
// with some but without CAP_SETPCAP cannot shrink its bounding set and
// clears the ambient and inheritable sets only.
func DropForExec() error {
	held, none, err := startDrop("", func(c int) error {
		return unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
	})
	if err != nil || none {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("caps: PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	hdr, data := capHeader(), held.data
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("caps: capset: %w", err)
	}
	return nil
}

// DropAll clears every capability set (bounding, ambient, effective,
// permitted, inheritable) on every thread of the process. A process that
// holds none (an ordinary user's: its bounding set, which it cannot shrink,
// gives it nothing under no_new_privs) has nothing to do; one that holds
// some in a cgo build, where Go cannot reach every thread, gets an error and
// must not run.
func DropAll() error {
	_, none, err := startDrop(" on every thread", func(c int) error {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); e != 0 {
			return e
		}
		return nil
	})
	if err != nil || none {
		return err
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 && e != unix.EINVAL {
		return fmt.Errorf("caps: PR_CAP_AMBIENT_CLEAR_ALL on every thread: %w", e)
	}
	hdr, data := capHeader(), [2]unix.CapUserData{}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("caps: capset on every thread: %w", e)
	}
	if now, err := current(); err != nil || now.any() {
		return errors.New("caps: capabilities remain after dropping them")
	}
	return nil
}

// startDrop is where both drops begin: it reads the calling thread's sets
// and, when they hold CAP_SETPCAP, empties the bounding set with drop. none
// reports that nothing is held, so there is nothing to drop; where ends a
// bounding-set error (" on every thread").
func startDrop(where string, drop func(c int) error) (h held, none bool, err error) {
	h, err = current()
	if err != nil {
		return h, false, err
	}
	if !h.any() {
		return h, true, nil
	}
	if h.has(unix.CAP_SETPCAP) {
		if err := dropBounding(drop); err != nil {
			return h, false, fmt.Errorf("%w%s", err, where)
		}
	}
	return h, false, nil
}

// dropBounding drops every capability the kernel knows from the bounding
// set with drop (EINVAL: past the last one).
func dropBounding(drop func(c int) error) error {
	for c := 0; c < 64; c++ {
		if err := drop(c); err != nil {
			if errors.Is(err, unix.EINVAL) {
				return nil
			}
			return fmt.Errorf("caps: PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	return nil
}

func capHeader() unix.CapUserHeader {
	return unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
}

// held is the calling thread's effective, permitted and inheritable sets.
type held struct{ data [2]unix.CapUserData }

// current reads them by capget (no /proc read: this runs in every child),
// or from /proc when a service manager's filter refuses capget.
func current() (held, error) {
	var h held
	hdr := capHeader()
	if err := unix.Capget(&hdr, &h.data[0]); err == nil {
		return h, nil
	}
	s, err := Read("/proc/thread-self/status")
	if err != nil {
		return h, fmt.Errorf("caps: cannot read this thread's capabilities: %w", err)
	}
	for i, shift := range []uint{0, 32} {
		h.data[i] = unix.CapUserData{Effective: uint32(s.Eff >> shift), Permitted: uint32(s.Prm >> shift), Inheritable: uint32(s.Inh >> shift)}
	}
	return h, nil
}

// any: a capability in the effective, permitted or inheritable set (the
// ambient set is a subset of permitted and inheritable).
func (h held) any() bool {
	for _, d := range h.data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return true
		}
	}
	return false
}

func (h held) has(c int) bool { return h.data[c/32].Effective&(1<<(uint(c)%32)) != 0 }

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
