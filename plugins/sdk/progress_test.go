package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// progressing reports n progress steps of a call when the host asks for
// them, then answers (or fails, or reports after its answer).
type progressing struct{ late chan error }

func (progressing) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "progressing", Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true}, nil
}

func (a progressing) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var args struct {
		N    int
		Fail bool
	}
	_ = json.Unmarshal(req.Arguments, &args)
	for i := 1; i <= args.N; i++ {
		if err := sdk.ReportProgress(ctx, sdk.Progress{Progress: float64(i), Total: float64(args.N), Message: fmt.Sprint("step ", i)}); err != nil {
			return nil, err
		}
	}
	if args.Fail {
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Message: "failed after its progress"}
	}
	if a.late != nil {
		// A report once the call is over (its context ends after the
		// answer is sent).
		go func() {
			<-ctx.Done()
			a.late <- sdk.ReportProgress(ctx, sdk.Progress{Progress: 99})
		}()
	}
	return &sdk.Result{Text: fmt.Sprint("wanted progress: ", sdk.WantsProgress(ctx))}, nil
}

func TestInvokeWithProgress(t *testing.T) {
	ctx := context.Background()
	late := make(chan error, 1)
	h := adaptertest.New(t, progressing{late: late})
	info, err := h.Describe(ctx)
	if err != nil || !info.Capabilities.Progress || !info.Progress {
		t.Fatalf("describe: %+v %v", info, err)
	}
	var got []sdk.Progress
	req := &sdk.Request{Operation: sdk.Operation{Name: "op"}, Arguments: json.RawMessage(`{"n": 3}`)}
	res, err := h.Client.InvokeWithProgress(ctx, req, info.Capabilities, func(p sdk.Progress) { got = append(got, p) })
	if err != nil || res.Text != "wanted progress: true" || len(got) != 3 || got[2] != (sdk.Progress{Progress: 3, Total: 3, Message: "step 3"}) {
		t.Fatalf("result %+v %v, progress %+v", res, err, got)
	}
	if err := <-late; !errors.Is(err, sdk.ErrCallEnded) {
		t.Errorf("progress after the answer: %v", err)
	}

	// A failure after progress is the call's upstream error.
	got = nil
	req.Arguments = json.RawMessage(`{"n": 2, "fail": true}`)
	_, err = h.Client.InvokeWithProgress(ctx, req, info.Capabilities, func(p sdk.Progress) { got = append(got, p) })
	var ue *sdk.UpstreamError
	if !errors.As(err, &ue) || ue.Message != "failed after its progress" || len(got) != 2 {
		t.Fatalf("failure: %v, progress %+v", err, got)
	}

	// Without the capability, or without a receiver, it is a plain Invoke:
	// the adapter is not asked for progress.
	req.Arguments = json.RawMessage(`{"n": 2}`)
	for _, c := range []struct {
		caps client.Capabilities
		f    func(sdk.Progress)
	}{{client.Capabilities{}, func(sdk.Progress) { t.Error("progress without the capability") }}, {info.Capabilities, nil}} {
		res, err = h.Client.InvokeWithProgress(ctx, req, c.caps, c.f)
		<-late
		if err != nil || res.Text != "wanted progress: false" {
			t.Fatalf("plain invoke: %+v %v", res, err)
		}
	}
}
