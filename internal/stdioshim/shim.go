// Package stdioshim ties a stdio connector's processes to the server's life.
//
// A parent-death signal reaches only a direct child, and many stdio servers
// start through wrappers that fork (`npx`, `sh -c`). So the server never
// starts the command itself: it re-executes its own binary as a small shim
// (MaybeRun, the first statement of main) that
//
//   - is started by a locked OS thread that lives as long as its Forker
//     (PR_SET_PDEATHSIG follows the spawning thread, not the process), with
//     SIGTERM as its parent-death signal and a process group of its own, so a
//     terminal's Ctrl-C never reaches it;
//   - starts the command in a further process group of its own, with the
//     shim's stdin, stdout and stderr passed straight through (no copying);
//   - kills that whole group when its parent dies, when it is told to stop,
//     and when the command exits (leftover grandchildren of a wrapper);
//   - reports on fd 3 one line when the command started (its pid, which is its
//     group) or why it could not, and one line with its exit status.
//
// The server kills the command's group itself too when it stops a
// connector, so a shim killed outright still leaves nothing behind.
//
// The shim runs inside bin/connecta: it uses only os/exec and the standard
// library's syscalls, so its cost is the binary's package initialisation.
package stdioshim

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Marker is argv[1] of a shim: <exe> Marker <parentPID> <path> <argv0> <args…>.
const Marker = "__connecta_stdio_shim__"

// statusFD is the shim's report pipe (the parent's ExtraFiles[0]).
const statusFD = 3

// Exit codes of the shim itself.
const (
	exitBadArgv    = 64
	exitStartError = 127 // the command could not be started; fd 3 says why
	exitOrphaned   = 125 // the parent died before the command started
)

// Report lines on fd 3.
const (
	lineStarted = "started "
	lineFailed  = "failed "
	lineExited  = "exited "
)

// MaybeRun returns at once unless argv marks this process as a shim; a shim
// runs its command to the end and exits without returning. Call it first in
// main and in TestMain of every package whose tests start stdio connectors.
func MaybeRun() {
	if len(os.Args) < 2 || os.Args[1] != Marker {
		return
	}
	os.Exit(run(os.Args[2:]))
}

func run(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "connecta stdio shim: malformed arguments")
		return exitBadArgv
	}
	ppid, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "connecta stdio shim: malformed arguments")
		return exitBadArgv
	}
	status := os.NewFile(statusFD, "status")
	report := func(line string) {
		if status != nil {
			_, _ = status.WriteString(line + "\n")
		}
	}
	// Signals first: a parent-death signal that arrives from here on is
	// handled; one before this killed the shim before it started anything.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if os.Getppid() != ppid {
		return exitOrphaned
	}
	cmd := &exec.Cmd{
		Path:        args[1],
		Args:        args[2:],
		Env:         os.Environ(), // exactly what the server gave the shim
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	syscall.CloseOnExec(statusFD) // the command must not inherit the report pipe
	if err := cmd.Start(); err != nil {
		report(lineFailed + oneLine(err.Error()))
		return exitStartError
	}
	group := cmd.Process.Pid
	report(lineStarted + strconv.Itoa(group))
	// Our copies of the MCP pipes are the command's now; holding them would
	// keep the server from seeing EOF when the command exits.
	_ = os.Stdin.Close()
	_ = os.Stdout.Close()

	exited := make(chan struct{})
	go func() {
		// Wait for the exit without reaping, so the group id cannot be
		// reused before the group is killed.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, group, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != syscall.EINTR {
				break
			}
		}
		close(exited)
	}()
	select {
	case <-exited:
	case <-sigs:
	}
	_ = syscall.Kill(-group, syscall.SIGKILL)
	err = cmd.Wait()
	code := 0
	text := "exit status 0"
	if err != nil {
		text = err.Error()
	}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ps.ExitCode()
		}
	}
	report(lineExited + oneLine(text))
	return code
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// readReport reads one report line (without its prefix kind split off).
func readReport(r *bufio.Reader) (kind, rest string, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", "", err
	}
	line = strings.TrimSuffix(line, "\n")
	for _, k := range []string{lineStarted, lineFailed, lineExited} {
		if after, ok := strings.CutPrefix(line, k); ok {
			return k, after, nil
		}
	}
	return "", line, nil
}
