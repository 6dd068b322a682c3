package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const foreignUID = 4242 // a user that is neither root nor us

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask, and the sticky bit
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Skipf("cannot chown to simulate another user (need root): %v", err)
	}
}

func TestOpen_PrivateDirectoryIsAcceptedAndUsedByDescriptor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	mkdir(t, dir, 0o700)
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("a.bin", []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The descriptor keeps naming the directory it checked after the path
	// is renamed away.
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	mkdir(t, dir, 0o700)
	got, err := d.ReadFile("a.bin", 100)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := d.ReadFile("a.bin", 3); err == nil {
		t.Fatal("a file over the bound was read")
	}
	if err := os.Symlink(filepath.Join(dir+".moved", "a.bin"), filepath.Join(dir+".moved", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("link", 100); err == nil {
		t.Fatal("a symlink was followed")
	}
	if _, err := d.ReadFile("../x", 100); err == nil {
		t.Fatal("a path with a slash was accepted")
	}
	names, err := d.Names()
	if err != nil || len(names) != 2 {
		t.Fatalf("names %v, %v", names, err)
	}
	if err := d.Remove("a.bin"); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_LastComponentMustBeOursAnd0700(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	mkdir(t, open, 0o755)
	if _, err := Open(open); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chmod 700 "+open) {
		t.Fatalf("a 0755 directory: %v", err)
	}
	theirs := filepath.Join(base, "theirs")
	mkdir(t, theirs, 0o700)
	chown(t, theirs, foreignUID)
	if _, err := Open(theirs); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "chown") {
		t.Fatalf("someone else's directory: %v", err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file); err == nil {
		t.Fatal("a file was accepted as a directory")
	}
	if _, err := Open("relative/dir"); err == nil {
		t.Fatal("a relative path was accepted")
	}
}

// The attack starts from a shared directory another user created:
// every form of it is refused, with no fallback into a subdirectory.
func TestOpen_ParentsOthersCanChangeAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  os.FileMode
		owner int // -1: ours
		want  string
	}{
		{"foreign-owned 0777", 0o777, foreignUID, "owned by uid 4242"},
		{"foreign-owned 0755", 0o755, foreignUID, "owned by uid 4242"},
		{"foreign-owned sticky", 0o1777 | os.ModeSticky, foreignUID, "owned by uid 4242"},
		{"ours but world-writable", 0o777, -1, "writable by others"},
		{"ours group-writable", 0o775, -1, "writable by others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := filepath.Join(t.TempDir(), "shared")
			mkdir(t, shared, tc.mode)
			cache := filepath.Join(shared, "cache")
			mkdir(t, cache, 0o700)
			if tc.owner >= 0 {
				chown(t, shared, tc.owner)
			}
			_, err := Open(cache)
			if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), shared) {
				t.Fatalf("Open(%s) = %v, want a refusal naming %s and %q", cache, err, shared, tc.want)
			}
		})
	}
}

// A root-owned sticky directory (the system's /tmp) is an acceptable parent.
func TestOpen_RootOwnedStickyParentIsAccepted(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a root-owned directory")
	}
	tmp := filepath.Join(t.TempDir(), "tmp")
	mkdir(t, tmp, 0o777|os.ModeSticky)
	cache := filepath.Join(tmp, "cache")
	mkdir(t, cache, 0o700)
	d, err := Open(cache)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

// systemd's DynamicUser=yes: $CACHE_DIRECTORY is /var/cache/connecta, a
// symlink to private/connecta; /var/cache/private is root's and 0700, the
// target is the dynamic user's. The symlink is resolved once, then walked.
func TestOpen_SymlinkedCacheDirectoryAsDynamicUserLaysItOut(t *testing.T) {
	root := t.TempDir()
	varCache := filepath.Join(root, "var", "cache")
	if err := os.MkdirAll(varCache, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "var"), varCache} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(t, filepath.Join(varCache, "private"), 0o700)
	mkdir(t, filepath.Join(varCache, "private", "connecta"), 0o700)
	link := filepath.Join(varCache, "connecta")
	if err := os.Symlink("private/connecta", link); err != nil {
		t.Fatal(err)
	}
	d, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if want := filepath.Join(varCache, "private", "connecta"); d.Path() != want {
		t.Fatalf("resolved %s, want %s", d.Path(), want)
	}
	// The same layout with the symlink's target in a directory others can
	// write is refused: the symlink is followed, not trusted.
	mkdir(t, filepath.Join(varCache, "open"), 0o777)
	mkdir(t, filepath.Join(varCache, "open", "connecta"), 0o700)
	link2 := filepath.Join(varCache, "connecta2")
	if err := os.Symlink("open/connecta", link2); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link2); !errors.Is(err, ErrNotPrivate) {
		t.Fatalf("a symlink into a writable directory: %v", err)
	}
}
