package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/privdir"
	"github.com/connecta-dev/connecta/test/testkit"
)

// The slim child (cmd/sandbox-child) built once per test binary, as
// `make build` builds it; removed by TestMain.
var slim struct {
	once sync.Once
	dir  string
	bin  []byte
	err  error
}

func slimChild(t *testing.T) Child {
	t.Helper()
	slim.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			slim.err = err
			return
		}
		if slim.dir, slim.err = os.MkdirTemp("", "connecta-slim-child-"); slim.err != nil {
			return
		}
		out := filepath.Join(slim.dir, "sandbox-child")
		cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, "github.com/connecta-dev/connecta/cmd/sandbox-child")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			slim.err = &buildError{err, string(msg)}
			return
		}
		slim.bin, slim.err = os.ReadFile(out)
	})
	if slim.err != nil {
		t.Skipf("cannot build cmd/sandbox-child: %v", slim.err)
	}
	sum := sha256.Sum256(slim.bin)
	return Child{Binary: slim.bin, SHA256: hex.EncodeToString(sum[:])}
}

func removeSlimChild() {
	if slim.dir != "" {
		os.RemoveAll(slim.dir)
	}
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// childExePaths is what this process's live children execute (their
// /proc/<pid>/exe links).
func childExePaths() []string {
	var out []string
	for _, pid := range liveChildren() {
		if l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil {
			out = append(out, l)
		}
	}
	return out
}

func childInfo(t *testing.T, p *Pool, kind string) float64 {
	t.Helper()
	return counter(t, p.m.childInfo.WithLabelValues(kind))
}

// The slim child runs programs from a sealed memfd: the spare's executable
// is the memfd, the log says which way was taken, and the gauge and
// ChildKind say "embedded".
func TestEmbeddedChild_RunsFromASealedMemfd(t *testing.T) {
	c := slimChild(t)
	p, logs := newRealPool(t, Options{Slots: 1, Child: c})
	requireEngine(t, p)
	if p.ChildKind() != ChildEmbedded || p.exe.how != "memfd" {
		t.Fatalf("kind %q how %q", p.ChildKind(), p.exe.how)
	}
	if !strings.Contains(logs.String(), "from a sealed memfd") {
		t.Fatalf("log does not say which way was taken:\n%s", logs)
	}
	if childInfo(t, p, ChildEmbedded) != 1 || childInfo(t, p, ChildSelf) != 0 {
		t.Fatal("connecta_sandbox_child_info does not mark embedded")
	}
	// A spare may still be starting: wait for one (the listing was read
	// once before, and a spare that came up just after failed the test).
	testkit.Eventually(t, 10*time.Second, func() bool {
		return slices.ContainsFunc(childExePaths(), func(exe string) bool {
			return strings.HasPrefix(exe, "/memfd:connecta-sandbox-child")
		})
	}, "no spare executes the memfd (at the start: %v)", childExePaths())
	seals, err := unix.FcntlInt(p.exe.file.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&sealAll != sealAll {
		t.Fatalf("seals %#x %v", seals, err)
	}
	if _, err := p.exe.file.WriteAt([]byte{0}, 0); err == nil {
		t.Fatal("the child's descriptor is writable")
	}
}

// Where the kernel refuses executable memfds (vm.memfd_noexec), the slim
// child is written once below the private cache directory, verified from
// its descriptor and executed through it: no name of it is left on disk.
func TestEmbeddedChild_VerifiedCopyWhenMemfdsCannotExecute(t *testing.T) {
	c := slimChild(t)
	p, logs := newRealPool(t, Options{Slots: 1, Child: c, testMemfdNoExec: true})
	requireEngine(t, p)
	if p.ChildKind() != ChildEmbedded || p.exe.how != "cache copy" {
		t.Fatalf("kind %q how %q", p.ChildKind(), p.exe.how)
	}
	if !strings.Contains(logs.String(), "from a verified copy below the cache directory") {
		t.Fatalf("log does not say which way was taken:\n%s", logs)
	}
	ents, _ := os.ReadDir(p.cacheDir.Path())
	for _, e := range ents {
		if strings.Contains(e.Name(), "sandbox-child") {
			t.Fatalf("a named copy is left in the cache directory: %s", e.Name())
		}
	}
}

// With neither an executable memfd nor a cache directory, the pool does not
// start, and says why and what to change.
func TestEmbeddedChild_NeitherWayRefusesToStart(t *testing.T) {
	c := slimChild(t)
	_, err := New(context.Background(), testOptions(Options{Child: c, testMemfdNoExec: true, DisableCache: true}))
	if err == nil || !strings.Contains(err.Error(), "vm.memfd_noexec") || !strings.Contains(err.Error(), "executor.cacheDir") {
		t.Fatalf("New: %v", err)
	}
}

// A child whose bytes are not the ones the build stamped (another build's,
// or a build that stamped none) is refused at start, naming the fix.
func TestEmbeddedChild_AnotherBuildsChildIsRefused(t *testing.T) {
	for name, c := range map[string]Child{
		"other build": {Binary: []byte("\x7fELF not this build"), SHA256: strings.Repeat("ab", 32)},
		"no stamp":    {Binary: []byte("\x7fELF")},
	} {
		_, err := New(context.Background(), testOptions(Options{Child: c, DisableCache: true}))
		if err == nil || !strings.Contains(err.Error(), BuildSlimChild) {
			t.Errorf("%s: New: %v", name, err)
		}
	}
}

// A memfd that cannot be sealed is refused, naming why (one made without
// MFD_ALLOW_SEALING carries F_SEAL_SEAL from birth: no seal can be added).
func TestEmbeddedChild_UnsealableMemfdIsRefused(t *testing.T) {
	fd, err := unix.MemfdCreate("unsealable", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skip("no memfd_create:", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:unsealable")
	defer f.Close()
	if _, err := f.Write([]byte{0x7f}); err != nil {
		t.Fatal(err)
	}
	if err := sealChild(f, 1); err == nil || !strings.Contains(err.Error(), "cannot be sealed") {
		t.Fatalf("seal: %v", err)
	}
}

// A copy whose read-back differs from the stamp is refused, never run.
func TestEmbeddedChild_ReadBackMismatchIsRefused(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "child"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("changed after the check"); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("the bytes that were checked"))
	err = checkFileSum(f, int64(len("the bytes that were checked")), hex.EncodeToString(sum[:]), "its copy")
	if err == nil || !strings.Contains(err.Error(), "unverified child") {
		t.Fatalf("checkFileSum: %v", err)
	}
}

// The copy is written only below a directory privdir opened, and privdir
// refuses a directory others can read (the copy's one way in).
func TestEmbeddedChild_CopyRefusesAPublicDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if d, err := privdir.Open(dir); err == nil || !errors.Is(err, privdir.ErrNotPrivate) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("privdir.Open of a 0755 directory: %v", err)
	}
}

// A build without the slim child re-executes itself, says so in one WARN
// naming the command that builds it, and marks "self".
func TestSelfChild_WarnsNamingTheBuild(t *testing.T) {
	lb := &logBuf{}
	p, err := New(context.Background(), testOptions(Options{DisableCache: true, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(lb, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.ChildKind() != ChildSelf || childInfo(t, p, ChildSelf) != 1 || childInfo(t, p, ChildEmbedded) != 0 {
		t.Fatalf("kind %q", p.ChildKind())
	}
	if n := strings.Count(lb.String(), "level=WARN msg=\"this build carries no slim sandbox child"); n != 1 || !strings.Contains(lb.String(), BuildSlimChild) {
		t.Fatalf("want one WARN naming %q:\n%s", BuildSlimChild, lb)
	}
}

// Under a real vm.memfd_noexec=2 (set in a private PID namespace, where the
// setting lives, so the machine's stays as it is) the pool takes the
// verified copy below the cache directory and runs programs from it.
func TestEmbeddedChild_RealMemfdNoExecTakesTheCopy(t *testing.T) {
	const inside = "CONNECTA_TEST_MEMFD_NOEXEC_CHILD"
	if path := os.Getenv(inside); path != "" {
		if err := os.WriteFile("/proc/sys/vm/memfd_noexec", []byte("2"), 0); err != nil {
			t.Skip("cannot set vm.memfd_noexec in this PID namespace:", err)
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(bin)
		p, logs := newRealPool(t, Options{Slots: 1, Child: Child{Binary: bin, SHA256: hex.EncodeToString(sum[:])}})
		requireEngine(t, p)
		if p.exe.how != "cache copy" || !strings.Contains(logs.String(), "vm.memfd_noexec") {
			t.Fatalf("how %q; log:\n%s", p.exe.how, logs)
		}
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Getuid() != 0 {
		t.Skip("needs root and unshare(1) for a private PID namespace")
	}
	if _, err := os.Stat("/proc/sys/vm/memfd_noexec"); err != nil {
		t.Skip("this kernel has no vm.memfd_noexec")
	}
	slimChild(t)
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0],
		"-test.run", "^TestEmbeddedChild_RealMemfdNoExecTakesTheCopy$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inside+"="+filepath.Join(slim.dir, "sandbox-child"))
	out, err := cmd.CombinedOutput()
	switch {
	case !strings.Contains(string(out), "=== RUN"):
		t.Skipf("no private PID namespace here (%v): %s", err, out)
	case strings.Contains(string(out), "--- SKIP"):
		t.Skipf("inside the PID namespace: %s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS"):
		t.Fatalf("inside the PID namespace: %v\n%s", err, out)
	}
}

// slowEcho answers each host call after a pause, so the child waits for the
// reply under its seccomp filter (on its run deadline's timer).
type slowEcho struct{ *testHost }

func (h slowEcho) Call(ctx context.Context, provider, fn string, args json.RawMessage) (json.RawMessage, error) {
	time.Sleep(50 * time.Millisecond) // the pause is the point: the child waits on its timer under the filter
	return h.testHost.Call(ctx, provider, "echo", args)
}

// The slim child waits for a host call's reply with its filter installed:
// the runtime's poller (epoll_create1, eventfd2, which the allow-list
// refuses) must exist before the filter, or the first wait on a timer
// crashes the child ("netpollinit failed"). The re-executed test binary
// never showed it: its poller was up from start.
func TestEmbeddedChild_WaitsForAHostCallUnderItsFilter(t *testing.T) {
	c := slimChild(t)
	p, _ := newRealPool(t, Options{Slots: 1, Child: c})
	requireEngine(t, p)
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Run(context.Background(), Job{
		Code:      `async () => [await t.echo(1), await t.echo("x")]`,
		Providers: []Provider{{Name: "t", Functions: []string{"echo"}}},
	}, slowEcho{newTestHost()})
	if err != nil || res.Err != nil {
		t.Fatalf("%v %+v", err, res.Err)
	}
	if string(res.Value) != `[[1],["x"]]` {
		t.Fatalf("value %s", res.Value)
	}
}
