// Package deploy_test keeps the deployment files honest: the example config
// loads with the real loader, the systemd unit keeps its hardening (and
// leaves out what would break wazero or the sandbox), and the Prometheus
// files parse and name metrics the binary exports.
package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/connecta-dev/connecta/internal/config"
)

func TestExampleConfig_LoadsWithTheRealLoader(t *testing.T) {
	creds := t.TempDir()
	for name, v := range map[string]string{"connecta-token": "example-token-0123456789abcdef\n", "tracker-token": "tracker-0123\n",
		"connecta-vault-key": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n"} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load("connecta.example.yaml", config.Resolver{CredentialsDir: creds})
	if err != nil {
		t.Fatalf("the example config is refused:\n%v", err)
	}
	if len(cfg.Auth.Tokens) != 1 || cfg.Auth.Tokens[0].Name != "laptop" {
		t.Errorf("tokens: %+v", cfg.Auth.Tokens)
	}
	var ids []string
	for _, c := range cfg.Connectors {
		ids = append(ids, c.ID)
		if len(c.Missing) != 0 {
			t.Errorf("%s: missing %+v", c.ID, c.Missing)
		}
	}
	if strings.Join(ids, ",") != "demo,everything" {
		t.Errorf("connectors: %v", ids)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	// Every credential the config names is loaded by the unit.
	unit := readFile(t, "connecta.service")
	for _, ref := range regexp.MustCompile(`\$\{credential:([^}]+)\}`).FindAllStringSubmatch(readFile(t, "connecta.example.yaml"), -1) {
		if !strings.Contains(unit, "LoadCredential="+ref[1]+":") {
			t.Errorf("the unit does not LoadCredential=%s", ref[1])
		}
	}
	// Every credential the unit loads is one the README's steps create, and
	// one the example names: a LoadCredential= whose file is missing fails
	// the service's start.
	steps := readmeSteps(t)
	for _, lc := range unitDirectives(t)["LoadCredential"] {
		name, path, _ := strings.Cut(lc, ":")
		if !strings.Contains(steps, "> "+path+"\n") {
			t.Errorf("the unit loads %s from %s, which deploy/README.md's steps never create", name, path)
		}
		if !strings.Contains(readFile(t, "connecta.example.yaml"), "${credential:"+name+"}") {
			t.Errorf("the unit loads %s, which the example config never names", name)
		}
	}
	// Without the credentials the server token refuses to boot.
	if _, err := config.Load("connecta.example.yaml", config.Resolver{}); err == nil ||
		!strings.Contains(err.Error(), "auth.tokens[0].token: cannot resolve ${credential:connecta-token}") {
		t.Errorf("without credentials: %v", err)
	}
}

// readmeSteps is the sh block of deploy/README.md (what steps.sh runs).
func readmeSteps(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(readFile(t, "README.md"))
	if m == nil {
		t.Fatal("deploy/README.md has no sh block")
	}
	return m[1]
}

// TestREADME_StepsCheckAndDoctorTheExample: the steps install the example
// as the configuration, check and doctor it with the credentials directory
// they fill, and install the unit that runs the binary they install.
func TestREADME_StepsCheckAndDoctorTheExample(t *testing.T) {
	steps := readmeSteps(t)
	for _, want := range []string{
		"install -m 0755 bin/connecta /usr/local/bin/connecta\n",
		"install -m 0644 deploy/connecta.example.yaml /etc/connecta/connecta.yaml\n",
		"connecta check --config /etc/connecta/connecta.yaml --credentials-dir /etc/connecta/credentials\n",
		"connecta doctor --config /etc/connecta/connecta.yaml --credentials-dir /etc/connecta/credentials\n",
		"install -m 0644 deploy/connecta.service /etc/systemd/system/connecta.service\n",
		"systemd-analyze verify /etc/systemd/system/connecta.service\n",
	} {
		if !strings.Contains(steps, want) {
			t.Errorf("deploy/README.md's steps lack %q", strings.TrimSpace(want))
		}
	}
	// The stdio connector runs what the steps install, at the version
	// test/everything pins.
	pin := regexp.MustCompile(`"@modelcontextprotocol/server-everything": "([^"]+)"`).FindStringSubmatch(readFile(t, "../test/everything/testdata/package.json"))
	if pin == nil || !strings.Contains(steps, "@modelcontextprotocol/server-everything@"+pin[1]+"\n") {
		t.Errorf("the steps do not install the pinned server-everything (%v)", pin)
	}
	if !strings.Contains(readFile(t, "connecta.example.yaml"), "command: [/usr/local/bin/mcp-server-everything]") {
		t.Error("the example's everything connector does not run the installed server")
	}
	if !strings.Contains(readFile(t, "../.ci/run"), "deploy/steps.sh") {
		t.Error(".ci/run does not run deploy/steps.sh")
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unitDirectives returns the unit's Key=Value lines (Key → values).
func unitDirectives(t *testing.T) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "connecta.service")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("bad unit line %q", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

func TestUnit_Hardening(t *testing.T) {
	d := unitDirectives(t)
	want := map[string]string{
		"Type": "notify", "NotifyAccess": "main", "DynamicUser": "yes", "CacheDirectory": "connecta",
		"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
		"NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes",
		"SystemCallArchitectures": "native", "KillMode": "mixed", "LockPersonality": "yes",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%v, want %q", k, got, v)
		}
	}
	if got := d["ExecReload"]; len(got) != 1 || got[0] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("ExecReload %v, want /bin/kill -HUP $MAINPID (SIGHUP reloads)", got)
	}
	if len(d["WatchdogSec"]) != 1 || len(d["LoadCredential"]) == 0 {
		t.Errorf("WatchdogSec %v LoadCredential %v", d["WatchdogSec"], d["LoadCredential"])
	}
	// wazero's compiler needs W+X mappings.
	if _, set := d["MemoryDenyWriteExecute"]; set {
		t.Error("MemoryDenyWriteExecute breaks wazero's compiler")
	}
	if !strings.Contains(strings.Join(d["SystemCallFilter"], " "), "seccomp") {
		t.Error("SystemCallFilter must allow seccomp(2): each child installs its own filter")
	}
	if strings.HasPrefix(d["ExecStart"][0], "/usr/local/bin/connecta serve --config ") == false {
		t.Errorf("ExecStart %v", d["ExecStart"])
	}
}

// TestUnit_Verify runs systemd-analyze when the machine has it.
func TestUnit_Verify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	unit := strings.ReplaceAll(readFile(t, "connecta.service"), "/usr/local/bin/connecta", "/bin/true")
	p := filepath.Join(dir, "connecta.service")
	if err := os.WriteFile(p, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", p).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// syscallGroups parses `systemd-analyze syscall-filter`.
func syscallGroups(t *testing.T, analyze string) map[string][]string {
	out, err := exec.Command(analyze, "syscall-filter", "--no-pager").Output()
	if err != nil {
		t.Skipf("systemd-analyze syscall-filter: %v", err)
	}
	groups := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch f := strings.TrimSpace(line); {
		case f == "" || strings.HasPrefix(f, "#"):
		case !strings.HasPrefix(line, " ") && strings.HasPrefix(f, "@"):
			cur = f
		case cur != "":
			groups[cur] = append(groups[cur], f)
		}
	}
	return groups
}

func expand(groups map[string][]string, name string, into map[string]bool) {
	if !strings.HasPrefix(name, "@") {
		into[name] = true
		return
	}
	for _, m := range groups[name] {
		expand(groups, m, into)
	}
}

// TestUnit_SyscallFilterToleratesTheSandbox: the unit's filter is inherited
// by every child and stacks under the child's own allow-list, so it must
// allow everything the parent and the child use.
func TestUnit_SyscallFilterToleratesTheSandbox(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	groups := syscallGroups(t, analyze)
	allowed, denied := map[string]bool{}, map[string]bool{}
	for _, line := range unitDirectives(t)["SystemCallFilter"] {
		target := allowed
		if strings.HasPrefix(line, "~") {
			target, line = denied, line[1:]
		}
		for _, name := range strings.Fields(line) {
			expand(groups, name, target)
		}
	}
	need := []string{
		// parent: spawning and supervising children, serving HTTP, sd_notify
		"execve", "clone", "clone3", "pipe2", "socketpair", "wait4", "waitid", "kill", "setpgid", "prctl",
		"accept4", "bind", "listen", "connect", "sendmsg", "recvmsg", "sendto", "getsockopt", "setsockopt",
		"openat", "mmap", "mprotect", "munmap", "madvise", "futex", "tgkill", "rt_sigreturn", "sigaltstack",
		"epoll_pwait", "epoll_ctl", "getrandom", "clock_gettime", "exit_group", "sched_getaffinity", "pidfd_open",
		// child hardening
		"seccomp", "setrlimit", "prlimit64",
	}
	need = append(need, childAllowList(t)...)
	for _, s := range need {
		if !allowed[s] || denied[s] {
			t.Errorf("the unit's SystemCallFilter blocks %s (allowed %v, denied %v)", s, allowed[s], denied[s])
		}
	}
}

// childAllowList reads the sandbox child's seccomp allow-list from its source
// (internal/sandbox/harden.go), so that a syscall added there is checked here too.
func childAllowList(t *testing.T) []string {
	src, err := os.ReadFile(filepath.Join("..", "internal", "sandbox", "harden.go"))
	if err != nil {
		t.Logf("sandbox allow-list not found: %v", err)
		return nil
	}
	block := regexp.MustCompile(`(?s)var allowedSyscalls = \[\]string\{(.*?)\n\}`).FindSubmatch(src)
	if block == nil {
		t.Log("sandbox allow-list not found in internal/sandbox/harden.go")
		return nil
	}
	var names []string
	for _, m := range regexp.MustCompile(`"([a-z0-9_]+)"`).FindAllSubmatch(block[1], -1) {
		names = append(names, string(m[1]))
	}
	return names
}

func TestPrometheus_FilesParseAndNameExportedMetrics(t *testing.T) {
	var scrape struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName     string `yaml:"job_name"`
			MetricsPath string `yaml:"metrics_path"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "prometheus/prometheus.yml")), &scrape); err != nil {
		t.Fatal(err)
	}
	if len(scrape.ScrapeConfigs) != 1 || scrape.ScrapeConfigs[0].JobName != "connecta" || scrape.ScrapeConfigs[0].MetricsPath != "/metrics" {
		t.Errorf("scrape: %+v", scrape)
	}
	for _, f := range scrape.RuleFiles {
		if _, err := os.Stat(filepath.Join("prometheus", f)); err != nil {
			t.Errorf("rule file %s: %v", f, err)
		}
	}

	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, "prometheus/connecta-alerts.yml")))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: incomplete rule", r.Alert)
			}
			for _, m := range regexp.MustCompile(`connecta_[a-z_]+`).FindAllString(r.Expr, -1) {
				if exported != nil && !exported[m] {
					t.Errorf("%s: metric %s is not exported by the binary", r.Alert, m)
				}
			}
		}
	}
	for _, a := range []string{"ConnectaExecutorOverloaded", "ConnectaSandboxChildCrashes", "ConnectaDownstreamUnavailable", "ConnectaDownstreamRateLimited", "ConnectaAdmissionRejections", "ConnectaOAuthRefreshFailing"} {
		if !alerts[a] {
			t.Errorf("missing alert %s", a)
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(p, "check", "rules", "prometheus/connecta-alerts.yml").CombinedOutput(); err != nil {
			t.Errorf("promtool: %v\n%s", err, out)
		}
	}
}

// exportedMetrics collects the metric names declared in the binary's
// sources (Name: "connecta_…"); nil when the sources are not there.
func exportedMetrics(t *testing.T) map[string]bool {
	names := map[string]bool{}
	// Any quoted connecta_ name: a declaration may pass it through a
	// helper (gateway's outcomesByConnector) rather than write Name: itself.
	re := regexp.MustCompile(`"(connecta_[a-z_]+)"`)
	for _, dir := range []string{"../internal/supervisor", "../internal/server", "../internal/gateway", "../internal/gateway/activity", "../internal/contract", "../internal/store", "../internal/oauth"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
		}
	}
	if len(names) == 0 {
		t.Log("no metric declarations found; not checking names")
		return nil
	}
	return names
}

// The Grafana dashboard is valid JSON whose every query names metrics the
// binary exports (cmd/connecta/grafana_test.go runs them against a live
// connecta through a real Prometheus).
func TestGrafana_DashboardNamesExportedMetrics(t *testing.T) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readFile(t, "grafana/connecta.json")), &d); err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	suffix := regexp.MustCompile(`_(bucket|sum|count)$`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range regexp.MustCompile(`connecta_[a-z_]+`).FindAllString(tg.Expr, -1) {
				if exported != nil && !exported[m] && !exported[suffix.ReplaceAllString(m, "")] {
					t.Errorf("%s: metric %s is not exported by the binary", p.Title, m)
				}
			}
		}
	}
}
