package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/connecta-dev/connecta/internal/actor"
)

// credentialTransport sets a connector's operator-set credential header on
// every request, read from the source each time (a replaced value applies
// on the next request, no restart). With none set the request goes out
// without it and the downstream's 401 is auth_required.
type credentialTransport struct {
	base http.RoundTripper
	id   string
	who  actor.ID // the per-caller child's actor; zero: the connector's one value
	// noCaller: a per-caller connector reached without an actor sends none.
	noCaller bool
	slot     CredentialSlot
	src      CredentialSource
}

func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v, err := "", ErrNoCredential
	if !t.noCaller {
		v, err = t.src.Credential(req.Context(), t.id, t.who)
	}
	switch {
	case errors.Is(err, ErrNoCredential) && !t.who.IsZero():
		// A caller's own value is gone (removed since the catalog loaded):
		// nothing is sent, the caller is told to set theirs.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &failure{code: CodeAuthRequired, missingCredential: true}
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
	err := ErrNoCredential
	if !c.withoutCaller() {
		_, err = c.g.opts.Credentials.Credential(ctx, c.spec.ID, c.who)
	}
	switch {
	case errors.Is(err, ErrNoCredential):
		return &failure{code: CodeAuthRequired, missingCredential: true}
	case err != nil:
		return &failure{code: CodeUnavailable, retryable: true, component: "store", message: "the connector's credential could not be read"}
	}
	return nil
}
