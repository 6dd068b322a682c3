package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// streamResult holds the issue-10 figures: cancellation and streaming.
type streamResult struct {
	CancelToFree     latencies // notifications/cancelled sent → /health shows no slot in use
	FirstLine        latencies // console.log in the program → its progress notification read by the client
	Plain, Streaming latencies // a 100-line program without and with a progress token, interleaved
	// PlainCPU, StreamingCPU: the server's CPU (its own and its reaped
	// children's) per 100-line program, each over a block of n runs.
	PlainCPU, StreamingCPU time.Duration
}

// benchTools is a second loopback downstream for what the demo cannot do:
// `wait` blocks until its caller goes away, `sleep` returns after ms.
type benchTools struct {
	started chan struct{} // one per wait that began
	ended   chan struct{} // one per wait that was cancelled
}

func serveBenchTools() (*benchTools, string, func(), error) {
	bt := &benchTools{started: make(chan struct{}, 64), ended: make(chan struct{}, 64)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv.AddTool(&mcp.Tool{Name: "wait", Description: "Block until cancelled.", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			bt.started <- struct{}{}
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			bt.ended <- struct{}{}
			return nil, ctx.Err()
		})
	srv.AddTool(&mcp.Tool{Name: "sleep", Description: "Sleep ms milliseconds.", Annotations: ro,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Ms int }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			select {
			case <-time.After(time.Duration(min(in.Ms, 10_000)) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"slept":true}`}}}, nil
		})
	url, stop, err := serveMCP(srv)
	return bt, url, stop, err
}

// benchStreaming measures cancellation and streaming on the running server.
func benchStreaming(ctx context.Context, srv *benchServer, cl *rawClient, bt *benchTools, n int, logf func(string, ...any)) (*streamResult, error) {
	r := &streamResult{}
	logf("cancel → slot free: %d cancels", n)
	for i := range n {
		d, err := cancelToFree(ctx, srv, cl, bt, i)
		if err != nil {
			return nil, fmt.Errorf("cancel: %w", err)
		}
		r.CancelToFree = append(r.CancelToFree, d)
	}
	logf("first streamed line: %d programs", n)
	first := `async () => { console.log(String(Date.now())); await connecta.call("bench.sleep", {ms: 100}); return 1 }`
	for range n {
		var lat time.Duration
		err := cl.stream(ctx, first, func(message string, at time.Time) {
			if lat == 0 {
				if ms, err := strconv.ParseInt(message, 10, 64); err == nil {
					lat = at.Sub(time.UnixMilli(ms))
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("first line: %w", err)
		}
		r.FirstLine = append(r.FirstLine, lat)
	}
	logf("streaming overhead: %d × a 100-line program, plain and streamed, interleaved", n)
	hundred := `async () => { for (let i = 0; i < 100; i++) console.log("line " + i); return 100 }`
	for range n {
		t0 := time.Now()
		if err := cl.run(ctx, hundred); err != nil {
			return nil, err
		}
		r.Plain = append(r.Plain, time.Since(t0))
		t1 := time.Now()
		lines := 0
		if err := cl.stream(ctx, hundred, func(string, time.Time) { lines++ }); err != nil {
			return nil, err
		}
		if lines != 100 {
			return nil, fmt.Errorf("streamed %d progress notifications, want 100", lines)
		}
		r.Streaming = append(r.Streaming, time.Since(t1))
	}
	// CPU in blocks, not per interleaved run: a run's child is reaped a
	// little after its answer, i.e. during the next run, which would charge
	// each kind with the other's children.
	block := func(streamed bool) (time.Duration, error) {
		before, err := readCPU(srv.pid)
		if err != nil {
			return 0, err
		}
		for range n {
			if streamed {
				err = cl.stream(ctx, hundred, func(string, time.Time) {})
			} else {
				err = cl.run(ctx, hundred)
			}
			if err != nil {
				return 0, err
			}
		}
		d, err := cpuSince(srv.pid, before)
		return (d.self + d.children) / time.Duration(n), err
	}
	var err error
	if r.PlainCPU, err = block(false); err != nil {
		return nil, err
	}
	if r.StreamingCPU, err = block(true); err != nil {
		return nil, err
	}
	return r, nil
}

// cancelToFree starts a program that waits on bench.wait, cancels it the
// way the TypeScript client does (notifications/cancelled on its own POST),
// and times until /health reports no slot in use.
func cancelToFree(ctx context.Context, srv *benchServer, cl *rawClient, bt *benchTools, i int) (time.Duration, error) {
	id := 1_000_000 + i
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"async () => await connecta.call(\"bench.wait\", {})"}}}`, id)
	var wg sync.WaitGroup
	wg.Add(1)
	var callErr error
	go func() {
		defer wg.Done()
		_, callErr = cl.post(ctx, body, nil)
	}()
	select {
	case <-bt.started:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("bench.wait did not start")
	}
	t0 := time.Now()
	if _, err := cl.post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id), nil); err != nil {
		return 0, err
	}
	for {
		active, err := activeSlots(ctx, srv)
		if err != nil {
			return 0, err
		}
		if active == 0 {
			break
		}
		if time.Since(t0) > 10*time.Second {
			return 0, fmt.Errorf("the slot was still in use 10 s after the cancel")
		}
		time.Sleep(500 * time.Microsecond)
	}
	d := time.Since(t0)
	<-bt.ended
	wg.Wait()
	return d, callErr
}

// activeSlots reads the executor's slots in use from /health.
func activeSlots(ctx context.Context, srv *benchServer) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(srv.url, "/mcp")+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Admission struct {
			Code struct {
				Active *int `json:"active"`
			} `json:"code"`
		} `json:"admission"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Admission.Code.Active == nil {
		return 0, fmt.Errorf("/health has no admission.code.active: %v", err)
	}
	return *h.Admission.Code.Active, nil
}

// post sends one JSON-RPC body and returns the response body.
func (c *rawClient) post(ctx context.Context, body string, header http.Header) ([]byte, error) {
	resp, err := c.send(ctx, body, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

// stream runs code with a progress token and calls onProgress with each
// progress message as it is read off the event stream.
func (c *rawClient) stream(ctx context.Context, code string, onProgress func(message string, at time.Time)) error {
	params, _ := json.Marshal(map[string]any{"name": "execute_code", "arguments": map[string]any{"code": code}, "_meta": map[string]any{"progressToken": "bench"}})
	resp, err := c.send(ctx, c.toolsCall(params), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return fmt.Errorf("a request with a progress token was answered %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	gotResult := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(data), &m) != nil {
			continue
		}
		switch {
		case m.Method == "notifications/progress":
			onProgress(m.Params.Message, time.Now())
		case m.Result != nil:
			if m.Result.IsError {
				return fmt.Errorf("program failed: %.300s", data)
			}
			gotResult = true
		}
	}
	if !gotResult {
		return fmt.Errorf("the event stream ended without a result")
	}
	return sc.Err()
}

func (s *streamResult) write(b *strings.Builder) {
	row := func(name, val string) { fmt.Fprintf(b, "| %s | %s | |\n", name, val) }
	p := func(l latencies) string {
		return fmt.Sprintf("%s / %s / %s", msf(l.pct(50)), msf(l.pct(95)), msf(l.pct(99)))
	}
	row(fmt.Sprintf("cancel (notifications/cancelled) → slot free, p50 / p95 / p99 of %d", len(s.CancelToFree)), p(s.CancelToFree))
	row(fmt.Sprintf("first streamed line: program's console.log → client, p50 / p95 / p99 of %d", len(s.FirstLine)), p(s.FirstLine))
	// The runs alternate plain and streamed, so each pair saw the same
	// machine: the median of the pairs' ratios is the overhead least moved by
	// other load.
	ratios := make([]float64, 0, len(s.Plain))
	for i := range min(len(s.Plain), len(s.Streaming)) {
		ratios = append(ratios, float64(s.Streaming[i])/float64(s.Plain[i]))
	}
	slices.Sort(ratios)
	overhead := 0.0
	if len(ratios) > 0 {
		overhead = 100 * (ratios[len(ratios)/2] - 1)
	}
	row(fmt.Sprintf("100-line program, p50 plain / streamed (overhead: median of %d interleaved pairs)", len(ratios)),
		fmt.Sprintf("%s / %s (%+.1f %%)", msf(s.Plain.pct(50)), msf(s.Streaming.pct(50)), overhead))
	if s.PlainCPU > 0 {
		row("100-line program, server CPU (parent + children) per program plain / streamed, blocks of n (overhead)",
			fmt.Sprintf("%s / %s (%+.1f %%)", msf(s.PlainCPU), msf(s.StreamingCPU), 100*(float64(s.StreamingCPU)/float64(s.PlainCPU)-1)))
	}
}
