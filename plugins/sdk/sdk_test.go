package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
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
	case "refused":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: "404", Message: "no such thing", Rejected: true}
	case "rpc":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: "-32021", Message: "needs sampling",
			Protocol: &sdk.ProtocolError{Code: -32021, Message: "needs sampling", Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}}
	case "failed":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Message: "no such account",
			Content: json.RawMessage(`[{"type":"text","text":"no such account"}]`)}
	case "bug":
		return nil, errors.New("nil map")
	case "blocks":
		return &sdk.Result{Text: "a picture", Content: json.RawMessage(`[{"type":"image","data":"UE5H","mimeType":"image/png"}]`)}, nil
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
		caps client.Capabilities
	}{{unaryOnly{}, client.Capabilities{StreamsInvoke: true}},
		{streaming{}, client.Capabilities{Validate: true, Expand: true, Stream: true, Streams: true, StreamsInvoke: true}}} {
		d, err := adaptertest.New(t, c.a).Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Capabilities != c.caps || d.Name != "unary" || !d.Serves(sdk.ModeUnary) || d.Serves(sdk.ModeWindow) || d.ProtocolVersion != 1 {
			t.Errorf("describe = %+v, want capabilities %+v", d, c.caps)
		}
	}
}

func TestInvokeOutcomes(t *testing.T) {
	h := adaptertest.New(t, unaryOnly{})
	ctx := context.Background()

	res, ue, err := h.Invoke(ctx, adaptertest.Call{Operation: "op1"})
	if err != nil || ue != nil || string(res.Structured) != `{"op":"op1"}` {
		t.Fatalf("success: %v %v %v", res, ue, err)
	}
	res, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"blocks"}`})
	if err != nil || ue != nil || res.Text != "a picture" || string(res.Content) != `[{"type":"image","data":"UE5H","mimeType":"image/png"}]` {
		t.Fatalf("content blocks: %+v %v %v", res, ue, err)
	}
	_, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"upstream"}`})
	if err != nil || ue.Status != "418" || !ue.Retryable || ue.Kind != sdk.KindUpstreamStatus {
		t.Fatalf("upstream error: %v %v", ue, err)
	}
	_, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"refused"}`})
	if err != nil || !ue.Rejected || ue.Retryable || ue.Status != "404" {
		t.Fatalf("refused: %v %v", ue, err)
	}
	// An upstream's own JSON-RPC error and failed result cross the
	// protocol whole.
	_, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"rpc"}`})
	if err != nil || ue.Protocol == nil || ue.Protocol.Code != -32021 || ue.Protocol.Message != "needs sampling" ||
		string(ue.Protocol.Data) != `{"requiredCapabilities":{"sampling":{}}}` || ue.Content != nil {
		t.Fatalf("protocol error: %+v %v", ue, err)
	}
	_, ue, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"failed"}`})
	if err != nil || ue.Protocol != nil || string(ue.Content) != `[{"type":"text","text":"no such account"}]` {
		t.Fatalf("failed result: %+v %v", ue, err)
	}
	_, _, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"bug"}`})
	if client.CodeOf(err) != client.Internal || !strings.Contains(err.Error(), "nil map") {
		t.Fatalf("adapter bug: %v", err)
	}
	// A panic is one failed call, not a dead adapter.
	_, _, err = h.Invoke(ctx, adaptertest.Call{Args: `{"do":"panic"}`})
	if client.CodeOf(err) != client.Internal || !strings.Contains(err.Error(), "invoke: internal error (panic), see the adapter log") || strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic: %v", err)
	}
	if _, _, err := h.Invoke(ctx, adaptertest.Call{}); err != nil {
		t.Fatalf("after panic: %v", err)
	}
}

func TestRequestCrossesTheBoundary(t *testing.T) {
	var got *sdk.Request
	h := adaptertest.New(t, recorder{got: &got})
	deadline := time.Now().Add(time.Hour).Round(time.Millisecond).UTC()
	_, _, err := h.Invoke(context.Background(), adaptertest.Call{
		Operation: "op", Config: `{"a":1}`, Args: `{"b":2}`, Timeout: 1500 * time.Millisecond, Mode: sdk.ModeWindow,
		Cursor: "c1", BaseDir: "/ops",
		Context: sdk.RequestContext{RequestID: "r", WorkspaceID: "w", AgentID: "a", TraceParent: "tp", TraceState: "ts", Deadline: deadline},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &sdk.Request{
		Context:   sdk.RequestContext{RequestID: "r", WorkspaceID: "w", AgentID: "a", TraceParent: "tp", TraceState: "ts", Deadline: deadline},
		Operation: sdk.Operation{Name: "op", Config: json.RawMessage(`{"a":1}`), Timeout: 1500 * time.Millisecond, Mode: sdk.ModeWindow, BaseDir: "/ops"},
		Arguments: json.RawMessage(`{"b":2}`),
		Cursor:    "c1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the adapter got\n%+v\nwant\n%+v", got, want)
	}
}

type recorder struct {
	unaryOnly
	got **sdk.Request
}

func (r recorder) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	*r.got = req
	return nil, nil
}

func TestOptionalRPCs(t *testing.T) {
	ctx := context.Background()
	u := adaptertest.New(t, unaryOnly{})
	if _, err := u.Validate(ctx, adaptertest.Call{}); client.CodeOf(err) != client.Unimplemented {
		t.Errorf("validate on a non-validator: %v", err)
	}
	if _, _, err := u.Stream(ctx, adaptertest.Call{}, 0); client.CodeOf(err) != client.Unimplemented {
		t.Errorf("stream on a non-streamer: %v", err)
	}

	s := adaptertest.New(t, streaming{})
	diags, err := s.Validate(ctx, adaptertest.Call{Config: map[string]any{}})
	if err != nil || len(diags) != 1 || diags[0].Field != "url" || diags[0].Severity != sdk.SeverityError {
		t.Errorf("validate: %v %v", diags, err)
	}
	tools, diags, err := s.Expand(ctx, adaptertest.Call{Operation: "pets"})
	if err != nil || len(tools) != 1 || tools[0].Name != "pets_a" ||
		!*tools[0].Annotations.Destructive || tools[0].Annotations.ReadOnly != nil ||
		diags[0].Severity != sdk.SeverityWarning {
		t.Errorf("expand: %v %v %v", tools, diags, err)
	}
	if _, _, err := u.Expand(ctx, adaptertest.Call{}); client.CodeOf(err) != client.Unimplemented {
		t.Errorf("expand on a non-expander: %v", err)
	}
	evs, ue, err := s.Stream(ctx, adaptertest.Call{}, 0)
	if err != nil || ue != nil || len(evs) != 5 || evs[0].Kind != client.EventItem || string(evs[0].Item.Data) != `{"n":1}` ||
		evs[3].Kind != client.EventGap || evs[3].Reason != "reconnected" || evs[4].Kind != client.EventEnd || evs[4].Cursor != "c" {
		t.Errorf("stream: %v %v %v", evs, ue, err)
	}
	evs, ue, err = s.Stream(ctx, adaptertest.Call{Args: `{"fail":true}`}, 0)
	if err != nil || len(evs) != 3 || ue == nil || ue.Message != "reset" || ue.Kind != sdk.KindTransport {
		t.Errorf("failing stream: %v %v %v", evs, ue, err)
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[fmt.Stringer]string{
		sdk.ModeAsyncJob: "async_job", sdk.Mode(9): "Mode(9)", sdk.SeverityWarning: "warning", sdk.Severity(0): "error",
		sdk.KindInvalidArgument: "invalid_argument", sdk.ErrorKind(0): "ErrorKind(0)",
	} {
		if got.String() != want {
			t.Errorf("%#v.String() = %q, want %q", got, got.String(), want)
		}
	}
}

func TestServeOptions(t *testing.T) {
	err := sdk.Serve(unaryOnly{}, sdk.WithManagedDebug(), sdk.WithDebug(context.Background(), nil, nil))
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("both debug modes: %v", err)
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{"array": "a list", "integer": "an integer", "object": "an object", "null": "null", "": "a value"} {
		if got := sdk.TypeName(in); got != want {
			t.Errorf("TypeName(%q) = %q, want %q", in, got, want)
		}
	}
	known := []string{"method", "url", "headers", "window_duration_ms"}
	for in, want := range map[string]string{"methd": "method", "Header": "headers", "URL": "url", "body": "",
		"window_duration": "window_duration_ms", "zzz": ""} {
		if got := sdk.Suggest(in, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "doc.txt")
	if err := os.WriteFile(file, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := sdk.ReadFile(file, 2048); err != nil || len(b) != 2048 {
		t.Errorf("ReadFile at the limit: %d bytes, %v", len(b), err)
	}
	for path, want := range map[string]string{
		file:                           "larger than 1 KiB",
		dir:                            "it is a directory",
		filepath.Join(dir, "none.txt"): "no such file or directory",
	} {
		if _, err := sdk.ReadFile(path, 1024); err == nil || err.Error() != want {
			t.Errorf("ReadFile(%s): %v, want %q", path, err, want)
		}
	}
}

// Recover turns a panic in an adapter's own goroutine into an error
// instead of ending the process.
func TestRecover(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- func() (err error) {
			defer sdk.Recover("test reader", &err)
			var m map[string]int
			m["x"] = 1 // a nil map: panics
			return nil
		}()
	}()
	err := <-done
	var pe *sdk.PanicError
	if !errors.As(err, &pe) || pe.Where != "test reader" || err.Error() != "test reader: internal error (panic), see the adapter log" {
		t.Errorf("recovered: %v", err)
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer sdk.Recover("test helper", nil)
		panic("boom")
	}()
	<-finished
	func() {
		var err error
		defer sdk.Recover("no panic", &err)
		if err != nil {
			t.Errorf("no panic: %v", err)
		}
	}()
}
