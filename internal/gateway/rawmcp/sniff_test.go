package rawmcp

import (
	"io"
	"strings"
	"testing"
)

func TestRawSniffer_SSEAndJSON(t *testing.T) {
	cases := []struct {
		name, body string
		sse        bool
		want       string
	}{
		{"json", `{"jsonrpc":"2.0","id":3,"result":{"b":1,"a":2}}`, false, `{"b":1,"a":2}`},
		{"json other id", `{"jsonrpc":"2.0","id":4,"result":{}}`, false, ""},
		{"sse", "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"z\":[1]}}\r\n\r\n", true, `{"z":[1]}`},
		{"sse without final blank line", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":7}", true, `7`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slot := &Slot{}
			s := &rawSniffer{rc: io.NopCloser(&oneByteReader{r: strings.NewReader(tc.body)}), slot: slot, id: float64(3), sse: tc.sse}
			b, err := io.ReadAll(s)
			if err != nil || string(b) != tc.body {
				t.Fatalf("pass-through changed the body: %v", err)
			}
			got, _ := slot.Result()
			if string(got) != tc.want {
				t.Fatalf("captured %q, want %q", got, tc.want)
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

func FuzzRawSniffer(f *testing.F) {
	f.Add([]byte("data: {\"id\":1,\"result\":{}}\n\n"), true)
	f.Add([]byte(`{"id":1,"result":[1]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, sse bool) {
		s := &rawSniffer{rc: io.NopCloser(&oneByteReader{r: strings.NewReader(string(body))}), slot: &Slot{}, id: float64(1), sse: sse}
		b, _ := io.ReadAll(s)
		if string(b) != string(body) {
			t.Fatal("body changed")
		}
	})
}
