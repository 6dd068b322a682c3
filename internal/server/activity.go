package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connecta-dev/connecta/internal/accesstoken"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/activity"
	"github.com/connecta-dev/connecta/internal/jstext"
	"github.com/connecta-dev/connecta/internal/store"
)

// activityParam reports /activity's query parameters; any other is refused.
func activityParam(k string) bool {
	switch k {
	case "limit", "before", "connector", "outcome", "actor", "since", "until":
		return true
	}
	return false
}

// parseActivityQuery reads ?limit=&before=&connector=&outcome=&actor=&since=&until=
// (times RFC 3339); the message of an error names the parameter.
func parseActivityQuery(v url.Values) (activity.Query, error) {
	q := activity.Query{Limit: activityDefaultLimit}
	for k, vals := range v {
		if !activityParam(k) {
			return q, fmt.Errorf("unknown parameter %q (known: limit, before, connector, outcome, actor, since, until)", clampParam(k))
		}
		if len(vals) > 1 {
			return q, fmt.Errorf("%s is given more than once", k)
		}
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, errors.New("limit must be a positive integer")
		}
		q.Limit = min(n, activityMaxLimit)
	}
	if s := v.Get("before"); s != "" {
		if _, err := activity.DecodeCursor(s); err != nil {
			return q, errors.New("before must be a nextCursor from a previous page")
		}
		q.Before = s
	}
	for _, f := range []struct {
		key string
		dst *string
		max int
	}{{"connector", &q.ConnectorID, jstext.MaxIdentityBytes}, {"outcome", &q.Outcome, 64}, {"actor", &q.Actor, 128}} {
		s := v.Get(f.key)
		if len(s) > f.max*4 {
			return q, fmt.Errorf("%s is too long", f.key)
		}
		*f.dst = s
	}
	switch q.Outcome {
	case "", activity.OutcomeSuccess, activity.OutcomeError, activity.OutcomeTimeout, activity.OutcomeCancelled, activity.OutcomeDenied:
	default:
		return q, errors.New("outcome must be one of success, error, timeout, cancelled, denied")
	}
	for _, f := range []struct {
		key string
		dst *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(f.key); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s must be an RFC 3339 time (2026-01-02T15:04:05Z)", f.key)
			}
			*f.dst = t
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return q, errors.New("since must be before until")
	}
	return q, nil
}

func clampParam(s string) string { return jstext.Clamp(s, 64) }

// serveActivity answers one page of payload-free activity events, newest
// first: {events, nextCursor?}.
func (s *Server) serveActivity(w http.ResponseWriter, r *http.Request) {
	q, err := parseActivityQuery(r.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid_args", err.Error()+".")
		return
	}
	// With access rules a caller sees its own events only, a denial as
	// the unknown-address event it was answered with; operators see all.
	info := infoFrom(r.Context())
	restricted := info != nil && info.accessOn && !info.operator
	// Another actor's events, or denials, are none of a caller's: the
	// empty page, without a store read.
	none := restricted && (q.Outcome == activity.OutcomeDenied || (q.Actor != "" && q.Actor != info.actor))
	if restricted {
		q.Actor = info.actor
	}
	page := activity.Page{Events: []activity.Event{}}
	if s.opts.Activity != nil && !none {
		page, err = s.opts.Activity.List(r.Context(), q)
		switch {
		case errors.Is(err, activity.ErrBadCursor):
			writeJSONError(w, http.StatusBadRequest, "invalid_args", "before must be a nextCursor from a previous page.")
			return
		case err != nil:
			s.log.WarnContext(r.Context(), "activity: store read failed", "error", err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			body, _ := gateway.Object{{Key: "error", Value: storeUnavailable(err)}}.MarshalJSON()
			_, _ = w.Write(body)
			return
		}
	}
	for i := range page.Events {
		page.Events[i] = page.Events[i].AsSeenBy(!restricted)
	}
	s.nameActors(r.Context(), page.Events)
	w.Header().Set("Content-Type", "application/json")
	_ = encodeJSON(w, page)
}

// nameActors shows each issued token's current name next to its immutable
// actor (a rename shows in the whole history). A failed lookup leaves the
// names out; the events are still served.
func (s *Server) nameActors(ctx context.Context, events []activity.Event) {
	tokens := s.settingsNow().inbound.Tokens()
	if tokens == nil || !slices.ContainsFunc(events, func(e activity.Event) bool { return strings.HasPrefix(e.Actor, accesstoken.ActorPrefix) }) {
		return
	}
	names, err := tokens.Names(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "activity: token names not read", "error", err.Error())
		return
	}
	for i := range events {
		events[i].ActorName = names[events[i].Actor]
	}
}

// storeUnavailable is the typed failure of a call that needed the store
// while it is down (docs/DECISIONS.md: details.component "store"; details.code stays
// for transport codes).
func storeUnavailable(err error) *gateway.Error {
	_ = err // the cause is logged by the store, never shown: it may name hosts
	return &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
		Message: "The state store is unavailable; retry shortly.",
		Details: []gateway.Field{{Key: "component", Value: "store"}}}
}

// isStoreDown reports a failure of the store itself.
func isStoreDown(err error) bool { return errors.Is(err, store.ErrUnavailable) }
