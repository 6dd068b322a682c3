package gateway

import (
	"context"
	"errors"
	"net/http"
)

// credentialTransport sets a connector's operator-set credential header on
// every request, read from the source each time (a replaced value applies
// on the next request, no restart). With none set the request goes out
// without it and the downstream's 401 is auth_required.
type credentialTransport struct {
	base http.RoundTripper
	id   string
	slot CredentialSlot
	src  CredentialSource
}

func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v, err := t.src.Credential(req.Context(), t.id)
	switch {
	case errors.Is(err, ErrNoCredential):
		return t.base.RoundTrip(req)
	case err != nil:
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &failure{code: CodeUnavailable, retryable: true, component: "store", message: "the connector's credential could not be read"}
	}
	req = req.Clone(req.Context())
	if t.slot.Scheme != "" {
		v = t.slot.Scheme + " " + v
	}
	req.Header.Set(t.slot.Header, v)
	return t.base.RoundTrip(req)
}

// credentialPresent fails a catalog refresh at once, with the
// operator_config recovery, when the connector's credential slot is empty.
func (c *connector) credentialPresent(ctx context.Context) error {
	if c.spec.Credential == nil {
		return nil
	}
	_, err := c.g.opts.Credentials.Credential(ctx, c.spec.ID)
	switch {
	case errors.Is(err, ErrNoCredential):
		return &failure{code: CodeAuthRequired, missingCredential: true}
	case err != nil:
		return &failure{code: CodeUnavailable, retryable: true, component: "store", message: "the connector's credential could not be read"}
	}
	return nil
}
