package config

import (
	"strings"
	"testing"
)

// TestCredentialSlot: `credential` takes its defaults, applies only to url
// connectors, and may not share its header with `headers` or oauth.
func TestCredentialSlot(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(`connectors:
  - id: a
    url: https://a.example/mcp
    credential: {}
  - id: b
    url: https://b.example/mcp
    credential: {label: Token, header: X-Api-Key, scheme: ""}
`), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *cfg.Connectors[0].Credential; got != (CredentialSlot{Label: "API key", Header: "Authorization", Scheme: "Bearer", Per: PerConnector}) {
		t.Fatalf("defaults: %+v", got)
	}
	if got := *cfg.Connectors[1].Credential; got != (CredentialSlot{Label: "Token", Header: "X-Api-Key", Scheme: "", Per: PerConnector}) {
		t.Fatalf("explicit: %+v", got)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"connectors:\n  - id: a\n    command: [x]\n    credential: {}\n", "applies only to url connectors"},
		{"connectors:\n  - id: a\n    url: https://a.example/mcp\n    headers: {authorization: \"${env:T}\"}\n    credential: {}\n", "set the same header"},
		{"publicUrl: https://c.example\nconnectors:\n  - id: a\n    url: https://a.example/mcp\n    oauth: {}\n    credential: {}\n", "oauth both set Authorization"},
		{"connectors:\n  - id: a\n    url: https://a.example/mcp\n    credential: {header: Content-Type}\n", "not a header connecta can send"},
		{"connectors:\n  - id: a\n    url: https://a.example/mcp\n    credential: {scheme: two words}\n", "must be one word"},
	} {
		_, err := Parse("c.yaml", []byte(bad.yaml), Resolver{LookupEnv: func(string) (string, bool) { return "v", true }})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
