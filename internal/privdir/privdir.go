// Package privdir opens a directory that only this process's user (or root)
// can change, and works below it only through its descriptor.
//
// The path is resolved once (it may be a symlink: systemd's DynamicUser=yes
// makes $CACHE_DIRECTORY one), then walked from / with
// openat(O_NOFOLLOW|O_DIRECTORY), each component checked with fstat on the
// descriptor just opened: owned by root or by us and writable by nobody else,
// except a sticky directory owned by root (the system's temporary directory:
// its sticky bit stops others renaming our entries; a sticky directory
// someone else owns still lets its owner do so). The last component must be
// ours with no group or other access. A rename or symlink swapped in during
// the walk makes an openat fail or an fstat refuse; once Open returns, the
// descriptor names the directory it checked, whatever later happens to paths.
//
// Anything else is refused with an error naming the fix; there is no fallback
// into a subdirectory of a directory someone else controls.
package privdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a verified private directory held open by descriptor.
type Dir struct {
	fd   int
	path string // the resolved path, for messages only
}

// ErrNotPrivate is wrapped by every refusal of a directory's ownership or
// mode (as opposed to one that does not exist or cannot be read).
var ErrNotPrivate = errors.New("not a private directory")

// Open resolves path and verifies it and every directory above it; see the
// package comment.
func Open(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	return walk(resolved, os.Getuid())
}

// Create makes path (and missing parents, 0700) when it does not exist, then
// opens it as Open does. The creation is by path; nothing made is trusted
// until the walk has checked it.
func Create(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	return Open(path)
}

func walk(resolved string, uid int) (*Dir, error) {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /: %w", err)
	}
	at := "/"
	parts := strings.Split(strings.Trim(resolved, "/"), "/")
	if resolved == "/" {
		parts = nil
	}
	for i := 0; ; i++ {
		last := i == len(parts)
		if err := checkComponent(fd, at, uid, last); err != nil {
			unix.Close(fd)
			return nil, err
		}
		if last {
			return &Dir{fd: fd, path: at}, nil
		}
		next, err := unix.Openat(fd, parts[i], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		at = filepath.Join(at, parts[i])
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return nil, fmt.Errorf("%s: %w: it changed to a symlink or non-directory while being checked", at, ErrNotPrivate)
			}
			return nil, &os.PathError{Op: "open", Path: at, Err: err}
		}
		fd = next
	}
}

// checkComponent applies the ownership and mode rules to the open directory
// fd, named at.
func checkComponent(fd int, at string, uid int, last bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: at, Err: err}
	}
	owner, mode := int(st.Uid), st.Mode
	if last {
		switch {
		case owner != uid:
			return fmt.Errorf("%s: %w: owned by uid %d, not by this user (uid %d); run chown %d %s, or choose a directory this user owns",
				at, ErrNotPrivate, owner, uid, uid, at)
		case mode&0o077 != 0:
			return fmt.Errorf("%s: %w: mode %04o gives group or others access; run chmod 700 %s", at, ErrNotPrivate, mode&0o7777, at)
		}
		return nil
	}
	if owner != 0 && owner != uid {
		return fmt.Errorf("%s: %w: a directory above it is owned by uid %d, who can rename or replace what is below; "+
			"choose a directory whose every parent is owned by root or by this user (uid %d)", at, ErrNotPrivate, owner, uid)
	}
	if mode&0o022 != 0 && !(owner == 0 && mode&unix.S_ISVTX != 0) {
		return fmt.Errorf("%s: %w: a directory above it is writable by others (mode %04o) and not a root-owned sticky directory, "+
			"so they can rename or replace what is below; run chmod go-w %s, or choose another directory", at, ErrNotPrivate, mode&0o7777, at)
	}
	return nil
}

// Path is the resolved path Open verified (for messages; never reopen it).
func (d *Dir) Path() string { return d.path }

// Fd is the directory's descriptor, for openat-style calls of one's own.
func (d *Dir) Fd() int { return d.fd }

// Close releases the descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// validName refuses anything but a plain entry name.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("privdir: %q is not a plain file name", name)
	}
	return nil
}

// OpenFile opens the regular file name for reading (never following a
// symlink) and checks it with fstat: a regular file owned by us that nobody
// else can write, at most max bytes. The caller reads it through the
// returned descriptor only.
func (d *Dir) OpenFile(name string, max int64) (*os.File, int64, error) {
	if err := validName(name); err != nil {
		return nil, 0, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = errors.New("not a regular file")
	case int(st.Uid) != os.Getuid():
		err = fmt.Errorf("owned by uid %d", st.Uid)
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("mode %04o", st.Mode&0o7777)
	case st.Size > max:
		err = fmt.Errorf("%d bytes, over %d", st.Size, max)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w: %v", f.Name(), ErrNotPrivate, err)
	}
	return f, st.Size, nil
}

// ReadFile reads the whole of name through OpenFile.
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, size, err := d.OpenFile(name, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return data, nil
}

// WriteFile stores data as name with mode perm, atomically: it is written to
// a fresh temporary entry (O_EXCL|O_NOFOLLOW) and renamed over name within
// the directory's descriptor, so a reader sees the old file or the new one.
func (d *Dir) WriteFile(name string, data []byte, perm os.FileMode) error {
	if err := validName(name); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(d.path, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, tmp))
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.fd, tmp, d.fd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return fmt.Errorf("privdir: writing %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// Names lists the directory's entries.
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// Remove deletes the entry name: a file, or a directory of files (one level,
// as wazero's own cache directories are).
func (d *Dir) Remove(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	sub := &Dir{fd: fd, path: filepath.Join(d.path, name)}
	names, err := sub.Names()
	for _, n := range names {
		_ = unix.Unlinkat(fd, n, 0)
	}
	sub.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
}
