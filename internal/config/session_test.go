package config

import (
	"strings"
	"testing"
)

// sharedSession is a url connector's opt-in to one shared downstream
// session (P4); it defaults to false and means nothing elsewhere.
func TestSharedSession_URLOnlyDefaultFalse(t *testing.T) {
	yaml := `connectors:
  - id: a
    url: http://127.0.0.1:9/mcp
  - id: b
    url: http://127.0.0.1:9/mcp
    sharedSession: true
`
	cfg, err := Parse("c.yaml", []byte(yaml), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Connectors[0].SharedSession || !cfg.Connectors[1].SharedSession {
		t.Fatalf("sharedSession = %v, %v", cfg.Connectors[0].SharedSession, cfg.Connectors[1].SharedSession)
	}
	for bad, want := range map[string]string{
		"connectors:\n  - id: a\n    command: [x]\n    sharedSession: true\n":                      "applies only to url connectors",
		"connectors:\n  - id: a\n    url: http://127.0.0.1:9/mcp\n    sharedSession: yes please\n": "expected true or false",
	} {
		_, err := Parse("c.yaml", []byte(bad), testResolver())
		if err == nil || !strings.Contains(err.Error(), "connectors[0].sharedSession") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// versionNegotiation is auto (2026-07-28 first) unless set to legacy; any
// other value refuses to boot, naming the field and its line.
func TestVersionNegotiation_AutoDefaultLegacyOptIn(t *testing.T) {
	yaml := `connectors:
  - id: a
    url: http://127.0.0.1:9/mcp
  - id: b
    command: [x]
    versionNegotiation: legacy
  - id: c
    url: http://127.0.0.1:9/mcp
    versionNegotiation: auto
`
	cfg, err := Parse("c.yaml", []byte(yaml), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Connectors[0].LegacyVersion || !cfg.Connectors[1].LegacyVersion || cfg.Connectors[2].LegacyVersion {
		t.Fatalf("legacy = %v, %v, %v", cfg.Connectors[0].LegacyVersion, cfg.Connectors[1].LegacyVersion, cfg.Connectors[2].LegacyVersion)
	}
	_, err = Parse("c.yaml", []byte("connectors:\n  - id: a\n    url: http://127.0.0.1:9/mcp\n    versionNegotiation: newest\n"), testResolver())
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4") || !strings.Contains(err.Error(), "connectors[0].versionNegotiation") || !strings.Contains(err.Error(), `must be auto or legacy, not "newest"`) {
		t.Fatalf("got %v", err)
	}
}
