package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/connecta-dev/connecta/gateway/rawmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// catalogEntry is one complete listing of a connector, immutable once
// built: readers share it without copying.
type catalogEntry struct {
	tools     []Tool
	byName    map[string]int
	fetchedAt time.Time
	expires   time.Time
	// downstreamTTL is the first page's ttlMs (2026-07-28 list results);
	// above 0 it caps how long the listing is served (catalogTTL).
	downstreamTTL time.Duration
}

// catalogTTL is how long e is served: ours, capped by a downstream ttlMs
// above 0 (0 or absent keeps ours).
func catalogTTL(ours time.Duration, e *catalogEntry) time.Duration {
	if e.downstreamTTL > 0 && e.downstreamTTL < ours {
		return e.downstreamTTL
	}
	return ours
}

func (e *catalogEntry) lookup(name string) (*Tool, bool) {
	i, ok := e.byName[name]
	if !ok {
		return nil, false
	}
	return &e.tools[i], true
}

// catalogState is guarded by connector.mu.
type catalogState struct {
	entry *catalogEntry
	dirty bool   // list_changed arrived: refresh before serving again
	gen   uint64 // bumped by list_changed
}

// invalidateCatalog marks the cache stale (notifications/tools/list_changed).
// The entry stays until a refresh replaces it.
func (c *connector) invalidateCatalog() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cat.dirty = true
	c.cat.gen++
}

// catalog returns the cached listing, joining or starting the one refresh in
// flight when it is stale. A failed refresh never drops a cached entry. The
// error is a *failure (classified) or ctx's error.
func (c *connector) catalog(ctx context.Context, operation string) (*catalogEntry, *Error) {
	e, err := c.catalogRaw(ctx)
	if err == nil {
		return e, nil
	}
	return nil, c.catalogError(ctx, err, operation)
}

func (c *connector) catalogRaw(ctx context.Context) (*catalogEntry, error) {
	if c.spec.MissingCredential != "" {
		c.recordFailure(CodeAuthRequired) // the use failed: health says so
		return nil, &failure{code: CodeAuthRequired, missingCredential: true}
	}
	c.mu.Lock()
	if e := c.cat.entry; e != nil && !c.cat.dirty && c.g.now().Before(e.expires) {
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
	type outcome struct {
		entry *catalogEntry
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		defer c.g.wg.Done()
		v, err, _ := c.refresh.Do("tools/list", c.runRefresh)
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

// runRefresh lists the catalog on the gateway's lifetime, detached from any
// one caller so a waiter that gives up does not fail the others. The error
// is a *failure.
func (c *connector) runRefresh() (any, error) {
	c.mu.Lock()
	gen := c.cat.gen
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.g.life, CatalogRefreshTimeout)
	defer cancel()
	ex := &rawmcp.Exchange{}
	ctx = rawmcp.WithExchange(ctx, ex)
	started := c.g.now()
	var entry *catalogEntry
	err := c.credentialPresent(ctx)
	if err == nil {
		entry, err = c.listTools(ctx)
	}
	var f *failure
	if err != nil {
		f = c.classify(ctx, err, ex.Snapshot())
		if f.code == CodeTimeout {
			f = &failure{code: CodeCatalogLookupFailed, message: fmt.Sprintf("tools/list timed out after %dms", CatalogRefreshTimeout.Milliseconds()), retryable: true}
		}
		c.logger.Warn("catalog refresh failed", "code", string(f.code), "reason", f.message)
		c.recordFailure(f.code)
		c.g.metrics.catalogRefresh(c.spec.ID, "failure", c.g.now().Sub(started))
	} else {
		c.recordSuccess()
		c.g.metrics.catalogRefresh(c.spec.ID, "success", c.g.now().Sub(started))
	}
	c.mu.Lock()
	if err == nil {
		entry.fetchedAt = c.g.now()
		entry.expires = entry.fetchedAt.Add(catalogTTL(c.g.ttl, entry))
		c.cat.entry = entry
		c.cat.dirty = c.cat.gen != gen // a list_changed during the refresh
	}
	c.mu.Unlock()
	if f != nil {
		return nil, f
	}
	return entry, nil
}

// listTools reads every cursor page of tools/list, keeping each tool's exact
// bytes. A partial catalog is a failure.
func (c *connector) listTools(ctx context.Context) (*catalogEntry, error) {
	ls, err := c.catalogSession(ctx)
	if err != nil {
		return nil, err
	}
	entry := &catalogEntry{byName: map[string]int{}}
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
			TTLMs      float64           `json:"ttlMs"`
		}
		if err := json.Unmarshal(raw, &pageBody); err != nil {
			return nil, &failure{code: CodeCatalogLookupFailed, message: "tools/list returned a malformed result"}
		}
		if page == 0 && pageBody.TTLMs >= 1 && pageBody.TTLMs < float64(MaxDownstreamTTL/time.Millisecond) {
			entry.downstreamTTL = time.Duration(pageBody.TTLMs) * time.Millisecond
		}
		for _, rt := range pageBody.Tools {
			t, ok := toolFromRaw(c.spec.ID, rt)
			if !ok {
				continue
			}
			if _, dup := entry.byName[t.Name]; dup {
				continue
			}
			if len(entry.tools) >= MaxCatalogTools {
				return nil, errPartialCatalog(fmt.Sprintf("more than %d tools", MaxCatalogTools))
			}
			if kept += len(rt); kept > c.g.maxCatalog {
				return nil, errPartialCatalog(fmt.Sprintf("more than %d bytes of tool definitions", c.g.maxCatalog))
			}
			entry.byName[t.Name] = len(entry.tools)
			entry.tools = append(entry.tools, t)
		}
		if pageBody.NextCursor == "" {
			return entry, nil
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
