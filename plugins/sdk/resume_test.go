package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// resuming reports a resume state when the host asks for one, and
// answers a resumed call with the state it got.
type resuming struct{ resume bool }

func (a resuming) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "resuming", Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true, Resume: a.resume}, nil
}

func (resuming) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	if len(req.Resume) > 0 {
		return &sdk.Result{Text: "resumed from " + string(req.Resume)}, nil
	}
	for _, bad := range []json.RawMessage{json.RawMessage(`{"task"`), json.RawMessage(`"` + strings.Repeat("x", sdk.MaxResumeBytes) + `"`)} {
		if err := sdk.ReportResume(ctx, bad); sdk.WantsResume(ctx) && err == nil {
			return nil, errors.New("a bad resume state was taken")
		}
	}
	if err := sdk.ReportResume(ctx, json.RawMessage(`{"task":"t-1"}`)); err != nil {
		return nil, err
	}
	_ = sdk.ReportProgress(ctx, sdk.Progress{Progress: 1})
	if err := sdk.ReportResume(ctx, json.RawMessage(`{"task":"t-2"}`)); err != nil {
		return nil, err
	}
	return &sdk.Result{Text: "fresh"}, nil
}

// An adapter whose Description says Resume lists the capability, sends
// the resume states it reports in order to a host that asked for them,
// refuses a state that is not JSON or too large, and gets Request.Resume
// on a resumed call; without the capability (or without a receiver) the
// host asks for none and the adapter reports none.
func TestResume(t *testing.T) {
	ctx := context.Background()
	h := adaptertest.New(t, resuming{resume: true})
	info, err := h.Describe(ctx)
	if err != nil || !info.Capabilities.Resume || !info.Resume || !info.Capabilities.Progress {
		t.Fatalf("describe: %+v %v", info, err)
	}
	var states []string
	req := &sdk.Request{Operation: sdk.Operation{Name: "op"}}
	res, err := h.Client.InvokeRelayed(ctx, req, info.Capabilities, client.Relay{Resume: func(s json.RawMessage) { states = append(states, string(s)) }})
	if err != nil || res.Text != "fresh" || strings.Join(states, " ") != `{"task":"t-1"} {"task":"t-2"}` {
		t.Fatalf("fresh call: %+v %v, states %q", res, err, states)
	}
	req.Resume = json.RawMessage(`{"task":"t-2"}`)
	if res, err = h.Client.Invoke(ctx, req); err != nil || res.Text != `resumed from {"task":"t-2"}` {
		t.Fatalf("resumed call: %+v %v", res, err)
	}

	states, req.Resume = nil, nil
	for _, caps := range []client.Capabilities{{Progress: true}, {}} {
		res, err = h.Client.InvokeRelayed(ctx, req, caps, client.Relay{Resume: func(s json.RawMessage) { states = append(states, string(s)) }})
		if err != nil || res.Text != "fresh" || len(states) != 0 {
			t.Fatalf("without the capability: %+v %v, states %q", res, err, states)
		}
	}

	old := adaptertest.New(t, resuming{})
	if info, err = old.Describe(ctx); err != nil || info.Capabilities.Resume || info.Resume {
		t.Fatalf("describe without Resume: %+v %v", info, err)
	}
}

// holding reports a resume state, then holds its call until the call's
// context ends, and tells whether it ended because the host went away.
type holding struct{ ended chan bool }

func (holding) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "holding", Modes: []sdk.Mode{sdk.ModeUnary}, Progress: true, Resume: true}, nil
}

func (a holding) Invoke(ctx context.Context, _ *sdk.Request) (*sdk.Result, error) {
	if err := sdk.ReportResume(ctx, json.RawMessage(`{"work":1}`)); err != nil {
		return nil, err
	}
	<-ctx.Done()
	a.ended <- sdk.HostGone(ctx)
	return nil, ctx.Err()
}

// A resumable call the host cancels ends as any call does; one whose
// host's connection ends (the gateway died) ends with ErrHostGone, so
// that the adapter leaves the upstream work it reported alone.
func TestResumableCallOutlivesItsHost(t *testing.T) {
	a := holding{ended: make(chan bool, 1)}
	rc := adaptertest.Serve(t, a)
	call := func(ctx context.Context) (*grpc.ClientConn, <-chan json.RawMessage) {
		conn, err := grpc.NewClient("unix://"+rc.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		c := client.New(conn)
		info, err := c.Describe(ctx, "test")
		if err != nil || !info.Capabilities.Resume {
			t.Fatalf("describe: %+v %v", info, err)
		}
		states := make(chan json.RawMessage, 1)
		go func() {
			_, _ = c.InvokeRelayed(ctx, &sdk.Request{Operation: sdk.Operation{Name: "op"}}, info.Capabilities,
				client.Relay{Resume: func(s json.RawMessage) { states <- s }})
		}()
		return conn, states
	}

	ctx, cancel := context.WithCancel(context.Background())
	conn, states := call(ctx)
	defer conn.Close()
	if s := <-states; string(s) != `{"work":1}` {
		t.Fatalf("resume state %s", s)
	}
	cancel()
	if gone := <-a.ended; gone {
		t.Error("a call the host cancelled ended as if its host had gone")
	}

	conn, states = call(context.Background())
	<-states
	conn.Close() // as a host that died
	if gone := <-a.ended; !gone {
		t.Error("a call whose host's connection ended did not say its host had gone")
	}
}
