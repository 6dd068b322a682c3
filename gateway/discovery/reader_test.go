package discovery

import "github.com/connecta-dev/connecta/gateway"

// The registry CONNECTORS builds is the CatalogReader this package declares.
var _ CatalogReader = (*gateway.Gateway)(nil)
