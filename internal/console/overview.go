package console

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/activity"
)

// The Overview page: the last hour of the activity store at a glance, drawn
// as server-rendered SVG (no script; the CSP is unchanged: inline <svg> with
// presentation attributes needs no style or image source).
const (
	overviewWindow    = time.Hour
	overviewMaxEvents = 10_000 // read at most this many of the hour's newest events
	overviewTopN      = 8      // rows of the slowest-connectors and error-code lists

	chartMinutes = 60
	chartBarW    = 10 // px per minute: 600 px of bars
	chartH       = 140
	chartPadL    = 36 // the y-axis labels
	chartPadB    = 22 // the x-axis labels
	chartPadT    = 12 // the top y label
	chartPadR    = 24 // the last x label
)

// outcomeOrder is the stacking order and legend of the per-minute charts;
// an outcome not listed stacks last, as "other".
var outcomeOrder = []struct{ name, fill string }{
	{"success", "#116329"},
	{"error", "#a40e26"},
	{"timeout", "#7a4d00"},
	{"cancelled", "#57606a"},
	{"denied", "#6639ba"},
	{"other", "#0b57d0"},
}

type overviewData struct {
	Enabled    bool
	Since      time.Time
	Events     int
	Capped     bool // the hour held more than overviewMaxEvents events
	Executions chart
	Calls      chart
	Slowest    []connectorLatency
	Errors     []errorCount
}

// chart is one stacked per-minute bar chart, laid out here so the template
// only prints numbers.
type chart struct {
	ID, Title, Desc string
	Width, Height   int
	PlotX, PlotH    int
	Bars            []chartBar
	YTicks          []chartTick
	XTicks          []chartTick
	Legend          []legendItem
	Total           int
}

type chartBar struct {
	X, Y, W, H int
	Fill       string
	Label      string // the bar's tooltip: minute, outcome, count
}

type chartTick struct {
	X, Y  int
	Label string
}

type legendItem struct {
	Name, Fill string
	Count      int
}

type connectorLatency struct {
	Connector        string
	Calls            int
	P95Ms, MaxMs     int64
	BarW             int // of overviewBarMax, proportional to P95Ms
	ErrorCalls       int
	ErrorRatePercent int
}

type errorCount struct {
	Code  string
	Count int
	BarW  int
}

const overviewBarMax = 120 // px of the widest row bar

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request) {
	now := c.now().UTC()
	d := overviewData{Enabled: c.o.Activity != nil, Since: now.Add(-overviewWindow)}
	v := view{Title: "Overview", Nav: "overview", Data: &d}
	if !d.Enabled {
		c.render(w, r, http.StatusOK, "overview", v)
		return
	}
	page, err := c.o.Activity.List(r.Context(), activity.Query{Limit: overviewMaxEvents + 1, Since: d.Since})
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	events := page.Events
	if len(events) > overviewMaxEvents || page.NextCursor != "" {
		d.Capped = true
		events = events[:min(len(events), overviewMaxEvents)]
	}
	d.Events = len(events)
	summarize(&d, events, now)
	c.render(w, r, http.StatusOK, "overview", v)
}

// summarize fills the charts and lists from one hour of events (any order).
func summarize(d *overviewData, events []activity.Event, now time.Time) {
	end := now.Truncate(time.Minute).Add(time.Minute) // the current minute is the last bar
	start := end.Add(-chartMinutes * time.Minute)
	minute := func(t time.Time) int {
		if t.Before(start) || !t.Before(end) {
			return -1
		}
		return int(t.Sub(start) / time.Minute)
	}

	// Calls: every event. Executions: the events of one execute_code request
	// are one execution, at its first call's minute, successful when every
	// call was (else the outcome of its first failed call). An execution
	// that called no connector leaves nothing in the activity store; the
	// metrics (deploy/grafana) count every one.
	calls := make([]map[string]int, chartMinutes)
	execs := make([]map[string]int, chartMinutes)
	type execution struct {
		first   time.Time
		outcome string
	}
	byRequest := map[string]*execution{}
	latencies := map[string][]int64{}
	errorCalls := map[string]int{}
	codes := map[string]int{}
	for _, e := range events {
		if e.OccurredAt.Before(now.Add(-overviewWindow)) {
			continue // the store's Since is the bound; an older event is not this hour's
		}
		if m := minute(e.OccurredAt); m >= 0 {
			bump(calls, m, e.Outcome)
		}
		latencies[e.ConnectorID] = append(latencies[e.ConnectorID], e.DurationMs)
		if e.Outcome != activity.OutcomeSuccess {
			errorCalls[e.ConnectorID]++
		}
		if e.ErrorCode != "" {
			codes[e.ErrorCode]++
		}
		if e.Source != activity.SourceExecuteCode || e.RequestID == "" {
			continue
		}
		key := e.Actor + "\x00" + e.RequestID
		x := byRequest[key]
		if x == nil {
			x = &execution{first: e.OccurredAt, outcome: activity.OutcomeSuccess}
			byRequest[key] = x
		}
		if e.OccurredAt.Before(x.first) {
			x.first = e.OccurredAt
		}
		if e.Outcome != activity.OutcomeSuccess && x.outcome == activity.OutcomeSuccess {
			x.outcome = e.Outcome
		}
	}
	for _, x := range byRequest {
		if m := minute(x.first); m >= 0 {
			bump(execs, m, x.outcome)
		}
	}
	d.Executions = layoutChart("executions", "Executions per minute by outcome", "execute_code requests that called a connector", execs, start)
	d.Calls = layoutChart("calls", "Connector calls per minute by outcome", "every downstream call, from programs and from call_tool", calls, start)

	for id, ms := range latencies {
		slices.Sort(ms)
		n := len(ms)
		d.Slowest = append(d.Slowest, connectorLatency{Connector: id, Calls: n, P95Ms: ms[(95*n+99)/100-1], MaxMs: ms[n-1],
			ErrorCalls: errorCalls[id], ErrorRatePercent: 100 * errorCalls[id] / n})
	}
	sort.Slice(d.Slowest, func(i, j int) bool {
		if d.Slowest[i].P95Ms != d.Slowest[j].P95Ms {
			return d.Slowest[i].P95Ms > d.Slowest[j].P95Ms
		}
		return d.Slowest[i].Connector < d.Slowest[j].Connector
	})
	d.Slowest = d.Slowest[:min(len(d.Slowest), overviewTopN)]
	if len(d.Slowest) > 0 {
		top := max(d.Slowest[0].P95Ms, 1)
		for i := range d.Slowest {
			d.Slowest[i].BarW = max(1, int(d.Slowest[i].P95Ms*overviewBarMax/top))
		}
	}
	for code, n := range codes {
		d.Errors = append(d.Errors, errorCount{Code: code, Count: n})
	}
	sort.Slice(d.Errors, func(i, j int) bool {
		if d.Errors[i].Count != d.Errors[j].Count {
			return d.Errors[i].Count > d.Errors[j].Count
		}
		return d.Errors[i].Code < d.Errors[j].Code
	})
	d.Errors = d.Errors[:min(len(d.Errors), overviewTopN)]
	if len(d.Errors) > 0 {
		for i := range d.Errors {
			d.Errors[i].BarW = max(1, d.Errors[i].Count*overviewBarMax/d.Errors[0].Count)
		}
	}
}

func bump(buckets []map[string]int, m int, outcome string) {
	if buckets[m] == nil {
		buckets[m] = map[string]int{}
	}
	known := false
	for _, o := range outcomeOrder {
		known = known || o.name == outcome
	}
	if !known {
		outcome = "other"
	}
	buckets[m][outcome]++
}

// layoutChart stacks each minute's outcomes (outcomeOrder) into bars scaled
// to the busiest minute, with y ticks at 0, half and the top and x ticks
// every 15 minutes.
func layoutChart(id, title, desc string, buckets []map[string]int, start time.Time) chart {
	ch := chart{ID: id, Title: title, Desc: desc, PlotX: chartPadL, PlotH: chartPadT + chartH,
		Width: chartPadL + chartMinutes*chartBarW + chartPadR, Height: chartPadT + chartH + chartPadB}
	peak := 1
	totals := map[string]int{}
	for _, b := range buckets {
		n := 0
		for o, k := range b {
			n += k
			totals[o] += k
		}
		peak = max(peak, n)
	}
	for m, b := range buckets {
		y := chartPadT + chartH
		for _, o := range outcomeOrder {
			k := b[o.name]
			if k == 0 {
				continue
			}
			h := max(1, k*chartH/peak)
			y -= h
			at := start.Add(time.Duration(m) * time.Minute)
			ch.Bars = append(ch.Bars, chartBar{X: chartPadL + m*chartBarW + 1, Y: y, W: chartBarW - 2, H: h, Fill: o.fill,
				Label: fmt.Sprintf("%s UTC: %d %s", at.Format("15:04"), k, o.name)})
		}
	}
	ticks := []int{0, (peak + 1) / 2, peak}
	if peak < 2 {
		ticks = []int{0, peak}
	}
	for _, v := range ticks {
		ch.YTicks = append(ch.YTicks, chartTick{X: chartPadL - 6, Y: chartPadT + chartH - v*chartH/peak, Label: fmt.Sprint(v)})
	}
	for m := 0; m <= chartMinutes; m += 15 {
		ch.XTicks = append(ch.XTicks, chartTick{X: chartPadL + m*chartBarW, Y: chartPadT + chartH + 16, Label: start.Add(time.Duration(m) * time.Minute).Format("15:04")})
	}
	for _, o := range outcomeOrder {
		if totals[o.name] > 0 {
			ch.Legend = append(ch.Legend, legendItem{Name: o.name, Fill: o.fill, Count: totals[o.name]})
			ch.Total += totals[o.name]
		}
	}
	return ch
}
