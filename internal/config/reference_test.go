package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// docs/CONFIG.md is the configuration reference: it must name exactly the
// keys the decoder accepts, and state each default as this package applies
// it. The keys are read from the decoder's own source, so a key added there
// without a line in the reference fails here.
func TestReference_DocsMatchTheDecoder(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	top, conn, adm := referenceTables(t, string(doc))

	accepted := decoderKeys(t)
	for _, k := range topKeys {
		if k == "connectors" {
			accepted[k] = true
		}
	}
	for k := range accepted {
		if _, ok := top[k]; !ok {
			t.Errorf("docs/CONFIG.md does not document %s", k)
		}
	}
	for k := range top {
		if !accepted[k] {
			t.Errorf("docs/CONFIG.md documents %s, which the decoder does not accept", k)
		}
	}
	for _, k := range connectorKeys {
		if _, ok := conn[k]; !ok {
			t.Errorf("docs/CONFIG.md does not document connectors[].%s", k)
		}
	}
	if len(conn) != len(connectorKeys) {
		t.Errorf("docs/CONFIG.md documents %d connector keys, the decoder accepts %d", len(conn), len(connectorKeys))
	}

	cfg, err := Parse("reference.yaml", []byte("connectors: []\n"), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	ms := func(d interface{ Milliseconds() int64 }) string { return fmt.Sprint(d.Milliseconds()) }
	for key, want := range map[string]string{
		"listen":                     cfg.Listen,
		"requests.maxActive":         fmt.Sprint(cfg.Requests.MaxActive),
		"requests.maxQueue":          fmt.Sprint(cfg.Requests.MaxQueue),
		"requests.queueTimeoutMs":    ms(cfg.Requests.QueueTimeout),
		"requests.retryAfterMs":      ms(cfg.Requests.RetryAfter),
		"requests.maxBodyBytes":      fmt.Sprint(cfg.Requests.MaxBodyBytes),
		"requests.bodyTimeoutMs":     ms(cfg.Requests.BodyTimeout),
		"executor.concurrency":       fmt.Sprint(cfg.Executor.Concurrency),
		"executor.maxQueueSize":      fmt.Sprint(cfg.Executor.MaxQueueSize),
		"executor.queueTimeoutMs":    ms(cfg.Executor.QueueTimeout),
		"executor.spares":            fmt.Sprint(cfg.Executor.Spares),
		"executor.maxSpares":         fmt.Sprint(cfg.Executor.MaxSpares),
		"executor.spareIdleMs":       ms(cfg.Executor.SpareIdle),
		"executor.timeoutMs":         ms(cfg.Executor.Timeout),
		"executor.cpuTimeMs":         ms(cfg.Executor.CPUTime),
		"executor.memoryLimitBytes":  fmt.Sprint(cfg.Executor.MemoryLimitBytes),
		"executor.maxStackSizeBytes": fmt.Sprint(cfg.Executor.MaxStackSizeBytes),
		"execute.maxHostCalls":       fmt.Sprint(cfg.Execute.MaxHostCalls),
		"execute.hostCallTimeoutMs":  ms(cfg.Execute.HostCallTimeout),
		"execute.maxEmittedBytes":    fmt.Sprint(cfg.Execute.MaxEmittedBytes),
		"execute.maxEmittedBlocks":   fmt.Sprint(cfg.Execute.MaxEmittedBlocks),
		"catalog.ttlMs":              ms(cfg.Catalog.TTL),
		"catalog.staleMs":            ms(cfg.Catalog.Stale),
		"catalog.pin":                cfg.Catalog.Pin,
		"catalog.approveFirst":       fmt.Sprint(cfg.Catalog.ApproveFirst),
		"results.maxInlineBytes":     fmt.Sprint(cfg.Results.MaxInlineBytes),
		"results.stashTtlMs":         ms(cfg.Results.StashTTL),
		"results.stashMaxBytes":      fmt.Sprint(cfg.Results.StashMaxBytes),
		"activity.maxEvents":         fmt.Sprint(cfg.Activity.MaxEvents),
		"activity.maxAgeMs":          ms(cfg.Activity.MaxAge),
		"runtime.gcPercent":          fmt.Sprint(DefaultRuntimeGCPercent),
		"store.url":                  cfg.Store.URL.Reveal(),
		"telemetry.sampleRatio":      fmt.Sprint(cfg.Telemetry.SampleRatio),
		"telemetry.serviceName":      cfg.Telemetry.ServiceName,
		"accessTokens.maxActive":     fmt.Sprint(DefaultAccessTokensMaxActive), // applied when the section is present
	} {
		if got := top[key]; got != want {
			t.Errorf("docs/CONFIG.md says %s defaults to %q; the config package applies %q", key, got, want)
		}
	}
	if got, want := conn["callAdmission"], fmt.Sprintf("{maxConcurrency: %d}", DefaultConnectorMaxConcurrency); got != want {
		t.Errorf("docs/CONFIG.md says connectors[].callAdmission defaults to %q, want %q", got, want)
	}
	// The defaults of keys a callAdmission leaves out.
	for key, want := range map[string]string{
		"maxQueueSize":   fmt.Sprint(DefaultCallAdmissionMaxQueueSize),
		"queueTimeoutMs": ms(DefaultCallAdmissionQueueTimeout),
		"retryAfterMs":   ms(DefaultCallAdmissionRetryAfter),
		"partition":      "connector",
		"maxPartitions":  fmt.Sprint(DefaultCallAdmissionMaxPartitions),
	} {
		if got := adm["callAdmission."+key]; got != want {
			t.Errorf("docs/CONFIG.md says connectors[].callAdmission.%s defaults to %q; the config package applies %q", key, got, want)
		}
	}
}

// referenceTables reads the two tables of docs/CONFIG.md: key → default.
func referenceTables(t *testing.T, doc string) (top, conn, adm map[string]string) {
	t.Helper()
	row := regexp.MustCompile("^\\| `([A-Za-z.]+)` \\| ([^|]*) \\|")
	top, conn, adm = map[string]string{}, map[string]string{}, map[string]string{}
	table := top
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "Each connector") {
			table = conn
		}
		if strings.HasPrefix(line, "A connector's `callAdmission`") {
			table = adm
		}
		if m := row.FindStringSubmatch(line); m != nil {
			table[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if len(top) == 0 || len(conn) == 0 || len(adm) == 0 {
		t.Fatal("docs/CONFIG.md: no reference tables found")
	}
	return top, conn, adm
}

// The keys the decoder accepts at the top and in a connector: its shapes'
// tags (internal/config/shape.go).
var (
	topKeys       = keysOf(reflect.TypeFor[fileShape]())
	connectorKeys = keysOf(reflect.TypeFor[connectorShape]())
)

// decoderKeys lists "section.key" (or the top-level key, for scalars and
// lists) for every key the decoder's shapes accept.
func decoderKeys(t *testing.T) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	top := reflect.TypeFor[fileShape]()
	for i := range top.NumField() {
		f := top.Field(i)
		name := f.Tag.Get("yaml")
		sec, isSection := reflect.New(f.Type).Interface().(interface{ shape() reflect.Type })
		if !isSection {
			keys[name] = true
			continue
		}
		for _, k := range keysOf(sec.shape()) {
			keys[name+"."+k] = true
		}
	}
	return keys
}
