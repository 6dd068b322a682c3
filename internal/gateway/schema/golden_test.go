package schema

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/test/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.golden from the current renderer")

// goldenText is every byte-exact output of one schema: both shapes, their
// flags, and the key lists.
func goldenText(raw []byte) string {
	d := Parse(raw)
	var b strings.Builder
	s, ds := d.Search(), d.Describe()
	fmt.Fprintf(&b, "search: %s\nsearch.truncated: %v\n", s.Text, s.Truncated)
	fmt.Fprintf(&b, "describe: %s\ndescribe.truncated: %v\n", ds.Text, ds.Truncated)
	if k, ok := d.Keys(); ok {
		props, _ := json.Marshal(k.Properties)
		req, _ := json.Marshal(k.Required)
		fmt.Fprintf(&b, "keys: %s\nrequired: %s\n", props, req)
	} else {
		b.WriteString("keys: absent\n")
	}
	return b.String()
}

// TestS1_CompactShapesGolden pins byte-exact renders (run with -update to
// rewrite after an intended change, then review the diff).
func TestS1_CompactShapesGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/render/*.json")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenText(raw)
			testkit.Golden(t, strings.TrimSuffix(in, ".json")+".golden", []byte(got), *update)
		})
	}
}
