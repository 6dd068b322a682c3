package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds: a load run is finite in clients, time, calls and program size.
const (
	MaxClients      = 256
	MaxDuration     = time.Hour
	MaxRequests     = 10_000_000
	MaxProgramBytes = 128 << 10 // execute_code's own source bound
	MaxWait         = 5 * time.Minute

	DefaultCallTimeout = 2 * time.Minute
	// maxErrorSamples is how many distinct error texts a report keeps.
	maxErrorSamples = 5
	maxSampleBytes  = 300
)

// Tools the generator can drive.
const (
	ToolExecuteCode = "execute_code"
	ToolSearchTools = "search_tools"
)

// Built-in programs (--program).
const (
	// ProgramOnePlusOne measures the executor round trip alone.
	ProgramOnePlusOne = "async () => 1 + 1"
	// ProgramFiveCall makes five sequential calls to the built-in demo
	// connector and returns a small projection of what they returned.
	ProgramFiveCall = `async () => {
  const projects = await connecta.call("demo.list_projects", {});
  const open = await connecta.call("demo.search_issues", { project: "WEB", status: "open", limit: 5 });
  const issue = await connecta.call("demo.get_issue", { id: open.issues[0].id });
  const person = await connecta.call("demo.get_person", { id: "u-ben" });
  const labels = await connecta.call("demo.list_labels", {});
  return {
    projects: projects.projects.map((p) => p.key),
    openWeb: open.total,
    first: { id: issue.id, title: issue.title, comments: issue.comments.length },
    person: person.person.name,
    active: person.activeIssues.length,
    labels: labels.labels.length,
  };
}`
)

// Config is one load run.
type Config struct {
	URL         string
	Token       string // bearer token; "" sends none (loopback default config)
	Clients     int
	Duration    time.Duration
	Requests    int // total calls across clients; 0 = until Duration
	Tool        string
	ProgramName string // label for the report
	Code        string // execute_code source
	Query       string // search_tools query
	CallTimeout time.Duration
	Wait        time.Duration // how long to wait for the server to accept a session
	HTTPClient  *http.Client  // optional base client
}

func (c *Config) validate() error {
	switch {
	case c.URL == "":
		return errors.New("--url is required")
	case c.Clients < 1 || c.Clients > MaxClients:
		return fmt.Errorf("--clients must be 1..%d", MaxClients)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("--duration must be in (0, %s]", MaxDuration)
	case c.Requests < 0 || c.Requests > MaxRequests:
		return fmt.Errorf("--requests must be 0..%d", MaxRequests)
	case c.Wait < 0 || c.Wait > MaxWait:
		return fmt.Errorf("--wait must be 0..%s", MaxWait)
	case c.CallTimeout < 0:
		return errors.New("--timeout must not be negative")
	}
	switch c.Tool {
	case ToolExecuteCode:
		if strings.TrimSpace(c.Code) == "" {
			return errors.New("execute_code needs a program")
		}
		if len(c.Code) > MaxProgramBytes {
			return fmt.Errorf("program is %d bytes, over %d", len(c.Code), MaxProgramBytes)
		}
	case ToolSearchTools:
	default:
		return fmt.Errorf("--tool must be %s or %s", ToolExecuteCode, ToolSearchTools)
	}
	return nil
}

// arguments are the tool arguments every call sends.
func (c *Config) arguments() (json.RawMessage, error) {
	if c.Tool == ToolSearchTools {
		return json.Marshal(map[string]any{"query": c.Query})
	}
	return json.Marshal(map[string]any{"code": c.Code})
}

// Report is the outcome of one run. Latencies cover every completed call,
// failed ones included (a refusal's latency is part of what clients see).
type Report struct {
	Tool     string         `json:"tool"`
	Program  string         `json:"program"`
	Clients  int            `json:"clients"`
	Elapsed  time.Duration  `json:"elapsedNs"`
	Calls    int            `json:"calls"`
	OK       int            `json:"ok"`
	Errors   map[string]int `json:"errors"` // by code: a tool error code, rpc_<n>, transport, connect
	Samples  []string       `json:"errorSamples,omitempty"`
	Result   string         `json:"resultSample,omitempty"` // the first successful result's text
	P50      time.Duration  `json:"p50Ns"`
	P95      time.Duration  `json:"p95Ns"`
	P99      time.Duration  `json:"p99Ns"`
	Min      time.Duration  `json:"minNs"`
	Max      time.Duration  `json:"maxNs"`
	Mean     time.Duration  `json:"meanNs"`
	PerSec   float64        `json:"callsPerSec"`
	OKPerSec float64        `json:"okPerSec"`
}

// ErrorCount is the number of failed calls and failed client connects.
func (r *Report) ErrorCount() int {
	n := 0
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// WriteText prints the report for a human.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tool=%s program=%s clients=%d elapsed=%s\n", r.Tool, r.Program, r.Clients, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "  calls %d  ok %d  errors %d", r.Calls, r.OK, r.ErrorCount())
	if len(r.Errors) > 0 {
		codes := make([]string, 0, len(r.Errors))
		for c := range r.Errors {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		parts := make([]string, len(codes))
		for i, c := range codes {
			parts[i] = fmt.Sprintf("%s=%d", c, r.Errors[c])
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, " "))
	}
	fmt.Fprintf(&b, "\n  throughput %.1f calls/s (ok %.1f/s)\n", r.PerSec, r.OKPerSec)
	if r.Calls > 0 {
		fmt.Fprintf(&b, "  latency p50 %s  p95 %s  p99 %s  min %s  max %s  mean %s\n",
			ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Min), ms(r.Max), ms(r.Mean))
	}
	if r.Result != "" {
		fmt.Fprintf(&b, "  result sample: %s\n", r.Result)
	}
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "  error sample: %s\n", s)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// collector gathers results from every client.
type collector struct {
	mu        sync.Mutex
	latencies []time.Duration
	ok        int
	errors    map[string]int
	samples   []string
	result    string // first successful result, clamped
}

// add records one call; sample is the result text of a success or the
// error text of a failure.
func (c *collector) add(d time.Duration, code, sample string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latencies = append(c.latencies, d)
	if code == "" {
		c.ok++
		if c.result == "" {
			c.result = clamp(sample, maxSampleBytes)
		}
		return
	}
	c.fail(code, sample)
}

// fail counts a failure that is not a call (a client that never connected).
func (c *collector) fail(code, sample string) {
	if c.errors == nil {
		c.errors = map[string]int{}
	}
	c.errors[code]++
	sample = code + ": " + clamp(sample, maxSampleBytes)
	if len(c.samples) < maxErrorSamples && !slices.Contains(c.samples, sample) {
		c.samples = append(c.samples, sample)
	}
}

func clamp(s string, n int) string {
	return jstext.Clamp(strings.ReplaceAll(s, "\n", " "), n)
}

// Run drives cfg.Clients concurrent MCP sessions, each calling the tool in
// a loop until cfg.Duration has passed (no new call starts after it;
// in-flight calls finish within CallTimeout) or cfg.Requests calls were
// started, and reports what it measured. ctx cancels the run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	args, err := cfg.arguments()
	if err != nil {
		return nil, err
	}
	httpClient := authClient(cfg.HTTPClient, cfg.Token, cfg.Clients)

	// Connect every client first, so the measured window is calls only.
	sessions := make([]*mcp.ClientSession, cfg.Clients)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	col := &collector{}
	var connectWG sync.WaitGroup
	connectErrs := make([]error, cfg.Clients)
	for i := range sessions {
		connectWG.Add(1)
		go func() {
			defer connectWG.Done()
			sessions[i], connectErrs[i] = connect(ctx, cfg, httpClient, i)
		}()
	}
	connectWG.Wait()
	live := 0
	for _, err := range connectErrs {
		if err != nil {
			col.fail("connect", err.Error())
			continue
		}
		live++
	}
	if live == 0 {
		return nil, fmt.Errorf("no client could connect to %s: %w", cfg.URL, errors.Join(connectErrs...))
	}

	var started atomic.Int64
	begin := time.Now()
	stopAt := begin.Add(cfg.Duration)
	var wg sync.WaitGroup
	var lastDone atomic.Int64 // UnixNano of the last completion
	for _, s := range sessions {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stopAt) {
				if n := started.Add(1); cfg.Requests > 0 && n > int64(cfg.Requests) {
					return
				}
				d, code, sample := callOnce(ctx, s, cfg, args)
				if ctx.Err() != nil && code != "" {
					return // the run was cancelled: not a server failure
				}
				col.add(d, code, sample)
				for now := time.Now().UnixNano(); ; {
					prev := lastDone.Load()
					if now <= prev || lastDone.CompareAndSwap(prev, now) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := time.Unix(0, lastDone.Load())
	if end.Before(begin) {
		end = time.Now()
	}
	return summarize(cfg, col, end.Sub(begin)), nil
}

func summarize(cfg Config, col *collector, elapsed time.Duration) *Report {
	r := &Report{
		Tool: cfg.Tool, Program: cfg.ProgramName, Clients: cfg.Clients, Elapsed: elapsed,
		Calls: len(col.latencies), OK: col.ok, Errors: col.errors, Samples: col.samples,
		Result: col.result,
	}
	if r.Errors == nil {
		r.Errors = map[string]int{}
	}
	lat := slices.Clone(col.latencies)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.P50, r.P95, r.P99 = percentile(lat, 50), percentile(lat, 95), percentile(lat, 99)
		r.Min, r.Max = lat[0], lat[n-1]
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.Mean = sum / time.Duration(n)
	}
	if s := elapsed.Seconds(); s > 0 {
		r.PerSec = float64(r.Calls) / s
		r.OKPerSec = float64(r.OK) / s
	}
	return r
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// connect opens one client session, retrying until cfg.Wait has passed so a
// server that is still starting is waited for.
func connect(ctx context.Context, cfg Config, httpClient *http.Client, i int) (*mcp.ClientSession, error) {
	deadline := time.Now().Add(cfg.Wait)
	for {
		client := mcp.NewClient(&mcp.Implementation{Name: "connecta-load", Version: fmt.Sprintf("client-%d", i)}, nil)
		transport := &mcp.StreamableClientTransport{
			Endpoint: cfg.URL, HTTPClient: httpClient,
			DisableStandaloneSSE: true, // connecta's /mcp is stateless
			MaxRetries:           -1,   // a failure is a measurement, not something to hide
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		s, err := client.Connect(cctx, transport, nil)
		cancel()
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return nil, fmt.Errorf("client %d: connect %s: %w", i, cfg.URL, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// callOnce makes one call and classifies it: "" for success, else an error
// code (the tool's typed code, rpc_<n>, transport, program_error).
func callOnce(ctx context.Context, s *mcp.ClientSession, cfg Config, args json.RawMessage) (time.Duration, string, string) {
	cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	t0 := time.Now()
	res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: cfg.Tool, Arguments: args})
	d := time.Since(t0)
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return d, fmt.Sprintf("rpc_%d", rpc.Code), rpc.Message
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return d, "client_timeout", err.Error()
		}
		return d, "transport", err.Error()
	}
	if !res.IsError {
		return d, "", resultText(res)
	}
	return d, toolErrorCode(res), resultText(res)
}

// toolErrorCode reads {error:{code}} from a failed result; a failure
// without a typed code is a program's own (untyped) error.
func toolErrorCode(res *mcp.CallToolResult) string {
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		return body.Error.Code
	}
	if json.Unmarshal([]byte(resultText(res)), &body) == nil && body.Error.Code != "" {
		return body.Error.Code
	}
	return "program_error"
}

func resultText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// authClient adds the bearer token to every request of base without
// changing base. Without a base it builds a client whose idle pool keeps one
// connection per load client (the default keeps 2 per host, which would
// measure connection set-up instead of connecta).
func authClient(base *http.Client, token string, clients int) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	} else if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t := dt.Clone()
		t.MaxIdleConnsPerHost = clients
		c.Transport = t
	}
	if token == "" {
		return c
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = bearer{token: token, next: next}
	return c
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
