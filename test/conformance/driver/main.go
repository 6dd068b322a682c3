// Command driver is connecta's client under the MCP conformance suite's
// client scenarios (`conformance client --command "driver"`, which appends
// the scenario server's URL): the gateway, as connecta builds it, with that
// server as an HTTP connector — the catalog load (server/discover, then
// initialize, then tools/list), then one call of the first tool. The OAuth
// scenarios need a browser and are not driven here.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/connecta-dev/connecta/gateway"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: driver URL")
		os.Exit(2)
	}
	if err := run(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

func run(url, scenario string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := gateway.New(ctx, gateway.Options{
		Connectors: []gateway.ConnectorSpec{{ID: "suite", URL: url}},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Version:    "conformance",
	})
	if err != nil {
		return err
	}
	defer g.Close()
	tools, err := g.Tools(ctx, "suite")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	fmt.Printf("%d tools\n", len(tools))
	if scenario == "initialize" || len(tools) == 0 {
		return nil
	}
	// One call of the scenario's first tool (tools_call: add_numbers;
	// sse-retry: the tool whose stream the server closes mid-call).
	args := json.RawMessage(`{}`)
	if tools[0].Name == "add_numbers" {
		args = json.RawMessage(`{"a":5,"b":3}`)
	}
	scope := g.NewScope()
	defer scope.Close()
	res, gerr := g.Invoke(ctx, scope, gateway.CallRequest{Address: tools[0].Address(), Args: args,
		Front: gateway.FrontDoorTopLevel, Source: "call_tool", AllowWrite: true})
	if gerr != nil {
		return fmt.Errorf("call: %s: %s", gerr.Code, gerr.Message)
	}
	fmt.Printf("%s\n", res.Value)
	return nil
}
