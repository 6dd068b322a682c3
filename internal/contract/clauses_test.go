package contract

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// clauseID is the shape of a contract clause id: an area letter and a small
// number (S1a is the one lettered sub-clause). Larger numbers are not clause
// ids (P50, P99 are percentiles).
var clauseID = regexp.MustCompile(`^([PASERMYLVX])([1-9]|1[01])(a?)$`)

// docClause is one defined entry of docs/contract.md: "- **P1** …".
var docClause = regexp.MustCompile(`(?m)^- \*\*([PASERMYLVX](?:[1-9]|1[01])a?)\*\*`)

// TestClauseIDsCitedAreDefined holds every clause id cited by code or by a
// test name to docs/contract.md, so that "(L6)" or TestE8_… can always be
// read in the repository.
func TestClauseIDsCitedAreDefined(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range docClause.FindAllStringSubmatch(string(doc), -1) {
		if defined[m[1]] {
			t.Errorf("docs/contract.md defines %s twice", m[1])
		}
		defined[m[1]] = true
	}
	if len(defined) < 60 {
		t.Fatalf("docs/contract.md defines only %d clauses; the entry form is `- **ID** text`", len(defined))
	}

	missing := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "third_party", "node_modules", ".git", "testdata", "build":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, id := range citedClauses(string(src)) {
			if !defined[id] {
				missing[id] = append(missing[id], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(missing))
	for id := range missing {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		files := missing[id]
		sort.Strings(files)
		t.Errorf("clause %s is cited (%s) but docs/contract.md does not define it", id, strings.Join(uniq(files), ", "))
	}
}

// citedClauses returns the clause ids in Go source: words split at every
// character that is not a letter or digit (so "P1_R1_OnePlusOne" gives P1
// and R1), with a leading Test/Fuzz/Benchmark/Example dropped ("TestE8").
func citedClauses(src string) []string {
	var out []string
	words := strings.FieldsFunc(src, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		for _, p := range []string{"Test", "Fuzz", "Benchmark", "Example"} {
			if rest, ok := strings.CutPrefix(w, p); ok && rest != "" {
				w = rest
				break
			}
		}
		if clauseID.MatchString(w) {
			out = append(out, w)
		}
	}
	return out
}

func uniq(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func TestCitedClausesSplitsTestNames(t *testing.T) {
	got := citedClauses("func TestE5_L7_Admission(t) {} // (L6) and S1a; P50 latency; case P1_R1_OnePlusOne")
	want := []string{"E5", "L7", "L6", "S1a", "P1", "R1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("citedClauses = %v, want %v", got, want)
	}
}
