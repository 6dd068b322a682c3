package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/ipc"
)

// The package-init budget of the slim child: every sandbox child runs all
// of these before its first instruction of ours. The parent (cmd/connecta)
// has none: it starts once.
const (
	initBudgetBytes  = 400_000
	initBudgetAllocs = 2_000
	ownModule        = "github.com/connecta-dev/connecta"
)

var initLine = regexp.MustCompile(`^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)

type initCost struct {
	pkg           string
	bytes, allocs int
}

// TestChildInitBudget builds the slim child as `make build` does and runs it
// as a sandbox child (warm mode without a cache directory: init, early
// hardening, exit) under GODEBUG=inittrace=1. Our own packages must do no
// init work at all, and all inits together must stay within the budget.
// It counts bytes and allocations, never time.
func TestChildInitBudget(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the child with")
	}
	bin := filepath.Join(t.TempDir(), "sandbox-child")
	build := exec.Command(goBin, "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	child := exec.Command(bin, ipc.ChildArgs{Mode: ipc.ModeWarm, ParentPID: os.Getpid()}.Argv()...)
	child.Env = []string{"GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	child.Stderr = &stderr
	if err := child.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}

	var costs []initCost
	var total initCost
	for _, line := range strings.Split(stderr.String(), "\n") {
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		b, _ := strconv.Atoi(m[2])
		a, _ := strconv.Atoi(m[3])
		costs = append(costs, initCost{m[1], b, a})
		total.bytes += b
		total.allocs += a
	}
	if len(costs) == 0 {
		t.Fatalf("no inittrace lines in the child's stderr:\n%s", stderr.String())
	}
	slices.SortFunc(costs, func(x, y initCost) int { return y.bytes - x.bytes })
	report := func() string {
		var b strings.Builder
		for _, c := range costs {
			if c.allocs > 0 {
				fmt.Fprintf(&b, "  %-60s %8d bytes %5d allocs\n", c.pkg, c.bytes, c.allocs)
			}
		}
		return b.String()
	}
	for _, c := range costs {
		if c.pkg == ownModule || strings.HasPrefix(c.pkg, ownModule+"/") {
			t.Errorf("package %s does init work (%d bytes, %d allocs): build package state lazily or make it constant", c.pkg, c.bytes, c.allocs)
		}
	}
	if total.bytes > initBudgetBytes || total.allocs > initBudgetAllocs {
		t.Errorf("inits of %d packages allocate %d bytes in %d allocations; budget %d bytes, %d allocations. Allocating packages:\n%s",
			len(costs), total.bytes, total.allocs, initBudgetBytes, initBudgetAllocs, report())
	}
	t.Logf("%d package inits: %d bytes, %d allocations", len(costs), total.bytes, total.allocs)
}
