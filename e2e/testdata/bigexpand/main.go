// Command bigexpand is an adapter whose expansion is as large as its
// config says ({"mib": n}: n tools of a 1 MiB description each), for the
// tests of an expansion over the adapter protocol's message limit.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

type adapter struct{}

func (adapter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "bigexpand", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (adapter) Invoke(context.Context, *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{Structured: json.RawMessage(`{}`)}, nil
}

func (adapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	var cfg struct {
		MiB int `json:"mib"`
	}
	if err := json.Unmarshal(op.Config, &cfg); err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf("", "%v", err)}
	}
	desc := strings.Repeat("x", 1<<20)
	tools := make([]sdk.Tool, cfg.MiB)
	for i := range tools {
		tools[i] = sdk.Tool{Name: fmt.Sprintf("%s_%d", op.Name, i), Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	return tools, nil
}

func main() {
	if err := sdk.Serve(adapter{}); err != nil {
		log.Fatal(err)
	}
}
