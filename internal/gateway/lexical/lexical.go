// Package lexical is discovery's tokenizer and ranker (docs/meta-tools.md §4,
// contract S1): whole-token matching with narrow inflections, IDF-weighted
// scoring across every searched catalog, complete matches first, exact tool
// names competing with them, ≥ 2-term partials as filler, and the any-term
// fallback when nothing is complete. Of ours it imports only jstext.
package lexical

import (
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// Bounds of the no-match analysis.
const (
	MaxAnalysisTerms      = 8  // terms echoed back in queryAnalysis
	MaxAnalysisTermPoints = 64 // code points per echoed term, "…" included
)

// isStopWord reports conversational framing removed from scoring terms
// only; action words (get, list, search, find, create) deliberately stay.
func isStopWord(t string) bool {
	switch t {
	case "a", "all", "an", "and", "are", "can", "could", "current",
		"for", "from", "i", "in", "into", "it", "latest", "let",
		"me", "most", "of", "on", "our", "please", "right", "show",
		"that", "the", "this", "to", "up", "want", "when", "which",
		"with", "you":
		return true
	}
	return false
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Tokens splits text the way the index does: `ABCDef` → `ABC Def`, `aB` /
// `1B` → `a B` / `1 B`, lowercase, then runs of [a-z0-9]. Only ASCII
// survives.
func Tokens(text string) []string {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return tokensUnicode(text)
		}
	}
	var tokens []string
	start := -1 // start of the current token in text
	for i := 0; i < len(text); i++ {
		c := text[i]
		alnum := isLower(c) || isDigit(c) || isUpper(c)
		if !alnum {
			if start >= 0 {
				tokens = append(tokens, lowerASCII(text[start:i]))
				start = -1
			}
			continue
		}
		if start >= 0 && isUpper(c) && i > 0 {
			prev := text[i-1]
			// `aB`/`1B` split, and the last capital of a run followed by a
			// lowercase letter starts a new word (`ABCDef`).
			if isLower(prev) || isDigit(prev) || (isUpper(prev) && i+1 < len(text) && isLower(text[i+1])) {
				tokens = append(tokens, lowerASCII(text[start:i]))
				start = i
				continue
			}
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		tokens = append(tokens, lowerASCII(text[start:]))
	}
	return tokens
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if isUpper(s[i]) {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if isUpper(b[j]) {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// tokensUnicode is the general path: camel splits on ASCII, then Unicode
// lowercasing (a few non-ASCII letters lowercase to ASCII, as in
// JavaScript), then runs of [a-z0-9].
func tokensUnicode(text string) []string {
	split := splitCamel(text)
	var tokens []string
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			tokens = append(tokens, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range split {
		r = unicode.ToLower(r)
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			cur = append(cur, byte(r))
			continue
		}
		flush()
	}
	flush()
	return tokens
}

// splitCamel applies the two camel-case splits in order, ASCII only.
func splitCamel(s string) string {
	// Pass 1: a run of ≥ 2 capitals followed by a lowercase letter splits
	// before its last capital (`ABCDef` → `ABC Def`).
	var b strings.Builder
	b.Grow(len(s) + 8)
	i := 0
	for i < len(s) {
		if !isUpper(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isUpper(s[j]) {
			j++
		}
		if j-i >= 2 && j < len(s) && isLower(s[j]) {
			b.WriteString(s[i : j-1])
			b.WriteByte(' ')
			b.WriteString(s[j-1 : j+1])
			i = j + 1
			continue
		}
		b.WriteString(s[i:j])
		i = j
	}
	p1 := b.String()
	// Pass 2: `aB` / `1B` → `a B` / `1 B`.
	b.Reset()
	for k := 0; k < len(p1); k++ {
		c := p1[k]
		b.WriteByte(c)
		if (isLower(c) || isDigit(c)) && k+1 < len(p1) && isUpper(p1[k+1]) {
			b.WriteByte(' ')
			b.WriteByte(p1[k+1])
			k++
		}
	}
	return b.String()
}

// Normalize is the tokens joined by single spaces.
func Normalize(text string) string { return strings.Join(Tokens(text), " ") }

// Terms are the distinct tokens of q in order.
func Terms(q string) []string {
	toks := Tokens(q)
	seen := make(map[string]struct{}, len(toks))
	out := toks[:0:0]
	for _, t := range toks {
		if _, dup := seen[t]; dup {
			continue
		}
		seen[t] = struct{}{}
		out = append(out, t)
	}
	return out
}

// RetrievalQuery removes conversational framing from the scoring terms; if
// every term is framing the raw query stays, so a search never turns into a
// browse.
func RetrievalQuery(raw string) string {
	var kept []string
	for _, t := range Tokens(raw) {
		if !isStopWord(t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		return raw
	}
	return strings.Join(kept, " ")
}

func inflections(base string) []string {
	v := []string{base + "s", base + "es", base + "ed"}
	if strings.HasSuffix(base, "e") {
		v = append(v, base+"d")
	}
	if strings.HasSuffix(base, "y") {
		stem := base[:len(base)-1]
		v = append(v, stem+"ies", stem+"ied")
	}
	return v
}

// candidates are the tokens a term matches: itself, its inflections, and a
// base whose own inflections include the term (`list` never matches
// `enlist`; `record` never matches `recording`).
func candidates(term string) []string {
	out := append([]string{term}, inflections(term)...)
	var bases []string
	if strings.HasSuffix(term, "s") {
		bases = append(bases, term[:len(term)-1])
	}
	if strings.HasSuffix(term, "es") {
		bases = append(bases, term[:len(term)-2])
	}
	if strings.HasSuffix(term, "ed") {
		bases = append(bases, term[:len(term)-2])
	}
	if strings.HasSuffix(term, "d") {
		bases = append(bases, term[:len(term)-1])
	}
	if strings.HasSuffix(term, "ies") || strings.HasSuffix(term, "ied") {
		bases = append(bases, term[:len(term)-3]+"y")
	}
	for _, b := range bases {
		if b == "" {
			continue
		}
		for _, v := range inflections(b) {
			if v == term {
				out = append(out, b)
				break
			}
		}
	}
	// Distinct, first occurrence kept.
	seen := make(map[string]struct{}, len(out))
	uniq := out[:0]
	for _, c := range out {
		if _, dup := seen[c]; !dup {
			seen[c] = struct{}{}
			uniq = append(uniq, c)
		}
	}
	return uniq
}

// MatchesTerm reports whether term matches a whole token of text under the
// index's inflection rules (used for connector identity, which is never
// indexed).
func MatchesTerm(text, term string) bool {
	toks := Tokens(text)
	if len(toks) == 0 {
		return false
	}
	set := make(map[string]struct{}, len(toks))
	for _, t := range toks {
		set[t] = struct{}{}
	}
	for _, c := range candidates(term) {
		if _, ok := set[c]; ok {
			return true
		}
	}
	return false
}

// Document is one tool as the index sees it.
type Document struct {
	Name        string
	Description string
}

type document struct {
	name       string // normalized name tokens joined by spaces
	nameTokens []string
	descTokens []string
}

// Catalog is one connector's indexed tools, or a failed catalog that
// occupies one slot of the global order.
type Catalog struct {
	failed   bool
	docs     []document
	nameToks map[string][]int
	descToks map[string][]int
}

// NewCatalog indexes docs (in catalog order).
func NewCatalog(docs []Document) *Catalog {
	c := &Catalog{
		docs:     make([]document, len(docs)),
		nameToks: make(map[string][]int),
		descToks: make(map[string][]int),
	}
	for i, d := range docs {
		nt := Tokens(d.Name)
		dt := Tokens(d.Description)
		c.docs[i] = document{name: strings.Join(nt, " "), nameTokens: nt, descTokens: dt}
		addPostings(c.nameToks, nt, i)
		addPostings(c.descToks, dt, i)
	}
	return c
}

// FailedCatalog stands in for a catalog that could not be loaded.
func FailedCatalog() *Catalog { return &Catalog{failed: true} }

// Len is the number of documents (0 for a failed catalog).
func (c *Catalog) Len() int { return len(c.docs) }

func addPostings(idx map[string][]int, toks []string, doc int) {
	for i, t := range toks {
		dup := false
		for _, p := range toks[:i] {
			if p == t {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		idx[t] = append(idx[t], doc)
	}
}

// Query is a parsed search query.
type Query struct {
	Raw       string   // as the caller wrote it
	Retrieval string   // scoring query: framing removed (or the raw query)
	Terms     []string // distinct scoring terms
	// Browse: empty or whitespace-only input lists everything.
	Browse bool
	// Unsearchable: non-empty input with no ASCII terms returns no tools.
	Unsearchable bool
	trimmed      string
}

// ParseQuery prepares raw for ranking.
func ParseQuery(raw string) Query {
	q := Query{Raw: raw, Retrieval: RetrievalQuery(raw)}
	q.Terms = Terms(q.Retrieval)
	q.trimmed = strings.TrimFunc(raw, isJSWhitespace)
	q.Browse = q.trimmed == ""
	q.Unsearchable = !q.Browse && len(q.Terms) == 0
	return q
}

// Ref names one document: catalog index and document index within it.
type Ref struct{ Catalog, Doc int }

// Match is one ranked candidate. Scores never leave the service.
type Match struct {
	Ref
	Order        int // global order: catalogs in order, a failed one takes one slot
	Score        float64
	MatchedTerms int
	Complete     bool // matched every term (every tool in a browse)
	ExactName    bool // the normalized raw query contains the tool name as whole words
}

// Result is a ranked, filtered search over all catalogs.
type Result struct {
	Matches []Match
	// Partial: a searchable query where no tool matched every term
	// (matchMode "partial" is shown only when Matches is non-empty).
	Partial bool
	query   Query
	st      *stats
}

// hits marks, per catalog, the documents one term matches.
type hits [][]bool

func (h hits) has(r Ref) bool { return h != nil && h[r.Catalog] != nil && h[r.Catalog][r.Doc] }

func (h hits) any() bool {
	for _, c := range h {
		for _, b := range c {
			if b {
				return true
			}
		}
	}
	return false
}

type stats struct {
	n        int
	nameHits []hits // by term index
	descHits []hits
	idf      []float64
}

func collectStats(q Query, cats []*Catalog) *stats {
	st := &stats{
		nameHits: make([]hits, len(q.Terms)),
		descHits: make([]hits, len(q.Terms)),
		idf:      make([]float64, len(q.Terms)),
	}
	for _, c := range cats {
		st.n += len(c.docs)
	}
	for ti, term := range q.Terms {
		nh, dh := make(hits, len(cats)), make(hits, len(cats))
		df := 0
		cands := candidates(term)
		for ci, c := range cats {
			if c.failed || len(c.docs) == 0 {
				continue
			}
			// Marks are allocated only where the term has postings: a query
			// of many distinct unmatched terms (its length is unbounded)
			// must not cost terms × documents of memory.
			for _, cand := range cands {
				if ds := c.nameToks[cand]; len(ds) > 0 {
					if nh[ci] == nil {
						nh[ci] = make([]bool, len(c.docs))
					}
					for _, d := range ds {
						nh[ci][d] = true
					}
				}
				if ds := c.descToks[cand]; len(ds) > 0 {
					if dh[ci] == nil {
						dh[ci] = make([]bool, len(c.docs))
					}
					for _, d := range ds {
						dh[ci][d] = true
					}
				}
			}
			if nh[ci] == nil && dh[ci] == nil {
				continue
			}
			for d := range c.docs {
				if nh.has(Ref{ci, d}) || dh.has(Ref{ci, d}) {
					df++
				}
			}
		}
		st.nameHits[ti], st.descHits[ti] = nh, dh
		st.idf[ti] = math.Log(1 + (float64(st.n)-float64(df)+0.5)/(float64(df)+0.5))
	}
	return st
}

// Search ranks every catalog's documents for q.
func Search(q Query, cats []*Catalog) *Result {
	res := &Result{query: q}
	if q.Unsearchable {
		return res
	}
	st := collectStats(q, cats)
	res.st = st
	phrase := Normalize(q.Retrieval)
	exactPhrase := " " + Normalize(q.Raw) + " "
	// Built once: per document they would cost documents × query length.
	phrasePrefix, phraseWords := phrase+" ", " "+phrase+" "
	var phraseWeight float64
	for ti := range q.Terms {
		phraseWeight += st.idf[ti]
	}
	var all []Match
	matched := make([]int, 0, len(q.Terms))
	orderBase := 0
	for ci, c := range cats {
		if c.failed {
			orderBase++
			continue
		}
		for di, d := range c.docs {
			ref := Ref{ci, di}
			m := Match{Ref: ref, Order: orderBase + di}
			if phrase == "" {
				m.Complete = true
				all = append(all, m)
				continue
			}
			matched = matched[:0]
			for ti := range q.Terms {
				if st.nameHits[ti].has(ref) || st.descHits[ti].has(ref) {
					matched = append(matched, ti)
				}
			}
			if len(matched) == 0 {
				continue
			}
			var score float64
			for _, ti := range matched {
				score += 4 * st.idf[ti]
			}
			switch {
			case d.name == phrase:
				score += 40 * phraseWeight
			case strings.HasPrefix(d.name, phrasePrefix):
				score += 24 * phraseWeight
			case len(d.name)+2 >= len(phraseWords) && strings.Contains(" "+d.name+" ", phraseWords):
				score += 16 * phraseWeight
			}
			for _, ti := range matched {
				w, t := st.idf[ti], q.Terms[ti]
				if slices.Contains(d.nameTokens, t) {
					score += 12 * w
				} else if st.nameHits[ti].has(ref) {
					score += 8 * w
				}
				if slices.Contains(d.descTokens, t) {
					score += 3 * w
				} else if st.descHits[ti].has(ref) {
					score += 1.5 * w
				}
			}
			m.Score = score
			m.MatchedTerms = len(matched)
			m.Complete = len(matched) == len(q.Terms)
			m.ExactName = d.name != "" && strings.Contains(exactPhrase, " "+d.name+" ")
			all = append(all, m)
		}
		orderBase += len(c.docs)
	}
	completes := 0
	for _, m := range all {
		if m.Complete {
			completes++
		}
	}
	kept := all[:0]
	for _, m := range all {
		if m.Complete || completes == 0 || m.ExactName || m.MatchedTerms >= 2 {
			kept = append(kept, m)
		}
	}
	// Complete matches and exact tool-name phrases share the first tier;
	// other partials fill after them whatever their score.
	sort.SliceStable(kept, func(i, j int) bool {
		a, b := kept[i], kept[j]
		at, bt := a.Complete || a.ExactName, b.Complete || b.ExactName
		if at != bt {
			return at
		}
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return a.Order < b.Order
	})
	res.Matches = kept
	res.Partial = !q.Browse && completes == 0
	return res
}

// Analysis is the bounded term feedback of queryAnalysis.
type Analysis struct {
	Represented []string // terms matched by a tool on this page
	OtherResult []string // terms matched only by tools off this page
	Unmatched   []string // terms no searched tool matched
	Truncated   bool     // terms dropped (over 8) or clipped (over 64 code points)
}

// Analyze classifies the query's terms against the page shown. For an
// unsearchable query the trimmed raw input is the one (unmatched) term.
func (r *Result) Analyze(page []Ref) Analysis {
	q := r.query
	terms := q.Terms
	if q.Unsearchable {
		terms = []string{q.trimmed}
	}
	a := Analysis{Represented: []string{}, OtherResult: []string{}, Unmatched: []string{}}
	shown := terms
	if len(shown) > MaxAnalysisTerms {
		shown = shown[:MaxAnalysisTerms]
		a.Truncated = true
	}
	for i, t := range shown {
		text, clipped := jstext.ClampPoints(t, MaxAnalysisTermPoints)
		if clipped {
			a.Truncated = true
		}
		var inName, inDesc hits
		if r.st != nil && !q.Unsearchable {
			inName, inDesc = r.st.nameHits[i], r.st.descHits[i]
		}
		represented := false
		for _, p := range page {
			if inName.has(p) || inDesc.has(p) {
				represented = true
				break
			}
		}
		switch {
		case represented:
			a.Represented = append(a.Represented, text)
		case inName.any() || inDesc.any():
			a.OtherResult = append(a.OtherResult, text)
		default:
			a.Unmatched = append(a.Unmatched, text)
		}
	}
	return a
}

// isJSWhitespace is the set String.prototype.trim removes.
func isJSWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
