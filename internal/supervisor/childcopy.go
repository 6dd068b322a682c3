package supervisor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/privdir"
)

// cachedChildCopy writes the slim child once below the private cache
// directory d, through its descriptor only: d was opened and checked
// component by component from / (internal/privdir: ours, 0700, no foreign
// writer on the way), this adds that its file system is not mounted noexec,
// the copy is an unnamed O_TMPFILE in it (or, on a file system without
// O_TMPFILE, a random name unlinked as soon as it is open), and the
// returned read-only descriptor is what was checked against sum. No name of
// the copy outlives this function, so there is nothing on disk to replace.
func cachedChildCopy(d *privdir.Dir, b []byte, sum string) (*os.File, error) {
	dfd, dir := d.Fd(), d.Path()
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dfd, &sfs); err != nil {
		return nil, fmt.Errorf("supervisor: statfs of the cache directory %s: %w", dir, err)
	}
	if sfs.Flags&unix.ST_NOEXEC != 0 {
		return nil, fmt.Errorf("supervisor: cannot start the sandbox child: %v, and the cache directory %s is on a noexec mount; "+
			"allow executable memfds (sysctl vm.memfd_noexec=0 or 1), or set executor.cacheDir to a private directory on a file system mounted with exec",
			errMemfdNoExec, dir)
	}

	fd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o500)
	name := ""
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		name = ".sandbox-child-" + hex.EncodeToString(rnd[:]) + ".tmp"
		fd, err = unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o500)
	}
	if err != nil {
		return nil, fmt.Errorf("supervisor: creating the sandbox child's copy in %s: %w", dir, err)
	}
	if name != "" {
		defer unix.Unlinkat(dfd, name, 0)
	}
	w := os.NewFile(uintptr(fd), dir+"/(sandbox child copy)")
	// Closed before anything executes it: a writable descriptor makes exec
	// fail with ETXTBSY.
	defer w.Close()
	if _, err := w.Write(b); err != nil {
		return nil, fmt.Errorf("supervisor: writing the sandbox child's copy in %s: %w", dir, err)
	}
	ro, err := reopenVerified(w, int64(len(b)), sum, "its copy in "+dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Fstat(int(ro.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Getuid() {
		ro.Close()
		return nil, fmt.Errorf("supervisor: the sandbox child's copy in %s is not a regular file of uid %d (%v)", dir, os.Getuid(), err)
	}
	return ro, nil
}
