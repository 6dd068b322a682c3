package traces_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// requireJaeger makes a missing Jaeger binary a failure (CI).
const requireJaeger = "CONNECTA_REQUIRE_JAEGER"

// jaegerBinary is where `make jaeger` puts cmd/jaeger (test/jaeger/go.mod).
var jaegerBinary = filepath.Join("..", "jaeger", "bin", "jaeger")

// jaegerConfig is Jaeger v2's all-in-one shape on free loopback ports:
// OTLP/HTTP in, memory storage, the query API out; its own telemetry off.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// jaeger is a running Jaeger v2, stopped by the test's cleanup.
type jaeger struct {
	cmd         *exec.Cmd
	otlp, query int
	done        chan struct{}
}

// newJaeger starts the built Jaeger when there is one; nil otherwise (the
// receiver stands in), unless CI requires it.
func newJaeger(t testing.TB) backend {
	t.Helper()
	if _, err := os.Stat(jaegerBinary); err != nil {
		if os.Getenv(requireJaeger) == "1" {
			t.Fatalf("%s=1 but %s is not built: run `make jaeger`", requireJaeger, jaegerBinary)
		}
		return nil
	}
	ports := freePorts(t, 3)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	j := &jaeger{query: ports[0], otlp: ports[2], done: make(chan struct{})}
	j.cmd = exec.Command(jaegerBinary, "--config", "file:"+cfg)
	log, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		t.Fatal(err)
	}
	j.cmd.Stdout, j.cmd.Stderr = log, log
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = j.cmd.Wait(); close(j.done) }()
	t.Cleanup(func() {
		j.stop()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("jaeger log:\n%s", out)
		}
	})
	ready := testkit.Poll(60*time.Second, func() bool {
		select {
		case <-j.done:
			return true
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/services", j.query))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && otlpListening(j.otlp)
	})
	select {
	case <-j.done:
		out, _ := os.ReadFile(log.Name())
		t.Fatalf("jaeger exited at start:\n%s", out)
	default:
	}
	if !ready {
		t.Fatal("jaeger did not serve its query API within 60s")
	}
	t.Logf("backend: Jaeger v2 (%s), OTLP/HTTP on %d, query on %d", jaegerBinary, j.otlp, j.query)
	return j
}

func otlpListening(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (j *jaeger) endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", j.otlp) }

func (j *jaeger) stop() {
	if j.cmd.Process != nil {
		_ = j.cmd.Process.Kill()
	}
	<-j.done
}

// trace reads the trace back through Jaeger's query API (/api/traces/{id}).
func (j *jaeger) trace(t testing.TB, traceID string, want int) []span {
	t.Helper()
	var out []span
	var lastErr error
	testkit.Poll(20*time.Second, func() bool {
		out, lastErr = j.read(traceID)
		return lastErr == nil && len(out) >= want
	})
	if lastErr != nil {
		t.Logf("jaeger query: %v", lastErr)
	}
	return out
}

// named reads back, through the query API's search, the spans called
// name (of any trace: roots such as the console's) once want have arrived.
func (j *jaeger) named(t testing.TB, name string, want int) []span {
	t.Helper()
	var out []span
	var lastErr error
	testkit.Poll(20*time.Second, func() bool {
		var all []span
		all, lastErr = j.get(fmt.Sprintf("http://127.0.0.1:%d/api/traces?service=connecta-test&operation=%s&limit=100", j.query, url.QueryEscape(name)))
		out = out[:0]
		for _, s := range all {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return lastErr == nil && len(out) >= want
	})
	if lastErr != nil {
		t.Logf("jaeger query: %v", lastErr)
	}
	return out
}

func (j *jaeger) read(traceID string) ([]span, error) {
	return j.get(fmt.Sprintf("http://127.0.0.1:%d/api/traces/%s", j.query, traceID))
}

func (j *jaeger) get(u string) ([]span, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound { // no span of this trace (yet)
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var body struct {
		Data []struct {
			Spans []struct {
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				References    []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
				Tags []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"spans"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var out []span
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			sp := span{Name: s.OperationName, ID: s.SpanID, Attrs: map[string]string{}}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.Parent = r.SpanID
				}
			}
			for _, tag := range s.Tags {
				sp.Attrs[tag.Key] = fmt.Sprint(tag.Value)
			}
			sp.Kind = sp.Attrs["span.kind"]
			out = append(out, sp)
		}
	}
	return out, nil
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}
