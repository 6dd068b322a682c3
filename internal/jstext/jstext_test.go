package jstext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLen_CountsUTF16CodeUnits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 1},
		{"…", 1},
		{"😀", 2},
		{"a😀b", 4},
		{"\xff", 1}, // an invalid byte counts as one U+FFFD
	} {
		if got := Len(tc.in); got != tc.want {
			t.Errorf("Len(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPrefix_NeverSplitsASurrogatePair(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"a😀b", 1, "a"},
		{"a😀b", 2, "a"}, // half a pair is dropped, not split
		{"a😀b", 3, "a😀"},
		{"a😀b", 4, "a😀b"},
	} {
		if got := Prefix(tc.in, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestClamp_CutsOnACodePointAndMarks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never half of it
		{"😀x", 3, "…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		{"a\xffb", 5, "a\ufffdb"}, // invalid bytes become U+FFFD
		{"a\xffb", 3, "a…"},
	} {
		if got := Clamp(tc.in, tc.n); got != tc.want {
			t.Errorf("Clamp(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// The identity clamp of docs/DECISIONS.md: the first N bytes on a character
// boundary, then the marker — N bytes of text kept, not N bytes in all.
func TestClamp_IdentityKeepsNBytesThenMarker(t *testing.T) {
	for _, n := range []int{MaxIdentityBytes, MaxAddressBytes, MaxEchoBytes} {
		long := strings.Repeat("a", n+1)
		if got := Clamp(long, n); got != long[:n]+Marker {
			t.Errorf("Clamp(%d×a, %d) = %d bytes, want %d a's and the marker", n+1, n, len(got), n)
		}
		if got := Clamp(long[:n], n); got != long[:n] {
			t.Errorf("Clamp of exactly %d bytes changed it", n)
		}
	}
}

func TestClampUnits_AndClampPoints(t *testing.T) {
	if got, cut := ClampUnits("a😀b", 3); got != "a…" || !cut {
		t.Errorf("ClampUnits = %q %v", got, cut)
	}
	if got, cut := ClampUnits("a😀", 3); got != "a😀" || cut {
		t.Errorf("ClampUnits = %q %v", got, cut)
	}
	if got, cut := ClampPoints("a😀bc", 3); got != "a😀…" || !cut {
		t.Errorf("ClampPoints = %q %v", got, cut)
	}
	if got, cut := ClampPoints("a😀b", 3); got != "a😀b" || cut {
		t.Errorf("ClampPoints = %q %v", got, cut)
	}
}

func TestAppendQuote_WritesWhatJSONStringifyWrites(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x1f\x7f", `"\u0000\u001f` + "\x7f\""},
		{"<&>", `"<&>"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"é😀", `"é😀"`},
		{"a\xffb", "\"a\ufffdb\""},
		{"\xed\xa0\x80|\xed\xbf\xbf", `"\ud800|\udfff"`}, // WTF-8 lone surrogates
	} {
		if got := string(AppendQuote([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("AppendQuote(%q) = %s, want x%s", tc.in, got, tc.want)
		}
	}
}

// dropSurrogates replaces each WTF-8 lone surrogate with U+FFFD.
func dropSurrogates(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if _, ok := wtf8Surrogate(s[i:]); ok {
			b.WriteString("\ufffd")
			i += 3
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// Marshal and Object follow JSON.stringify: U+2028/U+2029 raw (encoding/json
// escapes them, even inside raw JSON it compacts), keys in the order given.
func TestMarshal_JSONStringifyRules(t *testing.T) {
	got, err := Marshal(Object{
		{Key: "z", Value: "a\u2028b\u2029c"},
		{Key: "a", Value: []string{"\\u2028 stays", "<&>"}},
		{Key: "raw", Value: json.RawMessage(`{"k":"\u2028"}`)},
		{Key: "nested", Value: map[string]any{"o": Object{{Key: "y", Value: 1}, {Key: "x", Value: "\u2029"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"z\":\"a\u2028b\u2029c\",\"a\":[\"\\\\u2028 stays\",\"<&>\"],\"raw\":{\"k\":\"\u2028\"},\"nested\":{\"o\":{\"y\":1,\"x\":\"\u2029\"}}}"
	if string(got) != want {
		t.Fatalf("Marshal =\n %s\nwant\n %s", got, want)
	}
}

func TestMarshal_NoHTMLEscapingNoNewline(t *testing.T) {
	got, err := Marshal(map[string]any{"a": "<b>&", "n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"a":"<b>&","n":1}` {
		t.Fatalf("Marshal = %s", got)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("Marshal of a func: no error")
	}
}

// FuzzAppendQuote: the quoted text decodes back to s (invalid bytes as
// U+FFFD) and agrees with Prefix and Len.
func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\u2028<&>", "😀\xff", "\x00\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(AppendQuote(nil, s), &back); err != nil {
			t.Fatalf("AppendQuote(%q) is not JSON: %v", s, err)
		}
		// Each invalid byte is one U+FFFD, and so is a WTF-8 lone surrogate
		// once encoding/json decodes its \uXXXX.
		if want := string([]rune(dropSurrogates(s))); back != want {
			t.Fatalf("round trip %q, want %q", back, want)
		}
		n := Len(s)
		if Prefix(s, n) != s || Len(Prefix(s, n/2)) > n/2 {
			t.Fatalf("Prefix disagrees with Len on %q", s)
		}
		if c := Clamp(s, len(s)/2); !utf8.ValidString(c) || len(c) > len(s)/2+len(Marker) {
			t.Fatalf("Clamp(%q) = %q: invalid or too long", s, c)
		}
	})
}

func FuzzClamp(f *testing.F) {
	f.Add("tracker", 128)
	f.Add(strings.Repeat("😀", 40), 128)
	f.Add("\xff\xfe\xfd", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Clamp(s, n)
		if len(got) > n+len(Marker) || !utf8.ValidString(got) {
			t.Fatalf("Clamp(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && len(s) <= n && got != s {
			t.Fatalf("short valid value changed")
		}
	})
}

func TestUnescapeLineSeparators_EscapedBackslashKept(t *testing.T) {
	in := []byte(`{"a":"x\u2028y\\u2029z\u2029"}`)
	if got := string(unescapeLineSeparators(in)); got != "{\"a\":\"x\u2028y\\\\u2029z\u2029\"}" {
		t.Fatalf("%s", got)
	}
	if got, _ := Marshal("a\u2028<b>"); string(got) != "\"a\u2028<b>\"" {
		t.Fatalf("Marshal: %s", got)
	}
}

func TestFromWTF8_ALoneSurrogateIsOneReplacementCharacter(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                    "plain",
		"a\xed\xa0\x80b":           "a\ufffdb",     // lone high surrogate U+D800
		"\xed\xbf\xbf":             "\ufffd",       // lone low surrogate U+DFFF
		"\xed\xa0\xbd\xed\xb8\x80": "\ufffd\ufffd", // a pair encoded CESU-8-wise: two lone halves
		"x\xffy":                   "x\ufffdy",     // other invalid bytes: one each
		"\xed\xa0":                 "\ufffd\ufffd", // truncated
		"é😀":                       "é😀",
	} {
		if got := FromWTF8(in); got != want {
			t.Errorf("FromWTF8(%q) = %q, want %q", in, got, want)
		}
		if got := FromWTF8(in); !utf8.ValidString(got) {
			t.Errorf("FromWTF8(%q) is not valid UTF-8", in)
		}
	}
}

func FuzzFromWTF8(f *testing.F) {
	f.Add("a\xed\xa0\x80b")
	f.Fuzz(func(t *testing.T, s string) {
		got := FromWTF8(s)
		if !utf8.ValidString(got) || (utf8.ValidString(s) && got != s) {
			t.Fatalf("FromWTF8(%q) = %q", s, got)
		}
	})
}
