package discovery

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/connecta-dev/connecta/internal/gateway"
)

// Safety classes (S1a).
const (
	SafetyAll              = "all"
	SafetyReadOnly         = "readOnly"
	SafetyApprovalRequired = "approvalRequired"
)

// Schema formats.
const (
	FormatCompact = "compact"
	FormatJSON    = "json"
)

// Correction hints (S3); each names the way to ask correctly.
const (
	msgArgsObject   = "search takes one object of options, e.g. { query: \"list issues\" }."
	msgQuery        = "query must be a string. Omit it or use an empty string to browse the catalog."
	msgConnector    = "connector must be at most 512 UTF-8 bytes."
	msgConnectorStr = "connector must be a string naming one configured connector id."
	msgSafety       = `safety must be "readOnly", "approvalRequired", or "all".`
	msgLimit        = "limit must be a whole number from 1 through 100. Page through larger catalogs with offset."
	msgOffset       = "offset must be a non-negative whole number. Start at 0 or use the previous page's nextOffset."
	msgSchemas      = `includeSchemas must be "compact" or "json".`
	msgFormat       = `format must be "compact" or "json".`
	msgBothAddr     = "describe takes either address or addresses, not both."
	msgAddrShape    = `describe takes { address: "<connectorId>.<toolName>" } or { addresses: ["<connectorId>.<toolName>", ...] }.`
	msgAddrCount    = "addresses must contain at most 100 entries. Split a larger list across connecta.describe calls."
)

// SearchParams are the options of one search. Pointer fields distinguish
// "omitted" from a value.
type SearchParams struct {
	Query            *string // omitted browses
	Connector        string  // "" searches every connector
	Safety           string  // "" or "all", "readOnly", "approvalRequired"
	Limit            *int    // 1–100, default 8
	Offset           *int    // ≥ 0, default 0
	FullDescriptions bool
	IncludeSchemas   string // "", "compact", "json"
	// IncludeSchemaKeys adds inputKeys/requiredInputKeys/outputKeys when
	// schemas are requested; omitted means true on both front doors (S2:
	// search_tools carries the same metadata), false buys the bytes back.
	IncludeSchemaKeys *bool
}

// validate checks the bounds in the contract's order, before any catalog
// loads (S3).
func (p *SearchParams) validate() *gateway.Error {
	if len(p.Connector) > MaxConnectorArgBytes {
		return invalidArgs(msgConnector)
	}
	switch p.Safety {
	case "", SafetyAll, SafetyReadOnly, SafetyApprovalRequired:
	default:
		return invalidArgs(msgSafety)
	}
	if p.Limit != nil && (*p.Limit < 1 || *p.Limit > MaxLimit) {
		return invalidArgs(msgLimit)
	}
	if p.Offset != nil && *p.Offset < 0 {
		return invalidArgs(msgOffset)
	}
	if !knownFormat(p.IncludeSchemas) {
		return invalidArgs(msgSchemas)
	}
	return nil
}

// DecodeSearchArgs reads the JSON options object of a search (a program's
// connecta.search argument or search_tools' arguments). Unknown keys are
// ignored; a present key of the wrong type is invalid_args with a
// correction hint.
func DecodeSearchArgs(raw json.RawMessage) (SearchParams, *gateway.Error) {
	var p SearchParams
	fields, err := decodeObject(raw, msgArgsObject)
	if err != nil {
		return p, err
	}
	if v, ok := fields["query"]; ok {
		s, isStr := jsonString(v)
		if !isStr {
			return p, invalidArgs(msgQuery)
		}
		p.Query = &s
	}
	if v, ok := fields["connector"]; ok {
		s, isStr := jsonString(v)
		if !isStr {
			return p, invalidArgs(msgConnectorStr)
		}
		if len(s) > MaxConnectorArgBytes {
			return p, invalidArgs(msgConnector)
		}
		p.Connector = s
	}
	if v, ok := fields["safety"]; ok {
		s, isStr := jsonString(v)
		if !isStr {
			return p, invalidArgs(msgSafety)
		}
		p.Safety = s
		if e := (&SearchParams{Safety: s}).validate(); e != nil {
			return p, e
		}
	}
	if v, ok := fields["limit"]; ok {
		n, ok := jsonWholeNumber(v)
		if !ok || n < 1 || n > MaxLimit {
			return p, invalidArgs(msgLimit)
		}
		p.Limit = &n
	}
	if v, ok := fields["offset"]; ok {
		n, ok := jsonWholeNumber(v)
		if !ok || n < 0 {
			return p, invalidArgs(msgOffset)
		}
		p.Offset = &n
	}
	if v, ok := fields["fullDescriptions"]; ok {
		p.FullDescriptions = jsonTrue(v)
	}
	if v, ok := fields["includeSchemas"]; ok && !isNull(v) {
		s, isStr := jsonString(v)
		if !isStr || (s != FormatCompact && s != FormatJSON) {
			return p, invalidArgs(msgSchemas)
		}
		p.IncludeSchemas = s
	}
	if v, ok := fields["includeSchemaKeys"]; ok {
		b := !bytes.Equal(bytes.TrimSpace(v), []byte("false")) // only an explicit false opts out
		p.IncludeSchemaKeys = &b
	}
	return p, nil
}

// DescribeParams are the options of one describe.
type DescribeParams struct {
	Addresses        []string // ≤ 100, answered in order
	Format           string   // "" or "compact", "json"
	FullDescriptions bool
}

func (p *DescribeParams) validate() *gateway.Error {
	if len(p.Addresses) > MaxDescribeAddresses {
		return invalidArgs(msgAddrCount)
	}
	if !knownFormat(p.Format) {
		return invalidArgs(msgFormat)
	}
	return nil
}

// DecodeDescribeArgs reads connecta.describe's options: {address} or
// {addresses ≤ 100}, format, fullDescriptions.
func DecodeDescribeArgs(raw json.RawMessage) (DescribeParams, *gateway.Error) {
	var p DescribeParams
	fields, err := decodeObject(raw, msgAddrShape)
	if err != nil {
		return p, err
	}
	one, hasOne := fields["address"]
	many, hasMany := fields["addresses"]
	switch {
	case hasOne && hasMany:
		return p, invalidArgs(msgBothAddr)
	case hasOne:
		s, ok := jsonString(one)
		if !ok {
			return p, invalidArgs(msgAddrShape)
		}
		p.Addresses = []string{s}
	case hasMany:
		var items []json.RawMessage
		if err := json.Unmarshal(many, &items); err != nil || isNull(many) {
			return p, invalidArgs(msgAddrShape)
		}
		if len(items) > MaxDescribeAddresses {
			return p, invalidArgs(msgAddrCount)
		}
		p.Addresses = make([]string, len(items))
		for i, it := range items {
			p.Addresses[i] = jsStringOf(it)
		}
	default:
		return p, invalidArgs(msgAddrShape)
	}
	if v, ok := fields["format"]; ok && !isNull(v) {
		s, isStr := jsonString(v)
		if !isStr || (s != FormatCompact && s != FormatJSON) {
			return p, invalidArgs(msgFormat)
		}
		p.Format = s
	}
	if v, ok := fields["fullDescriptions"]; ok {
		p.FullDescriptions = jsonTrue(v)
	}
	return p, nil
}

func decodeObject(raw json.RawMessage, msg string) (map[string]json.RawMessage, *gateway.Error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]json.RawMessage{}, nil
	}
	if trimmed[0] != '{' {
		return nil, invalidArgs(msg)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return nil, invalidArgs(msg)
	}
	return fields, nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func jsonString(v json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return "", false
	}
	return s, true
}

func jsonTrue(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("true")) }

// jsonWholeNumber accepts a JSON number with an integral value that fits an
// int (JavaScript's Number.isInteger; 2.0 is 2).
func jsonWholeNumber(v json.RawMessage) (int, bool) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// jsStringOf is JavaScript's String(value) for one decoded JSON value.
func jsStringOf(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return "undefined"
	}
	switch t[0] {
	case '"':
		s, _ := jsonString(t)
		return s
	case '{':
		return "[object Object]"
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(t, &items) != nil {
			return ""
		}
		parts := make([]string, len(items))
		for i, it := range items {
			if !isNull(it) {
				parts[i] = jsStringOf(it)
			}
		}
		return strings.Join(parts, ",")
	}
	if t[0] == '-' || (t[0] >= '0' && t[0] <= '9') {
		if f, err := strconv.ParseFloat(string(t), 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1e21 {
				return strconv.FormatFloat(f, 'f', -1, 64)
			}
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return string(t)
}

// knownFormat: a schema format search and describe accept ("" is the
// default, compact).
func knownFormat(f string) bool { return f == "" || f == FormatCompact || f == FormatJSON }
