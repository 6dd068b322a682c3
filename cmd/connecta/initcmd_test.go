package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// init writes a starter deployment that check passes: the vault key and the
// first token in 0600 credential files named by the unit's LoadCredential=
// lines; the key is never printed, the token once, alone on stdout; an
// existing directory is refused and left as it was.
func TestInit_WritesADeploymentCheckPassesAndNeverOverwrites(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := filepath.Join(t.TempDir(), "deployment")
	code, out, errOut := runCLI("init", dir)
	if code != 0 {
		t.Fatalf("init: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	creds := filepath.Join(dir, "credentials")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	token, key := strings.TrimSpace(read("credentials/connecta-token")), strings.TrimSpace(read("credentials/connecta-vault-key"))
	if out != token+"\n" || len(token) < 40 {
		t.Fatalf("stdout %q, want the token alone (%q)", out, token)
	}
	if strings.Contains(out+errOut, key) || strings.Contains(errOut, token) {
		t.Fatalf("init printed the key, or the token beyond stdout:\nstdout %s\nstderr %s", out, errOut)
	}
	for _, name := range []string{"credentials/connecta-token", "credentials/connecta-vault-key"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", name, st.Mode(), err)
		}
	}
	unit := read("connecta.service")
	for _, want := range []string{"LoadCredential=connecta-token:", "LoadCredential=connecta-vault-key:"} {
		if !strings.Contains(unit, want) {
			t.Errorf("connecta.service lacks %s", want)
		}
	}
	for _, want := range []string{"connecta.yaml", "prometheus/connecta-alerts.yml", "README.md"} {
		if read(want) == "" {
			t.Errorf("%s is empty", want)
		}
	}
	cfg := filepath.Join(dir, "connecta.yaml")
	if code, out, errOut := runCLI("check", "--config", cfg, "--credentials-dir", creds); code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("check on what init wrote: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// The README's commands name the files init wrote.
	if readme := read("README.md"); !strings.Contains(readme, "connecta check  --config connecta.yaml --credentials-dir credentials") {
		t.Errorf("README.md lacks the check command:\n%s", readme)
	}

	before := read("credentials/connecta-token")
	if code, out, errOut := runCLI("init", dir); code != 1 || out != "" || !strings.Contains(errOut, "already exists") {
		t.Fatalf("init over an existing directory: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if read("credentials/connecta-token") != before {
		t.Fatal("a refused init changed the token")
	}
}

// Without DIR, init writes connecta-deployment in the working directory.
func TestInit_DefaultDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	if code, _, errOut := runCLI("init"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(defaultInitDir, "connecta.yaml")); err != nil {
		t.Fatal(err)
	}
}
