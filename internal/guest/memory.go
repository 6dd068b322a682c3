package guest

import (
	"golang.org/x/sys/unix"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator backs each linear memory with one private anonymous mapping
// of its maximum size (MAP_NORESERVE: untouched pages cost nothing). The
// memory grows in place, so memory.grow never copies, and Free unmaps it,
// returning every page to the OS as soon as the instance closes — the
// default allocator copies on every grow and leaves the garbage to the Go GC.
//
// The range [populateFrom, populateTo) — where the engine's snapshot is
// restored — is populated with one madvise instead of a page fault per page.
type mmapAllocator struct {
	populateFrom, populateTo uint64
}

func (a mmapAllocator) Allocate(_, maxBytes uint64) experimental.LinearMemory {
	if maxBytes == 0 || maxBytes > 1<<32 {
		return nil
	}
	buf, err := unix.Mmap(-1, 0, int(maxBytes), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	if a.populateFrom < a.populateTo && a.populateTo <= maxBytes {
		// Best effort (Linux 5.14+); without it the pages fault in one by one.
		_ = unix.Madvise(buf[a.populateFrom:a.populateTo], unix.MADV_POPULATE_WRITE)
	}
	return &mmapMemory{buf: buf}
}

type mmapMemory struct{ buf []byte }

// Reallocate grows in place; nil when size is over the mapping (memory.grow
// then fails and the guest's malloc returns NULL: QuickJS's out of memory).
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

func (m *mmapMemory) Free() {
	if m.buf != nil {
		_ = unix.Munmap(m.buf)
		m.buf = nil
	}
}
