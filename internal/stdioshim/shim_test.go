package stdioshim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

func TestMain(m *testing.M) {
	MaybeRun() // this test binary is the shim the tests start
	os.Exit(m.Run())
}

func gone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// Stop kills the command's whole group: a grandchild the command forked
// (and that ignores SIGTERM) goes too, and the exit is reported.
func TestStop_KillsTheWholeGroupAndReportsTheExit(t *testing.T) {
	f := NewForker()
	defer f.Close()
	p, err := f.Start(context.Background(), Command{
		Path: "/bin/sh", Args: []string{"sh", "-c", `trap "" TERM; sleep 300 & echo $!; wait`}, Env: []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(line))
	if grandchild <= 0 || gone(grandchild) {
		t.Fatalf("grandchild %q not running", line)
	}
	if g := p.Group(); g <= 0 || g == syscall.Getpgrp() {
		t.Fatalf("command group %d: want one of its own", g)
	}
	p.Stop(100 * time.Millisecond)
	if !testkit.Poll(5*time.Second, func() bool { return gone(grandchild) }) {
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
		t.Fatal("the grandchild outlived Stop")
	}
	if p.ExitText() == "" {
		t.Fatal("no exit reported")
	}
}

// A command that cannot be executed is a StartError with the exec error.
func TestStart_ExecFailureIsAStartError(t *testing.T) {
	f := NewForker()
	defer f.Close()
	dir := t.TempDir()
	path := dir + "/not-executable"
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.Start(context.Background(), Command{Path: path, Args: []string{path}, Env: []string{}})
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "permission denied") {
		t.Fatalf("got %v", err)
	}
}

// The command's own exit status is reported as it ended.
func TestExit_StatusIsReported(t *testing.T) {
	f := NewForker()
	defer f.Close()
	p, err := f.Start(context.Background(), Command{Path: "/bin/sh", Args: []string{"sh", "-c", "exit 7"}, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit")
	}
	if got := p.ExitText(); got != "exit status 7" {
		t.Fatalf("exit %q", got)
	}
}

// When the command exits, what it left running in its group is killed.
func TestExit_KillsWhatTheCommandLeftBehind(t *testing.T) {
	f := NewForker()
	defer f.Close()
	p, err := f.Start(context.Background(), Command{Path: "/bin/sh", Args: []string{"sh", "-c", `sleep 300 & echo $!`}, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	leftover, _ := strconv.Atoi(strings.TrimSpace(line))
	<-p.Done()
	if !testkit.Poll(5*time.Second, func() bool { return gone(leftover) }) {
		_ = syscall.Kill(leftover, syscall.SIGKILL)
		t.Fatal("a process the command left behind outlived it")
	}
}
