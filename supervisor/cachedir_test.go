package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// privateTempDir is a fresh cache directory that passes privdir's walk.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
