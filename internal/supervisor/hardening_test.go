package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

const orphanParentMarker = "__supervisor_orphan_parent__"

// runOrphanParent is a parent that starts a pool whose child never reads its
// pipe (so only the parent-death signal can end it), prints the child's pid
// and waits to be killed.
func runOrphanParent(_ []string) int {
	opts := Options{Slots: 1, Spares: 1, DisableCache: true, ReadyTimeout: time.Minute, testChildArgv: fakeArgv("slow")}
	p, err := New(context.Background(), testOptions(opts))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer p.Close()
	// Name a child that is running: one that already exited (a zombie not
	// yet reaped, e.g. a spare the pool replaced) proves nothing.
	running := testkit.Poll(time.Minute, func() bool {
		for _, kid := range liveChildren() {
			if st := processState(kid); st != "gone" && st != "Z" {
				fmt.Println(kid)
				return true
			}
		}
		return false
	})
	if !running {
		fmt.Println("error: no child ran within a minute")
		return 1
	}
	time.Sleep(time.Minute) // waits to be killed: the test kills this process
	return 0
}

func processState(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "gone"
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[0]
}

func TestHardening_ChildDiesWithItsParent(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", orphanParentMarker)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// However the test ends, the orphan parent (which sleeps a minute) must
	// not outlive it: every later test would count it as a leaked child.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("orphan parent said %q", line)
	}
	if st := processState(pid); st == "gone" || st == "Z" {
		t.Fatalf("child %d not running: %s", pid, st)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitFor(t, func() bool { st := processState(pid); return st == "gone" || st == "Z" })
}

func syscallKill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
