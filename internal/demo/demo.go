// Package demo is the built-in demo connector: an in-process MCP server over
// a small, fictional project tracker (3 projects, 25 issues, 8 people, labels,
// comments), so that a new user's first execute_code works without any
// downstream. Everything it says is labelled demo. Six read-only tools and
// one write tool (add_comment), which changes only the calling server
// instance's in-memory copy.
package demo

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Identity of the demo connector.
const (
	ID          = "demo"
	Title       = "Demo project tracker (built-in demo)"
	Description = "Built-in DEMO data, not a real system: a small fictional project tracker " +
		"(3 projects, 25 issues, 8 people, labels, comments). Six read-only tools; one write tool, " +
		"add_comment, changes only this server's in-memory copy."
	ServerName    = "connecta-demo"
	ServerVersion = "1.0.0"
)

// Guide is the demo connector's usage guide (served as skill connector:demo).
const Guide = `# Demo project tracker (built-in demo)

Built-in demo data shipped with connecta: a fictional company's issue
tracker. Nothing here is real, and changes are lost on restart.

## Data
- Projects ` + "`WEB`" + ` (Customer portal), ` + "`API`" + ` (Public API v2) and ` + "`MOB`" + ` (Mobile app).
- Issues ` + "`WEB-1`" + ` … ` + "`MOB-7`" + `, each with status (` + "`open`, `in_progress`, `done`" + `),
  priority (` + "`low` … `urgent`" + `), an assignee (a person id such as ` + "`u-ben`" + `, or null),
  labels and comments.
- People ` + "`u-ada`" + ` … ` + "`u-hana`" + ` in the teams platform, web and mobile.

## Tools (read-only)
- ` + "`list_projects`" + ` — projects with issue counts per status.
- ` + "`search_issues`" + ` — filter by query, project, status, priority, assignee
  (` + "`\"none\"`" + ` = unassigned), label; ` + "`limit`" + ` ≤ 50, page with ` + "`cursor`" + `
  = the previous page's ` + "`nextCursor`" + `.
- ` + "`get_issue`" + ` — one issue with its description and comments.
- ` + "`list_people`" + `, ` + "`get_person`" + ` — people, and a person's active issues.
- ` + "`list_labels`" + ` — labels with how many issues carry each.

## Write tool
- ` + "`add_comment`" + ` — adds a comment to an issue (needs ` + "`call_destructive_tool`" + `).

## Example
` + "```js" + `
async () => {
  const page = await connecta.call("demo.search_issues", { status: "open", priority: "urgent" });
  return page.issues.map(i => i.id + " " + i.title);
}
` + "```" + `
`

const instructions = "DEMO connector with fictional data (a project tracker). Start with list_projects or search_issues."

//go:embed data.json
var dataJSON []byte

type person struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
	Role  string `json:"role"`
	Team  string `json:"team"`
}

type project struct {
	Key         string `json:"key"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Lead        string `json:"lead"`
	Status      string `json:"status"`
}

type label struct {
	Name        string `json:"name"`
	Color       string `json:"color"`
	Description string `json:"description"`
}

type comment struct {
	ID        string `json:"id"`
	Author    string `json:"author"`
	Body      string `json:"body"`
	CreatedAt string `json:"createdAt"`
}

type issue struct {
	ID          string    `json:"id"`
	Project     string    `json:"project"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	Status      string    `json:"status"`
	Priority    string    `json:"priority"`
	Assignee    *string   `json:"assignee"`
	Reporter    string    `json:"reporter"`
	Labels      []string  `json:"labels"`
	CreatedAt   string    `json:"createdAt"`
	UpdatedAt   string    `json:"updatedAt"`
	Comments    []comment `json:"comments"`
}

type issueSummary struct {
	ID           string   `json:"id"`
	Project      string   `json:"project"`
	Title        string   `json:"title"`
	Status       string   `json:"status"`
	Priority     string   `json:"priority"`
	Assignee     *string  `json:"assignee"`
	Labels       []string `json:"labels"`
	CommentCount int      `json:"commentCount"`
	UpdatedAt    string   `json:"updatedAt"`
}

type dataset struct {
	People   []person  `json:"people"`
	Projects []project `json:"projects"`
	Labels   []label   `json:"labels"`
	Issues   []issue   `json:"issues"`
}

// state is one server instance's private copy of the dataset.
type state struct {
	mu          sync.Mutex
	data        dataset
	nextComment int
	now         func() time.Time
}

const (
	defaultLimit  = 10
	defaultAuthor = "u-ada"
)

// toolError is a failure the caller can fix (unknown id, bad cursor): it
// becomes an isError result, not a protocol error.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func failf(format string, args ...any) error { return &toolError{msg: fmt.Sprintf(format, args...)} }

// NewServer returns a fresh demo MCP server with its own copy of the
// dataset: writes through one server are never seen by another.
func NewServer() *mcp.Server {
	st := &state{now: time.Now}
	if err := json.Unmarshal(dataJSON, &st.data); err != nil {
		panic("demo: embedded dataset: " + err.Error()) // covered by tests; cannot happen at run time
	}
	for _, is := range st.data.Issues {
		st.nextComment += len(is.Comments)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: Title, Version: ServerVersion},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	for _, t := range st.tools() {
		srv.AddTool(t.def, t.handler())
	}
	return srv
}

type tool struct {
	def    *mcp.Tool
	input  string
	output string
	run    func(args json.RawMessage) (any, error)
}

func ptr[T any](v T) *T { return &v }

func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
}

func (st *state) tools() []*tool {
	mk := func(name, title, desc string, ann *mcp.ToolAnnotations, in, out string, run func(json.RawMessage) (any, error)) *tool {
		return &tool{
			def: &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: ann,
				InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(out)},
			input: in, output: out, run: run,
		}
	}
	return []*tool{
		mk("list_projects", "List projects (demo)", "[demo data] List the tracker's projects with issue counts per status.",
			readOnly("List projects (demo)"), emptyInput, listProjectsOutput, st.listProjects),
		mk("search_issues", "Search issues (demo)", "[demo data] Search issues by words and filters (project, status, priority, assignee, label), newest first, paginated.",
			readOnly("Search issues (demo)"), searchIssuesInput, searchIssuesOutput, st.searchIssues),
		mk("get_issue", "Get an issue (demo)", "[demo data] Get one issue with its description and comments.",
			readOnly("Get an issue (demo)"), getIssueInput, issueSchema, st.getIssue),
		mk("list_people", "List people (demo)", "[demo data] List the people in the tracker, optionally of one team.",
			readOnly("List people (demo)"), listPeopleInput, listPeopleOutput, st.listPeople),
		mk("get_person", "Get a person (demo)", "[demo data] Get a person with their open and in-progress issues.",
			readOnly("Get a person (demo)"), getPersonInput, getPersonOutput, st.getPerson),
		mk("list_labels", "List labels (demo)", "[demo data] List labels with how many issues carry each.",
			readOnly("List labels (demo)"), emptyInput, listLabelsOutput, st.listLabels),
		mk("add_comment", "Add a comment (demo)", "[demo data] Add a comment to an issue. Changes only this demo server's in-memory copy.",
			&mcp.ToolAnnotations{Title: "Add a comment (demo)", ReadOnlyHint: false, DestructiveHint: ptr(false), IdempotentHint: false, OpenWorldHint: ptr(false)},
			addCommentInput, addCommentOutput, st.addComment),
	}
}

func (t *tool) handler() mcp.ToolHandler {
	// One validator per tool: the demo's schemas are ours and few.
	v := validate.New(validate.Options{CacheEntries: 1})
	schema := json.RawMessage(t.input)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = json.RawMessage(`{}`)
		}
		if !validate.NumbersBounded(args) {
			return errorResult("Invalid arguments: not JSON, or a number out of range"), nil
		}
		if !json.Valid(args) {
			return errorResult("Invalid arguments: not JSON"), nil
		}
		if findings := v.Check(schema, args); len(findings) > 0 {
			return errorResult("Invalid arguments: " + validationText(findings)), nil
		}
		out, err := t.run(args)
		var te *toolError
		switch {
		case errors.As(err, &te):
			return errorResult(te.msg), nil
		case err != nil:
			return nil, err
		}
		return structuredResult(out)
	}
}

// validationText flattens findings to one line.
func validationText(findings []validate.Finding) string {
	parts := make([]string, len(findings))
	for i, f := range findings {
		parts[i] = fmt.Sprintf("at %s: %s (expected %s)", f.Path, f.Code, f.Expected)
	}
	return strings.Join(parts, "; ")
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// structuredResult returns v as structuredContent plus the same JSON as text.
func structuredResult(v any) (*mcp.CallToolResult, error) {
	raw, err := jstext.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("demo: encode result: %w", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(raw)}},
		StructuredContent: json.RawMessage(raw),
	}, nil
}

func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return failf("Invalid arguments: %v", err)
	}
	return nil
}

func summarize(is *issue) issueSummary {
	return issueSummary{ID: is.ID, Project: is.Project, Title: is.Title, Status: is.Status, Priority: is.Priority,
		Assignee: is.Assignee, Labels: nonNil(is.Labels), CommentCount: len(is.Comments), UpdatedAt: is.UpdatedAt}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (st *state) listProjects(json.RawMessage) (any, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	type counts struct {
		Open       int `json:"open"`
		InProgress int `json:"in_progress"`
		Done       int `json:"done"`
	}
	type row struct {
		project
		IssueCounts counts `json:"issueCounts"`
	}
	rows := make([]row, 0, len(st.data.Projects))
	for _, p := range st.data.Projects {
		r := row{project: p}
		for _, is := range st.data.Issues {
			if is.Project != p.Key {
				continue
			}
			switch is.Status {
			case "open":
				r.IssueCounts.Open++
			case "in_progress":
				r.IssueCounts.InProgress++
			case "done":
				r.IssueCounts.Done++
			}
		}
		rows = append(rows, r)
	}
	return map[string]any{"projects": rows}, nil
}

type searchArgs struct {
	Query    string `json:"query"`
	Project  string `json:"project"`
	Status   string `json:"status"`
	Priority string `json:"priority"`
	Assignee string `json:"assignee"`
	Label    string `json:"label"`
	Limit    int    `json:"limit"`
	Cursor   string `json:"cursor"`
}

// Cursors are opaque to callers: base64url of "offset:N".
func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset)))
}

func decodeCursor(c string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	n, ok := strings.CutPrefix(string(b), "offset:")
	if !ok {
		return 0, false
	}
	off, err := strconv.Atoi(n)
	return off, err == nil && off >= 0
}

func (st *state) searchIssues(raw json.RawMessage) (any, error) {
	var a searchArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Limit == 0 {
		a.Limit = defaultLimit
	}
	offset := 0
	if a.Cursor != "" {
		var ok bool
		if offset, ok = decodeCursor(a.Cursor); !ok {
			return nil, failf("Invalid cursor: pass nextCursor from the previous page unchanged")
		}
	}
	terms := strings.Fields(strings.ToLower(a.Query))
	st.mu.Lock()
	defer st.mu.Unlock()
	var hits []*issue
	for i := range st.data.Issues {
		is := &st.data.Issues[i]
		if a.Project != "" && !strings.EqualFold(is.Project, a.Project) ||
			a.Status != "" && is.Status != a.Status ||
			a.Priority != "" && is.Priority != a.Priority ||
			a.Label != "" && !slices.ContainsFunc(is.Labels, func(l string) bool { return strings.EqualFold(l, a.Label) }) {
			continue
		}
		switch {
		case a.Assignee == "":
		case a.Assignee == "none":
			if is.Assignee != nil {
				continue
			}
		case is.Assignee == nil || *is.Assignee != a.Assignee:
			continue
		}
		text := strings.ToLower(is.Title + " " + is.Description)
		all := true
		for _, t := range terms {
			if !strings.Contains(text, t) {
				all = false
				break
			}
		}
		if all {
			hits = append(hits, is)
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].UpdatedAt != hits[j].UpdatedAt {
			return hits[i].UpdatedAt > hits[j].UpdatedAt
		}
		return hits[i].ID < hits[j].ID
	})
	offset = min(offset, len(hits))
	type page struct {
		Issues     []issueSummary `json:"issues"`
		Total      int            `json:"total"`
		NextCursor string         `json:"nextCursor,omitempty"`
	}
	p := page{Issues: []issueSummary{}, Total: len(hits)}
	for i := offset; i < len(hits) && i < offset+a.Limit; i++ {
		p.Issues = append(p.Issues, summarize(hits[i]))
	}
	if offset+a.Limit < len(hits) {
		p.NextCursor = encodeCursor(offset + a.Limit)
	}
	return p, nil
}

func (st *state) findIssue(id string) *issue {
	for i := range st.data.Issues {
		if strings.EqualFold(st.data.Issues[i].ID, id) {
			return &st.data.Issues[i]
		}
	}
	return nil
}

func (st *state) findPerson(id string) *person {
	for i := range st.data.People {
		if st.data.People[i].ID == id {
			return &st.data.People[i]
		}
	}
	return nil
}

// issueNamed finds the issue a tool names, or says how issue ids look.
// The caller holds st.mu.
func (st *state) issueNamed(id string) (*issue, error) {
	is := st.findIssue(id)
	if is == nil {
		return nil, failf("Issue %q not found (ids look like WEB-1, API-3, MOB-2)", id)
	}
	return is, nil
}

// idArg decodes the {"id": …} arguments of the get_* tools.
func idArg(raw json.RawMessage) (string, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := decode(raw, &a); err != nil {
		return "", err
	}
	return a.ID, nil
}

func (st *state) getIssue(raw json.RawMessage) (any, error) {
	id, err := idArg(raw)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	is, err := st.issueNamed(id)
	if err != nil {
		return nil, err
	}
	out := *is
	out.Labels = nonNil(append([]string(nil), is.Labels...))
	out.Comments = nonNil(append([]comment(nil), is.Comments...))
	return out, nil
}

func (st *state) listPeople(raw json.RawMessage) (any, error) {
	var a struct {
		Team string `json:"team"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	people := []person{}
	for _, p := range st.data.People {
		if a.Team == "" || p.Team == a.Team {
			people = append(people, p)
		}
	}
	return map[string]any{"people": people}, nil
}

func (st *state) getPerson(raw json.RawMessage) (any, error) {
	id, err := idArg(raw)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	p := st.findPerson(id)
	if p == nil {
		return nil, failf("Person %q not found (ids look like u-ada, u-ben)", id)
	}
	type out struct {
		Person        person         `json:"person"`
		ActiveIssues  []issueSummary `json:"activeIssues"`
		ReportedCount int            `json:"reportedCount"`
	}
	o := out{Person: *p, ActiveIssues: []issueSummary{}}
	for i := range st.data.Issues {
		is := &st.data.Issues[i]
		if is.Assignee != nil && *is.Assignee == p.ID && is.Status != "done" {
			o.ActiveIssues = append(o.ActiveIssues, summarize(is))
		}
		if is.Reporter == p.ID {
			o.ReportedCount++
		}
	}
	return o, nil
}

func (st *state) listLabels(json.RawMessage) (any, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	type row struct {
		label
		IssueCount int `json:"issueCount"`
	}
	rows := make([]row, 0, len(st.data.Labels))
	for _, l := range st.data.Labels {
		r := row{label: l}
		for _, is := range st.data.Issues {
			if slices.ContainsFunc(is.Labels, func(x string) bool { return strings.EqualFold(x, l.Name) }) {
				r.IssueCount++
			}
		}
		rows = append(rows, r)
	}
	return map[string]any{"labels": rows}, nil
}

func (st *state) addComment(raw json.RawMessage) (any, error) {
	var a struct {
		IssueID string `json:"issueId"`
		Body    string `json:"body"`
		Author  string `json:"author"`
	}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Body) == "" {
		return nil, failf("Invalid arguments: body must not be blank")
	}
	if a.Author == "" {
		a.Author = defaultAuthor
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	is, err := st.issueNamed(a.IssueID)
	if err != nil {
		return nil, err
	}
	if st.findPerson(a.Author) == nil {
		return nil, failf("Person %q not found (author must be a person id such as u-ada)", a.Author)
	}
	st.nextComment++
	now := st.now().UTC().Truncate(time.Second).Format(time.RFC3339)
	c := comment{ID: "c-" + strconv.Itoa(st.nextComment), Author: a.Author, Body: a.Body, CreatedAt: now}
	is.Comments = append(is.Comments, c)
	is.UpdatedAt = now
	return map[string]any{"issueId": is.ID, "comment": c, "commentCount": len(is.Comments)}, nil
}
