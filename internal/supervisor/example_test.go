package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/connecta-dev/connecta/internal/supervisor"
)

// greeter is the Host: it serves the guest's `greet.hello(name)`.
type greeter struct{}

func (greeter) Call(_ context.Context, provider, function string, args json.RawMessage) (json.RawMessage, error) {
	var a []string
	if err := json.Unmarshal(args, &a); err != nil || len(a) != 1 {
		return nil, fmt.Errorf("%s.%s takes one name", provider, function)
	}
	return json.Marshal("hello, " + a[0])
}
func (greeter) Log(level, text string) {}

// A pool runs each program in its own sandbox child (this test binary,
// re-executed: TestMain serves the child) and routes its host calls.
func ExamplePool() {
	ctx := context.Background()
	pool, err := supervisor.New(ctx, supervisor.Options{
		Slots: 1, Spares: 1, QueueTimeout: 5 * time.Second, SpareIdle: 30 * time.Second,
		Limits: supervisor.Limits{Wall: 30 * time.Second, CPUTime: 250 * time.Millisecond, HeapBytes: 64 << 20, StackBytes: 1 << 20},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	lease, err := pool.Acquire(ctx) // L7 admission
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := lease.Run(ctx, supervisor.Job{
		Code:      `async () => await greet.hello("sandbox")`,
		Providers: []supervisor.Provider{{Name: "greet", Functions: []string{"hello"}}},
	}, greeter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Value))
	// Output: "hello, sandbox"
}
