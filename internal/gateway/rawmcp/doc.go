// Package rawmcp recovers what the go-sdk MCP client does not hand back:
// the raw JSON-RPC result bytes of a call and, for streamable HTTP, the
// facts of the HTTP exchange behind it (status, Retry-After, the transport
// error, whether the body cap cut the response).
//
// It exists for one upstream gap, go-sdk issue #967
// (https://github.com/modelcontextprotocol/go-sdk/issues/967): the client
// decodes results into Go values (maps), which reorders keys, turns big
// integers into floats and loses the difference between a missing and a
// false annotation, and its errors carry neither the HTTP status, the
// Retry-After header nor the errno. The gateway needs the exact bytes (the
// listed tool definitions, on which the schema and validator caches key, and
// the structured result, passed through unchanged) and those facts (the E2
// classification of a failure).
//
// Both reach the caller through context values, because the SDK passes the
// caller's context down to the connection and to the HTTP request: a Slot
// for the result ([WithSlot], filled by [Transport] for stdio and in-process
// connections and by [Sniff] for streamable HTTP), an Exchange for the HTTP
// facts ([WithExchange], recorded by the gateway's round tripper).
//
// When the SDK closes the gap, delete this package: take the raw result and
// the HTTP error from the SDK in gateway's call and catalog paths
// (invoke.go, catalog.go), drop the Transport wrapper in connector.go and
// the Sniff and Exchange calls in transport.go, and classify from the SDK's
// error in classify.go.
package rawmcp
