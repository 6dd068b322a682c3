package server

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/connecta-dev/connecta/internal/gateway"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names (docs/meta-tools.md §1). The list is exactly seven with execute_code.
const (
	ToolExecuteCode         = "execute_code"
	ToolSearchTools         = "search_tools"
	ToolCallTool            = "call_tool"
	ToolCallDestructiveTool = "call_destructive_tool"
	ToolAuthorizeConnector  = "authorize_connector"
	ToolGetResult           = "get_result"
	ToolSkills              = "skills"
)

type toolHandler func(ctx context.Context, info *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)

type toolEntry struct {
	tool   *mcp.Tool
	handle toolHandler
}

// instructions route the model between the tools (docs/meta-tools.md §1); ≤ 1,000 characters,
// never naming a removed tool.
const instructions = `connecta fronts several connectors (downstream MCP servers) behind seven tools. ` +
	`Read the usage skill once: skills({name:"usage"}). ` +
	`To read with an unknown address: search_tools, then call_tool with the address it returns. ` +
	`With a known address <connector>.<tool>: call_tool directly. ` +
	`To combine, filter, reduce or chain several reads: execute_code, a small JavaScript program using connecta.search/describe/call. ` +
	`Writes (tools that are not read-only) never run in programs or call_tool: find them with search_tools, then use call_destructive_tool, one visible call each. ` +
	`On auth_required: authorize_connector, then retry after the operator acts. ` +
	`When a result is truncated: re-call with fields to select less, or page it with get_result.`

const guideSentence = ` Some connectors have usage guides: read one with skills({name:"connector:<id>"}) before using its tools.`

const (
	descSearchTools = `Search the connectors' tools by keywords (empty query browses). Returns tools grouped by connector with canonical addresses <connector>.<tool>, ` +
		`read-only safety, and on request compact or JSON input schemas with inputKeys/requiredInputKeys/outputKeys. ` +
		`Use safety:"readOnly" for tools call_tool and programs may call, "approvalRequired" for writes. Pages with limit (1-100, default 8) and offset.`
	descCallTool = `Call one read-only connector tool by its canonical address <connector>.<tool> with args. ` +
		`Tools that are not explicitly read-only are refused with destructive_tool_requires_approval; use call_destructive_tool for them. ` +
		`resultMode "mcp" (default) passes the downstream content through; "value" returns {ok,data}. ` +
		`fields selects dot-paths (results[].id) to shrink a result; results over the inline cap are truncated with a get_result handle. ` +
		`timeoutMs bounds the call (default: the deployment's host-call deadline). No automatic retries.`
	descCallDestructiveTool = `Call any connector tool, including writes and destructive tools, by canonical address with args: one visible, deliberate call. ` +
		`Same fields as call_tool plus an optional reason (max 500 characters) that is shown to the user and never sent downstream. ` +
		`Find the address with search_tools first; confirm the user wants the change.`
	descAuthorizeConnector = `Start recovery for a connector that answered auth_required. For recovery "oauth" the answer has a status: ` +
		`"authorization_required" or "pending" with an authorizationUrl for a person to open and sign in (pending repeats the same link until expiresAt), ` +
		`or "authorized" (retry the call). force: true starts a new authorization (over a working grant only for operators). ` +
		`Otherwise the answer names the configuration key or credential an operator must provide (recovery "operator_config"), or says recovery is "unavailable". ` +
		`Never pass secrets to this tool.`
	descGetResult = `Page a call_tool result that was too large to return inline, by the resultId from its truncation notice. ` +
		`Returns {offset,nextOffset?,totalBytes,text}; continue from nextOffset. Pages are UTF-8 safe; concatenated they reproduce the stored text.`
	descSkills = `Read usage skills. Without name: list them. "usage" explains how to write execute_code programs ` +
		`(the connecta.search/describe/call/emit surface, budgets, deadlines, errors); "connector:<id>" returns that connector's guide.`
)

// Hand-written input schemas: the tools are registered low-level
// (docs/PITFALLS.md, go-sdk), so nothing is inferred from Go types. They
// leave additionalProperties open and the handlers ignore unknown keys, so
// a client that sends a key a later version added is not refused.
const (
	schemaSearchTools = `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"Keywords for the operation you need; empty or omitted browses."},` +
		`"connector":{"type":"string","description":"Restrict the search to one connector id."},` +
		`"safety":{"type":"string","enum":["readOnly","approvalRequired","all"],"description":"readOnly: callable by call_tool and programs; approvalRequired: needs call_destructive_tool; all (default)."},` +
		`"limit":{"type":"integer","minimum":1,"maximum":100,"default":8},` +
		`"offset":{"type":"integer","minimum":0,"default":0},` +
		`"fullDescriptions":{"type":"boolean","description":"Return full tool descriptions instead of 160-character summaries."},` +
		`"includeSchemas":{"type":"string","enum":["compact","json"],"description":"Include input/output schemas: compact TypeScript-like shapes or raw JSON Schema."}}}`
	callProperties = `"address":{"type":"string","description":"Canonical tool address <connector>.<tool> as search_tools returns it."},` +
		`"args":{"type":"object","description":"Arguments for the tool."},` +
		`"fields":{"type":"array","items":{"type":"string"},"description":"Dot-paths to keep, x[] maps over arrays (e.g. results[].id)."},` +
		`"resultMode":{"type":"string","enum":["mcp","value"],"default":"mcp"},` +
		`"timeoutMs":{"type":"integer","exclusiveMinimum":0,"description":"Deadline for the whole call in milliseconds."},` +
		`"diagnostics":{"type":"boolean","description":"Add timing to JSON envelopes."}`
	schemaCallTool            = `{"type":"object","properties":{` + callProperties + `},"required":["address"]}`
	schemaCallDestructiveTool = `{"type":"object","properties":{` + callProperties +
		`,"reason":{"type":"string","maxLength":500,"description":"Why this write is needed; never sent downstream."}},"required":["address"]}`
	schemaAuthorizeConnector = `{"type":"object","properties":{` +
		`"connector":{"type":"string","description":"Connector id that answered auth_required."},` +
		`"force":{"type":"boolean","description":"Start a new OAuth authorization even when one is pending or granted."}},"required":["connector"]}`
	schemaGetResult = `{"type":"object","properties":{` +
		`"id":{"type":"string","description":"resultId from a truncation notice."},` +
		`"offset":{"type":"integer","minimum":0,"default":0},` +
		`"maxBytes":{"type":"integer","minimum":1}},"required":["id"]}`
	schemaSkills = `{"type":"object","properties":{"name":{"type":"string","description":"usage or connector:<id>; omit to list."}}}`
)

func boolPtr(b bool) *bool { return &b }

// buildTools builds the seven tool definitions once (descriptions that depend
// on the connector set are fixed at start: the connector list is static).
func (s *Server) buildTools() []toolEntry {
	withGuides := anyGuide(s.opts.Gateway.Connectors())
	guide := func(d string) string {
		if withGuides {
			return d + guideSentence
		}
		return d
	}
	readOnlyOpen := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(true)}
	closedIdempotent := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	var tools []toolEntry
	if s.opts.Code != nil {
		// The definition is the first one's; each call runs on the
		// execute_code in force when it arrives (a reload may replace it).
		tools = append(tools, toolEntry{tool: s.opts.Code.Tool(), handle: func(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.settingsNow().code.Handle(ctx, req)
		}})
	}
	tools = append(tools,
		toolEntry{tool: &mcp.Tool{Name: ToolSearchTools, Description: guide(descSearchTools), InputSchema: json.RawMessage(schemaSearchTools), Annotations: readOnlyOpen}, handle: s.handleSearchTools},
		toolEntry{tool: &mcp.Tool{Name: ToolCallTool, Description: descCallTool, InputSchema: json.RawMessage(schemaCallTool), Annotations: readOnlyOpen}, handle: s.handleCallTool},
		toolEntry{tool: &mcp.Tool{Name: ToolCallDestructiveTool, Description: guide(descCallDestructiveTool), InputSchema: json.RawMessage(schemaCallDestructiveTool),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(true)}}, handle: s.handleCallDestructiveTool},
		toolEntry{tool: &mcp.Tool{Name: ToolAuthorizeConnector, Description: descAuthorizeConnector, InputSchema: json.RawMessage(schemaAuthorizeConnector),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)}}, handle: s.handleAuthorizeConnector},
		toolEntry{tool: &mcp.Tool{Name: ToolGetResult, Description: descGetResult, InputSchema: json.RawMessage(schemaGetResult), Annotations: closedIdempotent}, handle: s.handleGetResult},
		toolEntry{tool: &mcp.Tool{Name: ToolSkills, Description: guide(descSkills), InputSchema: json.RawMessage(schemaSkills), Annotations: closedIdempotent}, handle: s.handleSkills},
	)
	return tools
}

// anyGuide reports whether one of the connectors has a usage guide (three
// descriptions then point at the skills).
func anyGuide(connectors []gateway.ConnectorInfo) bool {
	for _, c := range connectors {
		if strings.TrimSpace(c.Guide) != "" {
			return true
		}
	}
	return false
}

// guided reports the tools whose description gains guideSentence when a
// connector the caller sees has a guide.
func guided(name string) bool {
	return name == ToolSearchTools || name == ToolCallDestructiveTool || name == ToolSkills
}

// codeToolFor is execute_code's definition for a caller's connectors
// (*contract.Service implements it).
type codeToolFor interface {
	ToolFor(connectors []gateway.ConnectorInfo) *mcp.Tool
}

// toolsFor is tools/list as a caller with view sees it: the definitions a
// server configured with only its connectors would list (the execute_code
// inventory, the guide sentences). Built once per distinct view and kept
// until the settings change (a reload).
func (s *Server) toolsFor(set *settings, view *gateway.View) []*mcp.Tool {
	key := view.Key()
	s.perView.mu.Lock()
	defer s.perView.mu.Unlock()
	if s.perView.set != set {
		s.perView.set, s.perView.byKey = set, map[string][]*mcp.Tool{}
	}
	if ts, ok := s.perView.byKey[key]; ok {
		return ts
	}
	visible := view.VisibleConnectors(s.opts.Gateway.Connectors())
	withGuides := anyGuide(visible)
	out := make([]*mcp.Tool, 0, len(s.tools))
	for _, e := range s.tools {
		t := *e.tool
		switch {
		case t.Name == ToolExecuteCode:
			if c, ok := set.code.(codeToolFor); ok {
				t = *c.ToolFor(visible)
			}
		case guided(t.Name):
			t.Description = strings.TrimSuffix(t.Description, guideSentence)
			if withGuides {
				t.Description += guideSentence
			}
		}
		out = append(out, &t)
	}
	if len(s.perView.byKey) >= maxViewsCached {
		clear(s.perView.byKey)
	}
	s.perView.byKey[key] = out
	return out
}

// maxViewsCached bounds the per-view tools/list cache.
const maxViewsCached = 1024

// perViewTools is the cache behind toolsFor.
type perViewTools struct {
	mu    sync.Mutex
	set   *settings
	byKey map[string][]*mcp.Tool
}

// perCallerToolsList makes tools/list per caller while access rules are in
// force (the SDK registers one definition per tool); without them the
// SDK's own answer passes untouched.
func (s *Server) perCallerToolsList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		info := infoFrom(ctx)
		lr, ok := res.(*mcp.ListToolsResult)
		if info == nil || !info.accessOn || !ok {
			return res, err
		}
		mine := s.toolsFor(s.settingsNow(), info.view)
		out := *lr
		out.Tools = make([]*mcp.Tool, len(lr.Tools))
		for i, t := range lr.Tools { // the SDK's order, the caller's definitions
			out.Tools[i] = t
			for _, m := range mine {
				if m.Name == t.Name {
					out.Tools[i] = m
				}
			}
		}
		return &out, nil
	}
}
