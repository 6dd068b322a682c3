package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A snippet is one piece of configuration a reader may copy: a ```yaml
// block of README.md, docs/*.md or deploy/*.md, a deploy/*.yaml file that is
// a connecta configuration, or a <pre> block of an HTML page the server
// renders (internal/console/templates). A fragment — a piece that is not a whole file
// — says so on its first line: `# fragment: under KEY` is completed by
// indenting it under `KEY:`, and `# fragment: with FILE` by appending it to
// testdata/snippets/FILE, the deployment it is an example within.
type snippet struct {
	where string // file:line
	text  string
}

var (
	fenceYAML  = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")
	htmlPre    = regexp.MustCompile(`(?s)<pre[^>]*>(.*?)</pre>`)
	fragmentOf = regexp.MustCompile(`^# fragment: under ([A-Za-z.]+)\n`)
	fragmentIn = regexp.MustCompile(`^# fragment: with ([A-Za-z0-9_-]+\.yaml)\n`)
	// Whole files under deploy/ that are not connecta's configuration.
	notConnectaConfig = map[string]bool{"prometheus.yml": true, "connecta-alerts.yml": true}
)

func docSnippets(t *testing.T) []snippet {
	t.Helper()
	var files []string
	for _, glob := range []string{"../../README.md", "../../docs/*.md", "../../deploy/*.md", "../../deploy/*/*.md"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	var out []snippet
	lineOf := func(data string, off int) int { return strings.Count(data[:off], "\n") + 1 }
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceYAML.FindAllStringSubmatchIndex(string(data), -1) {
			out = append(out, snippet{where: f + ":" + strconv.Itoa(lineOf(string(data), m[0])), text: string(data[m[2]:m[3]])})
		}
	}
	yamls, _ := filepath.Glob("../../deploy/*.yaml")
	more, _ := filepath.Glob("../../deploy/*/*.yaml")
	for _, f := range append(yamls, more...) {
		if strings.Contains(f, "kubernetes") {
			out = append(out, configMapSnippets(t, f)...)
			continue
		}
		if notConnectaConfig[filepath.Base(f)] {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, snippet{where: f, text: string(data)})
	}
	pages, _ := filepath.Glob("../console/templates/*.html")
	for _, f := range pages {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range htmlPre.FindAllStringSubmatchIndex(string(data), -1) {
			text := html.UnescapeString(string(data[m[2]:m[3]]))
			if strings.Contains(text, "{{") { // rendered data, not a configuration
				continue
			}
			out = append(out, snippet{where: f + ":" + strconv.Itoa(lineOf(string(data), m[0])), text: text + "\n"})
		}
	}
	return out
}

// configMapSnippets are the connecta configurations a Kubernetes manifest
// carries: each *.yaml key of a ConfigMap (the other kinds are checked by
// deploy/kubernetes/manifesttest).
func configMapSnippets(t *testing.T, file string) []snippet {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for key, text := range doc.Data {
			if doc.Kind == "ConfigMap" && strings.HasSuffix(key, ".yaml") {
				out = append(out, snippet{where: file + ": data." + key, text: text})
			}
		}
	}
}

// complete turns a fragment into a whole file.
func complete(text string) string {
	if m := fragmentIn.FindStringSubmatch(text); m != nil {
		base, err := os.ReadFile(filepath.Join("testdata", "snippets", m[1]))
		if err != nil {
			return "# missing base " + m[1] + "\n" + text // fails to decode with its name
		}
		return string(base) + strings.TrimPrefix(text, m[0])
	}
	m := fragmentOf.FindStringSubmatch(text)
	if m == nil {
		return text
	}
	body := strings.TrimPrefix(text, m[0])
	keys := strings.Split(m[1], ".")
	var b strings.Builder
	for i, k := range keys {
		b.WriteString(strings.Repeat("  ", i) + k + ":\n")
	}
	indent := strings.Repeat("  ", len(keys))
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		b.WriteString(indent + line + "\n")
	}
	return b.String()
}

// snippetSecret is what a reference in a snippet resolves to here: a value
// of the shape its name asks for.
func snippetSecret(name string) string {
	switch {
	case strings.Contains(name, "vault-key"), strings.Contains(name, "VAULT_KEY"):
		return base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	case strings.Contains(name, "store-url"), strings.Contains(name, "database-url"), strings.Contains(name, "DATABASE_URL"):
		return "postgres://connecta:pw@db.internal:5432/connecta"
	}
	// Distinct per name: two tokens of one example never resolve alike.
	return "snippet-secret-value-0123456789-" + base64.RawURLEncoding.EncodeToString([]byte(name))
}

// Every snippet a reader may copy decodes: the vault flow mapping with an
// unquoted ${…} (docs/console.md, the console's "not enabled" page) did not.
func TestSnippets_EveryDocumentedConfigurationDecodes(t *testing.T) {
	snippets := docSnippets(t)
	if len(snippets) < 9 {
		t.Fatalf("found only %d snippets: the extraction is broken", len(snippets))
	}
	credDir := t.TempDir()
	r := Resolver{
		LookupEnv:      func(name string) (string, bool) { return snippetSecret(name), true },
		CredentialsDir: credDir,
		ReadFile: func(path string) ([]byte, error) {
			if filepath.Dir(path) == credDir {
				return []byte(snippetSecret(filepath.Base(path))), nil
			}
			if data, err := os.ReadFile(path); err == nil || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, os.TempDir()) {
				return data, err
			}
			return []byte(snippetSecret(path)), nil // ${file:/etc/…} of a deployment
		},
	}
	dir := t.TempDir()
	for i, s := range snippets {
		path := filepath.Join(dir, "snippet-"+strconv.Itoa(i)+".yaml")
		if err := os.WriteFile(path, []byte(complete(s.text)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path, r); err != nil {
			t.Errorf("%s: does not decode:\n%v\n--- snippet ---\n%s", s.where, err, s.text)
		}
	}
}

// The "with" marker appends a piece to the deployment it is an example in.
func TestSnippets_FragmentWithBaseIsAppended(t *testing.T) {
	got := complete("# fragment: with access-base.yaml\naccess: []\n")
	if !strings.HasPrefix(got, "# The deployment") || !strings.HasSuffix(got, "\naccess: []\n") {
		t.Fatalf("%q", got)
	}
}

// The fragment marker completes a piece under its key.
func TestSnippets_FragmentIsCompletedUnderItsKey(t *testing.T) {
	got := complete("# fragment: under auth.oidc\nissuer: https://id.example.com\n")
	if want := "auth:\n  oidc:\n    issuer: https://id.example.com\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
