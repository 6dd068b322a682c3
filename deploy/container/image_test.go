package container

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// The programs whose answers must be the same in the container as on the
// host: plain code, a connector call (the built-in demo), one ended by the
// CPU budget and one by the memory bound.
var programs = []struct{ name, code, want string }{
	{"1+1", `async () => 1 + 1`, `"result":2`},
	{"connector", `async () => JSON.stringify(await connecta.call("demo.list_projects", {})).length > 10`, `"result":true`},
	{"cpu budget", `async () => { for (;;) {} }`, "CPU budget"},
	{"memory bound", `async () => { const a = []; for (;;) a.push(new Array(1e5)); }`, "memory"},
}

// runConfig: the demo connector, and a memory bound small enough that the
// memory program meets it well within the CPU budget on a loaded machine.
const runConfig = "executor: {cpuTimeMs: 1000, memoryLimitBytes: 16777216}\n" +
	"connectors:\n  - id: demo\n    builtin: demo\n"

// hostBinary is the bin/connecta the image carries (make test-image builds
// both from the same tree).
func hostBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CONNECTA_BIN")
	if bin == "" {
		bin = filepath.Join("..", "..", "bin", "connecta")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the host binary to compare with: %v (make test-image builds it)", err)
	}
	return bin
}

// writeConfig writes a configuration the container's user can read.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "connecta.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hardened are the podman run flags of a locked-down container: read-only
// root, no capabilities, no privilege gain, a non-root numeric user.
var hardened = []string{"--read-only", "--cap-drop=all", "--security-opt", "no-new-privileges", "--user", "65532:65532"}

// startContainer runs the image serving config on 127.0.0.1:port (host
// networking) and returns the container's name; it is removed when the
// test ends.
func startContainer(t *testing.T, p *podman, config string, port int, extra ...string) string {
	t.Helper()
	name := "connecta-test-" + suffix()
	args := append([]string{"run", "-d", "--name", name}, hardened...)
	args = append(args, extra...)
	args = append(args, "-v", config+":/etc/connecta/connecta.yaml:ro", p.image,
		"serve", "--config", "/etc/connecta/connecta.yaml", "--listen", "127.0.0.1:"+itoa(port))
	p.run(t, args...)
	t.Cleanup(func() { p.try(t, "rm", "-f", "-t", "0", name) })
	waitHealthy(t, "127.0.0.1:"+itoa(port), func() string { return p.logs(t, name) })
	return name
}

// The image, run with a read-only root, no capabilities, no-new-privileges,
// a non-root user and a tmpfs cache, answers every program exactly as
// bin/connecta on the host does; its sandbox children run the slim child
// from a memfd with their own seccomp filter stacked on the runtime's, the
// children's rlimits and no_new_privs; podman stop drains it (exit 0) and
// leaves no child behind.
func TestImage_RunsProgramsAsOnTheHostAndStopsWithItsChildren(t *testing.T) {
	p := needPodman(t)
	config := writeConfig(t, runConfig)

	hostPort, ctrPort := freePort(t), freePort(t)
	host := exec.Command(hostBinary(t), "serve", "--config", config, "--listen", "127.0.0.1:"+itoa(hostPort))
	host.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	var hostLog testkit.Buffer
	host.Stderr = &hostLog
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	waitHealthy(t, "127.0.0.1:"+itoa(hostPort), hostLog.String)

	name := startContainer(t, p, config, ctrPort, "--tmpfs", "/var/cache/connecta")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	onHost, err := connect(t, ctx, "127.0.0.1:"+itoa(hostPort), "")
	if err != nil {
		t.Fatal(err)
	}
	inCtr, err := connect(t, ctx, "127.0.0.1:"+itoa(ctrPort), "")
	if err != nil {
		t.Fatalf("%v\n%s", err, p.logs(t, name))
	}
	for _, prog := range programs {
		want, got := answer(t, ctx, onHost, prog.code), answer(t, ctx, inCtr, prog.code)
		if !strings.Contains(want, prog.want) {
			t.Errorf("%s on the host: %.300s (want it to say %q)", prog.name, want, prog.want)
		}
		t.Logf("%s: %.200s", prog.name, got)
		if got != want {
			t.Errorf("%s: the container answers\n  %.400s\nthe host\n  %.400s", prog.name, got, want)
		}
	}

	// The sandbox as on a host, seen from outside the container.
	pid := p.pid(t, name)
	children := descendants(pid)
	if len(children) == 0 {
		t.Fatalf("no sandbox children below the server (pid %d)\n%s", pid, p.logs(t, name))
	}
	server := procStatus(pid, "Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp_filters")
	if !strings.HasPrefix(server["Uid"], "65532") || server["CapEff"] != "0000000000000000" || server["NoNewPrivs"] != "1" || server["Seccomp_filters"] != "1" {
		t.Errorf("the server's process: %v (want uid 65532, no capabilities, no_new_privs, the runtime's one filter)", server)
	}
	for _, c := range children {
		exe, _ := os.Readlink("/proc/" + itoa(c) + "/exe")
		st := procStatus(c, "Seccomp", "Seccomp_filters", "NoNewPrivs", "CapEff")
		limits, _ := os.ReadFile("/proc/" + itoa(c) + "/limits")
		if !strings.HasPrefix(exe, "/memfd:connecta-sandbox-child") {
			t.Errorf("child %d executes %q, not the slim child's memfd", c, exe)
		}
		if st["Seccomp"] != "2" || st["Seccomp_filters"] != "2" || st["NoNewPrivs"] != "1" || st["CapEff"] != "0000000000000000" {
			t.Errorf("child %d: %v (want its own filter on the runtime's: 2 filters, no_new_privs, no capabilities)", c, st)
		}
		for _, want := range []string{"Max file size             0", "Max core file size        0", "Max open files            32"} {
			if !strings.Contains(string(limits), want) {
				t.Errorf("child %d limits lack %q:\n%s", c, want, limits)
			}
		}
	}
	logs := p.logs(t, name)
	if !strings.Contains(logs, "from a sealed memfd") || strings.Contains(logs, "no writable cache directory") {
		t.Errorf("the container's log (want the memfd child and the tmpfs cache used):\n%s", logs)
	}

	// podman stop while a program runs: SIGTERM starts the drain, /health
	// answers 503 shutting_down (readiness off) while the program finishes
	// and its answer is delivered, then the server exits 0, well before
	// podman's SIGKILL, and takes every child with it.
	running := make(chan string, 1)
	go func() { // (answer may not fail the test from this goroutine)
		res, err := inCtr.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": `async () => { for (;;) {} }`}})
		if err != nil || len(res.Content) == 0 {
			running <- fmt.Sprintf("%v %+v", err, res)
			return
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		running <- fmt.Sprintf("%v %+v", res.IsError, tc)
	}()
	time.Sleep(300 * time.Millisecond) // the program must be running at podman stop; nothing outside the container says it started
	stopped := make(chan string, 1)
	go func() {
		out, err := p.cmd("stop", "-t", "30", name).CombinedOutput()
		stopped <- fmt.Sprintf("%v %s", err, out)
	}()
	draining := false
	testkit.Poll(30*time.Second, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + itoa(ctrPort) + "/health")
		if err != nil {
			return true // the listener closed: the drain is over
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		draining = resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), `"shutting_down"`)
		return draining
	})
	if !draining {
		t.Error("/health never answered 503 shutting_down during the drain")
	}
	if got := <-running; !strings.Contains(got, "CPU budget") {
		t.Errorf("the program running at podman stop: %s", got)
	}
	if res := <-stopped; !strings.HasPrefix(res, "<nil>") {
		t.Errorf("podman stop: %s", res)
	}
	if code := p.run(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Errorf("exit code after podman stop: %s\n%s", code, p.logs(t, name))
	}
	for _, c := range append(children, pid) {
		if alive(c) {
			t.Errorf("process %d outlived podman stop", c)
		}
	}
}

// With nothing writable at all (read-only root, no volume: podman's
// anonymous volume for the image's VOLUME is refused), the server still
// starts, compiling in memory, and says so in one WARN.
func TestImage_WithoutAnyWritableCacheCompilesInMemory(t *testing.T) {
	p := needPodman(t)
	port := freePort(t)
	name := startContainer(t, p, writeConfig(t, runConfig), port, "--image-volume", "ignore")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connect(t, ctx, "127.0.0.1:"+itoa(port), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := answer(t, ctx, cs, `async () => 1 + 1`); !strings.Contains(got, `"result":2`) {
		t.Fatalf("1+1: %s", got)
	}
	logs := p.logs(t, name)
	if n := strings.Count(logs, "no writable cache directory"); n != 1 {
		t.Errorf("want one WARN about the cache, got %d:\n%s", n, logs)
	}
	if strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("errors in the log:\n%s", logs)
	}
}

// A cache volume like a disk emptyDir (root's, 0777, no sticky bit) is
// refused at start, naming the directory and the fix: anyone with the pod's
// user could replace what is below it (docs/kubernetes.md).
func TestImage_WorldWritableCacheVolumeIsRefusedNamingTheFix(t *testing.T) {
	p := needPodman(t)
	vol := filepath.Join(t.TempDir(), "emptydir")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	name := "connecta-test-" + suffix()
	args := append([]string{"run", "--name", name}, hardened...)
	args = append(args, "-v", vol+":/var/cache/connecta", "-v", writeConfig(t, runConfig)+":/etc/connecta/connecta.yaml:ro", p.image)
	out, err := p.cmd(args...).CombinedOutput()
	t.Cleanup(func() { p.try(t, "rm", "-f", name) })
	if err == nil {
		t.Fatalf("the server started on a world-writable cache volume:\n%s", out)
	}
	for _, want := range []string{"/var/cache/connecta", "executor.cacheDir", "writable by others (mode 0777)", "root-owned sticky"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	// (privdir.Create makes wazero/ by path before its walk refuses the
	// parent; nothing in it is ever trusted or used)
}
