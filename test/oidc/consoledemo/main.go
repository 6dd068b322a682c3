// Command consoledemo is `make console-demo`: the operator console tried
// locally. It starts the project's test OpenID provider (test/oidc, the
// pinned oidc-provider) with one demo operator, writes a configuration that
// signs in through it (a SQLite store and a vault in a temporary directory,
// the built-in demo connector), runs bin/connecta on it and prints the URL
// to open. Ctrl-C stops both and removes the directory.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	oidctest "github.com/connecta-dev/connecta/test/oidc"
)

const (
	operator     = "operator" // what the provider's sign-in form accepts
	operatorMail = "operator@example.com"
	clientID     = "connecta-console"
)

func main() {
	bin := flag.String("connecta", "bin/connecta", "the connecta binary to run")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "console-demo:", err)
		os.Exit(1)
	}
}

func run(bin string) error {
	dir, err := os.MkdirTemp("", "connecta-console-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	_ = ln.Close() // connecta binds it; nothing else on loopback takes it meanwhile
	base := "http://" + addr
	secret := random(24)
	p, err := oidctest.Run(oidctest.Options{
		Accounts: map[string]oidctest.Account{operator: {Email: operatorMail, EmailVerified: true, Name: "Demo Operator"}},
		Clients: []oidctest.Client{{ID: clientID, Secret: secret, RedirectURIs: []string{base + "/operator/callback"},
			GrantTypes: []string{"authorization_code"}}},
		AccessTokenTTL: 3600e9,
	})
	if err != nil {
		return fmt.Errorf("start the OpenID provider: %w", err)
	}
	defer p.Stop()
	cfg := fmt.Sprintf(`# written by make console-demo
listen: %s
publicUrl: %s
store: {url: "sqlite:%s"}
vault: {keys: [{id: k1, key: "${env:DEMO_VAULT_KEY}"}], active: k1}
accessTokens: {}
auth:
  oidc:
    issuer: %s
    clientId: %s
    clientSecret: "${env:DEMO_OIDC_SECRET}"
    callers: {any: true}
    operators: {emails: [%s]}
connectors:
  - id: demo
    builtin: demo
`, addr, base, filepath.Join(dir, "state.db"), p.Issuer, clientID, operatorMail)
	path := filepath.Join(dir, "connecta.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "DEMO_VAULT_KEY="+random(32), "DEMO_OIDC_SECRET="+secret)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := waitHealthy(base, exited); err != nil {
		return err
	}
	fmt.Printf("\nconsole-demo: open %s/operator/ and sign in as %q (%s) at the test provider %s\n"+
		"console-demo: the configuration is %s; Ctrl-C stops connecta and the provider\n\n", base, operator, operatorMail, p.Issuer, path)
	select {
	case <-stop:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited // connecta drains and stops; its exit status is its own log's business
		return nil
	case err := <-exited:
		return fmt.Errorf("connecta exited: %v", err)
	}
}

// waitHealthy waits until connecta answers /health (so the URL printed
// works when it is read), or fails when it exits first.
func waitHealthy(base string, exited chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("connecta exited: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("connecta did not answer /health within 60 s")
}

// random is n random bytes, base64 (a vault key when n is 32).
func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}
