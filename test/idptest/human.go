package idptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/connecta-dev/connecta/internal/jstext"
)

var formAction = regexp.MustCompile(`action="(/interaction/[^"]+/(login|confirm|abort))"`)

// PlayHuman plays the person at the authorization server issuer (this
// package's or the real provider's: they serve the same forms): it follows
// authURL with c (which must have a cookie jar), signs in as account, then
// allows (or, with allow false, denies) the consent, and returns the URL
// the server finally redirects to outside itself — the client's redirect
// URI with code and state (or error) — without requesting it. c's own
// redirect policy is not used.
func PlayHuman(ctx context.Context, c *http.Client, issuer, authURL, account string, allow bool) (*url.URL, error) {
	if c.Jar == nil {
		return nil, errors.New("PlayHuman needs an http.Client with a cookie jar")
	}
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	next, method, form := authURL, http.MethodGet, url.Values(nil)
	for hop := 0; hop < 20; hop++ {
		u, err := url.Parse(next)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(u.String(), issuer+"/") {
			return u, nil
		}
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
		if err != nil {
			return nil, err
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := noFollow.Do(req)
		if err != nil {
			return nil, err
		}
		page, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		switch {
		case res.StatusCode >= 300 && res.StatusCode < 400:
			loc, err := u.Parse(res.Header.Get("Location"))
			if err != nil {
				return nil, fmt.Errorf("redirect %q: %v", res.Header.Get("Location"), err)
			}
			next, method, form = loc.String(), http.MethodGet, nil
		case res.StatusCode == http.StatusOK:
			m := formAction.FindAllStringSubmatch(string(page), -1)
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: no login or consent form in %q", u, jstext.Clamp(string(page), 400))
			}
			var action string
			for _, a := range m {
				switch {
				case a[2] == "login":
					action, form = a[1], url.Values{"login": {account}}
				case a[2] == "confirm" && allow, a[2] == "abort" && !allow:
					action, form = a[1], url.Values{}
				}
			}
			if action == "" {
				return nil, fmt.Errorf("%s: no usable form in %q", u, jstext.Clamp(string(page), 400))
			}
			next, method = issuer+action, http.MethodPost
		default:
			return nil, fmt.Errorf("%s %s: HTTP %d: %s", method, u, res.StatusCode, jstext.Clamp(string(page), 400))
		}
	}
	return nil, errors.New("too many redirects")
}

// Authorize is [PlayHuman] at this server.
func (p *Provider) Authorize(ctx context.Context, c *http.Client, authURL, account string, allow bool) (*url.URL, error) {
	return PlayHuman(ctx, c, p.Issuer, authURL, account, allow)
}
