package jcs

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// TestCanonical_RFC8785Examples: the examples of RFC 8785 §3.2.2 and §3.2.3.
func TestCanonical_RFC8785Examples(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			`{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign",` + "\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{` [ 1 , { "b" : 2 , "a" : [ ] } ] `, `[1,{"a":[],"b":2}]`},
		{`-0`, `0`},
		{`1e21`, `1e+21`},
		{`123456789012345678901`, `123456789012345680000`},
		{`0.000001`, `0.000001`},
		{`0.0000001`, `1e-7`},
		{`"\u2028"`, "\"\u2028\""},
	} {
		got, err := Canonical([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("Canonical(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}

// TestCanonical_NumberFormsOfES: ECMAScript's Number::toString edge forms.
func TestCanonical_NumberFormsOfES(t *testing.T) {
	for f, want := range map[float64]string{
		5e-324: "5e-324", math.MaxFloat64: "1.7976931348623157e+308", 1e20: "100000000000000000000",
		0.1: "0.1", 100: "100", -1.5: "-1.5", 1.2345e-5: "0.000012345",
	} {
		var b bytes.Buffer
		if err := writeNumber(&b, f); err != nil || b.String() != want {
			t.Errorf("%v: got %q (%v), want %q", f, b.String(), err, want)
		}
	}
}

func TestCanonical_RefusesBadInput(t *testing.T) {
	deep := bytes.Repeat([]byte("["), MaxDepth+2)
	for _, in := range []string{``, `{`, `[1,]`, `1 2`, `1e400`, string(deep)} {
		if _, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%.20q) accepted", in)
		}
	}
}

// FuzzCanonical: whatever parses canonicalizes to valid JSON that is its
// own canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.5,"x",null]}`, `"\u0001"`, `1e-7`, `{"😀":1,"\ufb33":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, in)
		}
		again, err := Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q → %q (%v)", out, again, err)
		}
	})
}
