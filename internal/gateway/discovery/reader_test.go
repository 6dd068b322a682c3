package discovery

import "github.com/connecta-dev/connecta/internal/gateway"

// The gateway's registry is the CatalogReader this package declares.
var _ CatalogReader = (*gateway.Gateway)(nil)
