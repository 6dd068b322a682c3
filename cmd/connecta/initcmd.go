package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/connecta-dev/connecta/deploy"
)

// defaultInitDir is where `connecta init` writes without an argument.
const defaultInitDir = "connecta-deployment"

// cmdInit is `connecta init [DIR]`: a starter deployment in a new directory
// (it never touches an existing one). The vault key and a first access
// token go into credential files of mode 0600, laid out as systemd's
// LoadCredential= expects; the key is never printed, the token once, alone
// on stdout. `connecta check` passes on what it writes.
func cmdInit(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("init", stdout, stderr)
	var dir string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	if code, done := fs.parse(args); done {
		return code
	}
	if dir == "" {
		dir = defaultInitDir
	}
	token, err := writeDeployment(dir)
	if err != nil {
		fmt.Fprintf(stderr, "connecta init: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "connecta init: wrote a starter deployment into %s (read %s first).\n"+
		"The access token of `operator` follows on standard output, shown only now (it is also in %s, mode 0600):\n",
		dir, filepath.Join(dir, "README.md"), filepath.Join(dir, "credentials", "connecta-token"))
	fmt.Fprintln(stdout, token)
	return 0
}

// writeDeployment creates dir (refusing an existing one) and writes every
// file; on a failure it removes what it created.
func writeDeployment(dir string) (token string, err error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s already exists; init writes only into a new directory (nothing was changed)", dir)
		}
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	token, err = randomSecret(32, base64.RawURLEncoding)
	if err != nil {
		return "", err
	}
	key, err := randomSecret(32, base64.StdEncoding)
	if err != nil {
		return "", err
	}
	files := []struct {
		path string
		mode os.FileMode
		data string
	}{
		{"connecta.yaml", 0o644, initConfig},
		{"connecta.service", 0o644, deploy.Unit},
		{"prometheus/connecta-alerts.yml", 0o644, deploy.AlertRules},
		{"README.md", 0o644, initReadme},
		{"credentials/connecta-token", 0o600, token + "\n"},
		{"credentials/connecta-vault-key", 0o600, key + "\n"},
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"credentials", 0o700}, {"prometheus", 0o755}, {"state", 0o700}} {
		if err := os.Mkdir(filepath.Join(dir, d.path), d.mode); err != nil {
			return "", err
		}
	}
	for _, f := range files {
		// O_EXCL: never overwrite, even a file that appeared meanwhile.
		fd, err := os.OpenFile(filepath.Join(dir, f.path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return "", err
		}
		_, werr := io.WriteString(fd, f.data)
		if cerr := fd.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", werr
		}
	}
	return token, nil
}

func randomSecret(n int, enc *base64.Encoding) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return enc.EncodeToString(b), nil
}

const initConfig = `# connecta — starter configuration written by ` + "`connecta init`" + `.
# Check it:  connecta check --config connecta.yaml --credentials-dir credentials
# Run it:    connecta serve --config connecta.yaml --credentials-dir credentials
# Every key and its default: docs/CONFIG.md; unknown keys refuse to boot.

# Loopback only. Listening beyond it needs the inbound auth below (or
# auth.oidc / accessTokens, docs/inbound-auth.md) and usually publicUrl.
listen: 127.0.0.1:8787
# metricsListen: 127.0.0.1:9464        # serve /metrics only there
# publicUrl: https://connecta.example.com   # needed by the console and OAuth connectors

auth:
  tokens:
    # The first access token: credentials/connecta-token (printed once by
    # init). Under systemd, LoadCredential=connecta-token:… hands it over.
    - name: operator
      token: ${credential:connecta-token}
      operator: true

# Durable state (get_result handles, activity, vault values, issued tokens).
# Relative to this file's directory; under systemd (connecta.service) use
# the unit's StateDirectory instead: sqlite:/var/lib/connecta/state.db
store: {url: "sqlite:state/connecta.db"}

# Seals stored secrets (connector credentials, OAuth grants) with AES-256-GCM.
# credentials/connecta-vault-key holds 32 random bytes, base64; it is never
# printed. Rotate: add a key, make it active, connecta vault reseal.
vault:
  keys:
    - {id: k1, key: "${credential:connecta-vault-key}"}
  active: k1

# Operator-issued access tokens (connecta token create NAME …):
accessTokens: {maxActive: 100}

# Downstream MCP servers. The built-in demo answers without any setup;
# replace it with your own (README.md of this directory has examples).
connectors:
  - id: demo
    builtin: demo
  # - id: tracker
  #   title: Issue tracker
  #   url: https://mcp.example.com/mcp
  #   headers: {Authorization: "Bearer ${credential:tracker-token}"}
  # - id: files
  #   command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/shared]
`

const initReadme = `# A connecta deployment (written by ` + "`connecta init`" + `)

| file | what it is |
| --- | --- |
| ` + "`connecta.yaml`" + ` | the configuration, commented: SQLite store, vault, one operator token, the demo connector |
| ` + "`credentials/connecta-token`" + ` | the first access token (mode 0600), printed once by init |
| ` + "`credentials/connecta-vault-key`" + ` | the vault key, 32 random bytes base64 (mode 0600), never printed |
| ` + "`connecta.service`" + ` | the hardened systemd unit; its LoadCredential= lines name the two files above |
| ` + "`prometheus/connecta-alerts.yml`" + ` | Prometheus alert rules for connecta's metrics |
| ` + "`state/`" + ` | the SQLite store while you try it here |

## 1. Check and try it here

` + "```sh" + `
connecta check  --config connecta.yaml --credentials-dir credentials
connecta doctor --config connecta.yaml --credentials-dir credentials
connecta serve  --config connecta.yaml --credentials-dir credentials
` + "```" + `

Point an MCP client at http://127.0.0.1:8787/mcp with the header
` + "`Authorization: Bearer $(cat credentials/connecta-token)`" + `.

## 2. Add your connectors

Edit ` + "`connectors:`" + ` in connecta.yaml (examples are commented there); put each
secret in a file under credentials/ (mode 0600) and name it
` + "`${credential:NAME}`" + `; add a ` + "`LoadCredential=NAME:/etc/connecta/credentials/NAME`" + `
line to connecta.service for each. Run check again.

## 3. Install under systemd

` + "```sh" + `
sudo install -D -m 0644 connecta.yaml /etc/connecta/connecta.yaml
sudo sed -i 's#sqlite:state/connecta.db#sqlite:/var/lib/connecta/state.db#' /etc/connecta/connecta.yaml
sudo install -d -m 0700 /etc/connecta/credentials
sudo install -m 0600 credentials/* /etc/connecta/credentials/
sudo install -m 0644 connecta.service /etc/systemd/system/connecta.service
sudo systemctl daemon-reload && sudo systemctl enable --now connecta
` + "```" + `

` + "`systemctl reload connecta`" + ` re-reads the configuration (SIGHUP); ` + "`systemctl stop`" + `
drains: /health answers 503 shutting_down until the work in flight is done.

## 4. Watch it

Scrape ` + "`/metrics`" + ` (with the operator token, or set metricsListen) and load
prometheus/connecta-alerts.yml into Prometheus (` + "`rule_files:`" + `). The operator
console needs ` + "`auth.oidc`" + ` and ` + "`publicUrl`" + ` (docs/console.md).
`
