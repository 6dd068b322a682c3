package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
)

func TestS1_GuidanceSentenceByCase(t *testing.T) {
	f := trackerFixture()
	for _, id := range []string{"billing", "billing-eu", "billing-us", "billing-apac"} {
		f.connectors = append(f.connectors, gateway.ConnectorInfo{ID: id, Title: "Billing"})
		f.tools[id] = []gateway.Tool{tool(id, "charge", "Charge a card.", nil, "")}
	}
	down := trackerFixture()
	down.failures["ci"] = &gateway.Error{Code: gateway.CodeUnavailable, Message: "ci down", Retryable: true}
	cases := []struct {
		name string
		f    *fixtureCatalog
		args string
		want string // substring of guidance; "" means no queryAnalysis
	}{
		{"identity names connectors", f, `{"query":"billing invoices"}`,
			`but the query names configured connectors "billing", "billing-eu", "billing-us" and 1 more. Scope by connector and browse with an empty query`},
		{"nothing configured", trackerFixture(), `{"query":"zebra"}`, "No matching capability is configured in this deployment."},
		{"nothing among answering catalogs", down, `{"query":"zebra"}`,
			"No matching capability was found in the catalogs that answered; 1 connector catalog was unavailable."},
		{"scoped partial", trackerFixture(), `{"query":"issue zebra","connector":"tracker"}`,
			`No single tool on connector "tracker" matched every term.`},
		{"partial with unavailable", down, `{"query":"issue zebra"}`,
			"No single tool matched every term in the catalogs that answered."},
		{"scoped unsearchable failure", down, `{"query":"日本","connector":"ci"}`,
			`Connector "ci" could not be searched because its catalog was unavailable.`},
		{"scoped browse failure", down, `{"connector":"ci"}`, `Connector "ci" could not be browsed because its catalog was unavailable.`},
		{"scoped search failure", down, `{"query":"run","connector":"ci"}`, `Connector "ci" could not be searched`},
		{"approval filter", trackerFixture(), `{"query":"zebra","safety":"approvalRequired"}`,
			"No matching approval-required capability is configured in this deployment. Refine terms, scope by connector, or browse with an empty query. Change safety to inspect the other tools."},
		{"complete match", trackerFixture(), `{"query":"list issues"}`, ""},
		{"plain browse", trackerFixture(), `{}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page := mustSearch(t, newService(t, c.f), gateway.FrontDoorProgram, c.args)
			qa, ok := page["queryAnalysis"].(map[string]any)
			if c.want == "" {
				if ok {
					t.Fatalf("unexpected analysis %v", qa)
				}
				return
			}
			if !ok || !strings.Contains(qa["guidance"].(string), c.want) {
				t.Fatalf("guidance %v\nwant %q", qa["guidance"], c.want)
			}
		})
	}
}

func TestS1_AnnotationsPassThroughVerbatim(t *testing.T) {
	f := trackerFixture()
	f.tools["ci"][0].Definition = json.RawMessage(`{"name":"get_run","annotations":{"title":"Run <1>","readOnlyHint":true,"x-vendor":{"b":1,"a":2}}}`)
	s := newService(t, f)
	raw, err := search(t, s, gateway.FrontDoorProgram, `{"connector":"ci","limit":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(rawField(t, raw, "tools", 0, "annotations")); got != `{"title":"Run <1>","readOnlyHint":true,"x-vendor":{"b":1,"a":2}}` {
		t.Fatalf("annotations %s", got)
	}
}

func TestGuideSummaryParagraphsEndAtMarkdownBlocks(t *testing.T) {
	cases := []struct{ guide, want string }{
		{"First line\ncontinues here\n- a list item", "First line continues here"},
		{"Setext title\n===\n\nBody text.", "Setext title"},
		{"Intro line\n1. step one", "Intro line"},
		{"Mr. Smith wrote this guide for the tracker connector and it keeps going well past the budget. Second sentence here, which is long enough.",
			"Mr. Smith wrote this guide for the tracker connector and it keeps going well past the budget."},
		{"See the U.S. East region for every request that touches billing data and invoices. The rest goes elsewhere entirely and forever.",
			"See the U.S. East region for every request that touches billing data and invoices."},
		{"Everything in this guide applies to the tracker connector, its projects, its labels — and the many, many other things it holds",
			"Everything in this guide applies to the tracker connector, its projects, its labels — and the many…"},
	}
	for _, c := range cases {
		if got := GuideSummary(&gateway.ConnectorInfo{ID: "x", Guide: c.guide}); got != c.want {
			t.Errorf("guide %q\n got %q\nwant %q", c.guide, got, c.want)
		}
	}
}
