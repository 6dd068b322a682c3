package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/guest"
	"github.com/connecta-dev/connecta/ipc"
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
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r probeReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
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

func TestCacheDir_MustBeOursAnd0700(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.Mkdir(good, 0o700)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	if err := checkCacheDir(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{open, file, link, "relative/dir", filepath.Join(dir, "missing")} {
		if checkCacheDir(bad) == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestCache_PruneStaleVersions(t *testing.T) {
	dir := t.TempDir()
	cur := currentCacheVersionDir()
	for _, d := range []string{cur, "wazero-v0.0.1-amd64-linux", "wazero-dev-amd64-linux", "unrelated"} {
		os.Mkdir(filepath.Join(dir, d), 0o700)
	}
	pruneStaleCaches(dir)
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := []string{cur, "unrelated"}
	if cur > "unrelated" {
		want = []string{"unrelated", cur}
	}
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// The directory the prune keeps is the one wazero itself writes: a build
// whose wazero is replaced by our patched tree reports "(devel)" for the
// replacement, and pruning by that name removed the real cache on every
// warm-up.
func TestCache_WarmKeepsWazerosOwnDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if code := warmCache(ipc.ChildArgs{Mode: ipc.ModeWarm, CacheDir: dir}); code != exitOK {
			t.Fatalf("warmCache exit %d", code)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The compilation cache, and the snapshot the warm-up persists.
		if len(ents) != 2 || ents[0].Name() != guest.SnapshotFileName() || ents[1].Name() != currentCacheVersionDir() {
			t.Fatalf("cache holds %v, want %s and %s", ents, guest.SnapshotFileName(), currentCacheVersionDir())
		}
		files, _ := os.ReadDir(filepath.Join(dir, ents[1].Name()))
		if len(files) == 0 {
			t.Fatal("no compiled module in the cache")
		}
	}
}
