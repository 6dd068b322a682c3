package lexical

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/jstext"
)

func TestS1_TokensSplitCamelCaseAndKeepOnlyASCII(t *testing.T) {
	cases := map[string]string{
		"ABCDef":             "abc def",
		"getJobLogs":         "get job logs",
		"list_issues":        "list issues",
		"HTTPServerError2Go": "http server error2 go",
		"v1Beta":             "v1 beta",
		"日本 search—café":     "search caf",
		"  ":                 "",
		"ABC":                "abc",
		"aBCDe":              "a bc de",
	}
	for in, want := range cases {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestS1_ConversationalCleanupAppliesToScoringTermsOnly(t *testing.T) {
	if got := RetrievalQuery("Please show me the latest pipeline runs"); got != "pipeline runs" {
		t.Fatalf("got %q", got)
	}
	// All framing: the raw query stays (a search, never a browse).
	if got := RetrievalQuery("show me all"); got != "show me all" {
		t.Fatalf("got %q", got)
	}
	q := ParseQuery("show me all")
	if q.Browse || q.Unsearchable || !reflect.DeepEqual(q.Terms, []string{"show", "me", "all"}) {
		t.Fatalf("got %+v", q)
	}
}

func TestS1_InflectionsMatchWholeTokensOnly(t *testing.T) {
	yes := [][2]string{
		{"list", "lists"}, {"issue", "issues"}, {"issues", "issue"}, {"close", "closed"}, {"closed", "close"},
		{"reply", "replies"}, {"replies", "reply"}, {"copy", "copied"}, {"box", "boxes"}, {"run", "run"},
	}
	no := [][2]string{{"list", "enlist"}, {"record", "recording"}, {"log", "login"}, {"run", "running"}}
	for _, c := range yes {
		if !MatchesTerm(c[1], c[0]) {
			t.Errorf("%q should match %q", c[0], c[1])
		}
	}
	for _, c := range no {
		if MatchesTerm(c[1], c[0]) {
			t.Errorf("%q must not match %q", c[0], c[1])
		}
	}
}

func docs(pairs ...string) []Document {
	var d []Document
	for i := 0; i+1 < len(pairs); i += 2 {
		d = append(d, Document{Name: pairs[i], Description: pairs[i+1]})
	}
	return d
}

func names(r *Result, cats [][]Document) []string {
	var out []string
	for _, m := range r.Matches {
		out = append(out, cats[m.Catalog][m.Doc].Name)
	}
	return out
}

func TestS1_CompleteMatchesPrecedePartialFiller(t *testing.T) {
	cat := docs(
		"get_job_logs", "Fetch the logs of one job.",
		"list_jobs", "List jobs of a pipeline run.",
		"get_run", "Get a pipeline run with its jobs and logs.",
		"rare_thing", "pipeline",
	)
	cats := [][]Document{cat}
	r := Search(ParseQuery("pipeline run job logs"), []*Catalog{NewCatalog(cat)})
	got := names(r, cats)
	if got[0] != "get_run" {
		t.Fatalf("complete match first: %v", got)
	}
	// rare_thing matched one term only: dropped while a complete match exists.
	for _, n := range got {
		if n == "rare_thing" {
			t.Fatalf("single-term partial kept beside a complete match: %v", got)
		}
	}
	if r.Partial {
		t.Fatal("partial with a complete match")
	}
}

func TestS1_ExactToolNameInRawQueryCompetesByScore(t *testing.T) {
	// "get issue" names get_issue exactly: a partial (no "comments") that
	// still competes with the complete description-only decoy by score, and
	// outranks the ordinary partial list_comments, which is dropped.
	cat := docs(
		"decoy", "Get issue comments.",
		"get_issue", "Fetch one.",
		"list_comments", "List comments.",
		"a", "comments", "b", "comments", "c", "comments",
	)
	r := Search(ParseQuery("please get issue comments"), []*Catalog{NewCatalog(cat)})
	got := names(r, [][]Document{cat})
	if got[0] != "get_issue" || got[1] != "decoy" {
		t.Fatalf("got %v", got)
	}
	if !r.Matches[0].ExactName || r.Matches[0].Complete {
		t.Fatalf("get_issue should be an exact-name partial: %+v", r.Matches[0])
	}
	for _, n := range got {
		if n == "list_comments" || n == "a" {
			t.Fatalf("one-term partial kept beside a complete match: %v", got)
		}
	}
}

func TestS1_AnyTermFallbackWhenNothingIsComplete(t *testing.T) {
	cat := docs("list_issues", "List issues.", "list_labels", "List labels.", "ping", "Health.")
	r := Search(ParseQuery("labels zebra"), []*Catalog{NewCatalog(cat)})
	if !r.Partial || len(r.Matches) != 1 || names(r, [][]Document{cat})[0] != "list_labels" {
		t.Fatalf("got %v partial=%v", names(r, [][]Document{cat}), r.Partial)
	}
}

func TestS1_BrowseListsEverythingInGlobalOrderAndFailedCatalogTakesASlot(t *testing.T) {
	a := docs("a1", "", "a2", "")
	b := docs("b1", "")
	r := Search(ParseQuery("   "), []*Catalog{NewCatalog(a), FailedCatalog(), NewCatalog(b)})
	if len(r.Matches) != 3 || r.Matches[2].Order != 3 || r.Partial {
		t.Fatalf("got %+v", r.Matches)
	}
}

func TestS1_NoASCIITermsIsNotABrowse(t *testing.T) {
	q := ParseQuery("日本語")
	r := Search(q, []*Catalog{NewCatalog(docs("a", "b"))})
	if !q.Unsearchable || len(r.Matches) != 0 {
		t.Fatalf("got %+v", r.Matches)
	}
	a := r.Analyze(nil)
	if !reflect.DeepEqual(a.Unmatched, []string{"日本語"}) {
		t.Fatalf("got %+v", a)
	}
}

func TestS1_TiesBreakByGlobalOrder(t *testing.T) {
	cat := docs("x_one", "widget", "x_two", "widget", "x_three", "widget")
	r := Search(ParseQuery("widget"), []*Catalog{NewCatalog(cat)})
	if got := names(r, [][]Document{cat}); !reflect.DeepEqual(got, []string{"x_one", "x_two", "x_three"}) {
		t.Fatalf("got %v", got)
	}
}

func TestS1_QueryAnalysisIsBounded(t *testing.T) {
	long := strings.Repeat("z", 100)
	raw := "alpha beta gamma delta epsilon zeta eta theta iota " + long
	q := ParseQuery(raw)
	r := Search(q, []*Catalog{NewCatalog(docs("alpha", "", "beta_tool", "beta"))})
	a := r.Analyze([]Ref{{0, 0}})
	total := len(a.Represented) + len(a.OtherResult) + len(a.Unmatched)
	if total != MaxAnalysisTerms || !a.Truncated {
		t.Fatalf("got %+v", a)
	}
	if !reflect.DeepEqual(a.Represented, []string{"alpha"}) || !reflect.DeepEqual(a.OtherResult, []string{"beta"}) {
		t.Fatalf("got %+v", a)
	}
	clipped, _ := jstext.ClampPoints(long, MaxAnalysisTermPoints)
	if n := len([]rune(clipped)); n != MaxAnalysisTermPoints || !strings.HasSuffix(clipped, "…") {
		t.Fatalf("clip: %d %q", n, clipped)
	}
}

func catalogOf(n int) []Document {
	verbs := []string{"list", "get", "create", "update", "delete", "search"}
	nouns := []string{"issue", "project", "label", "user", "comment", "run", "job", "log", "file", "page"}
	out := make([]Document, n)
	for i := range out {
		v, o := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)]
		out[i] = Document{
			Name:        fmt.Sprintf("%s_%s_%d", v, o, i),
			Description: fmt.Sprintf("%s a %s in workspace %d; returns the %s with its metadata.", v, o, i%37, o),
		}
	}
	return out
}

func BenchmarkSearch1000(b *testing.B) {
	cat := NewCatalog(catalogOf(1000))
	q := ParseQuery("list project comments")
	b.ReportAllocs()
	for b.Loop() {
		Search(q, []*Catalog{cat})
	}
}

func BenchmarkIndex1000(b *testing.B) {
	docs := catalogOf(1000)
	b.ReportAllocs()
	for b.Loop() {
		NewCatalog(docs)
	}
}

func FuzzTokensFastPathMatchesGeneral(f *testing.F) {
	for _, s := range []string{"ABCDef", "getJobLogs", "aBCDe", "HTTPServerError2Go", "x__Y9z", "ABcDEf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return
			}
		}
		if a, b := Tokens(s), tokensUnicode(s); !reflect.DeepEqual(a, b) && !(len(a) == 0 && len(b) == 0) {
			t.Fatalf("%q: fast %q general %q", s, a, b)
		}
	})
}

// A query's length is unbounded: many distinct terms that match nothing
// must not cost memory per term per document.
func TestS1_UnmatchedTermsCostNoPerDocumentMemory(t *testing.T) {
	const docs, terms = 2000, 8000
	ds := make([]Document, docs)
	for i := range ds {
		ds[i] = Document{Name: fmt.Sprintf("list_issues_%c", 'a'+i%26), Description: "List issues in a project"}
	}
	cat := NewCatalog(ds)
	words := make([]string, 0, terms+1)
	for i := range terms {
		words = append(words, "zq"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676%26)))
	}
	words = append(words, "issues")
	q := ParseQuery(strings.Join(words, " "))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := Search(q, []*Catalog{cat})
	runtime.ReadMemStats(&after)
	if len(res.Matches) != docs {
		t.Fatalf("matches = %d, want every document (any-term fallback on \"issues\")", len(res.Matches))
	}
	// Dense marks would be terms × docs × 2 bytes = 32 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Errorf("Search allocated %d bytes for %d unmatched terms over %d documents", got, terms, docs)
	}
}
