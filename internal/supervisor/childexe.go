package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Child says what every sandbox child executes (docs/DESIGN.md "The sandbox
// child binary"). The zero value re-executes this binary (/proc/self/exe),
// which must then call sandbox.MaybeRunChild first in main.
type Child struct {
	// Binary is the slim child (cmd/sandbox-child) the parent carries;
	// nil → re-execute this binary.
	Binary []byte
	// SHA256 is the hex checksum the build stamped for Binary. A Binary
	// that does not have it is refused: it is not this build's child.
	SHA256 string
}

// The kinds of child a pool runs (/health executor.child and the label of
// connecta_sandbox_child_info).
const (
	ChildEmbedded = "embedded" // the slim child from a sealed memfd or a verified copy
	ChildSelf     = "self"     // this binary, re-executed
)

// BuildSlimChild is the command that builds bin/connecta with the slim child
// inside (the WARN of a build without it names it).
const BuildSlimChild = "make build"

// childExe is the executable the pool's children run: this binary, or one
// read-only descriptor of the verified slim child that every spawn passes
// in ExtraFiles and executes as /proc/self/fd/K (ForkExec cannot exec a
// descriptor, and the magic link names the inode itself, not a path anyone
// can swap).
type childExe struct {
	kind string
	how  string   // "memfd" or "cache copy" when embedded
	file *os.File // nil for self
}

// command is the path to execute and the descriptors to pass after files:
// the child's descriptor K is 3 + its index in ExtraFiles.
func (e *childExe) command(files []*os.File) (string, []*os.File) {
	if e == nil || e.file == nil {
		return selfExe, files
	}
	return "/proc/self/fd/" + strconv.Itoa(3+len(files)), append(files, e.file)
}

// describe names the executable in spawn errors.
func (e *childExe) describe() string {
	switch {
	case e == nil:
		return "floor program"
	case e.file == nil:
		return "this binary re-executed"
	}
	return "the embedded slim child from its " + e.how
}

func (e *childExe) close() {
	if e != nil && e.file != nil {
		e.file.Close()
	}
}

// errMemfdNoExec marks a kernel that refuses executable memfds
// (vm.memfd_noexec): the verified copy in the cache directory is next.
var errMemfdNoExec = errors.New("the kernel refuses executable memfds (vm.memfd_noexec)")

// prepareChild makes the executable every child runs, once, at pool start.
// The slim child goes into a sealed memfd; where the kernel refuses an
// executable memfd it is written once below the private cache directory
// and verified from the opened descriptor. Every failure names its cause
// and fix; nothing falls back to an unverified file.
func (p *Pool) prepareChild() (*childExe, error) {
	c := p.opts.Child
	if c.Binary == nil {
		if _, err := os.Stat(selfExe); err != nil {
			return nil, fmt.Errorf("supervisor: cannot re-execute %s: %w", selfExe, err)
		}
		p.log.Warn("this build carries no slim sandbox child: every sandbox child re-executes the whole binary (more CPU and memory per program); "+
			"build bin/connecta with it: "+BuildSlimChild, "child", ChildSelf)
		return &childExe{kind: ChildSelf}, nil
	}
	if err := checkChildSum(c.Binary, c.SHA256); err != nil {
		return nil, err
	}
	var f *os.File
	var err error
	if !p.opts.testMemfdNoExec {
		f, err = sealedMemfd(c.Binary, c.SHA256)
	} else {
		err = errMemfdNoExec
	}
	if err == nil {
		p.log.Info("sandbox children execute the embedded slim child from a sealed memfd", "child", ChildEmbedded, "sha256", c.SHA256)
		return &childExe{kind: ChildEmbedded, how: "memfd", file: f}, nil
	}
	if !errors.Is(err, errMemfdNoExec) {
		return nil, err
	}
	if p.cacheDir == nil {
		return nil, fmt.Errorf("supervisor: cannot start the sandbox child: %v, and there is no cache directory to write a verified copy to; "+
			"allow executable memfds (sysctl vm.memfd_noexec=0 or 1), or give the executor a cache directory (executor.cacheDir)", err)
	}
	if f, err = cachedChildCopy(p.cacheDir, c.Binary, c.SHA256); err != nil {
		return nil, err
	}
	p.log.Info("sandbox children execute the embedded slim child from a verified copy below the cache directory: "+errMemfdNoExec.Error(),
		"child", ChildEmbedded, "dir", p.cacheDir.Path(), "sha256", c.SHA256)
	return &childExe{kind: ChildEmbedded, how: "cache copy", file: f}, nil
}

// checkChildSum refuses a child whose bytes are not the build's.
func checkChildSum(b []byte, want string) error {
	if want == "" {
		return fmt.Errorf("supervisor: the embedded sandbox child carries no SHA-256 stamp; rebuild with %s", BuildSlimChild)
	}
	got := sha256.Sum256(b)
	if hex.EncodeToString(got[:]) != want {
		return fmt.Errorf("supervisor: the embedded sandbox child's SHA-256 is %x, the build stamped %s: it is another build's child; rebuild with %s",
			got, want, BuildSlimChild)
	}
	return nil
}

// checkFileSum hashes f from its start and compares with want.
func checkFileSum(f *os.File, size int64, want, what string) error {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, size+1))
	if err != nil {
		return fmt.Errorf("supervisor: reading back the sandbox child from %s: %w", what, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != want {
		return fmt.Errorf("supervisor: the sandbox child read back from %s has SHA-256 %s (%d bytes), not %s (%d bytes): "+
			"the copy was changed or cut short; the pool does not start on an unverified child", what, got, n, want, size)
	}
	return nil
}

// sealedMemfd writes b into a memfd, seals it against writing, growing,
// shrinking and further seals, and returns a read-only descriptor of it
// (an open writable descriptor would make exec fail with ETXTBSY) whose
// contents have been checked against sum.
func sealedMemfd(b []byte, sum string) (*os.File, error) {
	const name = "connecta-sandbox-child"
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Before Linux 6.3 MFD_EXEC is unknown, and every memfd is executable.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	switch {
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("%w: memfd_create(MFD_EXEC): %v", errMemfdNoExec, err)
	case err != nil:
		return nil, fmt.Errorf("supervisor: memfd_create for the sandbox child: %w (the kernel must have memfd_create, Linux ≥ 3.17)", err)
	}
	rw := os.NewFile(uintptr(fd), "memfd:"+name)
	defer rw.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("supervisor: fstat of the sandbox child's memfd: %w", err)
	}
	if st.Mode&0o111 == 0 {
		return nil, fmt.Errorf("%w: the memfd was created without execute permission", errMemfdNoExec)
	}
	if _, err := rw.Write(b); err != nil {
		return nil, fmt.Errorf("supervisor: writing the sandbox child into its memfd: %w", err)
	}
	pageOut(b)
	if err := sealChild(rw, int64(len(b))); err != nil {
		return nil, err
	}
	return reopenVerified(rw, int64(len(b)), sum, "its sealed memfd")
}

// sealChild seals the child's memfd with descriptors.go's one rule
// (sealAll, checked after adding) and says what a refusal means here.
func sealChild(f *os.File, size int64) error {
	if err := seal(f, size); err != nil {
		return fmt.Errorf("supervisor: the sandbox child's memfd cannot be sealed: %w; the pool does not run an unsealed child "+
			"(a kernel with memfd sealing, Linux ≥ 3.17, is needed)", err)
	}
	return nil
}

// pageOut asks the kernel to reclaim b's pages: once copied into the memfd
// the parent never reads the embedded child again, and its megabytes of the
// binary's pages would otherwise stay in the parent's RSS. MADV_PAGEOUT
// keeps the contents (file pages are read again on use, anonymous ones are
// swapped or stay), so it is safe on any slice; a kernel before 5.4 ignores
// it.
func pageOut(b []byte) {
	const page = 4096
	start := unsafe.Pointer(unsafe.SliceData(b))
	off := (page - uintptr(start)%page) % page
	if uintptr(len(b)) <= off+page {
		return
	}
	n := (uintptr(len(b)) - off) / page * page
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(start, off)), n), unix.MADV_PAGEOUT)
}

// reopenVerified opens f's inode again read-only (reopenReadOnly: its
// /proc/self/fd link, the same inode, never a path in a directory) and
// checks the contents from that descriptor.
func reopenVerified(f *os.File, size int64, sum, what string) (*os.File, error) {
	ro, err := reopenReadOnly(f)
	if err != nil {
		return nil, fmt.Errorf("supervisor: the sandbox child from %s: %w (is /proc mounted?)", what, err)
	}
	if err := checkFileSum(ro, size, sum, what); err != nil {
		ro.Close()
		return nil, err
	}
	return ro, nil
}
