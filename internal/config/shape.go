package config

import (
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The shape of the configuration file, written once: one struct per
// mapping, one field per key, the key's name in its yaml tag (struct order
// is the order "known: …" lists them in). The decoder walks a mapping into
// its shape (decoder.mapping), which refuses unknown, duplicate and
// non-string keys; each decoder then checks the values it owns. A value
// stays a yaml.Node, because every message names its line.

// field is one key of a shape: its key and value nodes (nil when the key
// is absent or null) and its dotted path in messages
// ("connectors[0].url"), which is set whether or not the key is given.
type field struct {
	key, val *yaml.Node
	path     string
}

// given reports whether the key is present with a non-null value.
func (f field) given() bool { return f.val != nil }

// name is the field's key (the last part of its path).
func (f field) name() string { return f.path[strings.LastIndexByte(f.path, '.')+1:] }

func (f *field) bind(key, val *yaml.Node, path string) { f.key, f.val, f.path = key, val, path }

// section is a key whose value is a mapping shaped T.
type section[T any] struct{ field }

// in walks the section into its shape; false when the key is absent or
// the value is not a mapping (reported). The shape's paths are set either
// way, for messages about keys that are not there.
func (s section[T]) in(d *decoder) (*T, bool) {
	if !s.given() {
		t := new(T)
		bindPaths(reflect.ValueOf(t).Elem(), s.path)
		return t, false
	}
	return shapeOf[T](d, s.val, s.path)
}

// shape lets reflection (keysOf, the reference test) reach T.
func (section[T]) shape() reflect.Type { return reflect.TypeFor[T]() }

// list is a key whose value is a list of mappings shaped T (see each).
type list[T any] struct{ field }

// items lets reflection (the shape test) reach T.
func (list[T]) items() reflect.Type { return reflect.TypeFor[T]() }

// binder is what every field of a shape is.
type binder interface {
	bind(key, val *yaml.Node, path string)
}

// keysOf lists a shape's keys in struct order.
func keysOf(t reflect.Type) []string {
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("yaml")
	}
	return keys
}

// bindPaths sets the path of each field of the shape v (under path) and
// returns its keys and fields.
func bindPaths(v reflect.Value, path string) ([]string, []binder) {
	keys := keysOf(v.Type())
	slots := make([]binder, len(keys))
	for i, k := range keys {
		slots[i] = v.Field(i).Addr().Interface().(binder)
		slots[i].bind(nil, nil, join(path, k))
	}
	return keys, slots
}

// shapeOf walks n into a new T (see decoder.mapping).
func shapeOf[T any](d *decoder, n *yaml.Node, path string) (*T, bool) {
	t := new(T)
	return t, d.mapping(n, path, t)
}

// mapping checks that n is a mapping whose keys are all shape's and
// unique, and binds each non-null value to its field. shape is a pointer
// to a shape struct.
func (d *decoder) mapping(n *yaml.Node, path string, shape any) bool {
	keys, slots := bindPaths(reflect.ValueOf(shape).Elem(), path)
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", kindName(n))
		return false
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			d.fail(k, path, "keys must be strings, got %s", kindName(k))
			continue
		}
		f := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.fail(k, f, "duplicate key (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		at := slices.Index(keys, k.Value)
		if at < 0 {
			d.fail(k, f, "unknown key%s", suggest(k.Value, keys))
			continue
		}
		if !isNull(val) {
			slots[at].bind(k, val, f)
		}
	}
	return true
}

// givenOf counts the given fields.
func givenOf(fs ...field) int {
	n := 0
	for _, f := range fs {
		if f.given() {
			n++
		}
	}
	return n
}

type fileShape struct {
	Listen        field                      `yaml:"listen"`
	MetricsListen field                      `yaml:"metricsListen"`
	PublicURL     field                      `yaml:"publicUrl"`
	Auth          section[authShape]         `yaml:"auth"`
	Requests      section[requestsShape]     `yaml:"requests"`
	Executor      section[executorShape]     `yaml:"executor"`
	Execute       section[executeShape]      `yaml:"execute"`
	Catalog       section[catalogShape]      `yaml:"catalog"`
	Results       section[resultsShape]      `yaml:"results"`
	Activity      section[activityShape]     `yaml:"activity"`
	Runtime       section[runtimeShape]      `yaml:"runtime"`
	Store         section[storeShape]        `yaml:"store"`
	Vault         section[vaultShape]        `yaml:"vault"`
	Connectors    list[connectorShape]       `yaml:"connectors"`
	AccessTokens  section[accessTokensShape] `yaml:"accessTokens"`
	Access        list[accessRuleShape]      `yaml:"access"`
	Telemetry     section[telemetryShape]    `yaml:"telemetry"`
}

type authShape struct {
	Tokens list[tokenShape]   `yaml:"tokens"`
	OIDC   section[oidcShape] `yaml:"oidc"`
}

type tokenShape struct {
	Name     field `yaml:"name"`
	Token    field `yaml:"token"`
	Operator field `yaml:"operator"`
}

type oidcShape struct {
	Issuer       field              `yaml:"issuer"`
	Audience     field              `yaml:"audience"`
	ClientID     field              `yaml:"clientId"`
	ClientSecret field              `yaml:"clientSecret"`
	SessionTTL   field              `yaml:"sessionTtlMs"`
	Callers      section[ruleShape] `yaml:"callers"`
	Operators    section[ruleShape] `yaml:"operators"`
	Scopes       field              `yaml:"scopes"`
}

// ruleShape is a callers/operators rule; Any is for callers only.
type ruleShape struct {
	Emails field                   `yaml:"emails"`
	Claim  section[claimRuleShape] `yaml:"claim"`
	Any    field                   `yaml:"any"`
}

type claimRuleShape struct {
	Name  field `yaml:"name"`
	Value field `yaml:"value"`
}

type accessTokensShape struct {
	MaxActive field `yaml:"maxActive"`
}

type accessRuleShape struct {
	Callers    section[accessCallersShape] `yaml:"callers"`
	Connectors field                       `yaml:"connectors"`
	Tools      field                       `yaml:"tools"`
	Writes     field                       `yaml:"writes"`
}

type accessCallersShape struct {
	Tokens       field              `yaml:"tokens"`
	OIDC         section[ruleShape] `yaml:"oidc"`
	IssuedTokens field              `yaml:"issuedTokens"`
}

type requestsShape struct {
	MaxActive          field `yaml:"maxActive"`
	MaxActivePerCaller field `yaml:"maxActivePerCaller"`
	MaxQueue           field `yaml:"maxQueue"`
	QueueTimeout       field `yaml:"queueTimeoutMs"`
	RetryAfter         field `yaml:"retryAfterMs"`
	MaxBodyBytes       field `yaml:"maxBodyBytes"`
	BodyTimeout        field `yaml:"bodyTimeoutMs"`
}

type executorShape struct {
	Concurrency       field `yaml:"concurrency"`
	MaxQueueSize      field `yaml:"maxQueueSize"`
	QueueTimeout      field `yaml:"queueTimeoutMs"`
	Spares            field `yaml:"spares"`
	MaxSpares         field `yaml:"maxSpares"`
	SpareIdle         field `yaml:"spareIdleMs"`
	Timeout           field `yaml:"timeoutMs"`
	CPUTime           field `yaml:"cpuTimeMs"`
	MemoryLimitBytes  field `yaml:"memoryLimitBytes"`
	MaxStackSizeBytes field `yaml:"maxStackSizeBytes"`
	CacheDir          field `yaml:"cacheDir"`
}

type executeShape struct {
	MaxHostCalls     field `yaml:"maxHostCalls"`
	HostCallTimeout  field `yaml:"hostCallTimeoutMs"`
	MaxEmittedBytes  field `yaml:"maxEmittedBytes"`
	MaxEmittedBlocks field `yaml:"maxEmittedBlocks"`
}

type catalogShape struct {
	TTL          field `yaml:"ttlMs"`
	Stale        field `yaml:"staleMs"`
	Pin          field `yaml:"pin"`
	ApproveFirst field `yaml:"approveFirst"`
}

type resultsShape struct {
	MaxInlineBytes field `yaml:"maxInlineBytes"`
	StashTTL       field `yaml:"stashTtlMs"`
	StashMaxBytes  field `yaml:"stashMaxBytes"`
}

type activityShape struct {
	MaxEvents field `yaml:"maxEvents"`
	MaxAge    field `yaml:"maxAgeMs"`
	File      field `yaml:"file"`
	Ring      field `yaml:"ring"` // retired: refused with a pointer to maxEvents
}

type runtimeShape struct {
	GCPercent        field `yaml:"gcPercent"`
	MemoryLimitBytes field `yaml:"memoryLimitBytes"`
}

type storeShape struct {
	URL field `yaml:"url"`
}

type vaultShape struct {
	Keys   list[vaultKeyShape] `yaml:"keys"`
	Active field               `yaml:"active"`
}

type vaultKeyShape struct {
	ID  field `yaml:"id"`
	Key field `yaml:"key"`
}

type telemetryShape struct {
	OTLP        section[otlpShape] `yaml:"otlp"`
	SampleRatio field              `yaml:"sampleRatio"`
	ServiceName field              `yaml:"serviceName"`
}

type otlpShape struct {
	Endpoint field `yaml:"endpoint"`
	Headers  field `yaml:"headers"`
}

type connectorShape struct {
	ID                 field                          `yaml:"id"`
	Title              field                          `yaml:"title"`
	Description        field                          `yaml:"description"`
	Guide              field                          `yaml:"guide"`
	GuideFile          field                          `yaml:"guideFile"`
	Builtin            field                          `yaml:"builtin"`
	URL                field                          `yaml:"url"`
	Headers            field                          `yaml:"headers"`
	Command            field                          `yaml:"command"`
	Env                field                          `yaml:"env"`
	MaxConcurrency     field                          `yaml:"maxConcurrency"` // retired: refused with a pointer to callAdmission
	CallAdmission      section[callAdmissionShape]    `yaml:"callAdmission"`
	ReadOnly           field                          `yaml:"readOnly"`
	ApprovalRequired   field                          `yaml:"approvalRequired"`
	OAuth              section[oauthShape]            `yaml:"oauth"`
	SharedSession      field                          `yaml:"sharedSession"`
	Credential         section[credentialShape]       `yaml:"credential"`
	Catalog            section[connectorCatalogShape] `yaml:"catalog"`
	VersionNegotiation field                          `yaml:"versionNegotiation"`
}

type callAdmissionShape struct {
	MaxConcurrency field                    `yaml:"maxConcurrency"`
	MaxQueueSize   field                    `yaml:"maxQueueSize"`
	QueueTimeout   field                    `yaml:"queueTimeoutMs"`
	RetryAfter     field                    `yaml:"retryAfterMs"`
	MaxPartitions  field                    `yaml:"maxPartitions"`
	Budget         section[callBudgetShape] `yaml:"budget"`
	Partition      field                    `yaml:"partition"`
}

type callBudgetShape struct {
	MaxCalls field `yaml:"maxCalls"`
	Window   field `yaml:"windowMs"`
}

type oauthShape struct {
	ClientID     field `yaml:"clientId"`
	ClientSecret field `yaml:"clientSecret"`
	Scopes       field `yaml:"scopes"`
	Grants       field `yaml:"grants"`
}

type credentialShape struct {
	Label  field `yaml:"label"`
	Header field `yaml:"header"`
	Scheme field `yaml:"scheme"`
	Per    field `yaml:"per"`
}

type connectorCatalogShape struct {
	Pin field `yaml:"pin"`
}
