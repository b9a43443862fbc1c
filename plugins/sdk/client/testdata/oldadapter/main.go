// Command oldadapter is an adapter written against the SDK of commit
// ea53ec7 (frozen in sdk/), using every call of the protocol.
package main

import (
	"context"
	"encoding/json"

	"crank.test/oldadapter/sdk"
)

type adapter struct{}

func (adapter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "old", Version: "0.9", Protocols: []string{"http"},
		Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, ConfigSchema: json.RawMessage(`{"type":"object"}`)}, nil
}

func (adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	if string(op.Config) == `{}` {
		return []sdk.Diagnostic{sdk.Errorf("url", "is required")}
	}
	return nil
}

func (adapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	return []sdk.Tool{{Name: op.Name + "_feed", Description: "A feed.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: sdk.Annotations{ReadOnly: sdk.Bool(true)}, Mode: sdk.ModeWindow}},
		[]sdk.Diagnostic{{Severity: sdk.SeverityWarning, Field: "paths", Message: "skipped one"}}
}

func (adapter) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	if string(req.Arguments) == `{"fail":true}` {
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Upstream: "GET http://up/x", Status: "503",
			Message: "busy", Body: "try later", Detail: json.RawMessage(`{"retry_after":"7"}`), Retryable: true}
	}
	return &sdk.Result{Structured: req.Arguments, Text: req.Operation.Name + " " + req.Context.RequestID, ContentType: "application/json"}, nil
}

func (adapter) Stream(_ context.Context, req *sdk.Request, send sdk.StreamSender) error {
	for _, c := range []string{"1", "2"} {
		if err := send.Item(sdk.Item{Data: json.RawMessage(`{"n":` + c + `}`), ID: "id" + c, Cursor: req.Cursor + c}); err != nil {
			return err
		}
	}
	if err := send.Gap("reconnected"); err != nil {
		return err
	}
	if string(req.Arguments) == `{"fail":true}` {
		return &sdk.UpstreamError{Kind: sdk.KindTransport, Message: "connection reset", Retryable: true}
	}
	return nil
}

func main() { sdk.Serve(adapter{}) }
