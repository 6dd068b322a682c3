package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/connecta-dev/connecta/internal/actor"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultName is the file name the embedded default reports in messages.
const DefaultName = "(embedded default)"

// DefaultYAML returns the embedded default configuration's text.
func DefaultYAML() []byte { return bytes.Clone(defaultYAML) }

// Default returns the embedded default: listen on 127.0.0.1:8787, no tokens,
// one built-in connector "demo".
func Default(r Resolver) (*Config, error) {
	return parse(DefaultName, "", defaultYAML, r)
}

// Load reads the configuration file at path (through r.ReadFile) and parses
// it. Relative paths inside it (guideFile, ${file:…}, activity.file) are
// resolved against the file's directory. A refusal is a *Error or an
// ErrorList.
func Load(path string, r Resolver) (*Config, error) {
	data, err := r.readFile(path, MaxConfigBytes)
	if err != nil {
		return nil, &Error{File: path, Message: "cannot read the configuration: " + errReason(err)}
	}
	return parse(path, filepath.Dir(path), data, r)
}

// Parse parses a configuration held in memory; name is used in messages and
// its directory anchors relative paths.
func Parse(name string, data []byte, r Resolver) (*Config, error) {
	return parse(name, filepath.Dir(name), data, r)
}

// connectorID is ConnectorIDPattern compiled: the documented pattern is the
// check, so the two cannot disagree.
var connectorID = regexp.MustCompile(ConnectorIDPattern)

// ValidConnectorID reports whether id matches ConnectorIDPattern.
func ValidConnectorID(id string) bool { return connectorID.MatchString(id) }

// validHeaderName reports an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Headers the MCP transport owns; a connector may not set them.
var transportHeaders = []string{"Host", "Content-Length", "Content-Type", "Accept", "Transfer-Encoding", "Connection", "Mcp-Session-Id", "Mcp-Protocol-Version"}

// Headers that carry credentials: their values must come from references.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

type decoder struct {
	file    string
	baseDir string
	r       Resolver
	errs    []*Error
	warns   []Warning
	// conns holds, for each decoded connector (Config.Connectors[i]), the
	// keys the whole-file checks name.
	conns []connectorAt
}

// connectorAt is where a decoded connector's whole-file findings are.
type connectorAt struct {
	oauth, pin field
}

func parse(name, baseDir string, data []byte, r Resolver) (*Config, error) {
	d := &decoder{file: name, baseDir: baseDir, r: r}
	if len(data) > MaxConfigBytes {
		return nil, &Error{File: name, Message: fmt.Sprintf("the configuration is larger than %d bytes", MaxConfigBytes)}
	}
	root, err := d.document(data)
	if err != nil {
		return nil, err
	}
	cfg := defaults()
	cfg.File = name
	if root != nil {
		d.config(root, cfg)
	}
	if err := result(d.errs); err != nil {
		return nil, err
	}
	cfg.warnings = d.warns
	return cfg, nil
}

// document parses the YAML text into its root node (nil for an empty file).
func (d *decoder) document(data []byte) (root *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, d.syntaxError(err, data)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, d.syntaxError(err, data)
	default:
		if len(extra.Content) > 0 && !isNull(extra.Content[0]) {
			return nil, &Error{File: d.file, Line: extra.Line, Column: extra.Column, Message: "a configuration is one YAML document; found a second one"}
		}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	if aliasErrs := d.rejectAliases(doc.Content[0], nil); len(aliasErrs) > 0 {
		return nil, result(aliasErrs)
	}
	return doc.Content[0], nil
}

// syntaxError turns the YAML parser's error into a refusal at the line
// of the problem. yaml.v3 says "line N" for the start of the construct it
// was reading (a plain scalar whose next line holds a bad tab, a mapping a
// misindented key falls out of), and for a parser error that start is
// counted from 0; on the first line it says nothing. The problem lies at
// or after that line, so the refusal names the first line from there at
// which the text stops parsing: the first line of the shortest prefix
// that fails.
func (d *decoder) syntaxError(err error, data []byte) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	from := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				from, msg = max(n, 1), text
			}
		}
	}
	return &Error{File: d.file, Line: failingLine(data, from), Message: "invalid YAML: " + msg}
}

// failingLine finds, from line from on, a line L where the text's first
// L-1 lines do not fail as the whole text does and its first L do:
// galloping, then bisecting, so a refusal costs O(log lines) parses. A
// prefix counts as failing only with the whole text's message: one cut
// inside a construct spanning lines (a quoted or block scalar, a flow
// list) fails for being cut ("found unexpected end of stream"), which is
// not the problem a later line has.
func failingLine(data []byte, from int) int {
	ends := lineEnds(data)
	lines := len(ends)
	want := parseFailure(data)
	fails := func(l int) bool { return parseFailure(data[:ends[l-1]]) == want }
	from = min(from, lines)
	if fails(from) {
		return from
	}
	good, bad := from, lines // prefix(good) does not fail as the text does, prefix(bad) does
	for step := 1; good+step < bad; step *= 2 {
		if fails(good + step) {
			bad = good + step
			break
		}
		good += step
	}
	for bad-good > 1 {
		mid := good + (bad-good)/2
		if fails(mid) {
			bad = mid
		} else {
			good = mid
		}
	}
	return bad
}

// lineEnds lists the offset just past each line of data, breaking lines
// where yaml.v3 counts them (\n, \r, \r\n, NEL, LS, PS); the last entry is
// len(data).
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			i++
			ends = append(ends, i+1)
		case data[i] == '\n' || data[i] == '\r':
			ends = append(ends, i+1)
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			i++
			ends = append(ends, i+1)
		case bytes.HasPrefix(data[i:], []byte("\u2028")) || bytes.HasPrefix(data[i:], []byte("\u2029")):
			i += 2
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

// parses reports whether every document of data parses.
func parses(data []byte) bool { return parseFailure(data) == "" }

// parseFailure is the parser's message for data without its line ("" when
// every document parses).
func parseFailure(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		switch err := dec.Decode(&n); {
		case errors.Is(err, io.EOF):
			return ""
		case err != nil:
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if rest, ok := strings.CutPrefix(msg, "line "); ok {
				if _, text, ok := strings.Cut(rest, ": "); ok {
					msg = text
				}
			}
			return msg
		}
	}
}

// rejectAliases refuses anchors' aliases anywhere: they make a field's value
// live at another line, and unbounded expansion is a decoder hazard.
func (d *decoder) rejectAliases(n *yaml.Node, errs []*Error) []*Error {
	if n.Kind == yaml.AliasNode {
		return append(errs, &Error{File: d.file, Line: n.Line, Column: n.Column, Message: "YAML aliases (*" + clip(n.Value) + ") are not supported"})
	}
	for _, c := range n.Content {
		errs = d.rejectAliases(c, errs)
	}
	return errs
}

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	e := &Error{File: d.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) warn(line int, field, format string, args ...any) {
	d.warns = append(d.warns, Warning{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch t := n.ShortTag(); t {
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "a timestamp"
		case "!!binary":
			return "binary data"
		default:
			return "a value tagged " + clip(t)
		}
	}
	return "something else"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest names the allowed key the unknown one most likely meant.
func suggest(key string, allowed []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	for _, a := range allowed {
		if norm(a) == norm(key) {
			return fmt.Sprintf(` (did you mean %q?)`, a)
		}
	}
	best, bestDist := "", 3
	for _, a := range allowed {
		if dist := editDistance(strings.ToLower(key), strings.ToLower(a)); dist < bestDist {
			best, bestDist = a, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(` (did you mean %q?)`, best)
	}
	return " (known: " + strings.Join(allowed, ", ") + ")"
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.fail(n, field, "expected a string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		d.fail(n, field, "expected true or false, got %s", kindName(n))
		return false, false
	}
	return v, true
}

func (d *decoder) integer(n *yaml.Node, field string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, field, "expected an integer, got %s", kindName(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		d.fail(n, field, "%s is not a 64-bit integer", clip(n.Value))
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n, field, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return v, true
}

func (d *decoder) strList(n *yaml.Node, field string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "expected a list of strings, got %s", kindName(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		s, good := d.str(item, fmt.Sprintf("%s[%d]", field, i))
		if !good {
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

// numField is one integer key of a section and where its value goes.
type numField struct {
	f      field
	lo, hi int64
	set    func(int64)
}

func msInto(p *time.Duration) func(int64) {
	return func(v int64) { *p = time.Duration(v) * time.Millisecond }
}
func intInto(p *int) func(int64)   { return func(v int64) { *p = int(v) } }
func i64Into(p *int64) func(int64) { return func(v int64) { *p = v } }

// integers decodes the given integer keys of a section, each within its
// bounds.
func (d *decoder) integers(nums ...numField) {
	for _, n := range nums {
		if n.f.given() {
			if v, good := d.integer(n.f.val, n.f.path, n.lo, n.hi); good {
				n.set(v)
			}
		}
	}
}

const (
	maxMs      = 3_600_000  // one hour
	maxWaitMs  = 600_000    // ten minutes
	maxTTLMs   = 86_400_000 // one day
	maxQueue   = 65_536
	gib        = 1 << 30
	maxTitleBs = 4096
	// maxActivityAgeMs bounds activity.maxAgeMs at ten years.
	maxActivityAgeMs = 10 * 365 * 86_400_000
)

func (d *decoder) config(root *yaml.Node, c *Config) {
	f, ok := shapeOf[fileShape](d, root, "")
	if !ok {
		return
	}
	var listenNode *yaml.Node
	if e := f.Listen; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			if msg := checkListenSyntax(s); msg != "" {
				d.fail(e.val, e.path, "%s", msg)
			} else {
				c.Listen, c.ListenLine, listenNode = s, e.val.Line, e.val
			}
		}
	}
	if e := f.MetricsListen; e.given() {
		if s, ok := d.str(e.val, e.path); ok && s != "" {
			switch msg := checkListenSyntax(s); {
			case msg != "":
				d.fail(e.val, e.path, "%s", msg)
			case s == c.Listen:
				d.fail(e.val, e.path, "%q is also listen: give /metrics its own address, or leave metricsListen empty to serve it on listen", clip(s))
			default:
				c.MetricsListen = s
			}
		}
	}
	if e := f.PublicURL; e.given() {
		c.PublicURL = d.optionalHTTPURL(e.val, e.path)
	}
	tokensGiven := false
	var oidc *oidcShape
	auth, ok := f.Auth.in(d)
	if ok {
		tokensGiven, oidc = d.auth(auth, c)
	}
	if f.AccessTokens.given() {
		d.accessTokens(f.AccessTokens, c)
	}
	d.checkOIDC(c, auth.OIDC, oidc)
	if s, ok := f.Requests.in(d); ok {
		r := &c.Requests
		d.integers(
			numField{s.MaxActive, 1, 4096, intInto(&r.MaxActive)},
			numField{s.MaxActivePerCaller, 1, 4096, intInto(&r.MaxActivePerCaller)},
			numField{s.MaxQueue, 0, maxQueue, intInto(&r.MaxQueue)},
			numField{s.QueueTimeout, 0, maxWaitMs, msInto(&r.QueueTimeout)},
			numField{s.RetryAfter, 0, maxWaitMs, msInto(&r.RetryAfter)},
			numField{s.MaxBodyBytes, 1024, gib, i64Into(&r.MaxBodyBytes)},
			numField{s.BodyTimeout, 1, maxWaitMs, msInto(&r.BodyTimeout)},
		)
		if pe := s.MaxActivePerCaller; pe.given() && r.MaxActivePerCaller > r.MaxActive {
			d.fail(pe.val, pe.path, "%d must be at most %s (%d)", r.MaxActivePerCaller, s.MaxActive.path, r.MaxActive)
		}
		// A caller queued behind slow senders must get a permit before
		// its own queue wait ends.
		if r.QueueTimeout > 0 && r.BodyTimeout >= r.QueueTimeout {
			n, which := f.Requests.val, " (the default)"
			if s.BodyTimeout.given() {
				n, which = s.BodyTimeout.val, ""
			}
			d.fail(n, s.BodyTimeout.path, "%d%s must be below %s (%d)", r.BodyTimeout.Milliseconds(), which, s.QueueTimeout.path, r.QueueTimeout.Milliseconds())
		}
	}
	if s, ok := f.Executor.in(d); ok {
		x := &c.Executor
		d.integers(
			numField{s.Concurrency, 1, 256, intInto(&x.Concurrency)},
			numField{s.MaxQueueSize, 0, maxQueue, intInto(&x.MaxQueueSize)},
			numField{s.QueueTimeout, 0, maxWaitMs, msInto(&x.QueueTimeout)},
			numField{s.Spares, 0, 64, intInto(&x.Spares)},
			numField{s.MaxSpares, 0, 64, intInto(&x.MaxSpares)},
			numField{s.SpareIdle, 1, maxMs, msInto(&x.SpareIdle)},
			numField{s.Timeout, 1, maxMs, msInto(&x.Timeout)},
			numField{s.CPUTime, 1, maxMs, msInto(&x.CPUTime)},
			numField{s.MemoryLimitBytes, 1 << 20, 4 * gib, i64Into(&x.MemoryLimitBytes)},
			numField{s.MaxStackSizeBytes, 64 << 10, 256 << 20, i64Into(&x.MaxStackSizeBytes)},
		)
		if e := s.CacheDir; e.given() {
			if p, ok := d.path(e.val, e.path); ok {
				x.CacheDir = p
			}
		}
		if x.MaxSpares < x.Spares {
			if se := s.MaxSpares; se.given() {
				d.fail(se.val, se.path, "%d is below %s (%d)", x.MaxSpares, s.Spares.path, x.Spares)
			} else {
				x.MaxSpares = x.Spares // only spares was raised: no growth above it
			}
		}
		if x.MaxStackSizeBytes > x.MemoryLimitBytes {
			n := f.Executor.val
			if s.MaxStackSizeBytes.given() {
				n = s.MaxStackSizeBytes.val
			}
			d.fail(n, s.MaxStackSizeBytes.path, "%d exceeds %s (%d)", x.MaxStackSizeBytes, s.MemoryLimitBytes.path, x.MemoryLimitBytes)
		}
	}
	if s, ok := f.Execute.in(d); ok {
		x := &c.Execute
		d.integers(
			numField{s.MaxHostCalls, 0, 10_000, intInto(&x.MaxHostCalls)},
			numField{s.HostCallTimeout, 1, maxMs, msInto(&x.HostCallTimeout)},
			numField{s.MaxEmittedBytes, 0, gib, i64Into(&x.MaxEmittedBytes)},
			numField{s.MaxEmittedBlocks, 0, 10_000, intInto(&x.MaxEmittedBlocks)},
		)
	}
	catalog, ok := f.Catalog.in(d)
	if ok {
		d.catalog(catalog, f.Catalog.val, c)
	}
	if s, ok := f.Results.in(d); ok {
		x := &c.Results
		d.integers(
			numField{s.MaxInlineBytes, 1024, gib, i64Into(&x.MaxInlineBytes)},
			numField{s.StashTTL, 1000, maxTTLMs, msInto(&x.StashTTL)},
			numField{s.StashMaxBytes, 0, 64 * gib, i64Into(&x.StashMaxBytes)},
		)
	}
	if s, ok := f.Activity.in(d); ok {
		x := &c.Activity
		d.integers(
			numField{s.MaxEvents, 0, 100_000_000, intInto(&x.MaxEvents)},
			numField{s.MaxAge, 0, maxActivityAgeMs, msInto(&x.MaxAge)},
		)
		if e := s.Ring; e.given() {
			d.fail(e.val, e.path, "was replaced by %s (the history now lives in the store, with %s); rename it to %s", s.MaxEvents.path, s.MaxAge.path, s.MaxEvents.name())
		}
		if e := s.File; e.given() {
			if p, ok := d.path(e.val, e.path); ok {
				x.File = p
			}
		}
	}
	if s, ok := f.Runtime.in(d); ok {
		x := &c.Runtime
		d.integers(
			numField{s.GCPercent, 10, 10_000, func(v int64) { x.GCPercent, x.GCPercentSet = int(v), true }},
			numField{s.MemoryLimitBytes, 0, 1 << 50, func(v int64) { x.MemoryLimitBytes, x.MemoryLimitSet = v, true }},
		)
	}
	if s, ok := f.Store.in(d); ok {
		d.store(s, f.Store.val, c)
	}
	if s, ok := f.Vault.in(d); ok {
		d.vault(s, f.Vault.val, c)
	}
	if f.Connectors.given() {
		d.connectors(f.Connectors, c)
		for i, cc := range c.Connectors {
			if cc.OAuth != nil && c.PublicURL == "" {
				d.fail(&yaml.Node{Line: cc.Line, Column: 1}, d.conns[i].oauth.path,
					"needs publicUrl: the authorization server sends the browser back to {publicUrl}/oauth/callback/%s", cc.ID)
			}
		}
	}
	d.checkQuarantineStore(c, f.Catalog.val, catalog)
	d.checkPerCallerQuarantine(c, f.Catalog.val, catalog)
	if s, ok := f.Telemetry.in(d); ok {
		d.telemetry(s, c)
	}
	if f.Access.given() {
		d.access(f.Access, c)
	}
	if listenNode != nil && !tokensGiven && !auth.OIDC.given() && !c.AccessTokens.Enabled && !isLoopbackListen(c.Listen) {
		d.fail(listenNode, f.Listen.path, "%q is not a loopback address and no inbound auth is configured (auth.tokens, auth.oidc or accessTokens): add one, or listen on 127.0.0.1", clip(c.Listen))
	}
}

// path decodes a filesystem path; relative paths are anchored at the config
// file's directory.
func (d *decoder) path(n *yaml.Node, field string) (string, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	if s == "" {
		return "", true
	}
	if strings.ContainsRune(s, 0) {
		d.fail(n, field, "contains a NUL byte")
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(d.baseDir, s)
	}
	return s, true
}

// auth decodes auth.tokens and auth.oidc; it reports whether any token
// entry was given (so that a failed token is not also reported as "no
// tokens") and the auth.oidc shape (for checkOIDC; nil unless decoded).
func (d *decoder) auth(a *authShape, c *Config) (tokensGiven bool, oidc *oidcShape) {
	if o, ok := a.OIDC.in(d); ok {
		d.oidc(o, a.OIDC, c)
		oidc = o
	}
	e := a.Tokens
	if !e.given() {
		return false, oidc
	}
	if e.val.Kind != yaml.SequenceNode {
		d.fail(e.val, e.path, "expected a list, got %s", kindName(e.val))
		return false, oidc
	}
	seen, names := map[string]string{}, map[string]string{}
	for i, item := range e.val.Content {
		path := fmt.Sprintf("%s[%d]", e.path, i)
		tf, ok := shapeOf[tokenShape](d, item, path)
		if !ok {
			continue
		}
		t := Token{Line: item.Line}
		if oe := tf.Operator; oe.given() {
			if oe.val.Kind != yaml.ScalarNode || (oe.val.Value != "true" && oe.val.Value != "false") {
				d.fail(oe.val, oe.path, "expected true or false")
			} else {
				t.Operator = oe.val.Value == "true"
			}
		}
		ne := tf.Name
		if s, ok := d.required(item, ne, " (the actor recorded in activity)"); ok {
			// The name is the actor (docs/DECISIONS.md "Actors"): a shape
			// that can never read as another actor, and one token per name.
			if err := actor.ValidStaticName(s); err != nil {
				d.fail(ne.val, ne.path, "%s, got %q", err, clip(s))
			} else if first, dup := names[s]; dup {
				d.fail(ne.val, ne.path, "%q is already the name of %s; names must be unique (each is one actor)", s, first)
			} else {
				names[s] = path
				t.Name = s
			}
		}
		te := tf.Token
		if !te.given() {
			d.fail(item, te.path, "is required")
			continue
		}
		value, raw, ok := d.secret(te.val, te.path, "tokens")
		if !ok {
			continue
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			d.fail(te.val, te.path, "%s resolves to a value with whitespace or control characters", clip(raw))
			continue
		}
		if first, dup := seen[value]; dup {
			d.fail(te.val, te.path, "resolves to the same token as %s", first)
			continue
		}
		seen[value] = path
		if len(value) < MinTokenBytes {
			d.warn(te.val.Line, te.path, "the token is shorter than %d bytes; use a long random value", MinTokenBytes)
		}
		t.Token, t.Reference = NewSecret(value), raw
		c.Auth.Tokens = append(c.Auth.Tokens, t)
	}
	return len(e.val.Content) > 0, oidc
}

// each walks a list of mappings shaped T: use gets each item that is one.
func each[T any](d *decoder, l list[T], use func(i int, item *yaml.Node, s *T)) {
	for i, item := range l.val.Content {
		if s, ok := shapeOf[T](d, item, fmt.Sprintf("%s[%d]", l.path, i)); ok {
			use(i, item, s)
		}
	}
}

func (d *decoder) connectors(l list[connectorShape], c *Config) {
	if l.val.Kind != yaml.SequenceNode {
		d.fail(l.val, l.path, "expected a list, got %s", kindName(l.val))
		return
	}
	ids := map[string]int{}
	each(d, l, func(i int, item *yaml.Node, s *connectorShape) {
		if conn, at, ok := d.connector(item, fmt.Sprintf("%s[%d]", l.path, i), s, ids); ok {
			c.Connectors = append(c.Connectors, conn)
			d.conns = append(d.conns, at)
		}
	})
}

func (d *decoder) connector(n *yaml.Node, path string, fs *connectorShape, ids map[string]int) (Connector, connectorAt, bool) {
	c := Connector{Line: n.Line, CallAdmission: DefaultCallAdmission()}
	at := connectorAt{oauth: fs.OAuth.field}
	before := len(d.errs)
	if s, ok := d.required(n, fs.ID, " ("+ConnectorIDPattern+")"); ok {
		e := fs.ID
		switch first, dup := ids[s]; {
		case !ValidConnectorID(s):
			d.fail(e.val, e.path, "%q must match %s", clip(s), ConnectorIDPattern)
		case dup:
			d.fail(e.val, e.path, "duplicate connector id %q (first at line %d)", s, first)
		default:
			ids[s] = e.val.Line
			c.ID = s
		}
	}
	if e := fs.Title; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			s = strings.Join(strings.Fields(s), " ")
			switch {
			case hasControl(s):
				d.fail(e.val, e.path, "must not contain control characters")
			case len(s) > maxTitleBs:
				d.fail(e.val, e.path, "is longer than %d bytes", maxTitleBs)
			default:
				c.Title = s
			}
		}
	}
	if e := fs.Description; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			c.Description = strings.TrimSpace(s)
		}
	}
	d.guide(fs.Guide, fs.GuideFile, &c)

	var kinds []field // of builtin, url, command: the ones given
	if e := fs.Builtin; e.given() {
		kinds = append(kinds, e)
		if s, ok := d.str(e.val, e.path); ok {
			if s != BuiltinDemo {
				d.fail(e.val, e.path, "unknown builtin %q (known: %s)", clip(s), BuiltinDemo)
			} else {
				c.Builtin = s
			}
		}
	}
	if e := fs.URL; e.given() {
		kinds = append(kinds, e)
		if s, ok := d.str(e.val, e.path); ok {
			switch msg := checkHTTPURL(s); {
			case msg != "":
				d.fail(e.val, e.path, "%s", msg)
			case strings.Contains(s, "${"):
				d.fail(e.val, e.path, "secret references are resolved only in headers and env; put credentials in headers")
			default:
				c.URL = s
			}
		}
	}
	if e := fs.Command; e.given() {
		kinds = append(kinds, e)
		if argv, ok := d.strList(e.val, e.path); ok {
			switch {
			case len(argv) == 0 || argv[0] == "":
				d.fail(e.val, e.path, "must name a program: [program, arg, …]")
			case slices.ContainsFunc(argv, func(a string) bool { return strings.ContainsRune(a, 0) }):
				d.fail(e.val, e.path, "must not contain NUL bytes")
			case slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, "${") }):
				d.fail(e.val, e.path, "secret references are resolved only in env; pass credentials through env")
			default:
				c.Command = argv
			}
		}
	}
	switch {
	case len(kinds) == 0:
		d.fail(n, path, "needs one of url (remote MCP over streamable HTTP), command (stdio MCP) or builtin")
	case len(kinds) > 1:
		d.fail(kinds[1].key, kinds[1].path, "%s and %s are mutually exclusive", kinds[0].name(), kinds[1].name())
	}
	isURL := fs.URL.given()
	if e := fs.Headers; e.given() {
		if !isURL {
			d.fail(e.key, e.path, "applies only to url connectors")
		} else if len(kinds) == 1 {
			d.headers(e, &c)
		}
	}
	if e := fs.Env; e.given() {
		if !fs.Command.given() {
			d.fail(e.key, e.path, "applies only to command (stdio) connectors")
		} else if len(kinds) == 1 {
			d.env(e, &c)
		}
	}
	if e := fs.OAuth; e.given() {
		if urlOnly(d, e, isURL, "grants", func(o *oauthShape) field { return o.Grants }, "grant", "downstream OAuth is for remote MCP servers") {
			d.oauth(e, &c)
			for _, h := range c.Headers {
				if strings.EqualFold(h.Name, "Authorization") {
					d.fail(e.key, e.path, "and headers.Authorization are mutually exclusive: with oauth, connecta sends the grant's access token")
				}
			}
		}
	}
	if e := fs.Credential; e.given() {
		if urlOnly(d, e, isURL, "per", func(cr *credentialShape) field { return cr.Per }, "credential", "the value is sent as an HTTP header") {
			d.credential(e, &c)
		}
	}
	d.callAdmission(fs, &c)
	if e := fs.SharedSession; e.given() {
		if v, ok := d.boolean(e.val, e.path); ok {
			switch {
			case v && c.URL == "" && len(kinds) == 1:
				d.fail(e.key, e.path, "applies only to url connectors (a stdio or builtin connector is always one shared session)")
			case v && c.PerCaller():
				d.fail(e.key, e.path, "true cannot go with a per-caller grant or credential (oauth.grants or credential.per: caller): one shared session would carry one caller's identity to everyone")
			default:
				c.SharedSession = v
			}
		}
	}
	if e := fs.VersionNegotiation; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			switch s {
			case VersionAuto:
			case VersionLegacy:
				c.LegacyVersion = true
			default:
				d.fail(e.val, e.path, "must be %s or %s, not %q", VersionAuto, VersionLegacy, clip(s))
			}
		}
	}
	roLines := map[string]int{}
	if e := fs.ReadOnly; e.given() {
		c.ReadOnly = d.toolList(e.val, e.path, nil)
		for i, name := range c.ReadOnly {
			roLines[name] = e.val.Content[i].Line
		}
	}
	cat, ok := fs.Catalog.in(d)
	if e := cat.Pin; ok && e.given() {
		if p, ok := d.pin(e.val, e.path); ok {
			c.CatalogPin = p
		}
	}
	at.pin = cat.Pin // given or not: a whole-file check may name it
	if e := fs.ApprovalRequired; e.given() {
		c.ApprovalRequired = d.toolList(e.val, e.path, roLines)
	}
	if c.URL != "" && len(c.Headers)+len(c.Missing) > 0 && strings.HasPrefix(c.URL, "http://") && !isLoopbackURL(c.URL) {
		d.warn(fs.URL.val.Line, fs.URL.path, "credentials are sent in cleartext over http:// to a non-loopback host")
	}
	for _, m := range c.Missing {
		d.warn(m.Line, m.Field, "%s is unresolved (%s); connector %q loads, but its calls fail auth_required until it is provided", m.Reference, m.Reason, c.ID)
	}
	return c, at, len(d.errs) == before
}

func (d *decoder) guide(ge, fe field, c *Connector) {
	if ge.given() && fe.given() {
		d.fail(fe.key, fe.path, "guide and guideFile are mutually exclusive")
		return
	}
	var text string
	var at field
	switch {
	case ge.given():
		s, ok := d.str(ge.val, ge.path)
		if !ok {
			return
		}
		text, at = s, ge
	case fe.given():
		p, ok := d.path(fe.val, fe.path)
		if !ok {
			return
		}
		if p == "" {
			d.fail(fe.val, fe.path, "must not be empty")
			return
		}
		data, err := d.r.readFile(p, MaxGuideBytes)
		if err != nil {
			d.fail(fe.val, fe.path, "cannot read %s: %s", p, errReason(err))
			return
		}
		text, at, c.GuideFile = string(data), fe, p
	default:
		return
	}
	switch {
	case len(text) > MaxGuideBytes:
		d.fail(at.val, at.path, "the guide is larger than %d bytes", MaxGuideBytes)
	case !utf8.ValidString(text):
		d.fail(at.val, at.path, "the guide is not valid UTF-8")
	default:
		c.Guide = strings.TrimSpace(text)
	}
}

// oauth reads a connector's `oauth: {}` or `{clientId, clientSecret,
// scopes}`. The downstream's own Authorization header is then connecta's
// to set, so a configured one is refused.
func (d *decoder) oauth(s section[oauthShape], c *Connector) {
	o := &OAuth{Grants: PerConnector}
	c.OAuth = o
	fs, ok := s.in(d)
	if !ok {
		return
	}
	if e := fs.Grants; e.given() {
		o.Grants = d.per(e.val, e.path)
	}
	o.ClientID = d.clientID(fs.ClientID)
	if segs, ok := d.clientSecretRef(fs.ClientSecret, fs.ClientID); ok {
		if value, ok := d.resolveConnectorValue(segs, fs.ClientSecret.val, fs.ClientSecret.path, c, hasControl); ok {
			o.ClientSecret = NewSecret(value)
		}
	}
	if e := fs.Scopes; e.given() {
		o.Scopes, _ = d.scopeList(e.val, e.path)
	}
}

// scopeList decodes a list of OAuth scope tokens (RFC 6749 §3.3: no
// spaces, quotes, backslashes or control characters).
func (d *decoder) scopeList(n *yaml.Node, field string) ([]string, bool) {
	list, ok := d.strList(n, field)
	if !ok {
		return nil, false
	}
	for _, s := range list {
		if s == "" || strings.ContainsAny(s, " \t\"\\") || hasControl(s) {
			d.fail(n, field, "%q is not a scope token", clip(s))
			return nil, false
		}
	}
	return list, true
}

func (d *decoder) headers(e field, c *Connector) {
	d.headerTemplates(e, transportHeaders, func(name, field string, v *yaml.Node, segs []segment) {
		if value, ok := d.resolveConnectorValue(segs, v, field, c, hasControl); ok {
			c.Headers = append(c.Headers, Header{Name: name, Value: NewSecret(value)})
		}
	})
}

// nameMap is how a mapping of names to value templates (HTTP headers,
// environment variables) is read: what its names are, how they are
// checked, and how a value reads as a template's text.
type nameMap struct {
	names string                            // "header names": "expected a mapping of header names to values"
	dup   string                            // "header": "duplicate header (first at line N)"
	canon func(string) string               // the spelling duplicates are found by
	check func(name string) string          // why a name is refused, or ""
	raw   func(v *yaml.Node) (string, bool) // the value's template text; false when it is not one (reported)
}

// templates decodes a mapping of names to value templates: no duplicate
// (by m.canon), names m.check accepts, values that parse as templates. use
// gets each good one.
func (d *decoder) templates(e field, m nameMap, use func(name, field string, v *yaml.Node, segs []segment)) {
	n := e.val
	if n.Kind != yaml.MappingNode {
		d.fail(n, e.path, "expected a mapping of %s to values, got %s", m.names, kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, ok := d.str(k, e.path)
		if !ok {
			continue
		}
		field := join(e.path, name)
		canon := m.canon(name)
		if first, dup := seen[canon]; dup {
			d.fail(k, field, "duplicate %s (first at line %d)", m.dup, first)
			continue
		}
		seen[canon] = k.Line
		if msg := m.check(name); msg != "" {
			d.fail(k, field, "%s", msg)
			continue
		}
		raw, ok := m.raw(v)
		if !ok {
			d.fail(v, field, "expected a string, got %s", kindName(v))
			continue
		}
		segs, err := parseTemplate(raw)
		if err != nil {
			d.fail(v, field, "%s", err)
			continue
		}
		use(name, field, v, segs)
	}
}

// stringValue is a value that must be a string.
func stringValue(v *yaml.Node) (string, bool) {
	return v.Value, v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str"
}

// headerTemplates decodes a mapping of HTTP header names to value
// templates: no duplicate (case-insensitively), a valid name not in
// reserved, a template that parses, and a secret reference in every
// credential header. use resolves each good one.
func (d *decoder) headerTemplates(e field, reserved []string, use func(name, field string, v *yaml.Node, segs []segment)) {
	m := nameMap{names: "header names", dup: "header", canon: strings.ToLower, raw: stringValue,
		check: func(name string) string {
			switch {
			case !validHeaderName(name):
				return fmt.Sprintf("%q is not a valid HTTP header name", clip(name))
			case containsFold(reserved, name):
				return "is set by the MCP transport and cannot be configured"
			}
			return ""
		}}
	d.templates(e, m, func(name, field string, v *yaml.Node, segs []segment) {
		if containsFold(credentialHeaders, name) && !hasReference(segs) {
			d.fail(v, field, "carries a credential: use a secret reference such as \"Bearer ${credential:NAME}\"")
			return
		}
		use(name, field, v, segs)
	})
}

func (d *decoder) env(e field, c *Connector) {
	m := nameMap{names: "variable names", dup: "variable", canon: func(s string) string { return s },
		check: func(name string) string {
			if !validEnvName(name) {
				return fmt.Sprintf("%q is not an environment variable name", clip(name))
			}
			return ""
		},
		raw: func(v *yaml.Node) (string, bool) {
			switch {
			case isNull(v):
				return "", true
			case v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!bool" || v.ShortTag() == "!!float"):
				return v.Value, true // PORT: 8080 reads as intended
			}
			return stringValue(v)
		}}
	hasNUL := func(s string) bool { return strings.ContainsRune(s, 0) }
	d.templates(e, m, func(name, field string, v *yaml.Node, segs []segment) {
		if value, ok := d.resolveConnectorValue(segs, v, field, c, hasNUL); ok {
			c.Env = append(c.Env, EnvVar{Name: name, Value: NewSecret(value)})
		}
	})
}

// resolveConnectorValue resolves a connector header/env value. Failures do
// not refuse the file: they are recorded on the connector (Missing).
func (d *decoder) resolveConnectorValue(segs []segment, n *yaml.Node, field string, c *Connector, bad func(string) bool) (string, bool) {
	value, parts, missing := d.r.resolveParts(segs, d.baseDir)
	for _, m := range missing {
		c.Missing = append(c.Missing, MissingCredential{Reference: m.raw, Field: field, Reason: m.reason, Line: n.Line})
	}
	if missing != nil {
		return "", false
	}
	if bad(value) {
		ref := ""
		for _, s := range segs {
			if s.kind != "" {
				ref = s.raw
				break
			}
		}
		if ref == "" {
			d.fail(n, field, "contains control characters")
			return "", false
		}
		c.Missing = append(c.Missing, MissingCredential{Reference: ref, Field: field, Reason: "resolves to a value with control characters", Line: n.Line})
		return "", false
	}
	for _, p := range parts {
		c.Secrets = append(c.Secrets, NewSecret(p))
	}
	return value, true
}

// containsFold: s is in list, ASCII case aside (header names).
func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// toolList decodes readOnly / approvalRequired; other maps tool names of the
// opposite list to their lines (a name in both is a contradiction).
func (d *decoder) toolList(n *yaml.Node, field string, other map[string]int) []string {
	names, ok := d.strList(n, field)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	out := names[:0]
	for i, name := range names {
		item := n.Content[i]
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case strings.TrimSpace(name) == "" || hasControl(name):
			d.fail(item, f, "must be a tool name")
		case seen[name]:
			d.fail(item, f, "%q is listed twice", clip(name))
		case other[name] > 0:
			d.fail(item, f, "%q is also in readOnly (line %d): a tool is either read-only or approval-required", clip(name), other[name])
		default:
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// checkListenSyntax validates host:port.
func checkListenSyntax(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port", clip(s))
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || port == "" {
		return fmt.Sprintf("%q: the port must be a number in [0, 65535]", clip(s))
	}
	_ = p
	if host != "" && strings.ContainsAny(host, " /\\\x00") {
		return fmt.Sprintf("%q: invalid host", clip(s))
	}
	return ""
}

// isLoopbackListen reports whether a syntactically valid listen address only
// accepts local connections. An empty host means every interface; a host
// name other than localhost cannot be known to be loopback.
func isLoopbackListen(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	return isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func isLoopbackURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && isLoopbackHost(u.Hostname())
}

// optionalHTTPURL decodes an http(s) URL that may be left empty: "" when
// it is empty or refused (the refusal is recorded).
func (d *decoder) optionalHTTPURL(n *yaml.Node, field string) string {
	s, ok := d.str(n, field)
	if !ok || s == "" {
		return ""
	}
	if msg := checkHTTPURL(s); msg != "" {
		d.fail(n, field, "%s", msg)
		return ""
	}
	return s
}

func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", clip(s))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q must be an http:// or https:// URL", clip(s))
	case u.Host == "":
		return fmt.Sprintf("%q has no host", clip(s))
	case u.User != nil:
		return "must not carry credentials (user:password@); use headers with a secret reference"
	case u.Fragment != "":
		return fmt.Sprintf("%q must not have a #fragment", clip(s))
	}
	return ""
}

// SetListen applies a --listen override and re-checks it against the
// tokens: a non-loopback address needs auth.tokens.
func (c *Config) SetListen(addr string) error {
	if msg := checkListenSyntax(addr); msg != "" {
		return &Error{Field: "--listen", Message: msg}
	}
	if !c.AuthRequired() && !isLoopbackListen(addr) {
		return &Error{Field: "--listen", Message: fmt.Sprintf("%q is not a loopback address and %s configures no inbound auth (auth.tokens, auth.oidc or accessTokens): add one, or listen on 127.0.0.1", clip(addr), c.File)}
	}
	c.Listen, c.ListenLine = addr, 0
	return nil
}

// credential decodes `credential: {label, header, scheme}`: a header whose
// value an operator sets in the vault (console or `connecta credential
// set`), filled in on every request. It may not share a header with
// `headers` or with oauth.
func (d *decoder) credential(s section[credentialShape], c *Connector) {
	cr := &CredentialSlot{Label: DefaultCredentialLabel, Header: DefaultCredentialHeader, Scheme: DefaultCredentialScheme, Per: PerConnector}
	fs, ok := s.in(d)
	if !ok {
		return
	}
	if e := fs.Per; e.given() {
		cr.Per = d.per(e.val, e.path)
	}
	if e := fs.Label; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			if s = strings.TrimSpace(s); s == "" || hasControl(s) || len(s) > 80 {
				d.fail(e.val, e.path, "must be 1 to 80 characters without control characters")
			} else {
				cr.Label = s
			}
		}
	}
	if e := fs.Header; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			if !validHeaderName(s) || containsFold(transportHeaders, s) {
				d.fail(e.val, e.path, "%q is not a header connecta can send", clip(s))
			} else {
				cr.Header = s
			}
		}
	}
	if e := fs.Scheme; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			if hasControl(s) || strings.ContainsAny(s, " \t") || len(s) > 40 {
				d.fail(e.val, e.path, "must be one word (e.g. Bearer), or empty to send the value as is")
			} else {
				cr.Scheme = s
			}
		}
	}
	for _, h := range c.Headers {
		if strings.EqualFold(h.Name, cr.Header) {
			d.fail(s.val, s.path, "and headers.%s set the same header: remove one", h.Name)
			return
		}
	}
	if c.OAuth != nil && strings.EqualFold(cr.Header, "Authorization") {
		d.fail(s.val, s.path, "and oauth both set Authorization: with oauth, connecta sends the grant's access token")
		return
	}
	c.Credential = cr
}

// per decodes `oauth.grants` / `credential.per`: connector (the team's one
// value) or caller (each actor's own).
func (d *decoder) per(n *yaml.Node, path string) string {
	s, ok := d.str(n, path)
	if !ok {
		return PerConnector
	}
	if s != PerConnector && s != PerCaller {
		d.fail(n, path, "%q is not one of connector, caller", clip(s))
		return PerConnector
	}
	return s
}

// perCallerOn reports whether a section that cannot apply (oauth or
// credential on a connector that is not a url connector) asks for
// per-caller values through the key pick names, so that the refusal can say
// why: one process or server is shared by every caller. The section's own
// mistakes are not reported: it is refused as a whole.
// urlOnly reports whether section e applies: on a url connector it does;
// on a stdio or builtin one it is refused, with why (for url connectors
// only) or, when its key (pick) says per caller, with the reason a per-caller
// what cannot be: one process serves every caller.
func urlOnly[T any](d *decoder, e section[T], isURL bool, key string, pick func(*T) field, what, why string) bool {
	switch {
	case isURL:
		return true
	case perCallerOn(d, e, pick):
		d.fail(e.key, e.path, "%s: caller cannot apply to a stdio or builtin connector: it is one process shared by every caller, so it cannot carry each caller's own %s", key, what)
	default:
		d.fail(e.key, e.path, "applies only to url connectors (%s)", why)
	}
	return false
}

func perCallerOn[T any](d *decoder, s section[T], pick func(*T) field) bool {
	quiet := &decoder{file: d.file}
	t, ok := s.in(quiet)
	if !ok {
		return false
	}
	f := pick(t)
	return f.given() && f.val.Kind == yaml.ScalarNode && f.val.Value == PerCaller
}
