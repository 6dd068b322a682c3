package guest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// CodeFile is a compilation cache of one entry, the QuickJS module's compiled
// code, kept in a file the caller holds by descriptor (a sealed memfd in the
// sandbox: no path is ever opened). The entry is the file's whole content.
type CodeFile struct {
	// File holds the entry, or is empty. The engine reads it from offset 0
	// and keeps using it: the caller must not close it while the engine
	// lives, nor share its open file description with another process that
	// reads it concurrently (offsets are per description).
	File *os.File
	// Key is the hex wazero cache key the entry was stored under (what
	// CompiledKey reported when it was filled); "" when File is empty.
	Key string
	// Fill: on a miss the engine compiles the module and writes the entry
	// into File (which must then be writable); without it a miss compiles
	// in memory and File is left alone.
	Fill bool
	// Trusted loads the entry without validating the module's function
	// bodies or checking the code's CRC, mapping the native code from File
	// (third_party/wazero.patch). Only for bytes produced or verified in
	// this process tree's lifetime and sealed against writes since.
	Trusted bool
}

// codeStore is CodeFile as wazero's CompilationCacheStore.
type codeStore struct {
	cf    CodeFile
	key   [32]byte
	have  bool
	added string // hex key of what Add wrote
}

func newCodeStore(cf CodeFile) (*codeStore, error) {
	s := &codeStore{cf: cf}
	if cf.Key != "" {
		n, err := hex.Decode(s.key[:], []byte(cf.Key))
		if err != nil || n != len(s.key) {
			return nil, fmt.Errorf("guest: CodeFile.Key %q is not a 32-byte hex key", cf.Key)
		}
		s.have = true
	}
	return s, nil
}

// Get hands wazero a duplicate of the descriptor at offset 0 (wazero closes
// what it gets; the trusted path maps the code from it).
func (s *codeStore) Get(key [32]byte) (io.ReadCloser, bool, error) {
	if !s.have || key != s.key {
		return nil, false, nil
	}
	fd, err := unix.Dup(int(s.cf.File.Fd()))
	if err != nil {
		return nil, false, err
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), s.cf.File.Name())
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, true, nil
}

func (s *codeStore) Add(key [32]byte, content io.Reader) error {
	if !s.cf.Fill {
		return nil
	}
	f := s.cf.File
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := io.Copy(io.NewOffsetWriter(f, 0), content); err != nil {
		return err
	}
	s.key, s.have, s.added = key, true, hex.EncodeToString(key[:])
	return nil
}

func (s *codeStore) Delete([32]byte) error {
	s.have = false
	if !s.cf.Fill {
		return nil
	}
	return s.cf.File.Truncate(0)
}

var errCodeFileAndDir = errors.New("guest: EngineOptions.Code and CacheDir are exclusive")
