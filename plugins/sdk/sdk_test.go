package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/sdktest"
)

type unaryOnly struct{}

func (unaryOnly) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "unary", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (unaryOnly) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	var args struct{ Do string }
	_ = json.Unmarshal(req.Arguments, &args)
	switch args.Do {
	case "panic":
		panic("boom")
	case "upstream":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: "418", Message: "teapot", Retryable: true}
	case "bug":
		return nil, errors.New("nil map")
	}
	return &sdk.Result{Structured: json.RawMessage(`{"op":"` + req.Operation.Name + `"}`)}, nil
}

type streaming struct{ unaryOnly }

func (streaming) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	if !strings.Contains(string(op.Config), "url") {
		return []sdk.Diagnostic{sdk.Errorf("url", "is required")}
	}
	return nil
}

func (streaming) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	return []sdk.Tool{{Name: op.Name + "_a", InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: sdk.Annotations{Destructive: sdk.Bool(true)}}},
		[]sdk.Diagnostic{{Severity: sdk.SeverityWarning, Field: "paths./x", Message: "skipped"}}
}

func (streaming) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	for i := range 3 {
		if err := send.Item(sdk.Item{Data: json.RawMessage(`{"n":1}`), Cursor: string(rune('a' + i))}); err != nil {
			return err
		}
	}
	if string(req.Arguments) == `{"fail":true}` {
		return &sdk.UpstreamError{Kind: sdk.KindTransport, Message: "reset"}
	}
	return send.Gap("reconnected")
}

func TestDescribeAdvertisesCapabilities(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		a    sdk.Adapter
		caps string
	}{{unaryOnly{}, ""}, {streaming{}, "validate,expand,stream"}} {
		d, err := sdktest.New(t, c.a).Client.Describe(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(d.GetCapabilities(), ","); got != c.caps {
			t.Errorf("capabilities = %q, want %q", got, c.caps)
		}
	}
}

func TestInvokeOutcomes(t *testing.T) {
	h := sdktest.New(t, unaryOnly{})
	ctx := context.Background()

	res, ue, err := h.Invoke(ctx, sdktest.Call{Operation: "op1"})
	if err != nil || ue != nil || string(res.GetStructuredJson()) != `{"op":"op1"}` {
		t.Fatalf("success: %v %v %v", res, ue, err)
	}
	_, ue, err = h.Invoke(ctx, sdktest.Call{Args: `{"do":"upstream"}`})
	if err != nil || ue.GetStatus() != "418" || !ue.GetRetryable() || ue.GetKind() != sdk.KindUpstreamStatus {
		t.Fatalf("upstream error: %v %v", ue, err)
	}
	_, _, err = h.Invoke(ctx, sdktest.Call{Args: `{"do":"bug"}`})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "nil map") {
		t.Fatalf("adapter bug: %v", err)
	}
	// A panic is one failed call, not a dead adapter.
	_, _, err = h.Invoke(ctx, sdktest.Call{Args: `{"do":"panic"}`})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "adapter panicked: boom") {
		t.Fatalf("panic: %v", err)
	}
	if _, _, err := h.Invoke(ctx, sdktest.Call{}); err != nil {
		t.Fatalf("after panic: %v", err)
	}
}

func TestOptionalRPCs(t *testing.T) {
	ctx := context.Background()
	u := sdktest.New(t, unaryOnly{})
	if _, err := u.Validate(ctx, sdktest.Call{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("validate on a non-validator: %v", err)
	}
	if _, err := u.Stream(ctx, sdktest.Call{}, 0); status.Code(err) != codes.Unimplemented {
		t.Errorf("stream on a non-streamer: %v", err)
	}

	s := sdktest.New(t, streaming{})
	diags, err := s.Validate(ctx, sdktest.Call{Config: map[string]any{}})
	if err != nil || len(diags) != 1 || diags[0].GetField() != "url" || diags[0].GetSeverity() != sdk.SeverityError {
		t.Errorf("validate: %v %v", diags, err)
	}
	x, err := s.Expand(ctx, sdktest.Call{Operation: "pets"})
	if err != nil || len(x.GetTools()) != 1 || x.GetTools()[0].GetName() != "pets_a" ||
		!x.GetTools()[0].GetAnnotations().GetDestructive() || x.GetTools()[0].GetAnnotations().ReadOnly != nil ||
		x.GetDiagnostics()[0].GetSeverity() != sdk.SeverityWarning {
		t.Errorf("expand: %v %v", x, err)
	}
	if _, err := u.Expand(ctx, sdktest.Call{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("expand on a non-expander: %v", err)
	}
	evs, err := s.Stream(ctx, sdktest.Call{}, 0)
	if err != nil || len(evs) != 5 || evs[3].GetGap().GetReason() != "reconnected" || evs[4].GetEnd().GetCursor() != "c" {
		t.Errorf("stream: %v %v", evs, err)
	}
	evs, err = s.Stream(ctx, sdktest.Call{Args: `{"fail":true}`}, 0)
	if err != nil || len(evs) != 4 || evs[3].GetError().GetMessage() != "reset" {
		t.Errorf("failing stream: %v %v", evs, err)
	}
}

func TestHelpers(t *testing.T) {
	known := []string{"method", "url", "headers"}
	for in, want := range map[string]string{"methd": "method", "Header": "headers", "URL": "url", "body": ""} {
		if got := sdk.Suggest(in, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
	parses := 0
	c := &sdk.ConfigCache[string]{Parse: func(raw []byte) string { parses++; return string(raw) }, Max: 2}
	c.Get([]byte("a"))
	c.Get([]byte("a"))
	c.Get([]byte("b"))
	c.Get([]byte("c"))
	if parses != 3 || c.Len() > 2 {
		t.Errorf("parses = %d, len = %d", parses, c.Len())
	}
}
