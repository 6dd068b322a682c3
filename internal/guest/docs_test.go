package guest

import (
	"os"
	"strings"
	"testing"
)

// The README states the log entry cap beside the 4,000 characters, with the
// marker a program sees (it was undocumented).
func TestDocs_ReadmeStatesTheLogEntryCap(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(readme)), " ")
	if marker := LogCountMarker(DefaultMaxLogEntries); !strings.Contains(flat, "`"+marker+"`") {
		t.Fatalf("README.md does not state the log entry cap %s", marker)
	}
}
