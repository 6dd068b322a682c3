package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// Every command answers -h, --help and `connecta help <command>` with its
// usage on stdout and exit 0; the bare forms list every command.
func TestCLI_HelpOnEveryCommandExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "help"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(out, "usage: connecta [command]") {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s", args, code, out, errOut)
		}
		for _, c := range commands() {
			if !strings.Contains(out, c.synopsis) {
				t.Errorf("%v: command list misses %q", args, c.synopsis)
			}
		}
	}
	for _, c := range commands() {
		if c.name == "help" {
			continue
		}
		want := "usage: connecta " + c.synopsis
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			code, out, errOut := runCLI(args...)
			if code != 0 || !strings.HasPrefix(out, want) || errOut != "" {
				t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, code, out, errOut)
			}
		}
	}
	if code, _, errOut := runCLI("help", "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("help frobnicate: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("serve", "--bogus"); code != 2 || !strings.Contains(errOut, "usage: connecta serve") {
		t.Errorf("serve --bogus: exit %d, stderr %q", code, errOut)
	}
}

var versionLine = regexp.MustCompile(`^connecta (\S+) \(([^,]+), (go\S+)\)\n$`)

// An unstamped binary still prints the pinned shape, with Go's version.
func TestCLI_VersionShapeBothSpellings(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCLI(args...)
		m := versionLine.FindStringSubmatch(out)
		if code != 0 || m == nil || m[3] != runtime.Version() {
			t.Fatalf("%v: exit %d, %q does not match %s", args, code, out, versionLine)
		}
	}
}

// `make build` stamps version and commit through -ldflags -X; the binary
// prints exactly what was stamped.
func TestCLI_VersionStampedByLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "connecta")
	build := exec.Command("go", "build", "-trimpath", "-o", bin,
		"-ldflags", "-X main.version=v9.8.7 -X main.commit=0123abcd", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "connecta v9.8.7 (0123abcd, " + runtime.Version() + ")\n"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
	// The Makefile passes the same two symbols.
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "-X main.version=$(VERSION) -X main.commit=$(COMMIT)") {
		t.Fatal("Makefile's build does not stamp main.version and main.commit")
	}
}

// A taken address fails before anything is spawned and names both ways to
// choose another.
func TestServe_AddressInUseNamesListenFlagAndKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCLI("serve", "--listen", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "address already in use") ||
		!strings.Contains(errOut, "--listen") || !strings.Contains(errOut, "`listen:`") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}

// Outside systemd, --credentials-dir supplies the files ${credential:NAME}
// reads; without it check refuses and says what is missing.
func TestCheck_CredentialsDirResolvesCredentialReferences(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "connecta-token"), []byte("s3cret-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "listen: 127.0.0.1:0\nauth:\n  tokens:\n    - name: laptop\n      token: ${credential:connecta-token}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("check", "--config", path); code != 1 || !strings.Contains(errOut, "CREDENTIALS_DIRECTORY") {
		t.Fatalf("without --credentials-dir: exit %d, stderr %s", code, errOut)
	}
	code, out, errOut := runCLI("check", "--config", path, "--credentials-dir", dir)
	if code != 0 || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("with --credentials-dir: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// check (and doctor, from the same helper) warns when readOnly or
// approvalRequired names a tool the connector does not list: such an
// entry classifies nothing. A listed name is silent.
func TestCheck_WarnsOnClassificationsNamingUnlistedTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "listen: 127.0.0.1:0\nconnectors:\n  - id: demo\n    builtin: demo\n" +
		"    readOnly: [list_projects, add]\n    approvalRequired: [add_comment, bulk_update]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("check", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		path + `:3: connectors[0].readOnly: "add" is not a tool connector "demo" lists, so it classifies nothing (it lists: add_comment, get_issue,`,
		path + `:3: connectors[0].approvalRequired: "bulk_update" is not a tool connector "demo" lists`,
	} {
		if !strings.Contains(out, "warning: "+want) {
			t.Errorf("no warning %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"list_projects" is not`) || strings.Contains(out, `"add_comment" is not`) {
		t.Errorf("a listed tool was warned about:\n%s", out)
	}
}

// The pinned fallback order: the -X stamp; else Go's build info (module
// version, vcs.revision); else dev and unknown commit.
func TestVersion_FallbackOrder(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	for _, tc := range []struct {
		version, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"v2.0.0", "f00d", bi, "connecta v2.0.0 (f00d, go1.99)"},
		{"", "", bi, "connecta v1.4.0 (abc123, go1.99)"},
		{"v2.0.0", "", bi, "connecta v2.0.0 (abc123, go1.99)"},
		{"", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "connecta dev (unknown commit, go1.99)"},
		{"", "", nil, "connecta dev (unknown commit, go1.99)"},
	} {
		if got := versionFrom(tc.version, tc.commit, tc.bi, "go1.99").String(); got != tc.want {
			t.Errorf("versionFrom(%q, %q, …) = %q, want %q", tc.version, tc.commit, got, tc.want)
		}
	}
}

// Every command that reads the configuration takes --credentials-dir, and
// its usage line says so (serve refused it; token's usage omitted it).
func TestCLI_EveryConfigReadingCommandTakesCredentialsDir(t *testing.T) {
	for _, c := range commands() {
		if c.name == "version" || c.name == "help" || c.name == "init" {
			continue
		}
		if !strings.Contains(c.synopsis, "[--credentials-dir DIR]") {
			t.Errorf("%s: synopsis %q lacks [--credentials-dir DIR]", c.name, c.synopsis)
		}
	}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "connecta-token"), []byte("s3cret-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("auth:\n  tokens:\n    - name: laptop\n      token: ${credential:connecta-token}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A taken address fails after the configuration loaded, before anything
	// is spawned: reaching it proves the credential resolved.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCLI("serve", "--config", path, "--credentials-dir", dir, "--listen", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "address already in use") {
		t.Fatalf("serve --credentials-dir: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := runCLI("token", "list", "--config", path, "--credentials-dir", dir); code != 1 || !strings.Contains(errOut, "memory:") {
		t.Fatalf("token list --credentials-dir: exit %d, stderr %s", code, errOut)
	}
}

// --listen with --stdio is refused, not ignored.
func TestServe_ListenWithStdioRefused(t *testing.T) {
	code, out, errOut := runCLI("serve", "--stdio", "--listen", "127.0.0.1:0")
	if code != 2 || out != "" || !strings.Contains(errOut, "--listen and --stdio") {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", code, out, errOut)
	}
}

// check verifies the store without opening it (a sqlite: file in a missing
// directory said ok), and doctor reports it as `store: FAILED` on its own
// line (it said `startup failed`), with no log record inside its report.
func TestCheckAndDoctor_StoreInAMissingDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	db := filepath.Join(dir, "missing", "state.db")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:0\nstore:\n  url: \"sqlite:"+db+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("check", "--config", path)
	if code != 1 || strings.Contains(out, "ok") || !strings.Contains(errOut, path+":3: store.url: directory "+filepath.Dir(db)) {
		t.Fatalf("check: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	code, out, errOut = runCLI("doctor", "--config", path)
	if code != 1 || !strings.Contains(out, "config: ok") || !strings.Contains(out, "\nstore: FAILED sqlite:"+db+": ") ||
		strings.Contains(out+errOut, "startup failed") || strings.Contains(out, "level=") {
		t.Fatalf("doctor: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// A writable directory passes check, and check created nothing there.
	if err := os.Mkdir(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI("check", "--config", path); code != 0 {
		t.Fatalf("check, directory present: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(filepath.Dir(db)); len(entries) != 0 {
		t.Fatalf("check created %v", entries)
	}
}

// doctor names the MCP version each connector negotiated (the built-in demo
// is a go-sdk server: 2026-07-28 under versionNegotiation auto).
func TestDoctor_NamesNegotiatedProtocolVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	cfg := "listen: 127.0.0.1:0\nstore:\n  url: \"sqlite:" + filepath.Join(dir, "s.db") + "\"\nconnectors:\n  - id: demo\n    builtin: demo\n  - id: old\n    builtin: demo\n    versionNegotiation: legacy\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("doctor", "--config", path)
	if code != 0 || !strings.Contains(out, "connector demo: ok (7 tools, MCP 2026-07-28)\n") || !strings.Contains(out, "connector old: ok (7 tools, MCP 2025-11-25)\n") {
		t.Fatalf("doctor: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
