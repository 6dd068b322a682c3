package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// catalogEntry is one complete listing of a connector, immutable once
// installed: readers share it without copying. tools is the served view —
// every listed tool, less those quarantine hides — and what discovery and
// invocation see; a hidden tool does not exist for them.
type catalogEntry struct {
	tools  []Tool
	byName map[string]int

	all         []Tool         // every listed tool, in listing order
	allByName   map[string]int // index into all
	fps         []string       // Fingerprint of all[i]
	fingerprint string         // catalogFingerprint of all
	fetchedAt   time.Time
	expires     time.Time     // fresh until; after a failed refresh, when to retry
	ttl         time.Duration // catalog.ttlMs, capped by the downstream's ttlMs
	downTTL     time.Duration // the downstream's ttlMs (0: none)
	stale       bool          // served after a failed refresh
	quarantined int           // listed tools the view hides
	approvalsAt time.Time     // when the approvals behind the view were read
	drift       *Drift        // nil: not observed (pin off, or no load yet)
	// inputs are the compiled input schemas by tool name (*inputSchema),
	// compiled on a tool's first call: once per tool and catalog
	// generation, however many tools the catalog has. Shared by the views
	// derived from one listing (same definitions); nil until first used.
	inputs *sync.Map
}

type inputSchema struct {
	once   sync.Once
	schema *validate.Schema
}

// inputSchema is t's compiled input schema in this catalog generation.
func (e *catalogEntry) inputSchema(t *Tool, v *validate.Validator) *validate.Schema {
	if e.inputs == nil {
		return v.Compile(t.InputSchema) // an entry not built by newEntry
	}
	x, _ := e.inputs.LoadOrStore(t.Name, &inputSchema{})
	in := x.(*inputSchema)
	in.once.Do(func() { in.schema = v.Compile(t.InputSchema) })
	return in.schema
}

func (e *catalogEntry) lookup(name string) (*Tool, bool) {
	i, ok := e.byName[name]
	if !ok {
		return nil, false
	}
	return &e.tools[i], true
}

func (e *catalogEntry) lookupAll(name string) (*Tool, bool) {
	i, ok := e.allByName[name]
	if !ok {
		return nil, false
	}
	return &e.all[i], true
}

// newEntry indexes a listing and fingerprints every tool.
func newEntry(all []Tool, fps []string) *catalogEntry {
	e := &catalogEntry{all: all, allByName: make(map[string]int, len(all)), fps: fps, inputs: new(sync.Map)}
	if e.fps == nil {
		e.fps = make([]string, len(all))
		for i := range all {
			e.fps[i] = Fingerprint(all[i].Definition)
		}
	}
	for i := range all {
		e.allByName[all[i].Name] = i
	}
	e.fingerprint = catalogFingerprint(all, e.fps)
	e.tools, e.byName = all, e.allByName
	return e
}

// derive copies an entry's listing for a new view (the listing is shared;
// slices are never written after install).
func (e *catalogEntry) derive() *catalogEntry {
	n := *e
	return &n
}

// catalogState is guarded by connector.mu.
type catalogState struct {
	entry *catalogEntry
	dirty bool   // list_changed arrived: refresh before serving again
	gen   uint64 // bumped by list_changed
	// recheck: approvals changed here (console): re-read them before
	// serving the view again.
	recheck bool
	// notBefore: a stored copy fetched before this is not adopted, because
	// the catalog was invalidated after it (a grant changed). A per-caller
	// child built after an eviction inherits its connector's (percaller.go).
	notBefore time.Time
}

// invalidateCatalog marks the cache stale (notifications/tools/list_changed).
// The entry stays until a refresh replaces it.
func (c *connector) invalidateCatalog() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cat.dirty = true
	c.cat.gen++
	c.cat.notBefore = c.g.now()
}

// catalog returns the cached listing, joining or starting the one refresh in
// flight when it is stale. A failed refresh never drops a cached entry. The
// error is a *failure (classified) or ctx's error.
func (c *connector) catalog(ctx context.Context, operation string) (*catalogEntry, *Error) {
	e, err := c.catalogRaw(ctx)
	if err == nil {
		return e, nil
	}
	return nil, c.red.redactError(c.catalogError(ctx, err, operation))
}

// servable reports whether e may be served as it is at now: fresh (or, after
// a failed refresh, not yet due for a retry and younger than staleMs), and
// under quarantine with approvals read recently enough.
func (c *connector) servable(e *catalogEntry, now time.Time) bool {
	if e == nil || c.cat.dirty || c.cat.recheck || !now.Before(e.expires) {
		return false
	}
	return c.pin != PinQuarantine || now.Sub(e.approvalsAt) < ApprovalRecheck
}

func (c *connector) catalogRaw(ctx context.Context) (*catalogEntry, error) {
	if c.spec.MissingCredential != "" {
		c.recordFailure(CodeAuthRequired) // the use failed: health says so
		return nil, &failure{code: CodeAuthRequired, missingCredential: true}
	}
	c.mu.Lock()
	if e := c.cat.entry; c.servable(e, c.g.now()) {
		c.mu.Unlock()
		return e, nil
	}
	if c.closed {
		c.mu.Unlock()
		return nil, &failure{code: CodeUnavailable, message: "the gateway is shutting down", retryable: true}
	}
	// Each waiter joins the flight on a goroutine the gateway owns, so one
	// that gives up returns at once while the refresh (bounded by
	// CatalogRefreshTimeout and the gateway's life) carries on for the rest.
	c.g.wg.Add(1)
	c.mu.Unlock()
	_, span := c.g.tracer.Start(ctx, "connecta.catalog.load", trace.WithAttributes(attribute.String("connecta.connector", c.spec.ID)))
	defer span.End()
	type outcome struct {
		entry *catalogEntry
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		defer c.g.wg.Done()
		v, err, _ := c.refresh.Do("tools/list", func() (any, error) { return c.runRefresh(span) })
		e, _ := v.(*catalogEntry)
		done <- outcome{e, err}
	}()
	select {
	case o := <-done:
		return o.entry, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runRefresh brings the catalog up to date on the gateway's lifetime,
// detached from any one caller so a waiter that gives up does not fail the
// others. In order: a fresh entry whose approvals are due is re-viewed; a
// stored copy younger than its TTL (another replica's load, or this
// process's before a restart) is adopted; otherwise the downstream is
// listed, and when that fails the newest catalog younger than staleMs is
// served stale. The error is a *failure. starter is the catalog.load span
// of the caller that started the flight: the refresh's log lines (and store
// spans) name that request's trace, though its context is not the caller's.
func (c *connector) runRefresh(starter trace.Span) (any, error) {
	c.mu.Lock()
	gen, cur, dirty, notBefore := c.cat.gen, c.cat.entry, c.cat.dirty, c.cat.notBefore
	c.cat.recheck = false
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(trace.ContextWithSpan(c.g.life, starter), CatalogRefreshTimeout)
	defer cancel()
	now := c.g.now()
	if cur != nil && !dirty && now.Before(cur.expires) {
		// Approvals are due (quarantine): re-read them, and adopt a newer
		// stored catalog — another replica's load after a list change this
		// process may not hear (it has no session when it serves a stored
		// copy) — so replicas agree within ApprovalRecheck.
		e := cur.derive()
		if s, _ := c.loadStored(ctx, cur); s != nil && s != cur && s.fetchedAt.After(cur.fetchedAt) && !s.fetchedAt.Before(notBefore) && now.Before(s.fetchedAt.Add(s.ttl)) {
			e = s
			e.expires = e.fetchedAt.Add(e.ttl)
		}
		c.view(ctx, e)
		return c.install(e, gen), nil
	}
	stored, storedOK := c.loadStored(ctx, nil)
	if stored != nil && !dirty && !stored.fetchedAt.Before(notBefore) && (cur == nil || stored.fetchedAt.After(cur.fetchedAt)) && now.Before(stored.fetchedAt.Add(stored.ttl)) {
		stored.expires = stored.fetchedAt.Add(stored.ttl)
		c.view(ctx, stored)
		return c.install(stored, gen), nil
	}

	ex := &rawmcp.Exchange{}
	lctx := rawmcp.WithExchange(ctx, ex)
	started := c.g.now()
	var entry *catalogEntry
	err := c.credentialPresent(lctx)
	if err == nil {
		entry, err = c.listTools(lctx)
	}
	if err != nil {
		f := c.classify(lctx, err, ex.Snapshot())
		if f.code == CodeTimeout {
			f = &failure{code: CodeCatalogLookupFailed, message: fmt.Sprintf("tools/list timed out after %dms", CatalogRefreshTimeout.Milliseconds()), retryable: true}
		}
		c.logger.WarnContext(ctx, "catalog refresh failed", "code", string(f.code), "reason", f.message)
		c.recordFailure(f.code)
		c.g.metrics.catalogRefresh(c.spec.ID, "failure", c.g.now().Sub(started))
		if !outage(f.code) {
			return nil, f // the downstream answered: no stale catalog hides that
		}
		return c.serveStale(ctx, cur, stored, gen, f)
	}
	c.recordSuccess()
	c.g.metrics.catalogRefresh(c.spec.ID, "success", c.g.now().Sub(started))
	entry.fetchedAt = c.g.now()
	entry.ttl = c.g.ttl
	if entry.downTTL > 0 && entry.downTTL < entry.ttl {
		entry.ttl = entry.downTTL // the downstream's ttlMs caps catalog.ttlMs
	}
	entry.expires = entry.fetchedAt.Add(entry.ttl)
	prev := stored
	if !storedOK || prev == nil {
		prev = cur // the store said nothing usable: compare with memory
	}
	c.persist(ctx, entry, prev, storedOK)
	c.view(ctx, entry)
	return c.install(entry, gen), nil
}

// install makes e the served entry; a list_changed during the refresh keeps
// the catalog dirty.
func (c *connector) install(e *catalogEntry, gen uint64) *catalogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cat.entry = e
	c.cat.dirty = c.cat.gen != gen
	return e
}

// serveStale answers a failed refresh: the newest of the entry in memory and
// the stored copy, while younger than staleMs, served stale until the next
// retry; otherwise nothing is served and the failure is the answer.
func (c *connector) serveStale(ctx context.Context, cur, stored *catalogEntry, gen uint64, f *failure) (any, error) {
	now := c.g.now()
	last := cur
	if stored != nil && (last == nil || stored.fetchedAt.After(last.fetchedAt)) {
		last = stored
	}
	if last == nil || now.Sub(last.fetchedAt) >= c.g.stale {
		c.mu.Lock()
		c.cat.entry = nil
		c.mu.Unlock()
		return nil, f
	}
	e := last.derive()
	e.stale = true
	e.expires = minTime(now.Add(min(staleRetry, e.ttl)), e.fetchedAt.Add(c.g.stale))
	c.view(ctx, e) // approvals may have changed since
	return c.install(e, gen), nil
}

// outage reports the refresh failures a stale catalog covers: the
// downstream is out of reach. auth_required is an answer (authorize, then
// retry) and is never hidden behind a stale catalog.
func outage(code Code) bool {
	return failsConnector(code) && code != CodeAuthRequired
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// listTools reads every cursor page of tools/list, keeping each tool's exact
// bytes. A partial catalog is a failure.
func (c *connector) listTools(ctx context.Context) (*catalogEntry, error) {
	ls, err := c.catalogSession(ctx)
	if err != nil {
		return nil, err
	}
	var all []Tool
	names := map[string]bool{}
	var downTTL int64
	seen := map[string]bool{}
	cursor := ""
	reconnected := false
	kept := 0 // bytes of tool definitions kept so far
	for page := 0; ; page++ {
		if page >= MaxCatalogPages {
			return nil, errPartialCatalog("too many pages")
		}
		slot := &rawmcp.Slot{}
		res, err := ls.cs.ListTools(rawmcp.WithSlot(ctx, slot), &mcp.ListToolsParams{Cursor: cursor})
		slot.Release()
		if err != nil && errors.Is(err, mcp.ErrSessionMissing) && !reconnected && page == 0 {
			// The downstream forgot the session (404): reconnect once.
			reconnected = true
			c.drop(ls)
			if exn := rawmcp.ExchangeFrom(ctx); exn != nil {
				exn.Reset()
			}
			if ls, err = c.session(ctx); err != nil {
				return nil, err
			}
			page--
			continue
		}
		if err != nil {
			if !isRPCError(err) && ctx.Err() == nil {
				c.drop(ls)
			}
			return nil, err
		}
		raw, ok := slot.Result()
		if !ok {
			// Not captured (should not happen): fall back to the SDK's
			// decoding, which loses key order but not correctness.
			if raw, err = json.Marshal(res); err != nil {
				return nil, fmt.Errorf("re-encode tools/list: %w", err)
			}
		}
		var pageBody struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
			TTLMs      float64           `json:"ttlMs"` // MCP 2026-07-28 Cacheable; a number, however large
		}
		if err := json.Unmarshal(raw, &pageBody); err != nil {
			return nil, &failure{code: CodeCatalogLookupFailed, message: "tools/list returned a malformed result"}
		}
		if page == 0 && pageBody.TTLMs >= 1 {
			downTTL = int64(min(pageBody.TTLMs, float64(maxDownstreamTTL/time.Millisecond)))
		}
		for _, rt := range pageBody.Tools {
			t, ok := toolFromRaw(c.spec.ID, rt)
			if !ok {
				continue
			}
			if names[t.Name] {
				continue
			}
			if len(all) >= MaxCatalogTools {
				return nil, errPartialCatalog(fmt.Sprintf("more than %d tools", MaxCatalogTools))
			}
			if kept += len(rt); kept > c.g.maxCatalog {
				return nil, errPartialCatalog(fmt.Sprintf("more than %d bytes of tool definitions", c.g.maxCatalog))
			}
			names[t.Name] = true
			all = append(all, t)
		}
		if pageBody.NextCursor == "" {
			e := newEntry(all, nil)
			e.downTTL = time.Duration(min(downTTL, int64(maxDownstreamTTL/time.Millisecond))) * time.Millisecond
			return e, nil
		}
		if seen[pageBody.NextCursor] {
			return nil, errPartialCatalog("a cursor repeated")
		}
		seen[pageBody.NextCursor] = true
		cursor = pageBody.NextCursor
	}
}

func errPartialCatalog(why string) *failure {
	return &failure{code: CodeCatalogLookupFailed, message: "tools/list returned a partial catalog (" + why + ")"}
}

// toolFromRaw converts one listed tool, keeping the exact bytes of the
// definition and the schemas. Malformed annotations are dropped (the
// read-only predicate then fails closed); a tool without a name is skipped.
func toolFromRaw(connectorID string, raw json.RawMessage) (Tool, bool) {
	var head struct {
		Name         string          `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Name == "" {
		// Retry leniently: a field of the wrong type must not hide the tool.
		var loose map[string]json.RawMessage
		if json.Unmarshal(raw, &loose) != nil {
			return Tool{}, false
		}
		head.Name, head.Title, head.Description = "", "", ""
		_ = json.Unmarshal(loose["name"], &head.Name)
		_ = json.Unmarshal(loose["title"], &head.Title)
		_ = json.Unmarshal(loose["description"], &head.Description)
		head.InputSchema, head.OutputSchema, head.Annotations = loose["inputSchema"], loose["outputSchema"], loose["annotations"]
		if head.Name == "" {
			return Tool{}, false
		}
	}
	t := Tool{
		ConnectorID:  connectorID,
		Name:         head.Name,
		Title:        head.Title,
		Description:  head.Description,
		InputSchema:  nonNull(head.InputSchema),
		OutputSchema: nonNull(head.OutputSchema),
		Definition:   append(json.RawMessage(nil), raw...),
	}
	if a := nonNull(head.Annotations); a != nil {
		var ann Annotations
		if json.Unmarshal(a, &ann) == nil {
			t.Annotations = &ann
			if t.Title == "" {
				t.Title = ann.Title
			}
		}
	}
	return t, true
}

// nonNull copies raw JSON, treating absence and `null` alike.
func nonNull(raw json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}
