package supervisor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/privdir"
)

// What a child trusts it receives from the parent over descriptors, never
// from a path: the compiled module and the post-initialization snapshot
// live in memfds the warm-up child fills, which the parent seals (no write,
// grow, shrink, or further seal change) once that child is gone and hands to
// every serving child as ChildCodeFD and ChildSnapshotFD. The cache directory
// is only the parent's, opened through package privdir, and only keeps the
// compiled code between server starts; what the parent reads back from it
// is checked against its digest and loaded by the warm-up with wazero's own
// checks, never trusted as it is (docs/sandbox.md "What a child trusts").

// maxCodeBytes and maxSnapshotBytes bound the memfds the parent accepts
// from the warm-up and the cache file it reads (~2.4 MB and ~260 KB today).
const (
	maxCodeBytes     = 256 << 20
	maxSnapshotBytes = 64 << 20
)

// sealedFile is a sealed memfd and the content's identity.
type sealedFile struct {
	f   *os.File
	key string // the compilation-cache key (code only)
}

// sealAll are the seals the parent adds: with them nobody (the parent
// included) can change the bytes again, nor lift the seals.
const sealAll = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

func newMemfd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("supervisor: memfd_create %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "memfd:"+name), nil
}

// seal checks f's size against max and seals it. Only once the child that
// wrote it has been reaped: F_SEAL_WRITE refuses while a writable shared
// mapping exists, and no other process holds the descriptor.
func seal(f *os.File, max int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 || fi.Size() > max {
		return fmt.Errorf("%s is %d bytes (want 1 to %d)", f.Name(), fi.Size(), max)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, sealAll); err != nil {
		return fmt.Errorf("sealing %s: %w", f.Name(), err)
	}
	if got, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || got&sealAll != sealAll {
		return fmt.Errorf("sealing %s: seals %#x, %v", f.Name(), got, err)
	}
	return nil
}

// reopenReadOnly opens a new read-only description of the parent's memfd
// for one child: children never share a file offset (wazero reads the code
// entry sequentially).
func reopenReadOnly(f *os.File) (*os.File, error) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("supervisor: reopening %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// childFiles are the descriptors a serving child gets after the IPC pipes
// (fd ChildCodeFD and ChildSnapshotFD), with what its argv says of them. The
// caller closes the files once the child has started.
func (p *Pool) childFiles() (files []*os.File, key string, snapshot bool, err error) {
	if p.code == nil {
		return nil, "", false, nil
	}
	code, err := reopenReadOnly(p.code.f)
	if err != nil {
		return nil, "", false, err
	}
	files, key = []*os.File{code}, p.code.key
	if p.snap != nil {
		snap, err := reopenReadOnly(p.snap.f)
		if err != nil {
			code.Close()
			return nil, "", false, err
		}
		files, snapshot = append(files, snap), true
	}
	return files, key, snapshot, nil
}

// closeDescriptors releases what childFiles reopens from.
func (p *Pool) closeDescriptors() {
	for _, s := range []*sealedFile{p.code, p.snap} {
		if s != nil {
			s.f.Close()
		}
	}
	if p.cacheDir != nil {
		p.cacheDir.Close()
	}
}

// The compiled code persisted in the cache directory: one file, replaced
// when the build (the cache key) changes. Its header names the key and the
// SHA-256 of the entry that follows.
const (
	codeFileName  = "compiled-code.bin"
	codeFileMagic = "connecta-code-1\n"
)

// loadPersistedCode copies the persisted entry into dst when it is intact
// and returns its key; "" when there is none (or it is refused, logged).
func (p *Pool) loadPersistedCode(dst *os.File) string {
	if p.cacheDir == nil {
		return ""
	}
	data, err := p.cacheDir.ReadFile(codeFileName, maxCodeBytes+int64(len(codeFileMagic))+130)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			p.log.Warn("persisted compiled code refused; compiling afresh", "err", err)
		}
		return ""
	}
	key, entry, err := parseCodeFile(data)
	if err != nil {
		p.log.Warn("persisted compiled code refused; compiling afresh", "file", filepath.Join(p.cacheDir.Path(), codeFileName), "err", err)
		return ""
	}
	if _, err := dst.WriteAt(entry, 0); err != nil {
		p.log.Warn("copying the persisted compiled code", "err", err)
		_ = dst.Truncate(0)
		return ""
	}
	return key
}

func parseCodeFile(data []byte) (key string, entry []byte, err error) {
	rest, ok := bytes.CutPrefix(data, []byte(codeFileMagic))
	if !ok || len(rest) < 130 || rest[64] != '\n' || rest[129] != '\n' {
		return "", nil, errors.New("not a connecta compiled-code file")
	}
	key, sum, entry := string(rest[:64]), string(rest[65:129]), rest[130:]
	if _, err := hex.DecodeString(key); err != nil {
		return "", nil, errors.New("malformed key")
	}
	if got := sha256.Sum256(entry); hex.EncodeToString(got[:]) != sum {
		return "", nil, errors.New("digest mismatch")
	}
	return key, entry, nil
}

// persistCode writes the warm-up's entry to the cache directory for the next
// start, and removes what older versions left there.
func (p *Pool) persistCode(code *os.File, key string) {
	if p.cacheDir == nil || len(key) != 64 {
		return
	}
	fi, err := code.Stat()
	if err != nil {
		return
	}
	entry := make([]byte, fi.Size())
	if _, err := code.ReadAt(entry, 0); err != nil && !errors.Is(err, io.EOF) {
		return
	}
	sum := sha256.Sum256(entry)
	data := make([]byte, 0, len(codeFileMagic)+130+len(entry))
	data = append(data, codeFileMagic...)
	data = append(data, key+"\n"+hex.EncodeToString(sum[:])+"\n"...)
	data = append(data, entry...)
	if err := p.cacheDir.WriteFile(codeFileName, data, 0o600); err != nil {
		p.log.Warn("persisting the compiled code failed; the next start compiles again", "err", err)
		return
	}
	// Earlier versions kept wazero's own cache directories and snapshot
	// files here; nothing reads them any more.
	names, _ := p.cacheDir.Names()
	for _, n := range names {
		if strings.HasPrefix(n, "wazero-") || (strings.HasPrefix(n, "snapshot-") && strings.HasSuffix(n, ".bin")) {
			_ = p.cacheDir.Remove(n)
		}
	}
}

// openCacheDir opens the configured cache directory (or
// <os.UserCacheDir()>/connecta/wazero, created 0700) through privdir; nil
// when the default location cannot be had at all: no user cache directory,
// or one that cannot be created (a read-only root file system, $HOME=/ as a
// container's user). The code is then compiled in memory at every start,
// after one WARN. A configured directory that cannot be created, and any
// directory that exists but is not private, is an error naming the fix: the
// first is the operator's explicit choice, the second someone else's
// directory, and neither is guessed around.
func (p *Pool) openCacheDir() (*privdir.Dir, error) {
	dir := p.opts.CacheDir
	implicit := dir == ""
	if implicit {
		base, err := os.UserCacheDir()
		if err != nil {
			p.log.Warn("no user cache directory; the module is compiled in memory at every start (set executor.cacheDir to keep it between starts)", "err", err)
			return nil, nil
		}
		dir = filepath.Join(base, "connecta", "wazero")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("supervisor: executor.cacheDir %s: %w", dir, err)
	}
	d, err := privdir.Create(dir)
	if err != nil && implicit && !errors.Is(err, privdir.ErrNotPrivate) {
		p.log.Warn("no writable cache directory; the module is compiled in memory at every start "+
			"(mount a volume there owned by this user, mode 0700, or a root-owned sticky tmpfs above it, or set executor.cacheDir)",
			"dir", dir, "uid", os.Getuid(), "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("supervisor: executor.cacheDir %s: %w (its entries are native code: it and every directory above it must be writable only by root or uid %d)", dir, err, os.Getuid())
	}
	return d, nil
}
