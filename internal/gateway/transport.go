package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway/rawmcp"
	"github.com/connecta-dev/connecta/internal/oauth"
	"golang.org/x/sys/unix"

	"github.com/connecta-dev/connecta/internal/telemetry"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The go-sdk client's errors carry neither the HTTP status, Retry-After nor
// the errno, nor its results their raw bytes (go-sdk issue #967, package
// rawmcp), so every downstream request goes through captureTransport, which
// records them into the rawmcp.Exchange the calling context carries, hands
// the raw result to its rawmcp.Slot, and caps the response body before
// anything reads it into memory.

// errBodyTooLarge is what a capped response body returns past the cap.
var errBodyTooLarge = errors.New("downstream response body exceeds the size cap")

// captureTransport adds the connector's configured headers, records each
// POST's outcome into the context's rawmcp.Exchange and caps response bodies. GETs
// (the standalone SSE stream and resumptions) belong to the session, not to
// a call, so they are only capped per event by the SDK.
type captureTransport struct {
	base     http.RoundTripper
	headers  map[string]string
	maxBytes int64
	awaiting rawmcp.Awaiting // input requests read off call streams, until answered
	discover *discoverBound  // bounds server/discover POSTs (discover.go)
}

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	traced := trace.SpanContextFromContext(req.Context()).IsValid()
	if len(t.headers) > 0 || traced {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
		// W3C trace context on every request a traced call makes.
		telemetry.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	if req.Method == http.MethodDelete {
		return t.deleteSession(req)
	}
	ex := rawmcp.ExchangeFrom(req.Context())
	if req.Method != http.MethodPost {
		ex = nil
	}
	var resp *http.Response
	var err error
	if req.Method == http.MethodPost && t.discover != nil && req.Header.Get("Mcp-Method") == discoverMethod {
		resp, err = t.discover.roundTrip(t.base, req)
	} else {
		resp, err = t.base.RoundTrip(req)
	}
	rawmcp.Answered(req, &t.awaiting, MaxResponseBodyBytes)
	if err != nil {
		if ex != nil && req.Context().Err() == nil {
			ex.RecordTransport(err)
		}
		return nil, err
	}
	if ex != nil {
		ex.RecordResponse(resp.StatusCode, resp.Header.Get("Retry-After"))
		if resp.StatusCode == http.StatusForbidden {
			if sc := oauth.InsufficientScope(resp.Header); len(sc) > 0 {
				ex.RecordScope(strings.Join(sc, " "))
			}
		}
	}
	if req.Method == http.MethodPost && resp.Body != nil {
		resp.Body = &cappedBody{rc: resp.Body, left: t.maxBytes, ex: ex}
		rawmcp.Sniff(req, resp, MaxResponseBodyBytes, &t.awaiting)
	}
	return resp, nil
}

// deleteSession sends the session-termination DELETE under a tighter bound
// than the SDK's: termination is best-effort, and a downstream that holds
// the DELETE until its hung handlers finish would otherwise keep
// Gateway.Close waiting the SDK's 5 s per session.
func (t *captureTransport) deleteSession(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), sessionDeleteTimeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// cappedBody fails reads past the cap instead of buffering them.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	ex   *rawmcp.Exchange
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Probe one byte: a body of exactly the cap is fine.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			if b.ex != nil {
				b.ex.RecordCapped()
			}
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// transportCode names a transport failure for details.code: the Go errno
// name (ECONNREFUSED, ECONNRESET, …) or "timeout"; "" when it is neither,
// because a cause we were not told is never invented.
func transportCode(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" && len(name) <= MaxCodeBytes {
			return name
		}
		return ""
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "timeout"
	}
	return ""
}

// originOf returns the scheme://host[:port] of a URL, clamped for
// details.host; "" when it does not parse as HTTP(S).
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	origin := u.Scheme + "://" + u.Host
	if len(origin) > MaxHostBytes {
		return ""
	}
	return origin
}

// parseRetryAfter reads Retry-After (RFC 9110 §10.2.3) as delay-seconds or
// an HTTP date and returns whole milliseconds clamped to [0,
// MaxRetryAfterMs] (a date in the past is 0); ok is false when absent or
// invalid. The header comes from the downstream: FuzzParseRetryAfter.
func parseRetryAfter(v string, now time.Time) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if secs < 0 || v[0] == '-' || v[0] == '+' {
			return 0, false
		}
		return min(secs, MaxRetryAfterMs/1000) * 1000, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := when.Sub(now) // saturates rather than overflows
	if d <= 0 {
		return 0, true
	}
	return min(ceilMs(d), MaxRetryAfterMs), true
}

// httpStatusText is a stable, provider-prose-free description of a status.
func httpStatusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return fmt.Sprintf("HTTP %d %s", status, t)
	}
	return fmt.Sprintf("HTTP %d", status)
}
