package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden")

// Secret values the test resolver hands out; none may ever appear in a
// message, a warning or a rendering of a Config.
var testSecrets = map[string]string{
	"CONNECTA_TOKEN":      "env-token-0123456789abcdef",
	"CONNECTA_TOKEN_COPY": "env-token-0123456789abcdef",
	"SHORT_TOKEN":         "short-tok",
	"TRACKER_KEY":         "tracker-key-9876543210",
	"EMPTY":               "",
	"VAULT_KEY":           "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", // 32 bytes of 1
	"CONNECTA_TOKEN_B":    "env-token-b-0123456789abcdef",
	"CONNECTA_TOKEN_C":    "env-token-c-0123456789abcdef",
	"CONNECTA_TOKEN_D":    "env-token-d-0123456789abcdef",
	"CONNECTA_TOKEN_E":    "env-token-e-0123456789abcdef",
	"CONNECTA_TOKEN_F":    "env-token-f-0123456789abcdef",
	"CONNECTA_TOKEN_G":    "env-token-g-0123456789abcdef",
}

func testResolver() Resolver {
	return Resolver{
		LookupEnv: func(name string) (string, bool) {
			v, ok := testSecrets[name]
			return v, ok
		},
		CredentialsDir: filepath.Join("testdata", "creds"),
		ReadFile:       os.ReadFile,
	}
}

func allSecretValues(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, v := range testSecrets {
		if v != "" {
			out = append(out, v)
		}
	}
	for _, p := range []string{"testdata/creds/connecta-token", "testdata/creds/tracker-token", "testdata/token.txt"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimRight(string(b), "\r\n"))
	}
	return out
}

func assertNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range allSecretValues(t) {
		if strings.Contains(text, s) {
			t.Errorf("%s reveals a secret value:\n%s", what, text)
		}
	}
}

// TestRefusals_Golden: every bad config in testdata/bad is refused with a
// typed error naming file, line and field; the text is byte-exact.
func TestRefusals_Golden(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad configs: %v", err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(path, testResolver())
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("a refusal returned a config too")
			}
			var first *Error
			if !errors.As(err, &first) {
				t.Fatalf("error %T is not a *config.Error", err)
			}
			all := []*Error{first}
			var list ErrorList
			if errors.As(err, &list) {
				all = list
			}
			for _, e := range all {
				if e.File != path {
					t.Errorf("error names file %q, want %q", e.File, path)
				}
				if e.Line <= 0 {
					t.Errorf("error has no line: %v", e)
				}
			}
			got := err.Error() + "\n"
			assertNoSecrets(t, "refusal", got)
			testkit.Golden(t, strings.TrimSuffix(path, ".yaml")+".golden", []byte(got), *update)
		})
	}
}

func TestErrorText_FileLineField(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{File: "connecta.yaml", Line: 12, Field: "connectors[1].id", Message: `"Bad Id" must match ^[a-z0-9][a-z0-9_-]{0,63}$`},
			`connecta.yaml:12: connectors[1].id: "Bad Id" must match ^[a-z0-9][a-z0-9_-]{0,63}$`},
		{Error{File: "connecta.yaml", Message: "cannot read the configuration: no such file or directory"},
			"connecta.yaml: cannot read the configuration: no such file or directory"},
		{Error{Field: "--listen", Message: "bad"}, "--listen: bad"},
		{Error{File: "c.yaml", Line: 3, Message: "invalid YAML: x"}, "c.yaml:3: invalid YAML: x"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestLoad_MissingFileIsTypedError(t *testing.T) {
	_, err := Load("testdata/none.yaml", testResolver())
	var e *Error
	if !errors.As(err, &e) || e.File != "testdata/none.yaml" || !strings.Contains(e.Message, "no such file") {
		t.Fatalf("got %v", err)
	}
}

// TestDefaults_AsPinned: the defaults are exactly docs/DECISIONS.md's.
func TestDefaults_AsPinned(t *testing.T) {
	cfg, err := Parse("empty.yaml", nil, testResolver())
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File:   "empty.yaml",
		Listen: "127.0.0.1:8787",
		Requests: Requests{MaxActive: 16, MaxQueue: 32, QueueTimeout: 5 * time.Second,
			RetryAfter: time.Second, MaxBodyBytes: 10485760, BodyTimeout: 2 * time.Second},
		Executor: Executor{Concurrency: 2, MaxQueueSize: 32, QueueTimeout: 5 * time.Second, Spares: 2,
			MaxSpares: 8, SpareIdle: 30 * time.Second, Timeout: 30 * time.Second, CPUTime: 250 * time.Millisecond, MemoryLimitBytes: 67108864,
			MaxStackSizeBytes: 1048576},
		Execute:   Execute{MaxHostCalls: 20, HostCallTimeout: 15 * time.Second, MaxEmittedBytes: 4000000, MaxEmittedBlocks: 32},
		Catalog:   Catalog{TTL: 300 * time.Second, Stale: time.Hour, Pin: "warn", ApproveFirst: true},
		Results:   Results{MaxInlineBytes: 50000, StashTTL: 900 * time.Second, StashMaxBytes: 67108864},
		Activity:  Activity{MaxEvents: 100000, MaxAge: 2592000 * time.Second},
		Store:     Store{URL: NewSecret("memory:")},
		Runtime:   Runtime{GCPercent: 400},
		Telemetry: Telemetry{SampleRatio: 1, ServiceName: "connecta"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults\n got %+v\nwant %+v", cfg, want)
	}
	// Spelling every default out changes nothing.
	explicit := `
listen: 127.0.0.1:8787
publicUrl: ""
requests: {maxActive: 16, maxQueue: 32, queueTimeoutMs: 5000, retryAfterMs: 1000, maxBodyBytes: 10485760, bodyTimeoutMs: 2000}
executor:
  concurrency: 2
  maxQueueSize: 32
  queueTimeoutMs: 5000
  spares: 2
  maxSpares: 8
  spareIdleMs: 30000
  timeoutMs: 30000
  cpuTimeMs: 250
  memoryLimitBytes: 67108864
  maxStackSizeBytes: 1048576
  cacheDir: ""
execute: {maxHostCalls: 20, hostCallTimeoutMs: 15000, maxEmittedBytes: 4000000, maxEmittedBlocks: 32}
catalog: {ttlMs: 300000, staleMs: 3600000, pin: warn, approveFirst: true}
results: {maxInlineBytes: 50000, stashTtlMs: 900000, stashMaxBytes: 67108864}
activity: {maxEvents: 100000, maxAgeMs: 2592000000, file: ""}
connectors: []
`
	cfg2, err := Parse("empty.yaml", []byte(explicit), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	cfg2.ListenLine = 0
	if !reflect.DeepEqual(cfg2, want) {
		t.Errorf("explicit defaults\n got %+v\nwant %+v", cfg2, want)
	}
}

// TestRuntime_KeysRecordedAsSet: a runtime key in the file is applied over
// GOGC / GOMEMLIMIT, so the decoder records that it was given; 0 is a real
// value of memoryLimitBytes (no limit), not "absent".
func TestRuntime_KeysRecordedAsSet(t *testing.T) {
	cfg, err := Parse("r.yaml", []byte("runtime: {gcPercent: 200, memoryLimitBytes: 0}\n"), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Runtime{GCPercent: 200, GCPercentSet: true, MemoryLimitSet: true}); cfg.Runtime != want {
		t.Errorf("runtime %+v, want %+v", cfg.Runtime, want)
	}
	for _, bad := range []string{"runtime: {gcPercent: 0}\n", "runtime: {memoryLimitBytes: -1}\n", "runtime: {gogc: 100}\n"} {
		if _, err := Parse("r.yaml", []byte(bad), testResolver()); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
}

// TestEmbeddedDefault_DemoOnLoopback: no --config means 127.0.0.1:8787 and
// one builtin connector "demo".
func TestEmbeddedDefault_DemoOnLoopback(t *testing.T) {
	cfg, err := Default(Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8787" || len(cfg.Auth.Tokens) != 0 {
		t.Errorf("listen %q tokens %d", cfg.Listen, len(cfg.Auth.Tokens))
	}
	if len(cfg.Connectors) != 1 {
		t.Fatalf("connectors: %+v", cfg.Connectors)
	}
	c := cfg.Connectors[0]
	if c.ID != "demo" || c.Builtin != BuiltinDemo || c.URL != "" || c.Command != nil || c.CallAdmission != DefaultCallAdmission() {
		t.Errorf("demo connector: %+v", c)
	}
	if len(cfg.Warnings()) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings())
	}
	if !bytes.Equal(DefaultYAML(), defaultYAML) {
		t.Error("DefaultYAML differs")
	}
}

func TestFullConfig_Decoded(t *testing.T) {
	src := `
listen: 0.0.0.0:9000
publicUrl: https://connecta.example.com
auth:
  tokens:
    - name: laptop
      token: ${credential:connecta-token}
    - name: ci
      token: ${env:CONNECTA_TOKEN}
    - name: file
      token: ${file:token.txt}
executor: {cacheDir: cache, concurrency: 4}
activity: {file: /var/log/connecta/activity.jsonl, maxEvents: 10}
store: {url: "sqlite:state.db"}
vault: {keys: [{id: k1, key: "${env:VAULT_KEY}"}], active: k1}
connectors:
  - id: tracker
    title: "  Issue
       tracker  "
    description: "  Tickets.  "
    url: https://mcp.example.com/mcp
    headers:
      Authorization: "Bearer ${credential:tracker-token}"
      X-Key: "k=${env:TRACKER_KEY};v=$${literal}"
      X-Version: "2"
    callAdmission: {maxConcurrency: 8}
    readOnly: [list_issues]
    approvalRequired: [close_issue]
    guideFile: guide.md
  - id: local_fs-2
    command: [node, server.js, --root, /srv]
    env: {PORT: 8080, API_KEY: "${env:TRACKER_KEY}", DEBUG: "", FLAG: true}
    guide: |
      # Local files
`
	cfg, err := Parse("testdata/connecta.yaml", []byte(src), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "0.0.0.0:9000" || cfg.ListenLine != 2 || cfg.PublicURL != "https://connecta.example.com" {
		t.Errorf("listen: %q %d %q", cfg.Listen, cfg.ListenLine, cfg.PublicURL)
	}
	toks := cfg.Auth.Tokens
	if len(toks) != 3 || toks[0].Name != "laptop" || toks[0].Token.Reveal() != "cred-token-0123456789abcdef" ||
		toks[0].Reference != "${credential:connecta-token}" || toks[1].Token.Reveal() != testSecrets["CONNECTA_TOKEN"] ||
		toks[2].Token.Reveal() != "file-token-0123456789abcdef" {
		t.Errorf("tokens: %#v", toks)
	}
	if cfg.Executor.CacheDir != filepath.Join("testdata", "cache") || cfg.Executor.Concurrency != 4 {
		t.Errorf("executor: %+v", cfg.Executor)
	}
	if cfg.Activity.File != "/var/log/connecta/activity.jsonl" || cfg.Activity.MaxEvents != 10 {
		t.Errorf("activity: %+v", cfg.Activity)
	}
	if !cfg.Store.Given || cfg.Store.URL.Reveal() != "sqlite:"+filepath.Join("testdata", "state.db") {
		t.Errorf("store: %q (relative sqlite paths are anchored at the file)", cfg.Store.URL.Reveal())
	}
	if len(cfg.Vault.Keys) != 1 || cfg.Vault.Active != "k1" || cfg.Vault.Keys[0].Key.Reveal() != strings.Repeat("\x01", 32) {
		t.Errorf("vault: %+v", cfg.Vault)
	}
	tr := cfg.Connector("tracker")
	if tr == nil {
		t.Fatal("no tracker")
	}
	if tr.Title != "Issue tracker" || tr.Description != "Tickets." || tr.CallAdmission.MaxConcurrency != 8 || tr.CallAdmission.MaxQueueSize != DefaultCallAdmissionMaxQueueSize || tr.CallAdmission.QueueTimeout != DefaultCallAdmissionQueueTimeout {
		t.Errorf("tracker: %q %q %d", tr.Title, tr.Description, tr.CallAdmission.MaxConcurrency)
	}
	if !strings.HasPrefix(tr.Guide, "# Tracker guide") || tr.GuideFile != filepath.Join("testdata", "guide.md") {
		t.Errorf("guide: %q %q", tr.Guide, tr.GuideFile)
	}
	hdr := map[string]string{}
	for _, h := range tr.Headers {
		hdr[h.Name] = h.Value.Reveal()
	}
	wantHdr := map[string]string{
		"Authorization": "Bearer tracker-secret-value",
		"X-Key":         "k=tracker-key-9876543210;v=${literal}",
		"X-Version":     "2",
	}
	if !reflect.DeepEqual(hdr, wantHdr) || tr.Headers[0].Name != "Authorization" {
		t.Errorf("headers: %v", hdr)
	}
	if !reflect.DeepEqual(tr.ReadOnly, []string{"list_issues"}) || !reflect.DeepEqual(tr.ApprovalRequired, []string{"close_issue"}) {
		t.Errorf("classification: %v %v", tr.ReadOnly, tr.ApprovalRequired)
	}
	lf := cfg.Connector("local_fs-2")
	if lf == nil || !reflect.DeepEqual(lf.Command, []string{"node", "server.js", "--root", "/srv"}) || lf.Guide != "# Local files" {
		t.Fatalf("local: %+v", lf)
	}
	var env []string
	for _, e := range lf.Env {
		env = append(env, e.Name+"="+e.Value.Reveal())
	}
	if !reflect.DeepEqual(env, []string{"PORT=8080", "API_KEY=tracker-key-9876543210", "DEBUG=", "FLAG=true"}) {
		t.Errorf("env: %v", env)
	}
	if len(cfg.Warnings()) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings())
	}
	// A Config in any rendering reveals nothing.
	js, _ := json.Marshal(cfg)
	for _, text := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", *cfg), fmt.Sprintf("%#v", *cfg), string(js)} {
		assertNoSecrets(t, "config rendering", text)
	}
}

// TestConnectorCredential_UnresolvedStillLoads: an unresolvable reference in
// a connector's headers/env does not refuse the file; the connector records
// what is missing and check/doctor warn.
func TestConnectorCredential_UnresolvedStillLoads(t *testing.T) {
	src := `connectors:
  - id: tracker
    url: https://mcp.example.com/mcp
    headers:
      Authorization: "Bearer ${credential:missing-token}"
      X-Ok: fine
  - id: local
    command: [srv]
    env:
      KEY: "${env:NOT_SET}"
      EMPTY: "${env:EMPTY}"
      OK: "${env:TRACKER_KEY}"
  - id: other
    url: https://other.example.com/mcp
`
	cfg, err := Parse("connecta.yaml", []byte(src), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Connector("tracker")
	if len(tr.Missing) != 1 {
		t.Fatalf("missing: %+v", tr.Missing)
	}
	m := tr.Missing[0]
	if m.Reference != "${credential:missing-token}" || m.Field != "connectors[0].headers.Authorization" || m.Line != 5 ||
		!strings.Contains(m.Reason, "missing-token") {
		t.Errorf("missing: %+v", m)
	}
	if len(tr.Headers) != 1 || tr.Headers[0].Name != "X-Ok" {
		t.Errorf("unresolved header kept: %v", tr.Headers)
	}
	lc := cfg.Connector("local")
	if len(lc.Missing) != 2 || lc.Missing[0].Reference != "${env:NOT_SET}" || lc.Missing[1].Reason != "environment variable EMPTY is empty" {
		t.Errorf("local missing: %+v", lc.Missing)
	}
	if len(lc.Env) != 1 || lc.Env[0].Name != "OK" {
		t.Errorf("env: %v", lc.Env)
	}
	if len(cfg.Connector("other").Missing) != 0 {
		t.Error("other connector affected")
	}
	var ws []string
	for _, w := range cfg.Warnings() {
		ws = append(ws, w.String())
	}
	want := []string{
		`connecta.yaml:5: connectors[0].headers.Authorization: ${credential:missing-token} is unresolved (cannot read testdata/creds/missing-token: no such file or directory); connector "tracker" loads, but its calls fail auth_required until it is provided`,
		`connecta.yaml:10: connectors[1].env.KEY: ${env:NOT_SET} is unresolved (environment variable NOT_SET is not set); connector "local" loads, but its calls fail auth_required until it is provided`,
		`connecta.yaml:11: connectors[1].env.EMPTY: ${env:EMPTY} is unresolved (environment variable EMPTY is empty); connector "local" loads, but its calls fail auth_required until it is provided`,
	}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("warnings\n got %q\nwant %q", ws, want)
	}
}

func TestCredentialWithoutCredentialsDirectory(t *testing.T) {
	src := "connectors:\n  - {id: t, url: 'https://x.example/mcp', headers: {Authorization: 'Bearer ${credential:t}'}}\n"
	cfg, err := Parse("c.yaml", []byte(src), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Connectors[0].Missing[0].Reason; !strings.Contains(r, "CREDENTIALS_DIRECTORY is not set") {
		t.Errorf("reason %q", r)
	}
}

// TestResolver_ReadsNoProcessEnvironment: the package never consults the
// process environment; only the Resolver's lookup.
func TestResolver_ReadsNoProcessEnvironment(t *testing.T) {
	t.Setenv("CONNECTA_PROCESS_ONLY", "process-env-token-0123456789")
	src := "auth:\n  tokens:\n    - {name: a, token: '${env:CONNECTA_PROCESS_ONLY}'}\n"
	_, err := Parse("c.yaml", []byte(src), Resolver{})
	if err == nil || !strings.Contains(err.Error(), "environment variable CONNECTA_PROCESS_ONLY is not set") {
		t.Fatalf("got %v", err)
	}
}

func TestTemplate_Syntax(t *testing.T) {
	env := Resolver{LookupEnv: func(n string) (string, bool) { return "<" + n + ">", true }}
	cases := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"Bearer ${env:A}", "Bearer <A>", ""},
		{"${env:A}${env:B}", "<A><B>", ""},
		{"$${env:A}", "${env:A}", ""},
		{"$ {x} $x }", "$ {x} $x }", ""},
		{"${env:A", "", "unterminated"},
		{"${vault:x}", "", "unknown kind"},
		{"${x}", "", "must be"},
		{"${env:}", "", "not an environment variable name"},
		{"${file:}", "", "empty path"},
		{"${credential:a/b}", "", "not a credential name"},
		{"${credential:..}", "", "not a credential name"},
	}
	for _, c := range cases {
		segs, err := parseTemplate(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: got %v, want error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got, miss := env.resolve(segs, ""); miss != nil || got != c.want {
			t.Errorf("%q: got %q %v", c.in, got, miss)
		}
	}
}

// TestSecret_NeverRendered: String, Format (every verb), JSON, text, slog.
func TestSecret_NeverRendered(t *testing.T) {
	s := NewSecret("s3cr3t-value")
	type holder struct {
		S   Secret
		Ptr *Secret
	}
	h := holder{S: s, Ptr: &s}
	var texts []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s"} {
		texts = append(texts, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, []Secret{s}))
	}
	texts = append(texts, s.String(), fmt.Sprint(s), fmt.Sprintln(&s))
	js, _ := json.Marshal(h)
	texts = append(texts, string(js))
	txt, _ := s.MarshalText()
	texts = append(texts, string(txt))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "secret", s, "holder", h)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s, "ptr", &s)
	texts = append(texts, buf.String())
	for _, text := range texts {
		if strings.Contains(text, "s3cr3t") || strings.Contains(text, "73336372") {
			t.Errorf("revealed: %s", text)
		}
	}
	if s.Reveal() != "s3cr3t-value" || s.IsZero() || !(Secret{}).IsZero() {
		t.Error("Reveal/IsZero")
	}
}

func TestWarnings_WeakTokenAndCleartext(t *testing.T) {
	src := `listen: 0.0.0.0:8787
auth:
  tokens: [{name: a, token: "${env:SHORT_TOKEN}"}]
connectors:
  - id: plain
    url: http://10.0.0.9:9000/mcp
    headers: {Authorization: "Bearer ${env:TRACKER_KEY}"}
  - id: loop
    url: http://127.0.0.1:9000/mcp
    headers: {Authorization: "Bearer ${env:TRACKER_KEY}"}
`
	cfg, err := Parse("c.yaml", []byte(src), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	var ws []string
	for _, w := range cfg.Warnings() {
		ws = append(ws, w.String())
	}
	want := []string{
		"c.yaml:3: auth.tokens[0].token: the token is shorter than 16 bytes; use a long random value",
		"c.yaml:6: connectors[0].url: credentials are sent in cleartext over http:// to a non-loopback host",
	}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("got %q", ws)
	}
}

func TestSetListen_OverrideRechecksLoopback(t *testing.T) {
	cfg, _ := Default(Resolver{})
	if err := cfg.SetListen("127.0.0.1:0"); err != nil || cfg.Listen != "127.0.0.1:0" {
		t.Fatalf("%v %q", err, cfg.Listen)
	}
	for _, ok := range []string{"[::1]:9000", "localhost:1"} {
		if err := cfg.SetListen(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err := cfg.SetListen("0.0.0.0:8787")
	var e *Error
	if !errors.As(err, &e) || e.Field != "--listen" || !strings.Contains(e.Message, "not a loopback address") {
		t.Errorf("got %v", err)
	}
	if err := cfg.SetListen("nonsense"); err == nil {
		t.Error("accepted nonsense")
	}
	withTok, err := Parse("c.yaml", []byte("auth: {tokens: [{name: a, token: '${env:CONNECTA_TOKEN}'}]}\n"), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if err := withTok.SetListen("0.0.0.0:8787"); err != nil {
		t.Error(err)
	}
}

func TestConnectorID_MatchesPinnedPattern(t *testing.T) {
	re := regexp.MustCompile(ConnectorIDPattern)
	for _, id := range []string{"a", "0", "demo", "a-b_c", "a" + strings.Repeat("b", 63), "a" + strings.Repeat("b", 64),
		"", "-a", "_a", "A", "a b", "a.b", "é", "a\n", "tracker-2", "9lives"} {
		if got, want := ValidConnectorID(id), re.MatchString(id); got != want {
			t.Errorf("%q: %v, pattern says %v", id, got, want)
		}
	}
}

func TestLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.1.2.3:1": true, "[::1]:1": true, "localhost:1": true, "LOCALHOST:1": true,
		"0.0.0.0:1": false, ":1": false, "[::]:1": false, "10.0.0.1:1": false, "example.com:1": false,
	} {
		if got := isLoopbackListen(addr); got != want {
			t.Errorf("%s: %v", addr, got)
		}
	}
}

// FuzzParse: no input panics; a refusal is always typed and positioned
// within the file; an acceptance satisfies the invariants.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/bad/*.yaml")
	seeds = append(seeds, "../../deploy/connecta.example.yaml")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(defaultYAML)
	f.Add([]byte("connectors: [{id: a, url: 'https://x/mcp', headers: {A: '${env:CONNECTA_TOKEN}'}}]"))
	r := testResolver()
	r.ReadFile = func(string) ([]byte, error) { return nil, os.ErrNotExist }
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.yaml", data, r)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if cfg != nil {
				t.Fatal("config with error")
			}
			// YAML breaks lines at \n, \r and \r\n.
			lines := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + 2
			if e.Line < 0 || e.Line > lines {
				t.Fatalf("line %d outside the file (%d lines): %v", e.Line, lines, err)
			}
			return
		}
		ids := map[string]bool{}
		for _, c := range cfg.Connectors {
			if !ValidConnectorID(c.ID) || !regexp.MustCompile(ConnectorIDPattern).MatchString(c.ID) || ids[c.ID] {
				t.Fatalf("bad or duplicate id %q accepted", c.ID)
			}
			ids[c.ID] = true
			n := 0
			for _, set := range []bool{c.URL != "", len(c.Command) > 0, c.Builtin != ""} {
				if set {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("connector %q has %d kinds", c.ID, n)
			}
		}
		if len(cfg.Auth.Tokens) == 0 && !isLoopbackListen(cfg.Listen) {
			t.Fatalf("non-loopback %q accepted without tokens", cfg.Listen)
		}
	})
}

// FuzzTemplate: the reference parser never panics; text without "${"
// resolves to itself.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"Bearer ${credential:x}", "$${env:A}", "${env:A", "${", "$$", "${file:/a}${env:B}c", "plain"} {
		f.Add(s)
	}
	r := Resolver{LookupEnv: func(string) (string, bool) { return "v", true }, ReadFile: func(string) ([]byte, error) { return []byte("f"), nil }, CredentialsDir: "/c"}
	f.Fuzz(func(t *testing.T, s string) {
		segs, err := parseTemplate(s)
		if err != nil {
			return
		}
		got, missing := r.resolve(segs, "")
		if missing != nil {
			t.Fatalf("%q: %v", s, missing)
		}
		if !strings.Contains(s, "${") && got != s {
			t.Fatalf("%q resolved to %q", s, got)
		}
	})
}

func TestFileBounds_ReadNoFurther(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), MaxConfigBytes+10), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Resolver{{}, {ReadFile: os.ReadFile}} {
		if _, err := Load(big, r); err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
			t.Errorf("big config: %v", err)
		}
	}
	src := "auth: {tokens: [{name: a, token: '${file:big}'}]}\nconnectors: [{id: a, command: [x], guideFile: big}]\n"
	_, err := Parse(filepath.Join(dir, "c.yaml"), []byte(src), Resolver{})
	if err == nil || !strings.Contains(err.Error(), "cannot read "+big+": file too large: more than 65536 bytes") ||
		!strings.Contains(err.Error(), "guideFile: cannot read "+big+": file too large: more than 262144 bytes") {
		t.Errorf("got %v", err)
	}
}

// TestExecutorSpares: spares is the minimum (0 = none), maxSpares bounds the
// growth toward demand and may not be below it; raising only spares lifts
// the default maximum with it.
func TestExecutorSpares(t *testing.T) {
	for _, tc := range []struct {
		yaml          string
		spares, max   int
		idle          time.Duration
		wantErrSubstr string
	}{
		{yaml: "executor: {spares: 0}", spares: 0, max: 8, idle: 30 * time.Second},
		{yaml: "executor: {spares: 0, maxSpares: 0}", spares: 0, max: 0, idle: 30 * time.Second},
		{yaml: "executor: {spares: 12}", spares: 12, max: 12, idle: 30 * time.Second},
		{yaml: "executor: {spares: 1, maxSpares: 4, spareIdleMs: 500}", spares: 1, max: 4, idle: 500 * time.Millisecond},
		{yaml: "executor: {spares: 4, maxSpares: 2}", wantErrSubstr: "executor.maxSpares: 2 is below executor.spares (4)"},
		{yaml: "executor: {spareIdleMs: 0}", wantErrSubstr: "executor.spareIdleMs: 0 is out of range"},
	} {
		cfg, err := Parse("spares.yaml", []byte(tc.yaml), testResolver())
		if tc.wantErrSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstr) {
				t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.wantErrSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if x := cfg.Executor; x.Spares != tc.spares || x.MaxSpares != tc.max || x.SpareIdle != tc.idle {
			t.Errorf("%s: spares %d, maxSpares %d, spareIdle %v", tc.yaml, x.Spares, x.MaxSpares, x.SpareIdle)
		}
	}
}

func TestStoreAndVault_Refusals(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`store: {url: "redis://x"}`, "store.url: unknown scheme"},
		{`store: {url: "memory:x"}`, "store.url: unknown scheme"},
		{`store: {url: "sqlite:"}`, "sqlite: needs a file path"},
		{`store: {}`, "store.url: is required"},
		{`store: {url: "${env:NOPE}"}`, "store.url: cannot resolve ${env:NOPE}"},
		{`activity: {ring: 1000}`, "activity.ring: was replaced by activity.maxEvents"},
		{`vault: {keys: [{id: k1, key: "c2hvcnQ="}], active: k1}`, "vault.keys[0].key: must be 32 bytes"},
		{`vault: {keys: [{id: k1, key: "${env:VAULT_KEY}"}], active: k2}`, `vault.active: "k2" is not the id`},
		{`vault: {keys: [{id: k1, key: "${env:VAULT_KEY}"}, {id: k1, key: "${env:VAULT_KEY}"}], active: k1}`, `vault.keys[1].id: "k1" appears twice`},
		{`vault: {active: k1}`, "vault.keys: is required"},
	} {
		_, err := Parse("c.yaml", []byte(tc.src), testResolver())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.src, err, tc.want)
		}
	}
	cfg, err := Parse("c.yaml", []byte(`store: {url: "postgres://u:${env:TRACKER_KEY}@db/connecta"}`), testResolver())
	if err != nil || cfg.Store.URL.Reveal() != "postgres://u:tracker-key-9876543210@db/connecta" {
		t.Fatalf("secret reference in store.url: %v", err)
	}
	cfg, err = Parse("c.yaml", []byte(`listen: 127.0.0.1:1`), testResolver())
	if err != nil || cfg.Store.Given || cfg.Store.URL.Reveal() != "memory:" {
		t.Fatalf("no store: given %v, url %q, %v", cfg.Store.Given, cfg.Store.URL.Reveal(), err)
	}
	def, err := Default(testResolver())
	if err != nil || !def.Store.Given {
		t.Fatalf("the embedded default names its store (so serve does not warn): %v", err)
	}
}

// A connector's `oauth` and a token's `operator` decode as written.
func TestOAuthAndOperator_Decoded(t *testing.T) {
	cfg, err := Parse("oauth.yaml", []byte(`publicUrl: https://connecta.example.com
auth:
  tokens:
    - {name: ops, token: "${env:CONNECTA_TOKEN}", operator: true}
connectors:
  - id: docs
    url: https://mcp.docs.example.com/mcp
    oauth: {}
  - id: tracker
    url: https://mcp.tracker.example.com/mcp
    oauth: {clientId: connecta, clientSecret: "${env:TRACKER_KEY}", scopes: [read, write]}
`), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Auth.Tokens[0].Operator {
		t.Error("operator: true not decoded")
	}
	if o := cfg.Connector("docs").OAuth; o == nil || o.ClientID != "" || len(o.Scopes) != 0 {
		t.Errorf("oauth: {} decoded as %+v", o)
	}
	o := cfg.Connector("tracker").OAuth
	if o == nil || o.ClientID != "connecta" || o.ClientSecret.Reveal() != testSecrets["TRACKER_KEY"] || strings.Join(o.Scopes, " ") != "read write" {
		t.Errorf("oauth decoded as %+v", o)
	}
}
