package client_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// An adapter built with the SDK as it was before it had types of its own
// (testdata/oldadapter, its server side frozen at that commit) works with
// this client, launched the way the host launches adapters: the protocol
// crank.adapter.v1 only grew.
func TestOldAdapter(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, "testdata/oldadapter").Start(t)
	ctx := ctxT(t)

	info, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &client.Info{
		Description: sdk.Description{Name: "old", Version: "0.9", Protocols: []string{"http"},
			Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, ConfigSchema: json.RawMessage(`{"type":"object"}`)},
		Capabilities:    client.Capabilities{Validate: true, Expand: true, Stream: true}, // from the strings it sends
		ProtocolVersion: 1,
	}
	if !reflect.DeepEqual(info, want) {
		t.Errorf("describe = %+v\nwant %+v", info, want)
	}

	diags, err := h.Validate(ctx, adaptertest.Call{Config: `{}`})
	if err != nil || len(diags) != 1 || diags[0] != (sdk.Diagnostic{Severity: sdk.SeverityError, Field: "url", Message: "is required"}) ||
		diags[0].Where() != "/url" { // no pointer from an adapter of before: the host reads the field
		t.Errorf("validate: %+v %v", diags, err)
	}
	tools, diags, err := h.Expand(ctx, adaptertest.Call{Operation: "ops", Config: `{"url":"x"}`})
	if err != nil || len(tools) != 1 || len(diags) != 1 {
		t.Fatalf("expand: %+v %+v %v", tools, diags, err)
	}
	if tl := tools[0]; tl.Name != "ops_feed" || tl.Mode != sdk.ModeWindow || string(tl.InputSchema) != `{"type":"object"}` ||
		tl.Annotations.ReadOnly == nil || !*tl.Annotations.ReadOnly || tl.Annotations.Destructive != nil {
		t.Errorf("tool = %+v", tl)
	}
	if diags[0].Severity != sdk.SeverityWarning || diags[0].Field != "paths" {
		t.Errorf("expand diagnostic = %+v", diags[0])
	}

	res, ue, err := h.Invoke(ctx, adaptertest.Call{Operation: "op", Args: `{"id":7}`})
	if err != nil || ue != nil || !reflect.DeepEqual(*res, sdk.Result{Structured: json.RawMessage(`{"id":7}`), Text: "op adaptertest", ContentType: "application/json"}) {
		t.Errorf("invoke: %+v %+v %v", res, ue, err)
	}
	_, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"fail":true}`})
	wantUE := sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Upstream: "GET http://up/x", Status: "503", Message: "busy",
		Body: "try later", Detail: json.RawMessage(`{"retry_after":"7"}`), Retryable: true}
	if err != nil || ue == nil || !reflect.DeepEqual(*ue, wantUE) {
		t.Errorf("upstream error: %+v %v", ue, err)
	}

	// It does not list "resume": a host asking a job's call for its
	// resume state makes a plain call, of which it gets none (and a
	// replica that takes the job over refuses it, owner_lost).
	resumed := 0
	res, err = h.Client.InvokeRelayed(ctx, &sdk.Request{Operation: sdk.Operation{Name: "op"}, Arguments: json.RawMessage(`{"id":7}`)},
		info.Capabilities, client.Relay{Resume: func(json.RawMessage) { resumed++ }})
	if err != nil || resumed != 0 || string(res.Structured) != `{"id":7}` {
		t.Errorf("invoke asking for resume states: %+v %v, %d states", res, err, resumed)
	}

	events, ue, err := h.Stream(ctx, adaptertest.Call{Cursor: "c", Mode: sdk.ModeWindow}, 0)
	wantEvents := []client.Event{
		{Kind: client.EventItem, Item: sdk.Item{Data: json.RawMessage(`{"n":1}`), ID: "id1", Cursor: "c1"}},
		{Kind: client.EventItem, Item: sdk.Item{Data: json.RawMessage(`{"n":2}`), ID: "id2", Cursor: "c2"}},
		{Kind: client.EventGap, Reason: "reconnected"},
		{Kind: client.EventEnd, Cursor: "c2"},
	}
	if err != nil || ue != nil || !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("stream: %+v %+v %v", events, ue, err)
	}
	// It does not list "streams": the stream of a session is a Stream
	// call of its own, in mode window.
	events, ue, err = h.Stream(ctx, adaptertest.Call{Cursor: "c", Mode: sdk.ModeSession}, 0)
	if err != nil || ue != nil || !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("session stream: %+v %+v %v", events, ue, err)
	}
	events, ue, err = h.Stream(ctx, adaptertest.Call{Args: `{"fail":true}`, Mode: sdk.ModeWindow}, 0)
	if err != nil || len(events) != 3 || ue == nil || ue.Kind != sdk.KindTransport || !ue.Retryable || ue.Rejected {
		t.Errorf("failing stream: %+v %+v %v", events, ue, err)
	}
}
