// Command skipreport runs `go test -json ARGS…` and prints what plain `go
// test ARGS…` prints — each package's ok/FAIL line, a failing test's output,
// build errors — then a summary of every skipped test with its reason. Its
// exit status is go test's. `make test` runs the suite through it, so a
// machine missing a real part (PostgreSQL, Chromium, node) shows which
// tests did not run and why instead of a quiet ok.
//
//	go run ./test/skipreport -- go test -short ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) < 2 {
		fmt.Fprintln(stderr, "usage: skipreport -- go test [flags] [packages]")
		return 2
	}
	cmd := exec.Command(args[0], append([]string{args[1], "-json"}, args[2:]...)...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "skipreport:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "skipreport:", err)
		return 2
	}
	skips := report(out, stdout, stderr)
	err = cmd.Wait()
	printSkips(stdout, skips)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "skipreport:", err)
		return 2
	}
	return 0
}

// event is one line of test2json (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// skip is one skipped test and the reason it logged.
type skip struct{ pkg, test, reason string }

// report turns the JSON stream into plain go test output on w and returns
// the skips. A test's output is held until it ends: printed when it fails,
// kept as the reason when it skips, dropped when it passes (go test without
// -v). Package-level lines pass, except the bare PASS of a passing package,
// which plain go test does not print.
func report(r io.Reader, w, errw io.Writer) []skip {
	held := map[string][]string{} // package + "\x00" + test → output lines
	var skips []skip
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not JSON: pass it on as it came
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(errw, e.Output)
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			for _, line := range held[key] {
				if !strings.HasPrefix(line, "=== ") {
					fmt.Fprint(w, line)
				}
			}
			delete(held, key)
		case e.Action == "skip" && e.Test != "":
			skips = append(skips, skip{pkg: e.Package, test: e.Test, reason: skipReason(held[key])})
			delete(held, key)
		case e.Action == "pass":
			delete(held, key)
		}
	}
	return skips
}

// skipReason is the logged lines of a skipped test (its t.Skip message),
// without the framing lines.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " / ")
}

func printSkips(w io.Writer, skips []skip) {
	if len(skips) == 0 {
		fmt.Fprintln(w, "skipped: none")
		return
	}
	sort.SliceStable(skips, func(i, j int) bool {
		if skips[i].pkg != skips[j].pkg {
			return skips[i].pkg < skips[j].pkg
		}
		return skips[i].test < skips[j].test
	})
	fmt.Fprintf(w, "\nskipped: %d test(s)\n", len(skips))
	for _, s := range skips {
		fmt.Fprintf(w, "  SKIP %s %s: %s\n", s.pkg, s.test, s.reason)
	}
}
