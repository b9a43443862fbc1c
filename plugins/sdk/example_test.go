package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// greeter is a whole adapter: one unary tool that greets whom its
// arguments name.
type greeter struct{}

func (greeter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "greeter", Version: "0.1.0", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (greeter) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil || args.Name == "" {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: "name: required, a string"}
	}
	out, err := json.Marshal(map[string]string{"greeting": "Hello, " + args.Name})
	return &sdk.Result{Structured: out}, err
}

// An adapter's main is Serve alone, sdk.Serve(greeter{}): the gateway
// launches the executable and Serve answers it until the gateway ends it.
// Here the adapter is served in this process instead (WithDebug, as
// package adaptertest serves adapters for their tests), and a host's
// client attaches to it as the gateway does to an adapter started by hand
// (WithManagedDebug).
func ExampleServe() {
	ctx, stop := context.WithCancel(context.Background())
	reattach := make(chan sdk.ReattachConfig, 1)
	closed := make(chan struct{})
	defer func() {
		stop() // Serve returns
		<-closed
	}()
	go func() {
		if err := sdk.Serve(greeter{}, sdk.WithDebug(ctx, reattach, closed), sdk.WithLogger(hclog.NewNullLogger())); err != nil {
			fmt.Println(err)
		}
	}()
	rc := <-reattach

	host, err := client.Start(client.Config{Reattach: &rc})
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := host.Describe(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Name, info.Version, info.Modes)
	res, err := host.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Name: "greet", Config: json.RawMessage(`{}`)},
		Arguments: json.RawMessage(`{"name": "Ada"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Structured))
	// Upstream failures come back typed.
	_, err = host.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Name: "greet", Config: json.RawMessage(`{}`)}})
	if ue := (*sdk.UpstreamError)(nil); errors.As(err, &ue) {
		fmt.Println(ue.Kind, ue.Message)
	}

	host.Kill() // an attached adapter keeps running: the deferred stop ends it
	// Output:
	// greeter 0.1.0 [unary]
	// {"greeting":"Hello, Ada"}
	// invalid_argument name: required, a string
}
