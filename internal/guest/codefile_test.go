package guest

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/ipc"
)

func codeEngine(t *testing.T, cf *CodeFile) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), EngineOptions{Code: cf, MaxArgBytes: ipc.MaxPayloadBytes, MaxResultChars: ipc.MaxResultChars})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func runOnePlusOne(t *testing.T, e *Engine) {
	t.Helper()
	out, err := e.Run(context.Background(), Program{Code: "async () => 1 + 1"}, &testHost{})
	if err != nil || out.Err != nil || string(out.Value) != "2" {
		t.Fatalf("run: %v %+v", err, out)
	}
}

// A CodeFile with Fill receives the compiled module; an engine given the
// same file (sealed) and its key loads it trusted, mapping the code from the
// descriptor, and runs; a wrong key is a miss that compiles in memory and
// leaves the file alone.
func TestCodeFile_FilledOnceThenLoadedFromTheDescriptor(t *testing.T) {
	fd, err := unix.MemfdCreate("code", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "code")
	defer f.Close()
	warm := codeEngine(t, &CodeFile{File: f, Fill: true})
	key := warm.CompiledKey()
	fi, _ := f.Stat()
	if len(key) != 64 || fi.Size() == 0 {
		t.Fatalf("key %q, %d bytes", key, fi.Size())
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		t.Fatal(err)
	}
	e := codeEngine(t, &CodeFile{File: f, Key: key, Trusted: true})
	if e.CompiledKey() != "" {
		t.Fatal("a trusted load wrote an entry")
	}
	runOnePlusOne(t, e)
	maps, _ := os.ReadFile("/proc/self/maps")
	if !regexp.MustCompile(`r-xp .*/memfd:code`).Match(maps) {
		t.Fatal("the code is not mapped executable from the descriptor")
	}

	wrong := strings.Repeat("0", 64)
	e = codeEngine(t, &CodeFile{File: f, Key: wrong, Trusted: true})
	runOnePlusOne(t, e)
	if _, err := NewEngine(context.Background(), EngineOptions{Code: &CodeFile{File: f, Key: "zz"}, MaxArgBytes: 1, MaxResultChars: 200}); err == nil {
		t.Fatal("a malformed key was accepted")
	}
}

// Compile maps the module and runs none of it; Start is the first guest code.
func TestCompile_RunsNoGuestCodeUntilStart(t *testing.T) {
	e, err := Compile(context.Background(), EngineOptions{CacheDir: testCacheDir, MaxArgBytes: ipc.MaxPayloadBytes, MaxResultChars: ipc.MaxResultChars})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Started() || e.rt.Module("") != nil {
		t.Fatal("Compile instantiated the module")
	}
	if _, err := e.Run(context.Background(), Program{Code: "async () => 1"}, &testHost{}); err == nil {
		t.Fatal("Run before Start")
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	runOnePlusOne(t, e)
}
