package main

import (
	"os/exec"
	"strings"
	"testing"
)

// What the slim child may link: the sandbox side of the process boundary,
// the engine and its runtime, the seccomp library and its BPF assembler,
// x/sys, and the standard library without its heavy parts. Allowed by path
// prefix, so packages may move within these trees.
var (
	childAllowed = []string{
		"github.com/connecta-dev/connecta/cmd/sandbox-child",
		"github.com/connecta-dev/connecta/internal/sandbox",
		"github.com/connecta-dev/connecta/internal/guest",
		"github.com/connecta-dev/connecta/internal/ipc",
		"github.com/connecta-dev/connecta/internal/jstext",
		"github.com/connecta-dev/connecta/internal/quickjs.wasm",
		"github.com/connecta-dev/connecta/internal/caps", // read and drop capability sets (x/sys only); the parent's forking thread uses it too
		"github.com/tetratelabs/wazero",
		"github.com/elastic/go-seccomp-bpf",
		"golang.org/x/net/bpf", // go-seccomp-bpf's filter assembler
		"golang.org/x/sys",
	}
	// Standard-library trees the child has no use for: each would bring the
	// parent's weight (and init work) back into every child.
	childRefusedStd = []string{
		"net/http", "html/template", "text/template", "database/sql",
		"crypto/tls", "crypto/x509", "net/mail", "net/smtp", "net/rpc",
		"encoding/xml", "expvar", "plugin", "log/slog", "os/exec",
	}
)

func under(path, prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }

// TestChildLinksOnlyTheSandboxSide holds `go list -deps ./cmd/sandbox-child`
// to the allowlist: the go-sdk, pgx, SQLite, client_golang, yaml, oauth2,
// go-oidc, html/template or any parent package in the child fails it.
func TestChildLinksOnlyTheSandboxSide(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var refused []string
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		n++
		ok := false
		if std == "true" {
			ok = true
			for _, r := range childRefusedStd {
				ok = ok && !under(path, r)
			}
		} else {
			for _, a := range childAllowed {
				ok = ok || under(path, a)
			}
		}
		if !ok {
			refused = append(refused, path)
		}
	}
	if len(refused) > 0 {
		t.Fatalf("the sandbox child links packages outside its allowlist (only the sandbox side belongs in it; "+
			"see docs/DESIGN.md \"The sandbox child binary\"):\n  %s", strings.Join(refused, "\n  "))
	}
	t.Logf("%d packages, all allowed", n)
}

// The allowlist refuses what it is for: the parent's packages and libraries.
func TestChildAllowlistRefusesTheParentsDependencies(t *testing.T) {
	for _, p := range []string{
		"github.com/connecta-dev/connecta/internal/supervisor", "github.com/connecta-dev/connecta/internal/app",
		"github.com/connecta-dev/connecta/internal/childbin",
		"github.com/modelcontextprotocol/go-sdk/mcp", "github.com/jackc/pgx/v5", "github.com/ncruces/go-sqlite3",
		"github.com/prometheus/client_golang/prometheus", "gopkg.in/yaml.v3", "golang.org/x/oauth2",
		"github.com/coreos/go-oidc/v3/oidc", "golang.org/x/net/http2",
	} {
		for _, a := range childAllowed {
			if under(p, a) {
				t.Errorf("%s is allowed by %s", p, a)
			}
		}
	}
	for _, p := range []string{"html/template", "net/http", "net/http/httptrace"} {
		refused := false
		for _, r := range childRefusedStd {
			refused = refused || under(p, r)
		}
		if !refused {
			t.Errorf("%s is not refused", p)
		}
	}
}
