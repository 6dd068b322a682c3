package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/test/testkit"
)

// requirePrometheusEnv makes a missing prometheus binary a failure (CI).
const requirePrometheusEnv = "CONNECTA_REQUIRE_PROMETHEUS"

// dashboard is the part of deploy/grafana/connecta.json the test reads.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the dashboard's variables as Grafana would expand them for
// one instance: every instance, and a rate window of a few scrapes.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")

// The Grafana dashboard's every panel query parses and returns data from
// Debian's prometheus scraping a live connecta driven through a few calls:
// executions that succeed, fail and are killed, a call_tool, a refused
// request, and an OAuth connector whose refresh series exist from the start.
func TestGrafana_EveryPanelQueryReturnsDataFromALiveConnecta(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(requirePrometheusEnv) == "1" {
			t.Fatalf("prometheus is not installed (%s=1 requires it; apt-get install prometheus)", requirePrometheusEnv)
		}
		t.Skip("prometheus is not installed (apt-get install prometheus); skipping")
	}
	raw, err := os.ReadFile("../../deploy/grafana/connecta.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("deploy/grafana/connecta.json: %v", err)
	}
	if len(d.Panels) < 12 {
		t.Fatalf("only %d panels", len(d.Panels))
	}

	t.Setenv("GRAFANA_TEST_TOKEN", "grafana-test-token-0123456789")
	srv := startServer(t, `executor: {spares: 1}
publicUrl: http://127.0.0.1:9
auth:
  tokens: [{name: dash, token: "${env:GRAFANA_TEST_TOKEN}"}]
connectors:
  - id: demo
    builtin: demo
  - id: docs
    url: http://127.0.0.1:9/mcp
    oauth: {}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := srv.client(t, ctx, "grafana-test-token-0123456789")
	for _, code := range []string{
		`async () => 1`,
		`async () => { throw new Error("no") }`,
		`async () => { for (;;) {} }`, // killed at the CPU budget
		`async () => (await connecta.call("demo.list_projects", {})).length`,
	} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code}}); err != nil {
			t.Fatalf("execute_code %s: %v", code, err)
		}
	}
	if _, _, err := callTool(ctx, cs, "demo.list_projects"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.Post("http://"+srv.addr+"/mcp", "application/json", strings.NewReader(`{}`)); err == nil {
		res.Body.Close() // 401: an auth rejection
	}

	dir := t.TempDir()
	promAddr := testkit.FreeAddr(t)
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: connecta\n    static_configs: [{targets: [%q]}]\n", srv.addr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var promLog testkit.Buffer
	cmd.Stdout, cmd.Stderr = &promLog, &promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	query := func(expr string) (string, int, error) {
		res, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return "", 0, err
		}
		defer res.Body.Close()
		var out struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return "", 0, err
		}
		return out.Status + " " + out.Error, len(out.Data.Result), nil
	}
	metricName := regexp.MustCompile(`connecta_[a-z_]+`)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var missing []string
		for _, p := range d.Panels {
			if len(p.Targets) == 0 {
				missing = append(missing, p.Title+": no query")
			}
			for _, tg := range p.Targets {
				if !metricName.MatchString(tg.Expr) {
					missing = append(missing, p.Title+": a query names no connecta metric")
				}
				status, n, err := query(grafanaVars.Replace(tg.Expr))
				switch {
				case err != nil:
					missing = append(missing, fmt.Sprintf("%s: %v", p.Title, err))
				case strings.HasPrefix(status, "error"):
					t.Fatalf("%s: %q does not parse: %s", p.Title, tg.Expr, status) // never gets better
				case n == 0:
					missing = append(missing, fmt.Sprintf("%s: %q returned no data", p.Title, tg.Expr))
				}
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s of scrapes:\n%s\nprometheus log:\n%s", strings.Join(missing, "\n"), promLog.String())
		}
		time.Sleep(time.Second) // a round of every panel's query a second, not testkit's 100: Prometheus scrapes on its own interval
	}
}
