package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// checkCacheDir accepts only a real directory owned by this uid with no group
// or other access: its entries are native code that gets mapped executable,
// guarded by a CRC and nothing else.
func checkCacheDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s: not an absolute path", dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s: not owned by uid %d", dir, os.Getuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s: mode %04o, want 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// wazeroVersion is the version our patched wazero reports as a constant
// (third_party/wazero.patch, internal/version): the name of its cache
// subdirectory must not depend on how a binary was built.
const wazeroVersion = "v1.12.0"

// currentCacheVersionDir is the subdirectory wazero uses for this build:
// wazero-<version>-<arch>-<os> (TestCache_WarmKeepsWazerosOwnDirectory
// checks it against the one wazero creates).
func currentCacheVersionDir() string {
	return "wazero-" + wazeroVersion + "-" + runtime.GOARCH + "-" + runtime.GOOS
}

// pruneStaleCaches removes sibling wazero-* directories left by other wazero
// versions (an upgrade leaves the old native code behind otherwise).
func pruneStaleCaches(dir string) {
	cur := currentCacheVersionDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "wazero-") && e.Name() != cur {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err == nil {
				fmt.Fprintf(os.Stderr, "sandbox: pruned stale compilation cache %s\n", e.Name())
			}
		}
	}
}
