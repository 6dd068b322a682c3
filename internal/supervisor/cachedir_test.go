package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// privateTempDir is a fresh cache directory that passes privdir's walk.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cachePool(t *testing.T, dir string) (*Pool, *logBuf, error) {
	t.Helper()
	lb := &logBuf{}
	p, err := New(context.Background(), testOptions(Options{Slots: 1, Spares: 1, CacheDir: dir,
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	if err == nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, lb, err
}

func runTwo(t *testing.T, p *Pool) {
	t.Helper()
	if res, err := run(t, p, "async () => 1 + 1", newTestHost(), Limits{}); err != nil || res.Err != nil || string(res.Value) != "2" {
		t.Fatalf("run: %v %+v", err, res)
	}
}

// The attack: executor.cacheDir under a shared directory another
// user created 0777, a cache planted beside it, and the attacker swapping
// the two with renameat2(RENAME_EXCHANGE) in a loop. The pool refuses to
// start, naming the directory and the fix; it makes no private subdirectory
// inside the foreign one, and no child ever starts.
func TestCacheDir_ForeignParentWithRacingRenameIsRefusedAtStart(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a directory another user owns")
	}
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	cache, planted := filepath.Join(shared, "cache"), filepath.Join(shared, "planted")
	for _, d := range []string{cache, planted} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// What the attacker plants: a well-formed compiled-code file (its own
	// digest matches) holding their "native code".
	entry := []byte("WAZEVO attacker shellcode")
	sum := sha256.Sum256(entry)
	body := codeFileMagic + strings.Repeat("ab", 32) + "\n" + hex.EncodeToString(sum[:]) + "\n" + string(entry)
	if err := os.WriteFile(filepath.Join(planted, codeFileName), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = unix.Renameat2(unix.AT_FDCWD, cache, unix.AT_FDCWD, planted, unix.RENAME_EXCHANGE)
			}
		}
	}()
	for range 20 {
		_, _, err := cachePool(t, cache)
		if err == nil {
			close(stop)
			<-done
			t.Fatal("New started under a directory another user can write")
		}
		for _, want := range []string{"executor.cacheDir", shared, "owned by uid 4242"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	close(stop)
	<-done
	ents, _ := os.ReadDir(shared)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "connecta-") {
			t.Errorf("a subdirectory %s was made inside the foreign directory", e.Name())
		}
	}
	if n := len(liveChildren()); n != 0 {
		t.Errorf("%d children alive", n)
	}
}

// A directory of ours that others can read is refused, naming chmod 700:
// no fallback into a subdirectory.
func TestCacheDir_OpenDirectoryIsRefusedNamingTheFix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := cachePool(t, dir)
	if err == nil {
		t.Fatal("New accepted a 0755 cache directory")
	}
	for _, want := range []string{dir, "chmod 700", "executor.cacheDir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("something was made in the refused directory: %v", ents)
	}
}

// Once the pool runs, the cache directory is the parent's business only:
// replacing it with one holding a planted cache changes nothing for the
// children, which run from their sealed descriptors.
func TestCacheDir_ChildrenNeverReadIt(t *testing.T) {
	dir := privateTempDir(t)
	p, lb, err := cachePool(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	runTwo(t, p)
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{codeFileName, "snapshot-0.bin", "wazero-v1.12.0-amd64-linux"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("planted"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		runTwo(t, p)
	}
	if n := counter(t, p.m.snapshotFallbacks); n != 0 {
		t.Fatalf("%v snapshot fallbacks; log:\n%s", n, lb.String())
	}
	if strings.Contains(lb.String(), "compiling in memory") {
		t.Fatalf("a child fell back to compiling; log:\n%s", lb.String())
	}
}

// The compiled code persists across starts in one file whose header carries
// the entry's digest: the next start loads it (the warm-up checks it with
// wazero's validation and CRC); a damaged one is refused with a warning and
// compiled afresh, then replaced.
func TestCacheDir_PersistedCodeIsReusedAndCheckedAgainstItsDigest(t *testing.T) {
	dir := privateTempDir(t)
	p, _, err := cachePool(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	key := p.code.key
	p.Close()
	path := filepath.Join(dir, codeFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("persisted with mode %v", fi.Mode())
	}

	p, lb, err := cachePool(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "loaded=true") || p.code.key != key {
		t.Fatalf("second start did not reuse the persisted code; log:\n%s", lb.String())
	}
	runTwo(t, p)
	p.Close()

	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, lb, err = cachePool(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lb.String(), "digest mismatch") || !strings.Contains(lb.String(), "loaded=false") {
		t.Fatalf("a damaged file was not refused; log:\n%s", lb.String())
	}
	runTwo(t, p)
	again, _ := os.ReadFile(path)
	if _, _, err := parseCodeFile(again); err != nil {
		t.Fatalf("the damaged file was not replaced: %v", err)
	}
}

// systemd's DynamicUser=yes gives the service $CACHE_DIRECTORY as a symlink
// (/var/cache/connecta → private/connecta, /var/cache/private root's and
// 0700): the pool follows it once and persists under its target.
func TestCacheDir_SymlinkedAsDynamicUserLaysItOut(t *testing.T) {
	root := t.TempDir()
	varCache := filepath.Join(root, "var", "cache")
	target := filepath.Join(varCache, "private", "connecta")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "var"), varCache} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(varCache, "connecta")
	if err := os.Symlink("private/connecta", link); err != nil {
		t.Fatal(err)
	}
	p, _, err := cachePool(t, filepath.Join(link, "wazero"))
	if err != nil {
		t.Fatal(err)
	}
	runTwo(t, p)
	if _, err := os.Stat(filepath.Join(target, "wazero", codeFileName)); err != nil {
		t.Fatal(err)
	}
}

// Every run frame carries its own 64-bit Math.random seed from the parent's
// CSPRNG; a real child's Math.random follows it, not the clock.
func TestRunFrame_CarriesAFreshRandomSeed(t *testing.T) {
	a, b := runOf(Job{Code: "0"}, Limits{}), runOf(Job{Code: "0"}, Limits{})
	if a.Seed == 0 || b.Seed == 0 || a.Seed == b.Seed {
		t.Fatalf("seeds %#x %#x", a.Seed, b.Seed)
	}
	p, _, err := cachePool(t, sharedCacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		res, err := run(t, p, "async () => [Math.random(), Math.random()]", newTestHost(), Limits{})
		if err != nil || res.Err != nil {
			t.Fatalf("run: %v %+v", err, res)
		}
		if seen[string(res.Value)] {
			t.Fatalf("a sequence repeated: %s", res.Value)
		}
		seen[string(res.Value)] = true
	}
}

// parseCodeFile reads a file from disk: whatever it holds is refused or
// parsed to an entry whose digest matches, never a panic.
func FuzzParseCodeFile(f *testing.F) {
	entry := []byte("WAZEVO")
	sum := sha256.Sum256(entry)
	f.Add([]byte(codeFileMagic + strings.Repeat("ab", 32) + "\n" + hex.EncodeToString(sum[:]) + "\n" + string(entry)))
	f.Add([]byte(codeFileMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, got, err := parseCodeFile(data)
		if err != nil {
			return
		}
		s := sha256.Sum256(got)
		if len(key) != 64 || !strings.Contains(string(data), hex.EncodeToString(s[:])) {
			t.Fatalf("accepted key %q with a wrong digest", key)
		}
	})
}

// A container's user with $HOME=/ on a read-only root file system has no
// place for the default cache: the pool still starts, compiling in memory,
// and says so in exactly one WARN naming the directory and the fix. (A
// regular file where the cache's parent should be makes the creation fail
// for root too; the image test proves the read-only root itself.)
func TestCacheDir_DefaultLocationUnwritableStartsInMemoryWithOneWarn(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", blocker)
	p, lb, err := cachePool(t, "")
	if err != nil {
		t.Fatalf("New refused to start without a writable default cache: %v", err)
	}
	runTwo(t, p)
	logs := lb.String()
	var warns []string
	for _, l := range strings.Split(logs, "\n") {
		// (the test binary's own child is "self", which warns on its own)
		if strings.Contains(l, "level=WARN") && !strings.Contains(l, "child="+ChildSelf) {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 {
		t.Errorf("want exactly one WARN about the cache, got %d:\n%s", len(warns), logs)
	}
	for _, want := range []string{"no writable cache directory", "compiled in memory", filepath.Join(blocker, "connecta", "wazero"), "executor.cacheDir"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the WARN does not say %q:\n%s", want, logs)
		}
	}
}

// The same failure for a configured executor.cacheDir is the operator's
// mistake and refuses to start, as does a default location that exists but
// is not private.
func TestCacheDir_ConfiguredUnwritableOrDefaultNotPrivateRefuses(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cachePool(t, filepath.Join(blocker, "cache")); err == nil || !strings.Contains(err.Error(), "executor.cacheDir") {
		t.Errorf("a configured cache directory that cannot be made: %v", err)
	}
	home := t.TempDir()
	open := filepath.Join(home, "connecta", "wazero")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", home)
	if _, _, err := cachePool(t, ""); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a default cache directory that is not private: %v", err)
	}
}
