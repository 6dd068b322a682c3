package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sample is a module of three packages: one passes, one fails, and one has a
// skipped test beside a passing one.
var sample = map[string]string{
	"go.mod":              "module sample\n\ngo 1.22\n",
	"good/good_test.go":   "package good\n\nimport \"testing\"\n\nfunc TestGood(t *testing.T) { t.Log(\"quiet\") }\n",
	"bad/bad_test.go":     "package bad\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) { t.Log(\"context line\"); t.Fatal(\"it broke\") }\n",
	"skippy/skip_test.go": "package skippy\n\nimport \"testing\"\n\nfunc TestRuns(t *testing.T) {}\n\nfunc TestNeedsChromium(t *testing.T) { t.Skip(\"chromium is not installed\") }\n",
}

var timing = regexp.MustCompile(`\t[0-9.]+s|\([0-9.]+s\)`)

// make test's output keeps plain go test's lines (what CI reads) and exit
// status, and ends with every skipped test and its reason (they were
// invisible).
func TestSkipReport_PlainOutputExitCodeAndSkipSummary(t *testing.T) {
	dir := t.TempDir()
	for name, text := range sample {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	plain := exec.Command("go", "test", "-count=1", "./...")
	plainOut, err := plain.Output()
	if err == nil {
		t.Fatal("plain go test passed on a failing package")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"--", "go", "test", "-count=1", "./..."}, &out, &errOut)
	if code != plain.ProcessState.ExitCode() {
		t.Fatalf("exit %d, go test's is %d", code, plain.ProcessState.ExitCode())
	}
	got := out.String()
	for _, line := range strings.Split(strings.TrimSpace(string(plainOut)), "\n") {
		if !strings.Contains(timing.ReplaceAllString(got, ""), timing.ReplaceAllString(line, "")) {
			t.Errorf("go test's line %q is missing from\n%s", line, got)
		}
	}
	if strings.Contains(got, "quiet") || strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output or a verbose line leaked:\n%s", got)
	}
	if !strings.HasSuffix(got, "\nskipped: 1 test(s)\n  SKIP sample/skippy TestNeedsChromium: skip_test.go:7: chromium is not installed\n") {
		t.Errorf("no skip summary at the end:\n%s", got)
	}
}
