// Package container holds the image's tests (make test-image): the image
// make image built, run for real with podman, as a plain container and
// through podman kube play of deploy/kubernetes/. Nothing here is linked
// into connecta.
package container

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

const (
	// requireEnv makes a missing podman or image a failure (.ci/run sets it
	// for make test-image), not a skip.
	requireEnv = "CONNECTA_REQUIRE_PODMAN"
	// imageEnv names the image to test; make test-image passes $(IMAGE).
	imageEnv = "CONNECTA_IMAGE"
)

// podman runs podman with the test's own containers.conf.
type podman struct {
	conf  string // the CONTAINERS_CONF file
	image string
}

// containersConf is how podman runs on these machines (no systemd as PID 1,
// cgroup v1, no bridge networking needed): the settings live here, with the
// test, never in the image or the manifests, which must run anywhere.
// nofile stays within this process's own hard limit (runc refuses more).
func containersConf() string {
	var lim syscall.Rlimit
	nofile := uint64(65536)
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Max < nofile {
		nofile = lim.Max
	}
	return fmt.Sprintf(`[containers]
default_ulimits = ["nofile=%d:%d", "nproc=4096:4096"]
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`, nofile, nofile)
}

// needPodman is the podman and image under test, or a skip (a failure with
// CONNECTA_REQUIRE_PODMAN=1) naming what is missing.
func needPodman(t *testing.T) *podman {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf(format+" (%s=1)", append(args, requireEnv)...)
		}
		t.Skipf(format, args...)
	}
	if runtime.GOOS != "linux" {
		unavailable("podman images are Linux")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		unavailable("podman not installed (apt-get install podman buildah): %v", err)
	}
	image := os.Getenv(imageEnv)
	if image == "" {
		unavailable("%s is not set: run make test-image, which builds the image first", imageEnv)
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &podman{conf: conf, image: image}
	if out, err := p.cmd("image", "exists", image).CombinedOutput(); err != nil {
		unavailable("image %s not found (make image): %v %s", image, err, out)
	}
	return p
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	c := exec.Command("podman", args...)
	c.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	return c
}

// run runs podman and fails the test on an error, returning stdout.
func (p *podman) run(t *testing.T, args ...string) string {
	t.Helper()
	c := p.cmd(args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// try runs podman for a cleanup: an error is logged, never fatal.
func (p *podman) try(t *testing.T, args ...string) {
	if out, err := p.cmd(args...).CombinedOutput(); err != nil {
		t.Logf("podman %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func (p *podman) logs(t *testing.T, name string) string {
	out, _ := p.cmd("logs", name).CombinedOutput()
	return string(out)
}

// pid is the host PID of a running container's process.
func (p *podman) pid(t *testing.T, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(p.run(t, "inspect", "--format", "{{.State.Pid}}", name))
	if err != nil || pid <= 0 {
		t.Fatalf("pid of %s: %v %d", name, err, pid)
	}
	return pid
}

func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHealthy polls /health until it answers 200; what() explains a
// failure (the container's or process's log).
func waitHealthy(t *testing.T, addr string, what func() string) {
	t.Helper()
	var err error
	if !testkit.Poll(90*time.Second, func() bool {
		var resp *http.Response
		if resp, err = http.Get("http://" + addr + "/health"); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("%s: /health not 200 within 90 s (%v)\n%s", addr, err, what())
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, ctx context.Context, addr, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := http.DefaultClient
	if token != "" {
		hc = &http.Client{Transport: bearer{token}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "image-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// answer is what a client sees of one execute_code: the error flag and the
// text, compared whole between the container and the host.
func answer(t *testing.T, ctx context.Context, cs *mcp.ClientSession, code string) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code}})
	if err != nil {
		t.Fatalf("execute_code %s: %v", code, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "isError=%v", res.IsError)
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(" " + tc.Text)
		}
	}
	return b.String()
}

func randomSecret(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// descendants lists every process below pid (host PIDs).
func descendants(pid int) []int {
	var all []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(s); err == nil {
				all = append(all, c)
				all = append(all, descendants(c)...)
			}
		}
	}
	return all
}

// procStatus reads the named fields of /proc/PID/status.
func procStatus(pid int, fields ...string) map[string]string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	got := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		for _, f := range fields {
			if k == f {
				got[k] = strings.TrimSpace(v)
			}
		}
	}
	return got
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// a zombie has exited; its parent has not reaped it yet
	f := strings.Fields(string(data))
	return len(f) < 3 || f[2] != "Z"
}

func itoa(n int) string { return strconv.Itoa(n) }
