package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The official JSON-Schema-Test-Suite (../shared, MIT): every case of
// tests/draft*/ for the five drafts. Skipped visibly without it;
// CONNECTA_REQUIRE_SCHEMA_SUITE=1 (CI) makes a missing suite a failure.
const suiteDir = "../../../../shared/testdata/json-schema-test-suite/tests"

var suiteDrafts = []struct {
	dir   string
	draft draft
	ref   *jsonschema.Draft
}{
	{"draft2020-12", draft2020, jsonschema.Draft2020},
	{"draft2019-09", draft2019, jsonschema.Draft2019},
	{"draft7", draft7, jsonschema.Draft7},
	{"draft6", draft6, jsonschema.Draft6},
	{"draft4", draft4, jsonschema.Draft4},
}

type suiteCase struct {
	draft    string
	file     string // relative to the draft's directory
	group    string
	desc     string
	schema   json.RawMessage
	data     json.RawMessage
	valid    bool
	optional bool // under optional/ (format/ included)
	format   bool // under optional/format/
}

func (c suiteCase) id() string { return c.draft + "/" + c.file + ": " + c.group + " / " + c.desc }

func loadSuite(t *testing.T) []suiteCase {
	t.Helper()
	if _, err := os.Stat(suiteDir); err != nil {
		if os.Getenv("CONNECTA_REQUIRE_SCHEMA_SUITE") == "1" {
			t.Fatalf("JSON-Schema-Test-Suite missing at %s (CONNECTA_REQUIRE_SCHEMA_SUITE=1): %v", suiteDir, err)
		}
		t.Skipf("JSON-Schema-Test-Suite not found at %s; set CONNECTA_REQUIRE_SCHEMA_SUITE=1 to make this a failure", suiteDir)
	}
	var cases []suiteCase
	for _, d := range suiteDrafts {
		root := filepath.Join(suiteDir, d.dir)
		err := filepath.WalkDir(root, func(path string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var groups []struct {
				Description string          `json:"description"`
				Schema      json.RawMessage `json:"schema"`
				Tests       []struct {
					Description string          `json:"description"`
					Data        json.RawMessage `json:"data"`
					Valid       bool            `json:"valid"`
				} `json:"tests"`
			}
			if err := json.Unmarshal(raw, &groups); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, g := range groups {
				for _, tc := range g.Tests {
					cases = append(cases, suiteCase{draft: d.dir, file: filepath.ToSlash(rel), group: g.Description,
						desc: tc.Description, schema: g.Schema, data: tc.Data, valid: tc.Valid,
						optional: strings.HasPrefix(rel, "optional"), format: strings.HasPrefix(rel, "optional/format/")})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(cases) < 5000 {
		t.Fatalf("only %d suite cases found under %s", len(cases), suiteDir)
	}
	return cases
}

func draftOfDir(dir string) draft {
	for _, d := range suiteDrafts {
		if d.dir == dir {
			return d.draft
		}
	}
	panic(dir)
}

// suiteVerdict evaluates one case: ok is the verdict's correctness, reason
// the pass-through reason (then ok is meaningless).
func suiteVerdict(v *Validator, compiledBy map[string]*compiled, c suiteCase) (ok bool, reason Reason) {
	key := c.draft + "\x00" + string(c.schema)
	comp, has := compiledBy[key]
	if !has {
		comp = v.compile(c.schema, draftOfDir(c.draft))
		compiledBy[key] = comp
	}
	r := (&Schema{v: v, c: comp}).Evaluate(c.data)
	if r.Passthrough != ReasonNone {
		return false, r.Passthrough
	}
	return (r.Findings == nil) == c.valid, ReasonNone
}

// referencesAnotherDocument is what a remote_ref pass-through must be able
// to point at: the suite's remotes or a json-schema.org metaschema.
func referencesAnotherDocument(schema json.RawMessage) bool {
	return bytes.Contains(schema, []byte("localhost:1234")) || bytes.Contains(schema, []byte("json-schema.org"))
}

// Every required case of the suite gets the expected verdict, except those
// whose schema references another document: they pass through by design
// (remote_ref), are counted apart, and are exactly suiteRemoteCases.
func TestSuite_EveryRequiredCaseGivesTheExpectedVerdict(t *testing.T) {
	cases := loadSuite(t)
	v := New(Options{})
	compiledBy := map[string]*compiled{}
	want := map[string]bool{}
	for _, id := range suiteRemoteCases {
		want[id] = true
	}
	remote := map[string]bool{}
	passed := 0
	for _, c := range cases {
		if c.optional {
			continue
		}
		ok, reason := suiteVerdict(v, compiledBy, c)
		switch {
		case reason == ReasonRemoteRef:
			remote[c.id()] = true
			if !referencesAnotherDocument(c.schema) {
				t.Errorf("%s: remote_ref pass-through, but the schema names no other document: %s", c.id(), c.schema)
			}
			if !want[c.id()] {
				t.Errorf("%s: passes through (remote_ref) but is not listed in suiteRemoteCases", c.id())
			}
		case reason != ReasonNone:
			t.Errorf("%s: passes through (%s); schema %s", c.id(), reason, c.schema)
		case !ok:
			t.Errorf("%s: valid = %v expected; schema %s, data %s", c.id(), c.valid, c.schema, c.data)
		default:
			passed++
		}
	}
	for id := range want {
		if !remote[id] {
			t.Errorf("%s: listed in suiteRemoteCases but no longer passes through", id)
		}
	}
	t.Logf("required cases: %d right, %d pass through by design (other documents)", passed, len(remote))
}

// TestSuite_Table prints the per-draft table (required, optional, format)
// beside santhosh-tekuri/jsonschema/v6 on the same cases, the reference
// loading nothing either. go test -run TestSuite_Table -v ./internal/gateway/validate/
func TestSuite_Table(t *testing.T) {
	if testing.Short() {
		t.Skip("the comparison table compiles every suite schema twice")
	}
	cases := loadSuite(t)
	v := New(Options{})
	compiledBy := map[string]*compiled{}
	refBy := map[string]*jsonschema.Schema{}
	type tally struct{ total, ours, oursRemote, oursOther, ref, refFailed int }
	rows := map[string]*[3]tally{}
	for _, c := range cases {
		row := rows[c.draft]
		if row == nil {
			row = &[3]tally{}
			rows[c.draft] = row
		}
		col := 0
		switch {
		case c.format:
			col = 2
		case c.optional:
			col = 1
		}
		tl := &row[col]
		tl.total++
		ok, reason := suiteVerdict(v, compiledBy, c)
		switch {
		case reason == ReasonRemoteRef:
			tl.oursRemote++
		case reason != ReasonNone:
			tl.oursOther++
		case ok:
			tl.ours++
		}
		key := c.draft + "\x00" + string(c.schema)
		s, has := refBy[key]
		if !has {
			s = referenceCompile(c.schema, c.draft)
			refBy[key] = s
		}
		if s == nil {
			tl.refFailed++
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.data))
		if err == nil && (s.Validate(inst) == nil) == c.valid {
			tl.ref++
		}
	}
	var b strings.Builder
	b.WriteString("\n| draft | column | cases | connecta right | connecta pass-through (other document / other) | jsonschema/v6 right | v6 cannot compile |\n|---|---|---|---|---|---|---|\n")
	for _, sd := range suiteDrafts {
		d := sd.dir
		for i, name := range []string{"required", "optional", "format"} {
			tl := rows[d][i]
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d / %d | %d | %d |\n", d, name, tl.total, tl.ours, tl.oursRemote, tl.oursOther, tl.ref, tl.refFailed)
		}
	}
	t.Log(b.String())
}

// referenceCompile compiles with santhosh-tekuri/jsonschema/v6 loading
// nothing (as connecta), format as its defaults (asserted before 2019-09).
func referenceCompile(schema json.RawMessage, dir string) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseAll{})
	for _, d := range suiteDrafts {
		if d.dir == dir {
			c.DefaultDraft(d.ref)
		}
	}
	if err := c.AddResource("https://connecta.invalid/s.json", doc); err != nil {
		return nil
	}
	s, err := c.Compile("https://connecta.invalid/s.json")
	if err != nil {
		return nil
	}
	return s
}
