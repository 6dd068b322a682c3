//go:build ignore

// move-internal moves the packages that are not an API under internal/
// (docs/DESIGN.md "What is importable") and rewrites every path that names
// them. It is re-runnable and idempotent: a directory still at its old path
// is moved; a file that appeared at an old path after an earlier run (a
// merged branch) is moved into the new directory; a second run changes
// nothing. Run it from the repository root through tools/move-internal.sh,
// which also regenerates docs/DESIGN.md's import table and builds.
//
// What it rewrites, in every tracked or untracked-but-not-ignored text file
// except third_party/, go.sum and itself:
//
//   - the import path module/OLD[/...] → module/NEW[/...], wherever it occurs
//     (imports, allowlists in tests, -X flags, docs);
//   - repository paths written from the root: OLD/rest (when NEW/rest
//     exists), ./OLD and ./OLD/... (Makefile, .ci/run, docs, comments), and
//     /OLD/rest in .gitignore;
//   - paths relative to a file that moved or to a target that moved:
//     "../x" string literals and the leading literals of filepath.Join /
//     path.Join in Go, ../x tokens in other files (markdown links, scripts);
//   - in internal/layers, the package paths of the rule tables;
//   - the pattern internal/... (which meant the few internal helpers) into
//     the list of those helpers, so it does not swallow the moved packages.
//
// A word without a slash ("gateway", `server`) is a package name and stays:
// moving a directory keeps its last element, so no package is renamed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const module = "github.com/connecta-dev/connecta"

// moves are old directory → new directory, below the module root. Every
// package of the module except cmd/… (the commands), test/… and deploy/…
// (test helpers and the operator's deployment files, see DESIGN.md).
var moves = [][2]string{
	{"access", "internal/access"},
	{"accesstoken", "internal/accesstoken"},
	{"actor", "internal/actor"},
	{"app", "internal/app"},
	{"config", "internal/config"},
	{"console", "internal/console"},
	{"contract", "internal/contract"},
	{"demo", "internal/demo"},
	{"gateway", "internal/gateway"},
	{"guest", "internal/guest"},
	{"inbound", "internal/inbound"},
	{"ipc", "internal/ipc"},
	{"jstext", "internal/jstext"},
	{"oauth", "internal/oauth"},
	{"quickjs.wasm", "internal/quickjs.wasm"},
	{"sandbox", "internal/sandbox"},
	{"server", "internal/server"},
	{"stdioshim", "internal/stdioshim"},
	{"store", "internal/store"},
	{"supervisor", "internal/supervisor"},
	{"telemetry", "internal/telemetry"},
	{"vault", "internal/vault"},
}

var dryRun = flag.Bool("n", false, "print what would move; change nothing")

func main() {
	flag.Parse()
	if mod, err := os.ReadFile("go.mod"); err != nil || !bytes.HasPrefix(mod, []byte("module "+module+"\n")) {
		fatalf("run from the root of %s (go.mod not found or another module)", module)
	}
	// longest old path first, so a nested mapping would win over its parent
	slices.SortFunc(moves, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	helpers := internalHelpers()

	warnUnmapped()
	movedFrom, conflicts := moveAll()
	if *dryRun {
		return
	}
	changed := 0
	for _, p := range textFiles() {
		old := p
		if o, ok := movedFrom[p]; ok {
			old = o
		}
		src, err := os.ReadFile(p)
		if err != nil {
			fatalf("%v", err)
		}
		out := rewriteModule(src)
		if strings.HasSuffix(p, ".go") {
			out = rewriteGo(p, old, out, helpers)
		} else {
			out = rewriteRelative(p, old, out)
			out = expandInternalPattern(out, "./internal/...", "./internal/", "/...", helpers)
		}
		out = rewriteRootPaths(p, out)
		if strings.HasSuffix(p, ".go") && !bytes.Equal(out, src) {
			if f, err := format.Source(out); err == nil {
				out = f
			} else {
				warnf("%s: gofmt: %v (left unformatted)", p, err)
			}
		}
		if bytes.Equal(out, src) {
			continue
		}
		changed++
		if err := os.WriteFile(p, out, fileMode(p)); err != nil {
			fatalf("%v", err)
		}
	}
	fmt.Printf("move-internal: %d file(s) moved, %d file(s) rewritten\n", len(movedFrom), changed)
	if len(conflicts) > 0 {
		for _, c := range conflicts {
			fmt.Fprintln(os.Stderr, "conflict:", c)
		}
		fatalf("%d file(s) exist at both their old and new path with different contents: merge each by hand into the new path, delete the old one, and run again", len(conflicts))
	}
}

// --- moving ---------------------------------------------------------------

// moveAll moves every old directory that still exists. It returns, for each
// file moved in this run, its new path → old path (the relative paths in it
// are rewritten from the old place), and the files found at both places
// with different contents.
func moveAll() (movedFrom map[string]string, conflicts []string) {
	movedFrom = map[string]string{}
	tracked := gitFiles("ls-files", "-z")
	for _, m := range moves {
		old, nw := m[0], m[1]
		if !exists(old) {
			continue
		}
		if !exists(nw) {
			// the whole directory, in one step (untracked files go along)
			var files []string
			walkFiles(old, func(f string) { files = append(files, f) })
			fmt.Printf("move %s → %s (%d files)\n", old, nw, len(files))
			if *dryRun {
				continue
			}
			mkdirAll(path.Dir(nw))
			if hasTracked(tracked, old) {
				run("git", "mv", old, nw)
			} else if err := os.Rename(old, nw); err != nil {
				fatalf("%v", err)
			}
			for _, f := range files {
				movedFrom[nw+strings.TrimPrefix(f, old)] = f
			}
			continue
		}
		// a late arrival: files at the old path next to an already moved tree
		walkFiles(old, func(f string) {
			dst := nw + strings.TrimPrefix(f, old)
			switch {
			case !exists(dst):
				fmt.Printf("move %s → %s (late arrival)\n", f, dst)
				if *dryRun {
					return
				}
				mkdirAll(path.Dir(dst))
				if tracked[f] {
					run("git", "mv", f, dst)
				} else if err := os.Rename(f, dst); err != nil {
					fatalf("%v", err)
				}
				movedFrom[dst] = f
			case sameBytes(f, dst):
				fmt.Printf("remove %s (the same bytes are at %s)\n", f, dst)
				if *dryRun {
					return
				}
				if tracked[f] {
					run("git", "rm", "-q", "-f", f) // -f: it may be staged only; its bytes are kept at dst
				} else if err := os.Remove(f); err != nil {
					fatalf("%v", err)
				}
			default:
				conflicts = append(conflicts, f+" vs "+dst)
			}
		})
		if !*dryRun {
			removeEmptyDirs(old)
		}
	}
	return movedFrom, conflicts
}

// staysOutside are the root directories that are not moved (DESIGN.md
// "What is importable").
var staysOutside = []string{"cmd", "deploy", "test", "third_party", "internal", "tools", "docs"}

// warnUnmapped names a root directory holding Go files that no mapping
// moves and that is not meant to stay: a package a merged branch added at
// the root, which needs a line in moves.
func warnUnmapped() {
	ents, _ := os.ReadDir(".")
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || slices.Contains(staysOutside, name) || mapPath(name) != name {
			continue
		}
		hasGo := false
		walkFiles(name, func(f string) { hasGo = hasGo || strings.HasSuffix(f, ".go") })
		if hasGo {
			warnf("%s/ holds Go files and no mapping moves it: add it to moves in tools/move-internal.go (or to staysOutside) and run again", name)
		}
	}
}

// mapPath is p (a slash path below the root) after the moves.
func mapPath(p string) string {
	for _, m := range moves {
		if p == m[0] || strings.HasPrefix(p, m[0]+"/") {
			return m[1] + p[len(m[0]):]
		}
	}
	return p
}

// internalHelpers are the directories under internal/ that no mapping
// made: what the pattern internal/... meant before the move.
func internalHelpers() []string {
	targets := map[string]bool{}
	for _, m := range moves {
		if rest, ok := strings.CutPrefix(m[1], "internal/"); ok {
			targets[strings.SplitN(rest, "/", 2)[0]] = true
		}
	}
	ents, _ := os.ReadDir("internal")
	var out []string
	for _, e := range ents {
		if e.IsDir() && !targets[e.Name()] {
			out = append(out, e.Name())
		}
	}
	return out
}

// --- rewriting ------------------------------------------------------------

// rewriteModule rewrites module/OLD to module/NEW where OLD is a whole
// path prefix (followed by '/', a quote, a space, a '.' before an
// identifier as in -X pkg.var, or the end).
func rewriteModule(src []byte) []byte {
	prefix := []byte(module + "/")
	var out []byte
	for i := 0; ; {
		j := bytes.Index(src[i:], prefix)
		if j < 0 {
			return append(out, src[i:]...)
		}
		j += i
		rest := j + len(prefix)
		out = append(out, src[i:rest]...)
		i = rest
		for _, m := range moves {
			if bytes.HasPrefix(src[rest:], []byte(m[0])) && moduleBoundary(src, rest+len(m[0])) {
				out = append(out, m[1]...)
				i = rest + len(m[0])
				break
			}
		}
	}
}

func moduleBoundary(src []byte, k int) bool {
	if k >= len(src) {
		return true
	}
	c := src[k]
	return !isPathChar(c) || c == '/' || (c == '.' && k+1 < len(src) && isIdentStart(src[k+1]))
}

// rewriteRootPaths rewrites repository paths written from the root: OLD/rest
// when the moved rest exists, ./OLD[/rest], and /OLD/rest in ignore files.
// A path preceded by a path character (a/OLD, ../OLD, module/OLD) is not
// from the root and stays.
func rewriteRootPaths(file string, src []byte) []byte {
	anchored := strings.HasSuffix(file, ".gitignore") || strings.HasSuffix(file, ".dockerignore")
	var out []byte
	last := 0
	for i := 0; i < len(src); i++ {
		// what precedes i: a non-path character (a bare OLD/rest), "./"
		// after one, or an ignore file's leading "/"; anything else
		// (a/OLD, ../OLD, module/OLD) is not a path from the root
		explicit := false
		switch {
		case i == 0 || !isPathChar(src[i-1]):
		case src[i-1] == '/' && i >= 2 && src[i-2] == '.' && (i == 2 || !isPathChar(src[i-3])):
			explicit = true
		case src[i-1] == '/' && anchored && (i == 1 || strings.IndexByte("\n \t!", src[i-2]) >= 0):
			explicit = true
		default:
			continue
		}
		for _, m := range moves {
			old := m[0]
			if !bytes.HasPrefix(src[i:], []byte(old)) {
				continue
			}
			k := i + len(old)
			if k < len(src) && src[k] != '/' && isPathChar(src[k]) {
				continue // a longer name: config.yaml, gatewayFoo
			}
			if k < len(src) && src[k] == '/' {
				e := k
				for e < len(src) && (isPathChar(src[e]) || src[e] == '*') {
					e++
				}
				if !namesPath(old+string(src[k:e])) && !(anchored && exists(m[1])) {
					continue // prose such as "store/vault", an MCP method (server/discover), a path that is gone
				}
			} else if !explicit || !exists(m[1]) {
				continue // a bare word is a package name
			}
			out = append(out, src[last:i]...)
			out = append(out, m[1]...)
			last = k
			i = k - 1
			break
		}
	}
	return append(out, src[last:]...)
}

// namesPath: the mention p (old layout) names something that exists after
// the moves, or a file in an existing directory two levels down
// (store/migrations/NNNN_name.sql); one level is not enough, or the MCP
// method server/discover would pass.
func namesPath(p string) bool {
	c := mapPath(candidate(p))
	if exists(c) {
		return true
	}
	d := path.Dir(candidate(p))
	return strings.Contains(d, "/") && isDir(mapPath(d))
}

func isDir(p string) bool {
	st, err := os.Stat(filepath.FromSlash(p))
	return err == nil && st.IsDir()
}

// candidate is the existing path a mention names: without a trailing
// "/...", a glob's last element, or trailing punctuation (a sentence's
// full stop after server/http.go).
func candidate(p string) string {
	p = strings.TrimSuffix(p, "/...")
	if i := strings.IndexAny(p, "*?["); i >= 0 {
		p = path.Dir(p[:i] + "x")
	}
	for n := len(p); n > 1 && (p[n-1] == '/' || p[n-1] == '-' || p[n-1] == '.' && p[n-2] != '.' && p[n-2] != '/'); n = len(p) {
		p = p[:n-1]
	}
	if p == "" {
		return "."
	}
	return p
}

// rewriteRelative rewrites ../x tokens in a non-Go file (markdown links,
// scripts) that moved or whose target moved.
func rewriteRelative(file, old string, src []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i+3 <= len(src); i++ {
		if !bytes.HasPrefix(src[i:], []byte("../")) || (i > 0 && isPathChar(src[i-1])) {
			continue
		}
		e := i
		for e < len(src) && isPathChar(src[e]) {
			e++
		}
		tok := strings.TrimRight(string(src[i:e]), ".")
		if nw, ok := relocate(path.Dir(old), path.Dir(file), tok); ok {
			out = append(out, src[last:i]...)
			out = append(out, nw...)
			last = i + len(tok)
		}
		i = e
	}
	return append(out, src[last:]...)
}

// relocate rewrites rel, a path relative to oldDir, so that from newDir it
// names the same thing after the moves; ok only when the target exists and
// the text changes.
func relocate(oldDir, newDir, rel string) (string, bool) {
	target := path.Join(oldDir, rel)
	mt := mapPath(target)
	if !exists(candidate(mt)) {
		return rel, false
	}
	r, err := filepath.Rel(filepath.FromSlash(newDir), filepath.FromSlash(mt))
	if err != nil {
		return rel, false
	}
	r = filepath.ToSlash(r)
	if strings.HasSuffix(rel, "/") && !strings.HasSuffix(r, "/") {
		r += "/"
	}
	return r, r != rel
}

// rewriteGo rewrites a Go file's relative path literals (when the file or
// its target moved), internal/layers' rule tables, and internal/... there.
func rewriteGo(file, old string, src []byte, helpers []string) []byte {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		warnf("%s: %v (relative paths not rewritten)", file, err)
		return src
	}
	type edit struct {
		from, to int
		text     string
	}
	var edits []edit
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	oldDir, newDir := path.Dir(old), path.Dir(file)
	moved := oldDir != newDir
	skip := map[*ast.BasicLit]bool{}
	layers := strings.HasPrefix(file, "internal/layers/")

	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Join" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || (x.Name != "filepath" && x.Name != "path") {
				return true
			}
			var lits []*ast.BasicLit
			var parts []string
			for _, a := range n.Args {
				v, lit := stringLit(a)
				if lit == nil {
					break
				}
				lits, parts = append(lits, lit), append(parts, v)
				skip[lit] = true
			}
			if len(lits) == 0 {
				return true
			}
			j := path.Join(parts...)
			if j != ".." && !strings.HasPrefix(j, "../") {
				return true
			}
			if nw, ok := relocate(oldDir, newDir, j); ok {
				var q []string
				for _, c := range strings.Split(nw, "/") {
					q = append(q, strconv.Quote(c))
				}
				edits = append(edits, edit{off(lits[0].Pos()), off(lits[len(lits)-1].End()), strings.Join(q, ", ")})
			} else if moved && !exists(candidate(mapPath(path.Join(oldDir, j)))) {
				warnf("%s: filepath.Join left as it is (%s does not exist)", fset.Position(n.Pos()), path.Join(oldDir, j))
			}
		case *ast.CompositeLit:
			// a Layer's name ({"gateway", []string{...}}) is prose, not a path
			if layers && len(n.Elts) >= 2 {
				if lit, ok := n.Elts[0].(*ast.BasicLit); ok {
					if c, ok := n.Elts[1].(*ast.CompositeLit); ok && c.Type != nil {
						skip[lit] = true
					}
				}
			}
		case *ast.BinaryExpr:
			// X.Name != "gateway" compares a layer's name
			if s, ok := n.X.(*ast.SelectorExpr); layers && ok && s.Sel.Name == "Name" {
				if lit, ok := n.Y.(*ast.BasicLit); ok {
					skip[lit] = true
				}
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING || skip[lit] {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		switch {
		case strings.HasPrefix(v, "../"): // a lone ".." is a path only as filepath.Join's argument (above)
			if nw, ok := relocate(oldDir, newDir, v); ok {
				edits = append(edits, edit{off(lit.Pos()), off(lit.End()), strconv.Quote(nw)})
			} else if moved && !exists(candidate(mapPath(path.Join(oldDir, v)))) {
				warnf("%s: %s left as it is (%s does not exist)", fset.Position(lit.Pos()), lit.Value, path.Join(oldDir, v))
			}
		case layers && v == "internal/...":
			var q []string
			for _, h := range helpers {
				q = append(q, strconv.Quote("internal/"+h))
			}
			edits = append(edits, edit{off(lit.Pos()), off(lit.End()), strings.Join(q, ", ")})
		case layers && mapPath(v) != v:
			edits = append(edits, edit{off(lit.Pos()), off(lit.End()), strconv.Quote(mapPath(v))})
		}
		return true
	})
	sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.from], []byte(e.text), out[e.to:])
	}
	return out
}

func stringLit(e ast.Expr) (string, *ast.BasicLit) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", nil
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", nil
	}
	return v, lit
}

// expandInternalPattern replaces the whole token pat (e.g. ./internal/...)
// by one pattern per helper: before the move it meant those few packages.
func expandInternalPattern(src []byte, pat, pre, post string, helpers []string) []byte {
	var parts []string
	for _, h := range helpers {
		parts = append(parts, pre+h+post)
	}
	repl := []byte(strings.Join(parts, " "))
	var out []byte
	last := 0
	for i := 0; ; {
		j := bytes.Index(src[i:], []byte(pat))
		if j < 0 {
			break
		}
		j += i
		e := j + len(pat)
		if (j == 0 || !isPathChar(src[j-1])) && (e == len(src) || !isPathChar(src[e])) {
			out = append(out, src[last:j]...)
			out = append(out, repl...)
			last = e
		}
		i = e
	}
	return append(out, src[last:]...)
}

// --- files ----------------------------------------------------------------

// textFiles are the files to rewrite: tracked and untracked-but-not-ignored
// regular files, except third_party/, go.sum, this tool and binaries.
func textFiles() []string {
	var out []string
	for p := range gitFiles("ls-files", "-z", "-c", "-o", "--exclude-standard") {
		if strings.HasPrefix(p, "third_party/") || strings.HasPrefix(p, "tools/move-internal") ||
			path.Base(p) == "go.sum" || strings.Contains(p, "node_modules") {
			continue
		}
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() > 8<<20 {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func gitFiles(args ...string) map[string]bool {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	set := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			set[p] = true
		}
	}
	return set
}

func hasTracked(tracked map[string]bool, dir string) bool {
	for p := range tracked {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

func walkFiles(dir string, fn func(string)) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		fatalf("%v", err)
	}
	for _, f := range files {
		fn(f)
	}
}

func removeEmptyDirs(dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // fails, as it should, when not empty
	}
}

func exists(p string) bool {
	_, err := os.Stat(filepath.FromSlash(p))
	return err == nil
}

func sameBytes(a, b string) bool {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func fileMode(p string) fs.FileMode {
	if st, err := os.Stat(p); err == nil {
		return st.Mode().Perm()
	}
	return 0o644
}

func mkdirAll(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
}

func isPathChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "move-internal: warning: "+format+"\n", args...)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "move-internal: "+format+"\n", args...)
	os.Exit(1)
}
