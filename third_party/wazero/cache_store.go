package wazero

import (
	"io"

	"github.com/tetratelabs/wazero/internal/filecache"
)

// CompilationCacheStore is where a CompilationCache made by
// NewCompilationCacheWithStore keeps compiled modules instead of a
// directory: Get returns the entry stored under key (ok=false when there is
// none), Add stores content under key, Delete drops a stale entry. An entry
// is opaque to the store; Get must return exactly what Add was given.
//
// A Get that returns an *os.File positioned at the entry's start lets a
// trusted cache (experimental.WithTrustedCompilationCache) map the native
// code from it instead of copying it, as it does for the directory cache.
type CompilationCacheStore interface {
	Get(key [32]byte) (content io.ReadCloser, ok bool, err error)
	Add(key [32]byte, content io.Reader) error
	Delete(key [32]byte) error
}

var _ filecache.Cache = CompilationCacheStore(nil)

// NewCompilationCacheWithStore is like NewCompilationCacheWithDir, with the
// entries kept in store: an embedder that hands compiled code to processes
// over descriptors, never through paths, can keep each entry in a sealed
// memory file.
func NewCompilationCacheWithStore(store CompilationCacheStore) CompilationCache {
	return &cache{fileCache: store}
}
