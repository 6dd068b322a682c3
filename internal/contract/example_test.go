package contract_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/config"
	"github.com/connecta-dev/connecta/internal/contract"
	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/discovery"
	"github.com/connecta-dev/connecta/internal/supervisor"
)

// execute_code over an in-memory MCP transport: the contract's tool on a
// go-sdk server, a program that searches the catalog and calls a tool, and
// the one JSON object the model reads back.
func Example() {
	ctx := context.Background()
	downstream := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "count", Description: "Count the notes.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"notes":3}`}}}, nil
			})
		return s
	}
	g, err := gateway.New(ctx, gateway.Options{Connectors: []gateway.ConnectorSpec{{ID: "notes", InProcess: downstream}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	disc, _ := discovery.New(discovery.Options{Catalog: g})
	pool, err := supervisor.New(ctx, supervisor.Options{ // children re-execute this test binary
		Slots: 1, Spares: 1, QueueTimeout: config.DefaultExecutorQueueTimeout, SpareIdle: config.DefaultExecutorSpareIdle,
		Limits: supervisor.Limits{
			Wall: config.DefaultExecutorTimeout, CPUTime: config.DefaultExecutorCPUTime,
			HeapBytes: config.DefaultExecutorMemoryLimitBytes, StackBytes: config.DefaultExecutorMaxStackSizeBytes,
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	svc, err := contract.New(contract.Options{Gateway: g, Discovery: disc, Pool: pool,
		MaxHostCalls: config.DefaultExecuteMaxHostCalls, HostCallTimeout: config.DefaultExecuteHostCallTimeout,
		MaxEmittedBytes: config.DefaultExecuteMaxEmittedBytes, MaxEmittedBlocks: config.DefaultExecuteMaxEmittedBlocks,
		MaxCodeBytes: config.ExecuteMaxCodeBytes,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	server := mcp.NewServer(&mcp.Implementation{Name: "connecta", Version: "example"}, nil)
	server.AddTool(svc.Tool(), svc.Handle)
	serverEnd, clientEnd := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, serverEnd, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "model", Version: "1"}, nil).Connect(ctx, clientEnd, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: contract.ToolName, Arguments: map[string]any{"code": `async () => {
		const page = await connecta.search({ query: "count notes" });
		const { notes } = await connecta.call(page.tools[0].address, {});
		return { address: page.tools[0].address, notes };
	}`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: {"result":{"address":"notes.count","notes":3}}
}
