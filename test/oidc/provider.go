// Package oidctest runs a real OAuth 2.1 / OpenID Connect authorization
// server for tests: the npm package oidc-provider (pinned by
// testdata/package-lock.json, installed by `make oidc-provider`) on a free
// 127.0.0.1 port, with dynamic client registration, PKCE, refresh tokens,
// revocation and resource indicators. It also serves a real go-sdk MCP
// server protected by it (see [NewProtectedServer]).
//
// Tests use it as a downstream's authorization server (downstream OAuth) and
// as connecta's own identity provider (inbound OIDC, the console). Without
// node or the installed package a test that starts it skips, unless
// CONNECTA_REQUIRE_OIDC_PROVIDER=1 (CI), where a missing piece fails it.
package oidctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/idptest"
)

const (
	// RequireEnv makes a missing node or package a failure (set by CI).
	RequireEnv  = "CONNECTA_REQUIRE_OIDC_PROVIDER"
	packageName = "oidc-provider"
	// startWait bounds one start; it takes under a second on an idle
	// machine. A start that does not listen by then is reported with the
	// process's state and tried once more (startAttempts): CI once saw a
	// node that neither listened nor exited for 90 s under load.
	startWait     = 45 * time.Second
	startAttempts = 2
)

// Account is a user the scripted login accepts (by its map key, the
// subject); Client is a statically registered client. The hermetic twin
// (test/idptest) takes the same ones.
type (
	Account = idptest.Account
	Client  = idptest.Client
)

// Options configure one provider. Zero values take the defaults named.
type Options struct {
	// AccessTokenTTL is every access token's lifetime (default 5 minutes;
	// whole seconds, at least 1).
	AccessTokenTTL time.Duration
	// RefreshTokenTTL bounds refresh tokens and grants (default 24 hours).
	RefreshTokenTTL time.Duration
	// Accounts the login accepts; default one, "alice" (alice@example.com,
	// verified).
	Accounts map[string]Account
	// Clients registered statically; dynamic registration is always open.
	Clients []Client
	// Resources, when set, are the only resource indicators accepted;
	// otherwise any resource gets JWT access tokens with it as audience.
	Resources []string
	// ResourceScopes are the scopes a resource accepts (default mcp:tools).
	ResourceScopes []string
	// ClientIDMetadataDocument enables client ID metadata documents
	// (client IDs that are HTTPS URLs).
	ClientIDMetadataDocument bool
	// Port, when set, is the port to listen on: a provider restarted on
	// the port of a stopped one has the same issuer (a key rotation).
	Port int
	// PairwiseSubjects turns pairwise subjects on, the way a provider whose
	// API tokens are per resource does it (Microsoft Entra's model): an ID
	// token's sub is pairwise per client, an access token's sub pairwise
	// per resource (its audience). So one person has a different sub in the
	// ID token of every client, and the same sub in every access token for
	// one resource, whichever client asked.
	PairwiseSubjects bool
	// KeyIDPrefix names the signing keys "<prefix>-es256" and
	// "<prefix>-rs256" (default "test"); the keys are fresh at every start.
	KeyIDPrefix string
}

// Port is the port the provider listens on.
func (p *Provider) Port() int {
	u, err := url.Parse(p.Issuer)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(u.Port())
	return n
}

// Provider is one running oidc-provider process.
type Provider struct {
	// Issuer is the authorization server's issuer URL (http://127.0.0.1:PORT).
	Issuer string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	done  chan struct{}
	log   *lockedBuffer
}

// Missing skips t, or fails it when RequireEnv is set.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 requires it; run `make oidc-provider`)", msg, RequireEnv)
	}
	t.Skipf("%s; install node >= 20.19 and run `make oidc-provider` (skipping)", msg)
}

// testdataDir is this package's testdata directory, found from the source
// file so that tests in any package can start the provider.
func testdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// Start runs a provider for the duration of t (or skips, see [Missing]).
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not on PATH")
	}
	out, err := exec.Command(node, "-e", `const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)`).CombinedOutput()
	if err != nil {
		Missing(t, "oidc-provider needs node >= 20.19 (%v %s)", err, out)
	}
	dir := testdataDir()
	if err := checkInstalled(dir); err != nil {
		Missing(t, "%v", err)
	}
	p, retried, err := start(node, dir, opts)
	if err != nil {
		t.Fatalf("start oidc-provider: %v", err)
	}
	for _, err := range retried {
		t.Logf("oidc-provider started on a retry; before: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Run starts a provider outside a test (`make console-demo`); the caller
// stops it. A missing node or package is an error saying what to install.
func Run(opts Options) (*Provider, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH; install node >= 20.19 and run `make oidc-provider`")
	}
	dir := testdataDir()
	if err := checkInstalled(dir); err != nil {
		return nil, fmt.Errorf("%v; run `make oidc-provider`", err)
	}
	p, _, err := start(node, dir, opts)
	return p, err
}

func checkInstalled(dir string) error {
	var pin struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &pin); err != nil {
		return fmt.Errorf("testdata/package.json: %v", err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "node_modules", packageName, "package.json"))
	if err != nil {
		return fmt.Errorf("%s is not installed", packageName)
	}
	var got struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		return fmt.Errorf("installed %s: %v", packageName, err)
	}
	if want := pin.Dependencies[packageName]; got.Version != want {
		return fmt.Errorf("installed %s is %s, package.json pins %s", packageName, got.Version, want)
	}
	return nil
}

// errNoListen is a start that neither listened nor exited in time.
var errNoListen = errors.New("did not listen")

// start returns the provider and the starts that did not listen before it
// (the caller logs them: a retry that hides a hang is still reported).
func start(node, dir string, opts Options) (*Provider, []error, error) {
	var errs []error
	for range startAttempts {
		p, err := startOnce(node, dir, opts)
		if err == nil || !errors.Is(err, errNoListen) {
			return p, errs, err
		}
		errs = append(errs, err)
	}
	return nil, nil, errors.Join(errs...)
}

func startOnce(node, dir string, opts Options) (*Provider, error) {
	cfg := map[string]any{
		"accessTokenTTL":           seconds(opts.AccessTokenTTL, 300),
		"refreshTokenTTL":          seconds(opts.RefreshTokenTTL, 86400),
		"clientIdMetadataDocument": opts.ClientIDMetadataDocument,
	}
	if opts.Accounts != nil {
		cfg["accounts"] = opts.Accounts
	}
	if opts.Port != 0 {
		cfg["port"] = opts.Port
	}
	if opts.KeyIDPrefix != "" {
		cfg["keyIdPrefix"] = opts.KeyIDPrefix
	}
	if opts.Clients != nil {
		cfg["clients"] = opts.Clients
	}
	if opts.PairwiseSubjects {
		cfg["pairwise"] = true
	}
	if opts.Resources != nil {
		cfg["resources"] = opts.Resources
	}
	if opts.ResourceScopes != nil {
		cfg["resourceScopes"] = opts.ResourceScopes
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, filepath.Join(dir, "provider.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONNECTA_OIDC_CONFIG="+string(raw), "NODE_ENV=test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	log := &lockedBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Provider{cmd: cmd, stdin: stdin, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(p.done) }()

	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-first:
		var ready struct {
			Issuer string `json:"issuer"`
		}
		if !ok || json.Unmarshal([]byte(line), &ready) != nil || ready.Issuer == "" {
			p.Stop()
			return nil, fmt.Errorf("no issuer line (got %q); stderr: %s", line, log.String())
		}
		p.Issuer = ready.Issuer
	case <-time.After(startWait):
		state := processState(cmd.Process.Pid)
		p.Stop()
		return nil, fmt.Errorf("%w within %v (%s); stderr: %s", errNoListen, startWait, state, log.String())
	}
	return p, nil
}

// processState says what a process that did not listen was doing: its
// scheduler state, the kernel function it waits in and the CPU it used, so
// a hang can be told from a start starved of CPU.
func processState(pid int) string {
	read := func(name string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	state, cpu := "?", "?"
	for _, line := range strings.Split(read("status"), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			state = strings.TrimSpace(v)
		}
	}
	// /proc/PID/stat: utime and stime are fields 14 and 15, in clock ticks
	// (100 per second on Linux); the command name in field 2 may hold
	// spaces, so count from its closing parenthesis.
	if stat := read("stat"); strings.Contains(stat, ")") {
		f := strings.Fields(stat[strings.LastIndex(stat, ")")+1:])
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			s, _ := strconv.Atoi(f[12])
			cpu = fmt.Sprintf("%.2fs user, %.2fs sys", float64(u)/100, float64(s)/100)
		}
	}
	return fmt.Sprintf("pid %d state %s, waiting in %s, %s", pid, state, read("wchan"), cpu)
}

func seconds(d time.Duration, def int) int {
	if d <= 0 {
		return def
	}
	return max(1, int(d/time.Second))
}

// Stop ends the process: closing stdin asks it to exit, a kill follows.
func (p *Provider) Stop() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// Log is what the provider wrote to stderr so far.
func (p *Provider) Log() string { return p.log.String() }

// Authorize plays the human ([idptest.PlayHuman]: the twin serves the same
// forms): it follows authURL with c (which must have a cookie jar), signs in
// as account, then allows (or, with allow false, denies) the consent, and
// returns the URL the provider finally redirects to outside itself — the
// client's redirect URI with code and state (or error) — without
// requesting it.
func (p *Provider) Authorize(ctx context.Context, c *http.Client, authURL, account string, allow bool) (*url.URL, error) {
	return idptest.PlayHuman(ctx, c, p.Issuer, authURL, account, allow)
}

// IssuerURL is Issuer (the [AuthServer] method).
func (p *Provider) IssuerURL() string { return p.Issuer }

type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 1<<20 {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// PairwiseSubject is the sub of account for audience (a client id for ID
// tokens, a resource for access tokens) when PairwiseSubjects is on: the
// provider's own formula, for tests to compare with.
func PairwiseSubject(account, audience string) string {
	return idptest.PairwiseSubject(account, audience)
}
