package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rawClient is the load's client: plain JSON-RPC POSTs over keep-alive
// connections to a stateless /mcp, so the client costs little and measures
// the server, not an SDK.
type rawClient struct {
	url string
	hc  *http.Client
	id  atomic.Int64
}

func newRawClient(url string, conns int) *rawClient {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	return &rawClient{url: url, hc: &http.Client{Transport: t}}
}

// toolReply is the part of a tools/call reply the bench reads.
type toolReply struct {
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (r *toolReply) text() string {
	if r.Result != nil && len(r.Result.Content) > 0 {
		return r.Result.Content[0].Text
	}
	if r.Error != nil {
		return "rpc error: " + r.Error.Message
	}
	return ""
}

// call makes one tools/call and returns the decoded reply; a transport
// failure, a non-200 status or a reply that is not a tool result is an error.
func (c *rawClient) call(ctx context.Context, tool string, args any, header http.Header) (*toolReply, error) {
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, c.toolsCall(params), header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	var r toolReply
	if err := json.Unmarshal(b, &r); err != nil || r.Result == nil {
		return nil, fmt.Errorf("not a tool result: %.200s", b)
	}
	return &r, nil
}

// toolsCall is a tools/call request with the next id.
func (c *rawClient) toolsCall(params []byte) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, c.id.Add(1), params)
}

// send POSTs one JSON-RPC body as an MCP client does (JSON in, JSON or an
// event stream out), with header added; the caller closes the body.
func (c *rawClient) send(ctx context.Context, body string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	return c.hc.Do(req)
}

// run executes code and fails unless the program succeeded.
func (c *rawClient) run(ctx context.Context, code string) error {
	r, err := c.call(ctx, "execute_code", map[string]any{"code": code}, nil)
	if err != nil {
		return err
	}
	if r.Result.IsError {
		return fmt.Errorf("program failed: %.300s", r.text())
	}
	return nil
}

// latencies are one sequential series.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return percentile(s, p)
}

func (l latencies) mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

// sequential runs code n times one after another.
func (c *rawClient) sequential(ctx context.Context, code string, n int) (latencies, error) {
	out := make(latencies, 0, n)
	for range n {
		t0 := time.Now()
		if err := c.run(ctx, code); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// closedLoop keeps `clients` callers busy for d and returns successful
// programs per second and how many failed (overload refusals included).
func (c *rawClient) closedLoop(ctx context.Context, code string, clients int, d time.Duration) (perSec float64, ok, failed int) {
	var okN, failN atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && ctx.Err() == nil {
				if err := c.run(ctx, code); err != nil {
					failN.Add(1)
					continue
				}
				okN.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	return float64(okN.Load()) / el, int(okN.Load()), int(failN.Load())
}
