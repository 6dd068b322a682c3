package validate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/connecta-dev/connecta/test/testkit"
)

// Bounds of the validator's cost target: no schema of at most MaxSchemaBytes
// with arguments of at most maxTargetArgs bytes costs more than 50 ms of CPU
// to compile and evaluate. BenchmarkPathological measures it; the tests
// below assert that the budget, not the clock, cut in.
const maxTargetArgs = 258_048

type pathological struct {
	name   string
	schema json.RawMessage
	args   json.RawMessage
	// want is the reason the check must pass through with; ReasonNone means
	// it must be evaluated (and Findings says whether it found anything).
	want     Reason
	findings bool
}

func repeatJoin(n int, f func(i int) string, sep string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, sep)
}

func stringArgs(n int) json.RawMessage {
	return json.RawMessage(`{"s":"` + strings.Repeat("a", n) + `"}`)
}

// pathologicalCases are the measured cases (seconds of CPU each
// before cost was charged), and their neighbours.
func pathologicalCases() []pathological {
	stars := func(n int) string { return strings.Repeat("(a*)", n) }
	alternation := "^(" + repeatJoin(5000, func(i int) string { return fmt.Sprintf("w%d", i) }, "|") + ")$"
	enum := "[" + repeatJoin(20000, func(i int) string { return fmt.Sprint(i * 7) }, ",") + "]"
	numbers := "[" + repeatJoin(8000, func(i int) string { return fmt.Sprint(i) }, ",") + "]"
	props := repeatJoin(20000, func(i int) string { return fmt.Sprintf(`"p%d":0`, i) }, ",")
	chain := func(n int, last string) string {
		return repeatJoin(n, func(i int) string {
			return fmt.Sprintf(`"d%d":{"type":"object","$ref":"#/$defs/d%d"}`, i, i+1)
		}, ",") + fmt.Sprintf(`,"d%d":%s`, n, last)
	}
	return []pathological{
		{name: "1000 (a*) patterns, 100,000 chars",
			schema: json.RawMessage(`{"properties":{"s":{"allOf":[` + repeatJoin(1000, func(int) string { return `{"pattern":"(a*)"}` }, ",") + `]}}}`),
			args:   stringArgs(100_000), want: ReasonBudget},
		{name: "one pattern of 1000 (a*), 100,000 chars",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"` + stars(1000) + `"}}}`),
			args:   stringArgs(100_000), want: ReasonBudget},
		{name: "8 KB pattern of (a*), 100,000 chars",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"` + stars(2000) + `"}}}`),
			args:   stringArgs(100_000), want: ReasonBudget},
		{name: "1,000 short patterns of 1,000 instructions each",
			schema: json.RawMessage(`{"properties":{"s":{"allOf":[` + repeatJoin(1000, func(i int) string { return fmt.Sprintf(`{"pattern":"[a-z]{1000}%d"}`, i) }, ",") + `]}}}`),
			args:   json.RawMessage(`{"s":"x"}`), want: ReasonBudget},
		{name: "35 KB alternation, 100,000 chars",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"` + alternation + `"}}}`),
			args:   stringArgs(100_000), want: ReasonBudget},
		{name: "35 KB alternation, short string",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"` + alternation + `"}}}`),
			args:   json.RawMessage(`{"s":"w4999"}`), want: ReasonNone},
		{name: "small pattern, 258,048-byte string",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"^[a-z]+$"}}}`),
			args:   stringArgs(maxTargetArgs - 10), want: ReasonNone},
		{name: "enum of 20,000 numbers referenced 400 times, 40 KB item",
			schema: json.RawMessage(`{"$defs":{"e":{"enum":` + enum + `}},"properties":{"a":{"items":{"allOf":[` +
				repeatJoin(400, func(int) string { return `{"$ref":"#/$defs/e"}` }, ",") + `]}}}}`),
			args: json.RawMessage(`{"a":` + numbers + `}`), want: ReasonBudget},
		{name: "enum of 20,000 numbers referenced 400 times, 400 properties",
			schema: json.RawMessage(`{"$defs":{"e":{"enum":` + enum + `}},"properties":{` +
				repeatJoin(400, func(i int) string { return fmt.Sprintf(`"p%d":{"$ref":"#/$defs/e"}`, i) }, ",") + `}}`),
			args: json.RawMessage(`{` + repeatJoin(400, func(i int) string { return fmt.Sprintf(`"p%d":[%s]`, i, numbers[1:100]) }, ",") + `}`),
			want: ReasonNone, findings: true},
		{name: "2,000-long $ref chain over 20,000 properties",
			schema: json.RawMessage(`{"$ref":"#/$defs/d0","$defs":{` + chain(2000, `{"additionalProperties":{"type":"integer"}}`) + `}}`),
			args:   json.RawMessage(`{` + props + `}`), want: ReasonNone},
		{name: "2,000-long $ref chain over 20,000 properties, unevaluatedProperties",
			schema: json.RawMessage(`{"unevaluatedProperties":false,"$ref":"#/$defs/d0","$defs":{` +
				chain(2000, `{"properties":{`+repeatJoin(20000, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }, ",")+`}}`) + `}}`),
			args: json.RawMessage(`{` + props + `}`), want: ReasonBudget},
		{name: "2,000-long chain, each level its own properties",
			schema: json.RawMessage(`{"$ref":"#/$defs/d0","$defs":{` + repeatJoin(2000, func(i int) string {
				return fmt.Sprintf(`"d%d":{"additionalProperties":true,"$ref":"#/$defs/d%d"}`, i, i+1)
			}, ",") + `,"d2000":true}}`),
			args: json.RawMessage(`{` + props + `}`), want: ReasonBudget},
		{name: "multipleOf and integer over 24,000 numbers",
			schema: json.RawMessage(`{"properties":{"a":{"items":{"type":"integer","multipleOf":0.0001,"minimum":-1e300,"maximum":1e300}}}}`),
			args:   json.RawMessage(`{"a":[` + repeatJoin(24000, func(i int) string { return fmt.Sprintf("%d.5e-3", i) }, ",") + `]}`), want: ReasonBudget},
		{name: "1,000 patternProperties over 20,000 properties",
			schema: json.RawMessage(`{"patternProperties":{` + repeatJoin(1000, func(i int) string { return fmt.Sprintf(`"^q%d$":{}`, i) }, ",") + `}}`),
			args:   json.RawMessage(`{` + props + `}`), want: ReasonBudget},
		{name: "anyOf findings along a 1,000-deep path",
			schema: json.RawMessage(`{"$defs":{"n":{"anyOf":[{"type":"string"},{"type":"array","items":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`),
			args:   json.RawMessage(strings.Repeat("[", 1000) + "1" + strings.Repeat("]", 1000)), want: ReasonNone, findings: true},
		{name: "uniqueItems over 1,200 items of 200 bytes",
			schema: json.RawMessage(`{"properties":{"a":{"uniqueItems":true}}}`),
			args:   json.RawMessage(`{"a":[` + repeatJoin(1200, func(i int) string { return fmt.Sprintf(`"%0200d"`, i) }, ",") + `]}`), want: ReasonNone},
		{name: "1 MiB of properties",
			schema: json.RawMessage(`{"properties":{` + repeatJoin(37000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) }, ",") + `}}`),
			args:   json.RawMessage(`{"p1":"x"}`), want: ReasonBudget},
		{name: "800 KB of properties",
			schema: json.RawMessage(`{"properties":{` + repeatJoin(29000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) }, ",") + `}}`),
			args:   json.RawMessage(`{"p1":"x"}`), want: ReasonBudget},
		{name: "5,000 properties",
			schema: json.RawMessage(`{"properties":{` + repeatJoin(5000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) }, ",") + `}}`),
			args:   json.RawMessage(`{"p1":"x"}`), want: ReasonNone},
		{name: "1 MiB pattern",
			schema: json.RawMessage(`{"properties":{"s":{"pattern":"` + strings.Repeat("ab", MaxSchemaBytes/2)[:MaxSchemaBytes-100] + `"}}}`),
			args:   json.RawMessage(`{"s":"x"}`), want: ReasonBudget},
		{name: "1 MiB enum",
			schema: json.RawMessage(`{"enum":[` + repeatJoin(100_000, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) }, ",") + `]}`),
			args:   json.RawMessage(`"v99999"`), want: ReasonBudget},
		{name: "100 KiB enum",
			schema: json.RawMessage(`{"enum":[` + repeatJoin(10_000, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) }, ",") + `]}`),
			args:   json.RawMessage(`"v09999"`), want: ReasonNone},
	}
}

// Each pathological case is cut by the budget (or evaluated within it):
// asserted by reason, never by time.
func TestBudget_PathologicalCasesAreCutByCost(t *testing.T) {
	for _, tc := range pathologicalCases() {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.schema) > MaxSchemaBytes || len(tc.args) > maxTargetArgs {
				t.Fatalf("case outside the target: schema %d, args %d bytes", len(tc.schema), len(tc.args))
			}
			v := New(Options{})
			r := v.Evaluate(tc.schema, tc.args)
			if r.Passthrough != tc.want {
				t.Fatalf("pass-through %q, want %q (findings %v)", r.Passthrough, tc.want, r.Findings)
			}
			if tc.want == ReasonNone && (r.Findings != nil) != tc.findings {
				t.Fatalf("findings %v, want some: %v", r.Findings, tc.findings)
			}
			if tc.want != ReasonNone && v.Passthroughs(tc.want) != 1 {
				t.Fatalf("pass-through not counted: %d", v.Passthroughs(tc.want))
			}
		})
	}
}

// BenchmarkPathological is compile + evaluate of each case, uncached:
// go test -run '^$' -bench Pathological ./internal/gateway/validate/
func BenchmarkPathological(b *testing.B) {
	for _, tc := range pathologicalCases() {
		b.Run(strings.NewReplacer(" ", "_", ",", "").Replace(tc.name), func(b *testing.B) {
			before := testkit.ProcessCPU()
			for b.Loop() {
				v := New(Options{})
				_ = v.Evaluate(tc.schema, tc.args)
			}
			reportCPU(b, before)
		})
	}
}

// reportCPU reports the process CPU time per op since before: CPU, not wall
// time, because the machine may be shared.
func reportCPU(b *testing.B, before time.Duration) {
	b.ReportMetric(float64(testkit.ProcessCPU()-before)/float64(b.N)/1e6, "cpu-ms/op")
}

// Patterns mean what ECMA-262 says, where RE2 spells it differently: \s
// includes Unicode white space, the dot excludes every line terminator.
func TestPattern_ECMA262Semantics(t *testing.T) {
	v := New(Options{})
	for _, tc := range []struct {
		pattern, value string
		match          bool
	}{
		{`^\s$`, "\u00a0", true}, {`^\S$`, "\u00a0", false}, {`^\S$`, "a", true},
		{`^[\s]$`, "\u2028", true}, {`^.$`, "\u2028", false}, {`^.$`, "é", true},
		{`^\cJ$`, "\n", true}, {`^\u00e9$`, "é", true}, {`^\ud83d\ude00$`, "😀", true}, {`^\u{1F600}$`, "😀", true},
		{`^[^]$`, "\n", true}, {`[]`, "a", false}, {`^\d+$`, "١٢", false},
	} {
		schema, _ := json.Marshal(map[string]any{"pattern": tc.pattern})
		args, _ := json.Marshal(tc.value)
		r := v.Evaluate(schema, args)
		if r.Passthrough != ReasonNone || (r.Findings == nil) != tc.match {
			t.Errorf("%s on %q: %+v, want match %v", tc.pattern, tc.value, r, tc.match)
		}
	}
	for _, p := range []string{`[\S]`, `\ud83d`, `(?=a)`, `(a)\1`} {
		schema, _ := json.Marshal(map[string]any{"pattern": p})
		if r := v.Evaluate(schema, json.RawMessage(`"a"`)); r.Passthrough != ReasonUnsupported {
			t.Errorf("%s: %+v, want unsupported", p, r)
		}
	}
}
