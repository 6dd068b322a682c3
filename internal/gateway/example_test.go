package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connecta-dev/connecta/internal/gateway"
	"github.com/connecta-dev/connecta/internal/gateway/validate"
)

// weather is a downstream MCP server, in process, with one read-only tool.
func weather() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{
		Name: "today", Description: "Today's forecast.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ City string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"city":"` + in.City + `","sky":"clear"}`}}}, nil
	})
	return s
}

// One call through the gateway: the address resolves on the connector's
// catalog, the read-only gate and the schema check pass, the result comes
// back unwrapped (S5). A bad argument never reaches the downstream (E8).
func ExampleGateway_Invoke() {
	ctx := context.Background()
	g, err := gateway.New(ctx, gateway.Options{
		Connectors: []gateway.ConnectorSpec{{ID: "weather", InProcess: weather}},
		Validator:  validate.New(validate.Options{}), // E8 before dispatch
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	scope := g.NewScope() // one request's calls and sessions
	defer scope.Close()

	res, gerr := g.Invoke(ctx, scope, gateway.CallRequest{Address: "weather.today", Args: json.RawMessage(`{"city":"Lyon"}`), Source: "call_tool"})
	if gerr != nil {
		fmt.Println(gerr.Code, gerr.Message)
		return
	}
	fmt.Println(string(res.Value))

	_, gerr = g.Invoke(ctx, scope, gateway.CallRequest{Address: "weather.today", Args: json.RawMessage(`{}`), Source: "call_tool"})
	if gerr != nil {
		fmt.Println(gerr.Code)
	}
	// Output:
	// {"city":"Lyon","sky":"clear"}
	// invalid_args
}
