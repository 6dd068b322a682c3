package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type activityPage struct {
	Events []struct {
		ID          string `json:"id"`
		ConnectorID string `json:"connectorId"`
		ToolName    string `json:"toolName"`
		Outcome     string `json:"outcome"`
		Actor       string `json:"actor"`
	} `json:"events"`
	NextCursor string `json:"nextCursor"`
}

// TestActivity_FiltersAndCursor: /activity answers {events, nextCursor?}
// newest first, pages with before=<cursor>, and filters by connector,
// outcome, actor and time.
func TestActivity_FiltersAndCursor(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cs := h.connect(t, "")
	for range 3 {
		call(t, cs, "call_tool", `{"address":"down.echo","args":{}}`)
	}
	call(t, cs, "call_tool", `{"address":"down.nope","args":{}}`)

	get := func(q string) activityPage {
		t.Helper()
		resp, body := h.get(t, "/activity?"+q)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/activity?%s: %d %s", q, resp.StatusCode, body)
		}
		var p activityPage
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := get("")
	if len(all.Events) != 4 || all.NextCursor != "" || all.Events[0].ToolName != "nope" {
		t.Fatalf("all: %+v", all)
	}
	p1 := get("limit=3")
	if len(p1.Events) != 3 || p1.NextCursor == "" {
		t.Fatalf("page 1: %+v", p1)
	}
	p2 := get("limit=3&before=" + url.QueryEscape(p1.NextCursor))
	if len(p2.Events) != 1 || p2.Events[0].ID != all.Events[3].ID || p2.NextCursor != "" {
		t.Fatalf("page 2: %+v", p2)
	}
	if p := get("outcome=error"); len(p.Events) != 1 || p.Events[0].ToolName != "nope" {
		t.Fatalf("outcome filter: %+v", p)
	}
	if p := get("outcome=success&connector=down"); len(p.Events) != 3 {
		t.Fatalf("connector+outcome filter: %+v", p)
	}
	if p := get("connector=other"); len(p.Events) != 0 {
		t.Fatalf("unknown connector: %+v", p)
	}
	if p := get("actor=" + url.QueryEscape(all.Events[0].Actor) + "&since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z"); len(p.Events) != 4 {
		t.Fatalf("actor and time window: %+v", p)
	}
	if p := get("until=2000-01-01T00:00:00Z"); len(p.Events) != 0 {
		t.Fatalf("until in the past: %+v", p)
	}
}

func TestActivity_BadParametersAre400InvalidArgs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, q := range []string{"limit=0", "limit=x", "before=!!", "before=bm9wZQ", "outcome=maybe",
		"since=yesterday", "until=1", "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "bogus=1", "limit=1&limit=2"} {
		resp, body := h.get(t, "/activity?"+q)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_args" || e.Error.Message == "" {
			t.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
		name := strings.SplitN(q, "=", 2)[0]
		if !strings.Contains(e.Error.Message, name) {
			t.Errorf("%s: message %q does not name %s", q, e.Error.Message, name)
		}
	}
}
