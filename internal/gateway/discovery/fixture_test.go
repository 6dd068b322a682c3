package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/connecta-dev/connecta/internal/gateway"
)

// fixtureCatalog is an in-test CatalogReader over fixture tools: the
// consumer side of the interface this package declares.
type fixtureCatalog struct {
	connectors []gateway.ConnectorInfo
	tools      map[string][]gateway.Tool
	failures   map[string]error
	observed   map[string]json.RawMessage // by address
	// block makes Tools wait for ctx (a hung downstream).
	block map[string]bool

	mu       sync.Mutex
	loads    []string
	inFlight atomic.Int32
	peak     atomic.Int32
	gate     chan struct{} // when set, Tools waits on it (to observe concurrency)
	// clone makes Tools hand out a fresh copy per load, as gateway.Tools does.
	clone bool
}

func (f *fixtureCatalog) Connectors() []gateway.ConnectorInfo { return f.connectors }

func (f *fixtureCatalog) Tools(ctx context.Context, id string) ([]gateway.Tool, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	f.mu.Lock()
	f.loads = append(f.loads, id)
	f.mu.Unlock()
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.block[id] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := f.failures[id]; err != nil {
		return nil, err
	}
	tools, ok := f.tools[id]
	if !ok {
		return nil, fmt.Errorf("no such connector %q", id)
	}
	if f.clone {
		return slices.Clone(tools), nil
	}
	return tools, nil
}

func (f *fixtureCatalog) ReadOnly(t *gateway.Tool) bool {
	a := t.Annotations
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint && !(a.DestructiveHint != nil && *a.DestructiveHint)
}

func (f *fixtureCatalog) ObservedOutputSchema(t *gateway.Tool) json.RawMessage {
	return f.observed[t.Address()]
}

func (f *fixtureCatalog) loaded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.loads...)
}

func boolp(b bool) *bool { return &b }

func tool(conn, name, desc string, readOnly *bool, input string) gateway.Tool {
	t := gateway.Tool{ConnectorID: conn, Name: name, Description: desc}
	if input != "" {
		t.InputSchema = json.RawMessage(input)
	}
	if readOnly != nil {
		t.Annotations = &gateway.Annotations{ReadOnlyHint: readOnly}
	}
	return t
}

// trackerFixture is a small realistic deployment: a tracker with a guide,
// a CI connector, and a chat connector.
func trackerFixture() *fixtureCatalog {
	ro, rw := boolp(true), boolp(false)
	return &fixtureCatalog{
		connectors: []gateway.ConnectorInfo{
			{ID: "tracker", Title: "  Issue\n tracker ", Guide: "# Tracker\n\nAlways scope issue queries by project key. Labels are case-sensitive.\n"},
			{ID: "ci", Title: "Continuous integration"},
			{ID: "chat"},
		},
		tools: map[string][]gateway.Tool{
			"tracker": {
				tool("tracker", "list_issues", "List issues in a project, newest first.", ro,
					`{"type":"object","properties":{"project":{"type":"string","description":"Project key"},"state":{"enum":["open","closed"]},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["project"]}`),
				tool("tracker", "get_issue", "Get one issue by its key.", ro,
					`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`),
				tool("tracker", "create_issue", "Create an issue in a project.", nil,
					`{"type":"object","properties":{"project":{"type":"string"},"title":{"type":"string"},"body":{"type":"string"}},"required":["project","title"]}`),
				tool("tracker", "list_labels", "List labels.", ro, `{"type":"object"}`),
			},
			"ci": {
				tool("ci", "get_run", "Get a pipeline run.", ro, `{"type":"object","properties":{"runId":{"type":"integer"}},"required":["runId"]}`),
				tool("ci", "get_job_logs", "Fetch the logs of a job in a run.", ro, `{"type":"object","properties":{"jobId":{"type":"integer"}}}`),
				tool("ci", "rerun", "Re-run a pipeline.", rw, ""),
			},
			"chat": {
				tool("chat", "post_message", "Post a message to a channel.", nil, `{"type":"object","properties":{"channel":{"type":"string"},"text":{"type":"string"}},"required":["channel","text"]}`),
			},
		},
		failures: map[string]error{},
		observed: map[string]json.RawMessage{},
	}
}
