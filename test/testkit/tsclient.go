package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TSClientNode is the node that runs the pinned TypeScript MCP client in dir
// (test/tsclient/testdata, as the test's package reaches it). Where node or
// the client's packages are missing it skips the test, or fails it when
// CONNECTA_REQUIRE_TSCLIENT is set (CI), so a missing part is never silent.
func TSClientNode(t testing.TB, dir string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil || statErr != nil {
		msg := "the TypeScript MCP client is not installed (run make tsclient; needs node and npm)"
		if os.Getenv("CONNECTA_REQUIRE_TSCLIENT") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}
