package discovery

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
)

// isJSSpace is JavaScript's \s (WhiteSpace and LineTerminator).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// collapseSpace replaces runs of whitespace with one space and trims.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for _, r := range s {
		if isJSSpace(r) {
			pending = b.Len() > 0
			continue
		}
		if pending {
			b.WriteByte(' ')
			pending = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// summarizeDescription collapses whitespace and cuts to max UTF-16 units,
// "…" included; full returns the text unchanged. Empty gives "".
func summarizeDescription(text string, full bool, max int) string {
	if text == "" || full {
		return text
	}
	compact := collapseSpace(text)
	if jstext.Len(compact) <= max {
		return compact
	}
	return strings.TrimRightFunc(jstext.Prefix(compact, max-1), isJSSpace) + "…"
}

// connectorTitle is the shown title: whitespace normalized, at most 120
// UTF-8 bytes including the "…" of a clipped one. "" when unset.
func connectorTitle(c *gateway.ConnectorInfo) string {
	t := collapseSpace(c.Title)
	if t == "" {
		return ""
	}
	return jstext.Clamp(t, MaxConnectorTitle-len("…"))
}

// skillName is the skill that fetches a connector's guide.
func skillName(id string) string { return "connector:" + id }

func hasGuide(c *gateway.ConnectorInfo) bool { return strings.TrimFunc(c.Guide, isJSSpace) != "" }

// GuideSummary is the bounded (≤ 120 UTF-16 units) one-thought summary of a
// connector's guide: its first meaningful paragraph, cut at the strongest
// boundary (sentence, clause + "…", word + "…", hard cut + "…"); headings,
// then the connector description, are fallbacks. "" without a guide.
func GuideSummary(c *gateway.ConnectorInfo) string {
	if !hasGuide(c) {
		return ""
	}
	lines := withoutFrontmatter(strings.Split(c.Guide, "\n"))
	inFence, inComment := false, false
	heading := ""
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		if inComment {
			if strings.Contains(raw, "-->") {
				inComment = false
			}
			continue
		}
		if isFence(raw) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(strings.TrimLeftFunc(raw, isJSSpace), "<!--") {
			if !strings.Contains(raw, "-->") {
				inComment = true
			}
			continue
		}
		if startsTable(lines, i) {
			i++
			for i+1 < len(lines) && strings.Contains(lines[i+1], "|") {
				i++
			}
			continue
		}
		if isBlank(raw) || notSummary(raw) {
			continue
		}
		isHeading := headingLevel(raw) > 0
		line := collapseSpace(stripListMarker(stripHeading(raw)))
		if line == "" {
			continue
		}
		if isHeading {
			if heading == "" {
				heading = boundedSummary(line)
			}
			continue
		}
		paragraph := []string{line}
		for i+1 < len(lines) {
			next := lines[i+1]
			if isBlank(next) || startsTable(lines, i+1) || isFence(next) || headingLevel(next) > 0 ||
				isListItem(next) || isSetextUnderline(next) || notSummary(next) {
				break
			}
			paragraph = append(paragraph, strings.TrimFunc(next, isJSSpace))
			i++
			if jstext.Len(strings.Join(paragraph, " ")) > GuideSummaryLen {
				break
			}
		}
		if s := boundedSummary(strings.Join(paragraph, " ")); s != "" {
			return s
		}
		return line
	}
	if heading != "" {
		return heading
	}
	fallback := `Usage guide for "` + c.ID + `".`
	if s := boundedSummary(c.Description); s != "" {
		return s
	}
	return fallback
}

func isBlank(s string) bool { return strings.TrimFunc(s, isJSSpace) == "" }

// isRule is a `---`/`***`/`___` line (also YAML frontmatter fences).
func isRule(s string) bool {
	t := strings.TrimFunc(s, isJSSpace)
	if len(t) < 3 {
		return false
	}
	c := t[0]
	if c != '-' && c != '*' && c != '_' {
		return false
	}
	return strings.Trim(t, string(c)) == ""
}

func isFence(s string) bool {
	t := strings.TrimLeftFunc(s, isJSSpace)
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

func headingLevel(s string) int {
	t := strings.TrimLeftFunc(s, isJSSpace)
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n > 6 {
		return 6
	}
	return n
}

func stripHeading(s string) string {
	t := strings.TrimLeftFunc(s, isJSSpace)
	n := 0
	for n < len(t) && n < 6 && t[n] == '#' {
		n++
	}
	if n == 0 {
		return s
	}
	return strings.TrimLeftFunc(t[n:], isJSSpace)
}

func stripListMarker(s string) string {
	t := strings.TrimLeftFunc(s, isJSSpace)
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') {
		r, _ := utf8.DecodeRuneInString(t[1:])
		if isJSSpace(r) {
			return strings.TrimLeftFunc(t[1:], isJSSpace)
		}
	}
	return s
}

func isListItem(s string) bool {
	t := strings.TrimLeftFunc(s, isJSSpace)
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') {
		r, _ := utf8.DecodeRuneInString(t[1:])
		return isJSSpace(r)
	}
	n := 0
	for n < len(t) && t[n] >= '0' && t[n] <= '9' {
		n++
	}
	if n == 0 || n+1 >= len(t) || (t[n] != '.' && t[n] != ')') {
		return false
	}
	r, _ := utf8.DecodeRuneInString(t[n+1:])
	return isJSSpace(r)
}

func isSetextUnderline(s string) bool {
	t := strings.TrimFunc(s, isJSSpace)
	return t != "" && strings.Trim(t, "=") == ""
}

// notSummary is markup with no summary text: rules, HTML comments, table rows.
func notSummary(s string) bool {
	t := strings.TrimLeftFunc(s, isJSSpace)
	return strings.HasPrefix(t, "<!--") || strings.HasPrefix(t, "|") || isRule(s)
}

// startsTable: a pipe-bearing row followed by a delimiter row.
func startsTable(lines []string, i int) bool {
	if i+1 >= len(lines) || !strings.Contains(lines[i], "|") {
		return false
	}
	cells := strings.Split(strings.Trim(strings.TrimFunc(lines[i+1], isJSSpace), "|"), "|")
	if len(cells) < 2 {
		return false
	}
	for _, c := range cells {
		c = strings.TrimFunc(c, isJSSpace)
		c = strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if len(c) < 3 || strings.Trim(c, "-") != "" {
			return false
		}
	}
	return true
}

func withoutFrontmatter(lines []string) []string {
	start := 0
	for start < len(lines) && isBlank(lines[start]) {
		start++
	}
	if start >= len(lines) || !isRule(lines[start]) {
		return lines
	}
	for j := start + 1; j < len(lines); j++ {
		if isRule(lines[j]) {
			return lines[j+1:]
		}
	}
	return lines
}

// boundedSummary shortens a summary at the strongest readable boundary.
func boundedSummary(summary string) string {
	s := collapseSpace(summary)
	if s == "" || jstext.Len(s) <= GuideSummaryLen {
		return s
	}
	// A complete sentence (≥ 24 units) needs no ellipsis.
	if end := sentenceEnd(s); end > 0 {
		return s[:end]
	}
	available := jstext.Prefix(s, GuideSummaryLen-1)
	// A clause boundary that keeps most of the budget.
	clause := 0
	for i, r := range available {
		switch {
		case r == ',' || r == ';' || r == ':':
			if next, _ := utf8.DecodeRuneInString(available[i+1:]); i+1 < len(available) && isJSSpace(next) {
				if jstext.Len(available[:i]) >= 80 {
					clause = i
				}
			}
		case isJSSpace(r):
			rest := available[i+utf8.RuneLen(r):]
			d, dw := utf8.DecodeRuneInString(rest)
			if (d == '—' || d == '–' || d == '-') && len(rest) > dw {
				if after, _ := utf8.DecodeRuneInString(rest[dw:]); isJSSpace(after) && jstext.Len(available[:i]) >= 80 {
					clause = i
				}
			}
		}
	}
	if clause > 0 {
		return strings.TrimRightFunc(available[:clause], isJSSpace) + "…"
	}
	// The last word boundary.
	if cut := lastWordBoundary(available); cut > 0 {
		prefix := strings.TrimRightFunc(available[:cut], isJSSpace)
		prefix = strings.TrimRightFunc(prefix, func(r rune) bool {
			return strings.ContainsRune(",;:([{—–-", r)
		})
		prefix = strings.TrimRightFunc(prefix, isJSSpace)
		if prefix != "" {
			return prefix + "…"
		}
	}
	return available + "…"
}

// lastWordBoundary is the start of the final whitespace run that is followed
// only by non-space to the end (/\s+\S*$/), or -1.
func lastWordBoundary(s string) int {
	end := len(s)
	for end > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:end])
		if isJSSpace(r) {
			break
		}
		end -= w
	}
	if end == 0 {
		return -1
	}
	start := end
	for start > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:start])
		if !isJSSpace(r) {
			break
		}
		start -= w
	}
	return start
}

const sentencePunct = ".!?…。！？"
const closers = ")]}'\"”’"

// sentenceEnd is the byte end of the last sentence boundary within the
// budget that leaves at least 24 units, skipping abbreviations; 0 if none.
func sentenceEnd(s string) int {
	best := 0
	for i, r := range s {
		if !strings.ContainsRune(sentencePunct, r) {
			continue
		}
		end := i + utf8.RuneLen(r)
		for end < len(s) {
			c, w := utf8.DecodeRuneInString(s[end:])
			if !strings.ContainsRune(closers, c) {
				break
			}
			end += w
		}
		if end < len(s) {
			if c, _ := utf8.DecodeRuneInString(s[end:]); !isJSSpace(c) {
				continue
			}
		}
		units := jstext.Len(s[:end])
		if units > GuideSummaryLen {
			break
		}
		if r == '.' && isAbbreviation(s, i+1) {
			continue
		}
		if units >= 24 {
			best = end
		}
	}
	return best
}

// isAbbreviation: a period that belongs to e.g./i.e., an initial, a title,
// or an initialism not followed by a new clause.
func isAbbreviation(text string, end int) bool {
	head := text[:end]
	start := strings.LastIndexFunc(head, isJSSpace)
	token := head[start+1:]
	if start >= 0 {
		_, w := utf8.DecodeRuneInString(head[start:])
		token = head[start+w:]
	}
	lower := strings.ToLower(token)
	if lower == "e.g." || lower == "i.e." {
		return true
	}
	if len(token) == 2 && token[0] >= 'A' && token[0] <= 'Z' {
		return true
	}
	switch lower {
	case "mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.":
		return true
	}
	initialism := len(token) >= 4 && len(token)%2 == 0
	for i := 0; initialism && i < len(token); i += 2 {
		c := token[i]
		initialism = ((c|0x20) >= 'a' && (c|0x20) <= 'z') && token[i+1] == '.'
	}
	switch lower {
	case "vs.", "etc.", "approx.", "dept.", "fig.", "no.":
		initialism = true
	}
	if !initialism {
		return false
	}
	rest := strings.TrimLeft(text[end:], closers)
	if rest == "" || !isJSSpace(firstRune(rest)) {
		return false
	}
	words := strings.FieldsFunc(rest, isJSSpace)
	if len(words) == 0 {
		return false
	}
	next := words[0]
	startsClause := unicode.IsUpper(firstRune(next)) &&
		(startsWithWord(next, "The", "A", "An") || (len(words) > 1 && startsWithWord(words[1], "the", "a", "an")))
	return !startsClause
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// startsWithWord is /^(?:w1|w2|…)\b/ with JavaScript's ASCII \b.
func startsWithWord(s string, words ...string) bool {
	for _, w := range words {
		if strings.HasPrefix(s, w) {
			if len(s) == len(w) {
				return true
			}
			c := s[len(w)]
			if !(c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')) {
				return true
			}
		}
	}
	return false
}
