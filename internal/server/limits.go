package server

import (
	"time"
)

// Contract bounds the server applies (docs/meta-tools.md §1, §2, §4, §7, §12
// and §14; docs/DECISIONS.md). Named as the contract names them. The
// configurable values (requests.*, results.maxInlineBytes, the deadlines)
// have no defaults here: package config is their one home, and New and
// Reload refuse a zero.
const (
	// maxReloadableBodyBytes is the largest requests.maxBodyBytes config
	// accepts (1 GiB).
	maxReloadableBodyBytes = 1 << 30

	// docs/meta-tools.md §1: instructions stay within this many characters.
	MaxInstructionsChars = 1000
	// docs/meta-tools.md §1: call_destructive_tool's reason.
	MaxReasonChars = 500
	// docs/meta-tools.md §9: the usage skill stays under this many bytes.
	MaxUsageSkillBytes = 9000
	// docs/meta-tools.md §1 tools/list cache hint.
	ToolsListTTLMs = 3600000
	// AccessToolsListTTLMs is the tools/list (and server/discover) cache
	// hint while access rules are in force: the list is per caller and a
	// reloaded rule must show within a minute.
	AccessToolsListTTLMs = 30000

	// writeGrace is added on top of admission wait and the longest deadline
	// when sizing the HTTP write timeout (docs/PITFALLS.md: write timeout).
	writeGrace = 10 * time.Second
	// readHeaderTimeout bounds slow-loris header writers.
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
	// activityDefaultLimit is /activity's page when no limit is given.
	activityDefaultLimit = 100
	activityMaxLimit     = 10000
)

// JSON-RPC error codes of docs/meta-tools.md §12.
const (
	rpcServerOverloaded   = -32001
	rpcServerShuttingDown = -32002
	rpcMethodNotFound     = -32601
)

// maxMethodEchoBytes bounds the unknown method name a -32601 echoes.
const maxMethodEchoBytes = 200
