package config

import (
	"strings"
	"testing"
)

// A finding about a connector or an access rule names its own index in
// the file, also when an entry before it was refused (its index among the
// entries that decoded said connectors[0] for the second one).
func TestWholeFileChecks_NameTheEntryByItsIndexInTheFile(t *testing.T) {
	text := `listen: 127.0.0.1:8787
auth:
  tokens:
    - {name: ci, token: "${env:CONNECTA_TOKEN}"}
connectors:
  - id: "Bad Id"
    builtin: demo
  - id: tracker
    url: https://tracker.example/mcp
    oauth: {}
  - id: docs
    url: https://docs.example/mcp
    catalog: {pin: quarantine}
access:
  - {callers: {tokens: [ci]}, connectors: [tracker], writes: maybe}
  - {callers: {tokens: [nobody]}, connectors: [docs]}
  - {callers: {tokens: [ci]}, connectors: ["*", ghost]}
`
	r := testResolver()
	_, err := Parse("c.yaml", []byte(text), r)
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error()
	for _, want := range []string{
		"c.yaml:6: connectors[0].id: ",
		"c.yaml:8: connectors[1].oauth: needs publicUrl",
		"c.yaml:13: connectors[2].catalog.pin: quarantine needs a durable store",
		"c.yaml:15: access[0].writes: expected true or false",
		"c.yaml:16: access[1].callers.tokens[0]: \"nobody\" names no auth.tokens entry",
		// The index counts a "*" before the id.
		"c.yaml:17: access[2].connectors[1]: \"ghost\" is not a configured connector id",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}
