// Package discovery is the one search and describe service both front doors
// use (S6): connecta.search / connecta.describe inside programs and the
// top-level search_tools. The front door is a parameter: programs get the flat
// page with key lists on by default, the top level the page grouped by
// connector, and recovery records name the surface the caller has.
//
// Search, Describe, DecodeSearchArgs, DecodeDescribeArgs and
// SearchResultTooLarge return *gateway.Error, not error, as the gateway
// does: both front doors render its fields (the tool result, the guest's
// typed failure).
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/connecta-dev/connecta/internal/gateway"
)

// Contract bounds (S1, S3, S4, docs/meta-tools.md §4).
const (
	DefaultLimit          = 8
	MaxLimit              = 100
	MaxDescribeAddresses  = 100
	MaxResultBytes        = 256_000 // serialized discovery page
	MaxConnectorArgBytes  = 512     // a longer connector scope is refused whole
	MaxConnectorTitle     = 120     // UTF-8 bytes of a shown title, "…" included
	SearchDescriptionLen  = 160     // UTF-16 units of a search row description
	DescribeDescriptionLn = 240     // UTF-16 units of a describe entry description
	GuideSummaryLen       = 120     // UTF-16 units of a guide summary
	MaxSuggestions        = 3       // canonical addresses offered on a close miss
	MaxIdentityConnectors = 3       // connectors a no-match search names back
	DefaultConcurrency    = 4       // catalogs loaded at once
	DefaultCatalogTimeout = 30 * time.Second

	// suggestionCellBudget bounds edit-distance work per describe call; past
	// it only containment suggests (a hostile catalog of long names cannot
	// make a miss expensive).
	suggestionCellBudget = 20_000_000
)

// CatalogReader is what discovery needs of the connector registry
// (the gateway implements it).
type CatalogReader interface {
	Connectors() []gateway.ConnectorInfo
	// Tools is the cached listing of one connector; *gateway.Error on failure.
	Tools(ctx context.Context, connectorID string) ([]gateway.Tool, error)
	// ReadOnly is the fail-closed predicate, operator classification included.
	ReadOnly(t *gateway.Tool) bool
	// ObservedOutputSchema is the S9 observation, nil when none.
	ObservedOutputSchema(t *gateway.Tool) json.RawMessage
}

// Options configure a Service.
type Options struct {
	Catalog CatalogReader
	// Concurrency is how many catalogs one search loads at once (default 4).
	Concurrency int
	// CatalogTimeout bounds each catalog load (default 30 s).
	CatalogTimeout time.Duration
}

// Service is the discovery service. It holds no per-request state (only a
// bounded cache of lexical indexes) and is safe for concurrent use.
type Service struct {
	mu      sync.Mutex
	indexes map[indexKey]*catalogIndex // lexical indexes of recent listings

	catalog     CatalogReader
	concurrency int
	timeout     time.Duration
}

// New builds a Service.
func New(opts Options) (*Service, error) {
	if opts.Catalog == nil {
		return nil, errors.New("discovery: Options.Catalog is required")
	}
	s := &Service{
		indexes:     map[indexKey]*catalogIndex{},
		catalog:     opts.Catalog,
		concurrency: opts.Concurrency,
		timeout:     opts.CatalogTimeout,
	}
	if s.concurrency <= 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.timeout <= 0 {
		s.timeout = DefaultCatalogTimeout
	}
	return s, nil
}

// SearchResultTooLarge is S3's refusal of a search result of n bytes. The
// page is bounded here; the top-level front door also bounds the complete
// tool result it wraps the page in (both copies, JSON escaping included),
// which only the server can measure, and refuses with this same error.
func SearchResultTooLarge(n int) *gateway.Error { return resultTooLarge(n, searchTooLargeHint) }

func invalidArgs(msg string) *gateway.Error {
	return &gateway.Error{Code: gateway.CodeInvalidArgs, Message: msg, Retryable: false}
}

func resultTooLarge(bytes int, hint string) *gateway.Error {
	return &gateway.Error{
		Code: gateway.CodeResultTooLarge,
		Message: fmt.Sprintf("Discovery result is %d UTF-8 bytes, over the %d-byte ceiling. %s",
			bytes, MaxResultBytes, hint),
		Retryable: false,
	}
}

// Hints naming the ways to ask for less (S3).
const (
	searchTooLargeHint   = `Lower limit, drop fullDescriptions, or request includeSchemas: "compact".`
	describeTooLargeHint = `Describe fewer addresses, drop fullDescriptions, or use format: "compact".`
)

// routeName names the discovery surface in a catalog timeout message.
func routeName(front gateway.FrontDoor, describe bool) string {
	switch {
	case describe:
		return "connecta.describe"
	case front == gateway.FrontDoorProgram:
		return "connecta.search"
	}
	return "search_tools"
}

// unserializable is the failure of a page that could not be encoded (it
// cannot happen with the values discovery builds; typed all the same, so
// that Search and Describe return *gateway.Error like Invoke).
func unserializable(op string, err error) *gateway.Error {
	return gateway.Errorf(gateway.CodeResultProcessingFailed, false, "%s result could not be serialized: %s", op, err.Error())
}
