package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Telemetry is `telemetry`: OpenTelemetry traces over OTLP/HTTP. An absent
// otlp.endpoint switches tracing off.
type Telemetry struct {
	Endpoint string   // otlp.endpoint: the collector's OTLP/HTTP base URL ("" = off)
	Headers  []Header // otlp.headers, resolved (secret references allowed)
	// SampleRatio is the share of new traces kept (parent-based: an
	// incoming sampled trace is always kept); 1 when absent.
	SampleRatio float64
	ServiceName string // service.name; "connecta" when absent
}

// Default values of the telemetry block.
const (
	DefaultTraceSampleRatio = 1.0
	DefaultTraceServiceName = "connecta"
)

func (d *decoder) telemetry(fs *telemetryShape, c *Config) {
	t := &c.Telemetry
	if o, ok := fs.OTLP.in(d); ok {
		if e := o.Endpoint; e.given() {
			t.Endpoint = d.optionalHTTPURL(e.val, e.path)
		}
		if e := o.Headers; e.given() {
			d.telemetryHeaders(e, t)
		}
	}
	if e := fs.SampleRatio; e.given() {
		if v, ok := d.ratio(e.val, e.path); ok {
			t.SampleRatio = v
		}
	}
	if e := fs.ServiceName; e.given() {
		if s, ok := d.str(e.val, e.path); ok {
			switch {
			case strings.TrimSpace(s) == "":
				d.fail(e.val, e.path, "must not be empty")
			case len(s) > 255 || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
				d.fail(e.val, e.path, "must be at most 255 bytes without control characters")
			default:
				t.ServiceName = s
			}
		}
	}
}

// ratio decodes a number in [0, 1].
func (d *decoder) ratio(n *yaml.Node, field string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.fail(n, field, "expected a number between 0 and 1, got %s", kindName(n))
		return 0, false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || v < 0 || v > 1 || v != v {
		d.fail(n, field, "%s is not a number between 0 and 1", clip(n.Value))
		return 0, false
	}
	return v, true
}

// telemetryHeaders decodes telemetry.otlp.headers: header names to values,
// each value a template that may hold secret references; an unresolvable
// reference refuses the configuration (the collector's credential is the
// operator's own, not a connector's that may arrive later).
func (d *decoder) telemetryHeaders(e field, t *Telemetry) {
	d.headerTemplates(e, nil, func(name, field string, v *yaml.Node, segs []segment) {
		value, missing := d.r.resolve(segs, d.baseDir)
		for _, m := range missing {
			d.fail(v, field, "cannot resolve %s: %s", m.raw, m.reason)
		}
		switch {
		case missing != nil:
		case hasControl(value):
			d.fail(v, field, "resolves to a value with control characters")
		default:
			t.Headers = append(t.Headers, Header{Name: name, Value: NewSecret(value)})
		}
	})
}
