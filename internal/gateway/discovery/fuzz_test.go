package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/connecta-dev/connecta/internal/gateway"
)

func FuzzDecodeSearchArgs(f *testing.F) {
	for _, seed := range []string{`{}`, `{"query":"list issues","limit":3,"offset":1}`, `{"query":5}`,
		`{"connector":"tracker","safety":"readOnly","includeSchemas":"json","includeSchemaKeys":false}`, `[]`, `null`, `{"limit":1e309}`} {
		f.Add([]byte(seed))
	}
	s := newService(f, trackerFixture())
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := DecodeSearchArgs(raw)
		if err != nil {
			var ge *gateway.Error
			if !errors.As(err, &ge) || ge.Code != gateway.CodeInvalidArgs || ge.Retryable {
				t.Fatalf("decode error %v", err)
			}
			return
		}
		for _, front := range []gateway.FrontDoor{gateway.FrontDoorProgram, gateway.FrontDoorTopLevel} {
			out, err := s.Search(context.Background(), front, p)
			if err != nil {
				var ge *gateway.Error
				if !errors.As(err, &ge) {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON page %s", out)
			}
		}
	})
}

func FuzzDecodeDescribeArgs(f *testing.F) {
	for _, seed := range []string{`{"address":"ci.get_run"}`, `{"addresses":["ci.x","ghost.y",1,null,{}]}`, `{"address":"a","addresses":[]}`,
		`{"addresses":["tracker.list_issues"],"format":"json","fullDescriptions":true}`} {
		f.Add([]byte(seed))
	}
	s := newService(f, trackerFixture())
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := DecodeDescribeArgs(raw)
		if err != nil {
			var ge *gateway.Error
			if !errors.As(err, &ge) || ge.Code != gateway.CodeInvalidArgs {
				t.Fatalf("decode error %v", err)
			}
			return
		}
		out, err := s.Describe(context.Background(), gateway.FrontDoorProgram, p)
		if err != nil {
			var ge *gateway.Error
			if !errors.As(err, &ge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var page struct{ Tools []json.RawMessage }
		if json.Unmarshal(out, &page) != nil || len(page.Tools) != len(p.Addresses) {
			t.Fatalf("one entry per address: %s", out)
		}
	})
}

func TestS6_ConcurrentSearchesShareOneService(t *testing.T) {
	s := newService(t, thousandTools())
	var wg sync.WaitGroup
	pages := make([]json.RawMessage, 8)
	for i := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, _ := DecodeSearchArgs(json.RawMessage(`{"query":"get user","includeSchemas":"compact","safety":"readOnly"}`))
			out, err := s.Search(context.Background(), gateway.FrontDoorProgram, p)
			if err != nil {
				t.Error(err)
			}
			pages[i] = out
		}()
	}
	wg.Wait()
	for _, p := range pages[1:] {
		if string(p) != string(pages[0]) {
			t.Fatal("concurrent searches disagree")
		}
	}
}

func TestS1_ListingRewrittenInPlaceIsReindexed(t *testing.T) {
	f := trackerFixture()
	s := newService(t, f)
	if mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"pipeline","connector":"ci"}`)["total"].(float64) != 2 {
		t.Fatal("setup")
	}
	// Same backing array, same length, new content (a refresh reusing memory).
	f.tools["ci"][0] = tool("ci", "get_build", "Get a build.", boolp(true), "")
	f.tools["ci"][2] = tool("ci", "retry", "Retry a build.", boolp(false), "")
	if got := mustSearch(t, s, gateway.FrontDoorProgram, `{"query":"pipeline","connector":"ci"}`)["total"].(float64); got != 0 {
		t.Fatalf("stale index: %v matches", got)
	}
}
