package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/caps"
	"github.com/connecta-dev/connecta/internal/guest"
	"github.com/connecta-dev/connecta/internal/ipc"
)

const probeMarker = "__sandbox_hardening_probe__"

func TestMain(m *testing.M) {
	MaybeRunChild()
	if len(os.Args) > 1 && os.Args[1] == probeMarker {
		os.Exit(runProbe())
	}
	os.Exit(m.Run())
}

// probeReport is what a hardened process could and could not do.
type probeReport struct {
	Env         []string
	Cwd         string
	OwnGroup    bool
	NoNewPrivs  bool
	Dumpable    bool
	CoreLimit   uint64
	FSizeLimit  uint64
	NoFileLimit uint64
	CPULimit    uint64
	Seccomp     bool   // filter mode reported by the kernel
	Socket      string // errors, "" = it worked
	OpenRead    string
	OpenCreate  string
	Exec        string
	Relaxed     bool
	Caps        caps.Sets // of the whole process, from /proc/self/status
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// runProbe hardens itself exactly as a child does, then tries what a child
// must not be able to do.
func runProbe() int {
	a := ipc.ChildArgs{Mode: ipc.ModeServe, ParentPID: os.Getppid(), CPULimitSeconds: 40}
	if err := hardenEarly(a); err != nil {
		fmt.Println("early:", err)
		return 1
	}
	var r probeReport
	r.Caps, _ = caps.Read("/proc/self/status")
	r.Env = os.Environ()
	r.Cwd, _ = os.Getwd()
	r.OwnGroup = unix.Getpgrp() == os.Getpid()
	nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	r.NoNewPrivs = nnp == 1
	d, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	r.Dumpable = d != 0
	if err := hardenLate(a); err != nil {
		fmt.Println("late:", err)
		return 1
	}
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_CORE, &rl)
	r.CoreLimit = rl.Max
	unix.Getrlimit(unix.RLIMIT_FSIZE, &rl)
	r.FSizeLimit = rl.Max
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	r.NoFileLimit = rl.Max
	unix.Getrlimit(unix.RLIMIT_CPU, &rl)
	r.CPULimit = rl.Cur
	// PR_GET_SECCOMP is not on the allow-list: EPERM from prctl is itself
	// proof of a filter; 2 means filter mode when relaxed builds allow it.
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	r.Seccomp = mode == 2 || errors.Is(err, unix.EPERM)
	_, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	r.Socket = errText(err)
	f, err := os.Open("/proc/self/status")
	if err == nil {
		f.Close()
	}
	r.OpenRead = errText(err)
	f, err = os.Create(filepath.Join(os.TempDir(), "connecta-probe-"+strconv.Itoa(os.Getpid())))
	if err == nil {
		f.Close()
	}
	r.OpenCreate = errText(err)
	err = exec.Command("/bin/true").Run()
	r.Exec = errText(err)
	r.Relaxed = relaxedHardening
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func TestHardening_ChildCannotReachTheWorld(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", probeMarker)
	cmd.Env = []string{"DEPLOYMENT_SECRET=hunter2", "HOME=/root"} // must not survive
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := startAsPoolDoes(cmd); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	out := stdout.String()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r probeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !noCapabilities(r.Caps) {
		t.Fatalf("capabilities left: %+v", r.Caps)
	}
	if len(r.Env) != 0 || r.Cwd != "/" || !r.OwnGroup || !r.NoNewPrivs || r.Dumpable {
		t.Fatalf("process state: %+v", r)
	}
	if r.CoreLimit != 0 || r.FSizeLimit != 0 || r.NoFileLimit != childNoFile || r.CPULimit != 40 {
		t.Fatalf("rlimits: %+v", r)
	}
	if r.Relaxed {
		t.Skip("race build: seccomp relaxed (docs/PITFALLS.md)")
	}
	if !r.Seccomp {
		t.Fatalf("no seccomp filter: %+v", r)
	}
	for what, got := range map[string]string{"socket": r.Socket, "open": r.OpenRead, "create": r.OpenCreate, "exec": r.Exec} {
		if !strings.Contains(got, "not permitted") {
			t.Errorf("%s: %q, want EPERM", what, got)
		}
	}
}

// startAsPoolDoes starts cmd from a thread without bounding or inheritable
// capabilities, as the supervisor's forking thread is (the thread is thrown
// away after).
func startAsPoolDoes(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := caps.DropForExec(); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// A child started with capabilities in a build where it cannot drop them on
// every thread (cgo) refuses to run; where it can, it drops them all.
func TestHardening_ChildStartedWithCapabilitiesDropsThemOrRefuses(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: only root starts a child with capabilities")
	}
	cmd := exec.Command("/proc/self/exe", probeMarker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		if !strings.Contains(string(out), "caps:") {
			t.Fatalf("refused without naming capabilities: %v: %s", err, out)
		}
		return // refused: a cgo build
	}
	var r probeReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !noCapabilities(r.Caps) {
		t.Fatalf("capabilities left: %+v", r.Caps)
	}
}

// noCapabilities: every set empty. An ordinary user's bounding set stays as
// it was (only CAP_SETPCAP can shrink it) and gives nothing under
// no_new_privs; started by root, it is empty too.
func noCapabilities(s caps.Sets) bool {
	if os.Getuid() != 0 {
		s.Bnd = 0
	}
	return s == caps.Sets{}
}

// No guest code runs before the seccomp filter: the child's engine is loaded
// (its code mapped) but not started when it hardens, on every path — with
// no snapshot, which used to run _initialize and QuickJS's setup before the
// filter, and with a snapshot that is refused (the fallback that did too).
func TestChild_NoGuestCodeBeforeHardening(t *testing.T) {
	// A sealed, bogus snapshot as the parent would hand it.
	fd, err := unix.MemfdCreate("bogus-snapshot", unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(fd, []byte("not a snapshot"))
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, requiredSeals); err != nil {
		t.Fatal(err)
	}
	snap := os.NewFile(uintptr(fd), "bogus-snapshot")
	defer snap.Close()
	for _, a := range []ipc.ChildArgs{
		{Mode: ipc.ModeServe},
		{Mode: ipc.ModeServe, Snapshot: true},
	} {
		hardened := false
		eng, fallback, err := prepareEngine(context.Background(), a, descriptors{snapshot: snap}, func(e *guest.Engine) error {
			if e.Started() {
				t.Errorf("%+v: guest code ran before hardening", a)
			}
			hardened = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !hardened || !eng.Started() || (fallback != "") != a.Snapshot {
			t.Fatalf("%+v: hardened %v, started %v, fallback %q", a, hardened, eng.Started(), fallback)
		}
		eng.Close()
	}
}
