package server

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// usageSkill is identical in every deployment (docs/meta-tools.md §9) and stays under
// MaxUsageSkillBytes.
//
//go:embed usage.md
var usageSkill string

const skillsListHeader = "Available skills. Fetch one with skills({ name: \"<name>\" })."

const usageSkillDescription = "how to write execute_code programs, budgets, deadlines and errors"

// handleSkills lists skills or fetches one (docs/meta-tools.md §9). Errors are text with
// isError and never fall back to another skill.
func (s *Server) handleSkills(ctx context.Context, _ *requestInfo, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	// Only the connectors the caller reaches have skills for it.
	visible := gateway.ViewFrom(ctx).VisibleConnectors(s.opts.Gateway.Connectors())
	args, err := parseArgs(req.Params.Arguments)
	if err != nil {
		return textError(err.Error()), nil
	}
	name, given, err := args.str("name")
	if err != nil {
		return textError(err.Error()), nil
	}
	if !given || name == "" {
		return text(s.skillList(visible)), nil
	}
	if name == "usage" {
		return text(usageSkill), nil
	}
	if id, ok := strings.CutPrefix(name, "connector:"); ok {
		c, found := connectorIn(visible, id)
		if !found {
			return textError(fmt.Sprintf("Unknown connector %s. Available skills: %s", quote(jstext.Clamp(id, jstext.MaxEchoBytes)), s.skillNames(visible))), nil
		}
		if strings.TrimSpace(c.guide) == "" {
			return textError(fmt.Sprintf("Connector %s has no guide. Available skills: %s", quote(id), s.skillNames(visible))), nil
		}
		return text(c.guide), nil
	}
	if c, found := connectorIn(visible, name); found && strings.TrimSpace(c.guide) != "" {
		return textError(fmt.Sprintf("Unknown skill %s. Connector guides are named \"connector:%s\".", quote(name), c.id)), nil
	}
	return textError(fmt.Sprintf("Unknown skill %s. Available skills: %s", quote(jstext.Clamp(name, jstext.MaxEchoBytes)), s.skillNames(visible))), nil
}

type connectorGuide struct{ id, title, guide string }

func connectorIn(connectors []gateway.ConnectorInfo, id string) (connectorGuide, bool) {
	for _, c := range connectors {
		if c.ID == id {
			return connectorGuide{id: c.ID, title: c.Title, guide: c.Guide}, true
		}
	}
	return connectorGuide{}, false
}

func (s *Server) skillList(connectors []gateway.ConnectorInfo) string {
	var b strings.Builder
	b.WriteString(skillsListHeader)
	b.WriteString("\n\n- `usage` — ")
	b.WriteString(usageSkillDescription)
	for _, c := range connectors {
		if strings.TrimSpace(c.Guide) == "" {
			continue
		}
		desc := c.Title
		if desc == "" {
			desc = c.ID
		}
		fmt.Fprintf(&b, "\n- `connector:%s` — usage guide for %s", c.ID, desc)
	}
	return b.String()
}

func (s *Server) skillNames(connectors []gateway.ConnectorInfo) string {
	names := []string{"usage"}
	for _, c := range connectors {
		if strings.TrimSpace(c.Guide) != "" {
			names = append(names, "connector:"+c.ID)
		}
	}
	return strings.Join(names, ", ")
}

func text(t string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
}
