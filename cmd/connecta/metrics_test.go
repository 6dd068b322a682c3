package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/test/testkit"
)

// seriesRef is one series an alert rule selects: a metric name and, when
// the rule narrows it, one label value it must be able to match.
type seriesRef struct{ alert, name, label, value string }

// alertSeries reads every rule file under deploy/prometheus and returns the
// connecta_* series their expressions select: each `label="v"` and each
// alternative of `label=~"a|b"` is one series that must exist.
func alertSeries(t *testing.T) []seriesRef {
	t.Helper()
	files, _ := filepath.Glob("../../deploy/prometheus/*.yml")
	selector := regexp.MustCompile(`(connecta_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	matcher := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|=)\s*"([^"]*)"`)
	literal := regexp.MustCompile(`^[a-zA-Z0-9_]+$`)
	var refs []seriesRef
	for _, f := range files {
		var doc struct {
			Groups []struct {
				Rules []struct {
					Alert, Record, Expr string
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				for _, m := range selector.FindAllStringSubmatch(r.Expr, -1) {
					narrowed := false
					for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
						values := []string{lm[3]}
						if lm[2] == "=~" {
							values = strings.Split(lm[3], "|")
						}
						for _, v := range values {
							if literal.MatchString(v) {
								refs = append(refs, seriesRef{r.Alert, m[1], lm[1], v})
								narrowed = true
							}
						}
					}
					if !narrowed {
						refs = append(refs, seriesRef{alert: r.Alert, name: m[1]})
					}
				}
			}
		}
	}
	if len(refs) == 0 {
		t.Fatal("no alert rules found under deploy/prometheus")
	}
	return refs
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAlertSeriesExistOnAFreshServer: a server that has served nothing yet
// already exposes every series the shipped alert rules read (at zero), so
// each alert can fire from the first event. With metricsListen set,
// /metrics is served there and only there.
func TestAlertSeriesExistOnAFreshServer(t *testing.T) {
	listen, metrics := testkit.FreeAddr(t), testkit.FreeAddr(t)
	yaml := "listen: " + listen + "\nmetricsListen: " + metrics + "\npublicUrl: http://" + listen + "\n" +
		"executor: {spares: 0}\n" +
		"connectors:\n  - id: demo\n    builtin: demo\n  - id: remote\n    url: http://127.0.0.1:9/mcp\n" +
		"  - id: docs\n    url: http://127.0.0.1:9/docs/mcp\n    oauth: {}\n"
	cfg, err := config.Parse("fresh.yaml", []byte(yaml), resolver(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, serveOptions{log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	testkit.Eventually(t, 30*time.Second, func() bool {
		code, _ := httpGet(t, "http://"+listen+"/health")
		return code == http.StatusOK
	}, "server did not come up")
	if code, _ := httpGet(t, "http://"+listen+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on listen: %d, want 404 when metricsListen is set", code)
	}
	code, body := httpGet(t, "http://"+metrics+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics on metricsListen: %d", code)
	}
	if c, _ := httpGet(t, "http://"+metrics+"/health"); c != http.StatusNotFound {
		t.Errorf("/health on metricsListen: %d, want 404 (metrics only)", c)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	for _, ref := range alertSeries(t) {
		found := false
		for _, l := range lines {
			if !strings.HasPrefix(l, ref.name+"{") && !strings.HasPrefix(l, ref.name+" ") {
				continue
			}
			if ref.label == "" || strings.Contains(l, ref.label+`="`+ref.value+`"`) {
				found = true
				break
			}
		}
		if !found {
			sel := ref.name
			if ref.label != "" {
				sel += "{" + ref.label + `="` + ref.value + `"}`
			}
			t.Errorf("alert %s reads %s, which a fresh server does not expose", ref.alert, sel)
		}
	}
}
