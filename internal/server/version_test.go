package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/test/testkit"
)

// A 2026-07-28-only downstream and a 2025-06-18-only one both answer
// call_tool and a five-call program through connecta. Once the catalog is
// fresh, the first gets five tools/call for the program and nothing else
// (no initialize ever; its one server/discover came with the catalog), the
// second a session per execution (P4).
func TestVersionNegotiation_CallToolAndProgramsOnBothProtocols(t *testing.T) {
	sharedPool(t)
	modern := testkit.NewVersionedMCP(t, []string{"2026-07-28"}, true)
	old := testkit.NewVersionedMCP(t, []string{"2025-06-18"}, false)
	h := newHarness(t, harnessOptions{code: withCode, extra: []gateway.ConnectorSpec{{ID: "modern", URL: modern.URL}, {ID: "old", URL: old.URL}}})
	cs := h.connect(t, "")
	for _, id := range []string{"modern", "old"} {
		res := call(t, cs, "call_tool", `{"address":"`+id+`.echo","args":{"i":-1}}`)
		if res.IsError {
			t.Fatalf("%s call_tool: %s", id, textOf(t, res))
		}
		code := `async () => { let s = 0; for (let i = 0; i < 5; i++) s += (await connecta.call("` + id + `.echo", {i})).i; return s }`
		args, _ := json.Marshal(map[string]string{"code": code})
		if res := call(t, cs, "execute_code", string(args)); res.IsError || textOf(t, res) != `{"result":10}` {
			t.Fatalf("%s program: %s", id, textOf(t, res))
		}
	}
	if got := modern.Take(); got["initialize"] != 0 || got["server/discover"] != 1 || got["tools/call"] != 6 {
		t.Fatalf("2026-07-28 downstream got %v; want one server/discover, six tools/call, no initialize", got)
	}
	if got := old.Take(); got["initialize"] != 3 || got["tools/call"] != 6 {
		t.Fatalf("2025-06-18 downstream got %v; want three initialize (catalog, call_tool, program) and six tools/call", got)
	}
	code := `async () => { for (let i = 0; i < 5; i++) await connecta.call("modern.echo", {i}); return 5 }`
	args, _ := json.Marshal(map[string]string{"code": code})
	if res := call(t, cs, "execute_code", string(args)); res.IsError {
		t.Fatalf("program: %s", textOf(t, res))
	}
	if got := modern.Take(); fmt.Sprint(got) != "map[tools/call:5]" {
		t.Fatalf("a five-call program with a fresh catalog sent %v; want five tools/call and nothing else", got)
	}
	states := h.gw.ConnectorStates()
	if states["modern"].ProtocolVersion != "2026-07-28" || states["old"].ProtocolVersion != "2025-06-18" {
		t.Fatalf("connectorStates: %+v", states)
	}
}

// connecta declares logging (it sends notifications/message), and a
// tools/call's _meta log level streams over stdio exactly as over HTTP,
// whichever protocol version the client speaks and with no
// logging/setLevel first.
func TestStdio_MetaLogLevelStreamsAndLoggingDeclared(t *testing.T) {
	sharedPool(t)
	h := newHarness(t, harnessOptions{code: withStreamingCode})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			c2sR, c2sW := io.Pipe()
			s2cR, s2cW := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.srv.ServeStdio(ctx, c2sR, s2cW) }()
			defer func() { cancel(); <-done }()
			logs := make(chan string, 16)
			client := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, &mcp.ClientOptions{
				//lint:ignore SA1019 the deprecated logging feature is what program output streams through (see stream.go)
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					logs <- string(r.Params.Level) + ":" + fmt.Sprint(r.Params.Data)
				},
			})
			cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			//lint:ignore SA1019 connecta declares the deprecated logging capability (stream.go)
			if ir := cs.InitializeResult(); ir.ProtocolVersion != version || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
				t.Fatalf("initialize result %+v: want %s with the logging capability", ir, version)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{
				Meta: mcp.Meta{"io.modelcontextprotocol/logLevel": "warning"},
				Name: "execute_code", Arguments: map[string]any{"code": `async () => { console.log("a"); console.warn("b"); console.error("c"); return 1 }`},
			})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			var got []string
			for len(got) < 2 {
				select {
				case m := <-logs:
					got = append(got, m)
				case <-time.After(5 * time.Second):
					t.Fatalf("only %v arrived", got)
				}
			}
			if fmt.Sprint(got) != "[warning:b error:c]" {
				t.Fatalf("messages %v", got)
			}
		})
	}
}
