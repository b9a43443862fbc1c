package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// current is an adapter of this SDK using every call of the protocol.
type current struct{ streaming }

func (current) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "current", Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}}, nil
}

func (current) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	mode := sdk.ModeWindow
	if !op.ToolExecution {
		mode = 0 // an older host serves every tool in its entry's mode
	}
	return []sdk.Tool{{Name: op.Name + "_a", Mode: mode, Annotations: sdk.Annotations{ReadOnly: sdk.Bool(true)}}},
		[]sdk.Diagnostic{{Field: "x", Message: "no severity is an error"}, sdk.KeyErrorf("headers", "X.Api.Key", "a dotted key")}
}

func (current) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	var args struct {
		Kind     sdk.ErrorKind
		Rejected bool
	}
	_ = json.Unmarshal(req.Arguments, &args)
	if args.Kind == 0 {
		return &sdk.Result{Text: req.Context.Deadline.UTC().Format(time.RFC3339)}, nil
	}
	return nil, &sdk.UpstreamError{Kind: args.Kind, Status: "404", Retryable: !args.Rejected, Rejected: args.Rejected}
}

// A host built before the SDK had types of its own reads a new adapter
// through the generated client exactly as it read an old one: capabilities
// as strings, modes, severities and error kinds as the enums' numbers,
// retryable as before; rejected is a field such a host does not know.
func TestOldHost(t *testing.T) {
	rc := adaptertest.Serve(t, current{})
	conn, err := grpc.NewClient("unix://"+rc.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := adapterv1.NewAdapterClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	d, err := rpc.Describe(ctx, &adapterv1.DescribeRequest{HostVersion: "old"})
	if err != nil || !slices.Equal(d.GetCapabilities(), []string{"validate", "expand", "stream", "streams", "streams_invoke"}) ||
		!slices.Equal(d.GetModes(), []adapterv1.ExecutionMode{adapterv1.ExecutionMode_EXECUTION_MODE_UNARY, adapterv1.ExecutionMode_EXECUTION_MODE_WINDOW}) {
		t.Errorf("describe: %v %v", d, err)
	}

	op := &adapterv1.Operation{Name: "op", ConfigJson: []byte(`{}`), Mode: adapterv1.ExecutionMode_EXECUTION_MODE_UNARY}
	v, err := rpc.ValidateOperation(ctx, &adapterv1.ValidateOperationRequest{Operation: op})
	if err != nil || len(v.GetDiagnostics()) != 1 || v.GetDiagnostics()[0].GetSeverity() != adapterv1.Diagnostic_SEVERITY_ERROR ||
		v.GetDiagnostics()[0].GetField() != "url" {
		t.Errorf("validate: %v %v", v, err)
	}
	// Asked without host capabilities, as before tools had modes of their own.
	x, err := rpc.ExpandOperation(ctx, &adapterv1.ExpandOperationRequest{Operation: op})
	if err != nil || len(x.GetTools()) != 1 || x.GetTools()[0].GetMode() != adapterv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED ||
		!x.GetTools()[0].GetAnnotations().GetReadOnly() || x.GetDiagnostics()[0].GetSeverity() != adapterv1.Diagnostic_SEVERITY_ERROR ||
		// An earlier host reads the dotted field; a current one the pointer.
		x.GetDiagnostics()[1].GetField() != "headers.X.Api.Key" || x.GetDiagnostics()[1].GetPointer() != "/headers/X.Api.Key" {
		t.Errorf("expand: %v %v", x, err)
	}

	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	r, err := rpc.Invoke(ctx, &adapterv1.InvokeRequest{Operation: op, ArgumentsJson: []byte(`{}`),
		Context: &adapterv1.RequestContext{Deadline: timestamppb.New(deadline)}})
	if err != nil || r.GetResult().GetText() != deadline.UTC().Format(time.RFC3339) {
		t.Errorf("invoke, the adapter seeing the deadline: %v %v", r, err)
	}
	for kind, want := range map[sdk.ErrorKind]adapterv1.UpstreamError_Kind{
		sdk.KindUpstreamStatus:  adapterv1.UpstreamError_KIND_UPSTREAM_STATUS,
		sdk.KindTransport:       adapterv1.UpstreamError_KIND_TRANSPORT,
		sdk.KindTimeout:         adapterv1.UpstreamError_KIND_TIMEOUT,
		sdk.KindCancelled:       adapterv1.UpstreamError_KIND_CANCELLED,
		sdk.KindInvalidArgument: adapterv1.UpstreamError_KIND_INVALID_ARGUMENT,
		sdk.KindBadResponse:     adapterv1.UpstreamError_KIND_BAD_RESPONSE,
	} {
		for _, rejected := range []bool{false, true} {
			args := fmt.Sprintf(`{"kind":%d,"rejected":%v}`, kind, rejected)
			r, err := rpc.Invoke(ctx, &adapterv1.InvokeRequest{Operation: op, ArgumentsJson: []byte(args)})
			ue := r.GetError()
			if err != nil || ue.GetKind() != want || ue.GetStatus() != "404" || ue.GetRetryable() == rejected || ue.GetRejected() != rejected {
				t.Errorf("%s: %v %v", args, r, err)
			}
		}
	}

	st, err := rpc.Stream(ctx, &adapterv1.InvokeRequest{Operation: op, ArgumentsJson: []byte(`{"fail":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.GetEvent().(type) {
		case *adapterv1.StreamEvent_Item:
			got = append(got, "item "+string(e.Item.GetDataJson())+" "+e.Item.GetCursor())
		case *adapterv1.StreamEvent_Error:
			got = append(got, "error "+e.Error.GetKind().String()+" "+e.Error.GetMessage())
		default:
			got = append(got, fmt.Sprintf("%T", e))
		}
	}
	if want := []string{`item {"n":1} a`, `item {"n":1} b`, `item {"n":1} c`, "error KIND_TRANSPORT reset"}; !slices.Equal(got, want) {
		t.Errorf("stream = %q, want %q", got, want)
	}
}
