package validate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// referenceVerdict validates with santhosh-tekuri/jsonschema (the validator
// this package replaced; tests only, never linked into bin/connecta).
func referenceVerdict(t *testing.T, schema, args string) (valid, ok bool) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
	if err != nil {
		return false, false
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseAll{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("https://connecta.invalid/s.json", doc); err != nil {
		return false, false
	}
	s, err := c.Compile("https://connecta.invalid/s.json")
	if err != nil {
		return false, false
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(args)))
	if err != nil {
		return false, false
	}
	return s.Validate(inst) == nil, true
}

type refuseAll struct{}

func (refuseAll) Load(string) (any, error) { return nil, errUnsupported }

// The evaluator agrees with the reference validator on every verdict where
// both can evaluate the schema.
func TestE8_AgreesWithReferenceValidator(t *testing.T) {
	schemas := []string{
		objSchema,
		`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`,
		`{"type":"array","prefixItems":[{"type":"string"}],"unevaluatedItems":false}`,
		`{"type":"array","contains":{"type":"integer"},"minContains":2,"maxContains":3}`,
		`{"type":"array","uniqueItems":true}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"}],"additionalItems":false}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"],"c":{"required":["d"]}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":1,"exclusiveMinimum":true}`,
		`{"dependentRequired":{"a":["b"]},"dependentSchemas":{"c":{"required":["d"]}}}`,
		`{"if":{"properties":{"k":{"const":"n"}}},"then":{"required":["n"]},"else":{"required":["s"]}}`,
		`{"oneOf":[{"type":"integer"},{"type":"number","minimum":2}]}`,
		`{"not":{"type":"string"}}`,
		`{"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
		`{"type":"object","propertyNames":{"maxLength":3}}`,
		`{"type":"object","minProperties":1,"maxProperties":2}`,
		`{"allOf":[{"properties":{"a":{"type":"integer"}}}],"unevaluatedProperties":false}`,
		`{"anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{}},"required":["b"]}],"unevaluatedProperties":false}`,
		`{"type":"number","multipleOf":0.1}`,
		`{"type":"integer","exclusiveMaximum":10}`,
		`{"enum":[1,"a",{"x":[1,2]},null]}`,
		`{"const":{"a":[1,{"b":true}]}}`,
		`{"type":"string","pattern":"^[a-z]+$","minLength":2}`,
		`{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"},"v":{"type":"integer"}}}},"$ref":"#/$defs/node"}`,
		`{"$defs":{"n":{"$anchor":"num","type":"number"}},"properties":{"a":{"$ref":"#num"}}}`,
		`{"$id":"https://example.invalid/root.json","properties":{"a":{"$ref":"https://example.invalid/root.json#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,
		`{"type":["integer","null"]}`,
	}
	instances := []string{
		`{}`, `[]`, `null`, `1`, `1.0`, `2.5`, `0.3`, `10`, `"ab"`, `"A"`, `"abc"`, `true`,
		`{"name":"abc","count":3}`, `{"name":"abc","count":30,"x":1}`, `{"a":1}`, `{"a":"x"}`, `{"a":1,"b":2}`,
		`{"b":1}`, `{"c":1}`, `{"c":1,"d":2}`, `{"a":1,"c":1,"d":1}`, `{"k":"n"}`, `{"k":"n","n":1}`, `{"s":1}`,
		`{"x-a":1,"y":"s"}`, `{"x-a":"s"}`, `{"y":2}`, `{"long":1}`, `{"a":1,"b":2,"c":3}`,
		`["a"]`, `["a",1]`, `["a",1,2]`, `[1,2]`, `[1,"a",1.0]`, `[1,2,3,4]`, `[{"a":1},{"a":1.0}]`,
		`{"x":[1,2]}`, `{"x":[2,1]}`, `{"a":[1,{"b":true}]}`, `{"next":{"next":{"v":"x"}}}`, `{"next":{"v":1}}`,
	}
	v := New(Options{})
	compared := 0
	for _, s := range schemas {
		if v.compiled(json.RawMessage(s)).root == nil {
			t.Errorf("schema unexpectedly unsupported: %s", s)
			continue
		}
		for _, inst := range instances {
			want, ok := referenceVerdict(t, s, inst)
			if !ok {
				continue
			}
			compared++
			got := v.Check(json.RawMessage(s), json.RawMessage(inst)) == nil
			if got != want {
				t.Errorf("schema %s, instance %s: valid = %v, reference says %v (findings %v)", s, inst, got, want,
					v.Check(json.RawMessage(s), json.RawMessage(inst)))
			}
		}
	}
	if compared < 500 {
		t.Fatalf("only %d verdicts compared", compared)
	}
}
