package grpcadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	grpcadapter "github.com/crankmcp/crank/plugins/grpc"
	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	d, err := h.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "grpc" || grpcadapter.Name != "grpc" {
		t.Errorf("name = %q", d.Name)
	}
	if !slices.Equal(d.Modes, []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}) {
		t.Errorf("modes = %v, want unary and window", d.Modes)
	}
	if d.Capabilities != (client.Capabilities{Validate: true, Expand: true, Stream: true, Streams: true, StreamsInvoke: true, Egress: true}) {
		t.Errorf("capabilities = %+v", d.Capabilities)
	}
	var schema map[string]any
	if err := json.Unmarshal(d.ConfigSchema, &schema); err != nil {
		t.Errorf("config schema is not JSON: %v", err)
	}
}

// TestUnaryReflection: the schemas come from server reflection, the call
// carries the configured metadata and the caller's trace context, and the
// answer follows the proto3 JSON mapping.
func TestUnaryReflection(t *testing.T) {
	// Not parallel: the spans an in-process adapter finishes leave with
	// whichever of its answers comes next, so another test's call running
	// meanwhile could take this test's spans.
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Echo", "metadata", map[string]any{"X-Api-Key": "k-123", "x-tenant": "acme", "trace-bin": "AAEC"})

	tools := expandTools(t, h, adaptertest.Call{Config: cfg})
	if len(tools) != 1 || tools[0].Name != "" {
		t.Fatalf("tools = %v, want the entry itself", tools)
	}
	tool := tools[0]
	wantContains(t, "input schema", string(tool.InputSchema), `"text":{"description":"The text to echo.","type":"string"}`, `"additionalProperties":false`)
	wantContains(t, "output schema", string(tool.OutputSchema), `"metadata":{`)
	if tool.Title != "Echo (Test)" || tool.Description == "" {
		t.Errorf("title %q description %q", tool.Title, tool.Description)
	}
	if a := tool.Annotations; !isTrue(a.ReadOnly) || !isTrue(a.Idempotent) {
		t.Errorf("annotations = %v, want read-only and idempotent (NO_SIDE_EFFECTS)", a)
	}

	traceparent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"text":"hello","id":"9007199254740993"}`,
		Context: sdk.RequestContext{TraceParent: traceparent}})
	if err != nil || ue != nil {
		t.Fatalf("invoke: %v %+v", err, ue)
	}
	var out struct {
		Text     string            `json:"text"`
		ID       string            `json:"id"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(res.Structured, &out); err != nil {
		t.Fatal(err)
	}
	if out.Text != "hello" || out.ID != "9007199254740993" {
		t.Errorf("answer = %+v (int64 must survive as a string)", out)
	}
	if out.Metadata["x-api-key"] != "k-123" || out.Metadata["x-tenant"] != "acme" {
		t.Errorf("metadata = %v", out.Metadata)
	}
	if out.Metadata["traceparent"] != traceparent {
		t.Errorf("traceparent not forwarded: %v", out.Metadata)
	}
	// Traced by the host: the call's client span is recorded and its
	// trace context sent.
	res, ue, err = h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"text":"hello"}`,
		Context: sdk.RequestContext{TraceParent: traceparent, RecordSpans: true}})
	if err != nil || ue != nil {
		t.Fatalf("invoke: %v %+v", err, ue)
	}
	if err := json.Unmarshal(res.Structured, &out); err != nil {
		t.Fatal(err)
	}
	spans := h.Spans()
	if len(spans) != 2 || spans[0].Kind != sdk.SpanClient || spans[0].Name != "crank.test.v1.Test/Echo" {
		t.Fatalf("spans = %+v", spans)
	}
	if want := fmt.Sprintf("00-%x-%x-01", spans[0].TraceID, spans[0].SpanID); out.Metadata["traceparent"] != want {
		t.Errorf("traceparent %q, want the call span's %q", out.Metadata["traceparent"], want)
	}
	if res.ContentType != "application/json" {
		t.Errorf("content type %q", res.ContentType)
	}

	// A number for an int64 is accepted too; defaults are emitted.
	got := invokeOK(t, h, adaptertest.Call{Config: ts.cfg("Echo"), Args: `{"id": 7}`})
	if got["id"] != "7" || got["text"] != "" {
		t.Errorf("answer = %v, want id \"7\" and the empty text", got)
	}
	// emit_defaults: false leaves them out; field_names: json renames.
	got = invokeOK(t, h, adaptertest.Call{Config: ts.cfg("Echo", "emit_defaults", false), Args: `{"id": 7}`})
	if _, ok := got["text"]; ok {
		t.Errorf("answer = %v, want no default text", got)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReflectionVersions: v1 only, v1alpha only (the fallback), none.
func TestReflectionVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    grpctest.Reflection
	}{{"v1", grpctest.ReflectionV1}, {"v1alpha", grpctest.ReflectionV1Alpha}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, grpctest.Options{Reflection: tc.r})
			h := newHarness(t)
			tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Echo")})
			if len(tools) != 1 {
				t.Fatalf("tools = %v", tools)
			}
			if got := invokeOK(t, h, adaptertest.Call{Config: ts.cfg("Echo"), Args: `{"text":"x"}`}); got["text"] != "x" {
				t.Errorf("answer = %v", got)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		ts := startTestServer(t, grpctest.Options{})
		h := newHarness(t)
		resp := expand(t, h, adaptertest.Call{Config: ts.cfg("Echo")})
		wantDiag(t, resp.diags, "target", "does not offer server reflection", "descriptor_set or proto_files")
		// A call finds the same problem and says so.
		ue := invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Echo", "timeout", "5s"), Args: `{}`})
		wantContains(t, "message", ue.Message, "does not offer server reflection")
	})
	t.Run("unknown service", func(t *testing.T) {
		t.Parallel()
		ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
		h := newHarness(t)
		cfg := map[string]any{"target": ts.addr, "method": "crank.test.v1.Nope/Echo"}
		resp := expand(t, h, adaptertest.Call{Config: cfg})
		wantDiag(t, resp.diags, "service", "does not know service crank.test.v1.Nope", testService)
		cfg["method"] = testService + "/Nope"
		resp = expand(t, h, adaptertest.Call{Config: cfg})
		wantDiag(t, resp.diags, "method", "has no method Nope", "Echo, Fail")
	})
}

// writeDescriptorSet writes the test protos as a FileDescriptorSet.
func writeDescriptorSet(t testing.TB, dir string) string {
	t.Helper()
	b, err := proto.Marshal(grpctest.DescriptorSet(testFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "test.binpb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDescriptorSet drives a server without reflection from a descriptor
// set, and resolves the set's path against the operations file's
// directory.
func TestDescriptorSet(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{})
	dir := t.TempDir()
	set := writeDescriptorSet(t, dir)
	h := newHarness(t)
	cfg := ts.cfg("Echo", "descriptor_set", set)
	if tools := expandTools(t, h, adaptertest.Call{Config: cfg}); len(tools) != 1 {
		t.Fatalf("tools = %v", tools)
	}
	if got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"text":"from a set"}`}); got["text"] != "from a set" {
		t.Errorf("answer = %v", got)
	}

	// A relative path resolves against the operations file's directory.
	rel := adaptertest.Call{Config: ts.cfg("Echo", "descriptor_set", "test.binpb"), BaseDir: dir, Args: `{"text":"rel"}`}
	if tools := expandTools(t, h, rel); len(tools) != 1 {
		t.Fatalf("tools = %v", tools)
	}
	if got := invokeOK(t, h, rel); got["text"] != "rel" {
		t.Errorf("answer = %v", got)
	}
	// The same through the adapter's Go interfaces.
	a := grpcadapter.New()
	op := &sdk.Operation{Name: "echo", Config: mustJSON(t, ts.cfg("Echo", "descriptor_set", "test.binpb")), BaseDir: dir}
	if diags := a.(sdk.OperationValidator).ValidateOperation(ctxT(t), op); len(diags) != 0 {
		t.Fatalf("validate: %v", diags)
	}
	tools, diags := a.(sdk.OperationExpander).ExpandOperation(ctxT(t), op)
	if len(tools) != 1 || len(diags) != 0 {
		t.Fatalf("expand: %v %v", tools, diags)
	}
	res, err := a.Invoke(ctxT(t), &sdk.Request{Operation: *op, Arguments: []byte(`{"text":"relative"}`)})
	if err != nil || !strings.Contains(string(res.Structured), `"relative"`) {
		t.Fatalf("invoke: %v %v", res, err)
	}

	// Broken sets.
	for _, tc := range []struct{ content, want string }{
		{"not a descriptor set", "not a binary FileDescriptorSet"},
		{"", "holds no files"},
	} {
		bad := filepath.Join(dir, "bad.binpb")
		if err := os.WriteFile(bad, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		resp := expand(t, h, adaptertest.Call{Config: ts.cfg("Echo", "descriptor_set", bad)})
		wantDiag(t, resp.diags, "descriptor_set", tc.want)
	}
	// A set without its imports.
	full := grpctest.DescriptorSet(testFiles(t))
	full.File = slices.DeleteFunc(full.File, func(f *descriptorpb.FileDescriptorProto) bool { return f.GetName() == "zoo.proto" })
	bad := filepath.Join(dir, "partial.binpb")
	if err := os.WriteFile(bad, mustMarshal(t, full), 0o644); err != nil {
		t.Fatal(err)
	}
	resp := expand(t, h, adaptertest.Call{Config: ts.cfg("Echo", "descriptor_set", bad)})
	wantDiag(t, resp.diags, "descriptor_set", "imports zoo.proto", "--include_imports")
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProtoFiles compiles .proto sources at load: comments become
// descriptions; a broken file is reported with its position.
func TestProtoFiles(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{})
	h := newHarness(t)
	dir := testdataDir(t)
	cfg := ts.cfg("Echo", "proto_files", []string{"test.proto"}, "import_paths", []string{dir})
	tools := expandTools(t, h, adaptertest.Call{Config: cfg})
	if len(tools) != 1 {
		t.Fatalf("tools = %v", tools)
	}
	wantContains(t, "description", tools[0].Description, "Echo answers with the request's text")
	wantContains(t, "input schema", string(tools[0].InputSchema), `"description":"The text to echo."`)
	if got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"text":"compiled"}`}); got["text"] != "compiled" {
		t.Errorf("answer = %v", got)
	}

	// The default import path is the operations file's directory.
	a := grpcadapter.New()
	op := &sdk.Operation{Name: "echo", Config: mustJSON(t, ts.cfg("Echo", "proto_files", []string{"test.proto"})), BaseDir: dir}
	if tools, diags := a.(sdk.OperationExpander).ExpandOperation(ctxT(t), op); len(tools) != 1 || len(diags) != 0 {
		t.Fatalf("expand: %v %v", tools, diags)
	}

	// An inline source, its imports found on import_paths.
	src := sources(t)["test.proto"]
	icfg := ts.cfg("Echo", "proto_source", src, "import_paths", []string{dir})
	if tools := expandTools(t, h, adaptertest.Call{Config: icfg}); len(tools) != 1 || !strings.Contains(tools[0].Description, "Echo answers") {
		t.Fatalf("tools = %v", tools)
	}
	if got := invokeOK(t, h, adaptertest.Call{Config: icfg, Args: `{"text":"inline"}`}); got["text"] != "inline" {
		t.Errorf("answer = %v", got)
	}
	resp := expand(t, h, adaptertest.Call{Config: ts.cfg("Echo", "proto_source", "syntax = \"proto3\";\nmessage A { B b = 1; }\n")})
	wantDiag(t, resp.diags, "proto_source", "cannot compile", "proto_source.proto:2")

	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "broken.proto"), []byte("syntax = \"proto3\";\npackage x;\nmessage A { Missing m = 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp = expand(t, h, adaptertest.Call{Config: ts.cfg("Echo", "proto_files", []string{"broken.proto"}, "import_paths", []string{broken})})
	wantDiag(t, resp.diags, "proto_files", "cannot compile", "broken.proto:3", "Missing")
	resp = expand(t, h, adaptertest.Call{Config: ts.cfg("Echo", "proto_files", []string{"absent.proto"}, "import_paths", []string{broken})})
	wantDiag(t, resp.diags, "proto_files", "absent.proto")
}

// TestServiceImport: one entry, one tool per method, with MCP-safe names.
func TestServiceImport(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := map[string]any{"target": ts.addr, "service": testService, "metadata": map[string]string{"x-key": "v"}}
	resp := expand(t, h, adaptertest.Call{Operation: "test", Config: cfg})
	var names []string
	byName := map[string]sdk.Tool{}
	for _, tool := range resp.tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	want := []string{"test_echo", "test_fail", "test_sleep", "test_big", "test_upload", "test_zoo", "test_now", "test_upper", "test_legacy", "test_old_echo", "test_herd"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	var warnings []string
	for _, d := range resp.diags {
		if d.Severity != sdk.SeverityWarning {
			t.Errorf("diagnostic %v", d)
		}
		warnings = append(warnings, d.Message)
	}
	all := strings.Join(warnings, "\n")
	wantContains(t, "warnings", all, "Count is a server-streaming method: serve it with mode: window",
		"Chat is a bidirectional-streaming method: serve it with mode: window or session")
	wantContains(t, "deprecated description", byName["test_old_echo"].Description, "Deprecated.")

	// The derived config names the method and keeps the rest.
	echo := byName["test_echo"]
	var derived map[string]any
	if err := json.Unmarshal(echo.Config, &derived); err != nil {
		t.Fatal(err)
	}
	if derived["method"] != testService+"/Echo" || derived["service"] != nil || derived["metadata"] == nil {
		t.Errorf("derived config = %v", derived)
	}
	got := invokeOK(t, h, adaptertest.Call{Config: echo.Config, Args: `{"text":"via import"}`})
	if got["text"] != "via import" {
		t.Errorf("answer = %v", got)
	}

	// methods filters; tool_prefix renames.
	cfg["methods"] = []string{"Echo", "Upper"}
	cfg["tool_prefix"] = "t."
	tools := expandTools(t, h, adaptertest.Call{Operation: "test", Config: cfg})
	if len(tools) != 2 || tools[0].Name != "t.echo" || tools[1].Name != "t.upper" {
		t.Errorf("tools = %v", tools)
	}
	cfg["methods"] = []string{"Echo", "Nope"}
	wantDiag(t, expand(t, h, adaptertest.Call{Operation: "test", Config: cfg}).diags, "methods[1]", "has no method Nope")

	// In window mode only the server-streaming methods are tools.
	delete(cfg, "methods")
	wresp := expand(t, h, adaptertest.Call{Operation: "w", Config: cfg, Mode: sdk.ModeWindow})
	names = nil
	for _, tool := range wresp.tools {
		names = append(names, tool.Name)
		if len(tool.OutputSchema) != 0 {
			t.Errorf("%s: a stream tool has no output schema of its own", tool.Name)
		}
		if tool.Name == "t.chat" {
			wantContains(t, "description", tool.Description, "Bidirectional: the requests argument's crank.test.v1.EchoRequest messages are sent in order")
			continue
		}
		wantContains(t, "description", tool.Description, "Server-streaming: each crank.test.v1.Tick message")
	}
	if !slices.Equal(names, []string{"t.count", "t.forever", "t.chat"}) {
		t.Errorf("window tools = %v", names)
	}
	warnings = nil
	for _, d := range wresp.diags {
		warnings = append(warnings, d.Message)
	}
	wantContains(t, "window warnings", strings.Join(warnings, "\n"),
		"Echo is a unary method: serve it with mode: unary (or poll it in a window from its own entry, with transport_behavior: request_response)")
}

// TestModesAndStreamingKinds: a method must match the entry's mode:
// unary and client-streaming methods answer once (mode unary, or polled in
// a window), server-streaming and bidirectional ones are read as streams
// (mode window, and the host's sessions on it).
func TestModesAndStreamingKinds(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	for _, tc := range []struct {
		method string
		mode   sdk.Mode
		want   string
	}{
		{"Chat", sdk.ModeUnary, "Chat is a bidirectional-streaming method: serve it with mode: window or session"},
		{"Count", sdk.ModeUnary, "Count is a server-streaming method: serve it with mode: window"},
	} {
		wantDiag(t, expand(t, h, adaptertest.Call{Config: ts.cfg(tc.method), Mode: tc.mode}).diags, "method", tc.want)
	}
	for _, ok := range []struct {
		method string
		mode   sdk.Mode
	}{{"Upload", sdk.ModeUnary}, {"Upload", sdk.ModeWindow}, {"Chat", sdk.ModeWindow}} {
		if tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg(ok.method), Mode: ok.mode}); len(tools) != 1 {
			t.Errorf("%s in mode %v: %v", ok.method, ok.mode, tools)
		}
	}
	diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: ts.cfg("Echo"), Mode: sdk.ModeSession})
	if err != nil {
		t.Fatal(err)
	}
	wantDiag(t, diags, "", "serves modes unary and window, not session")

	// A unary method in a window is polled (transport_behavior:
	// request_response): a method entry may ask for it.
	if tools, _, err := h.Expand(ctxT(t), adaptertest.Call{Config: ts.cfg("Echo"), Mode: sdk.ModeWindow}); err != nil || len(tools) != 1 {
		t.Errorf("a unary method in window mode: %v %v", tools, err)
	}

	// Invoke (a call, or a window's poll) refuses a streaming method;
	// Stream refuses a method that answers once.
	ue := invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Count")})
	if ue.Kind != sdk.KindInvalidArgument {
		t.Errorf("kind = %v", ue.Kind)
	}
	wantContains(t, "message", ue.Message, "is read as a stream (mode: window with transport_behavior: server_stream)")
	ue = invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Chat"), Args: `{"requests": []}`})
	wantContains(t, "message", ue.Message, "Chat is a bidirectional-streaming method: it is read as a stream")
	_, ue, err = h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Upload"), Args: `{"requests": []}`}, 0)
	if err != nil || ue == nil {
		t.Fatalf("stream of a client-streaming method: %v %v", ue, err)
	}
	wantContains(t, "message", ue.Message, "Upload is a client-streaming method: it answers once and cannot be read as a stream")
	if n := ts.streamCalls.Load(); n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}
}

// TestStatusMapping: every gRPC status code becomes a clear tool error.
func TestStatusMapping(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Fail")
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		name := strings.ToUpper(snake(code.String()))
		if code == codes.Canceled {
			name = "CANCELLED"
		}
		t.Run(name, func(t *testing.T) {
			ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"code": name, "message": "told to fail"}})
			if ue.Status != name {
				t.Errorf("status = %q, want %q", ue.Status, name)
			}
			wantKind := sdk.KindUpstreamStatus
			switch code {
			case codes.DeadlineExceeded:
				wantKind = sdk.KindTimeout
			case codes.Unavailable:
				wantKind = sdk.KindTransport
			}
			if ue.Kind != wantKind {
				t.Errorf("kind = %v, want %v", ue.Kind, wantKind)
			}
			wantContains(t, "message", ue.Message, name, "told to fail")
			wantRetry := code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.ResourceExhausted || code == codes.Aborted
			if ue.Retryable != wantRetry {
				t.Errorf("retryable = %v", ue.Retryable)
			}
			switch code {
			case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated,
				codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
				if !ue.Rejected {
					t.Error("not rejected")
				}
			default:
				if ue.Rejected {
					t.Error("rejected")
				}
			}
			wantContains(t, "upstream", ue.Upstream, "gRPC crank.test.v1.Test/Fail at "+ts.addr)
			var detail struct {
				Code       string `json:"code"`
				CodeNumber int    `json:"code_number"`
				Message    string `json:"message"`
			}
			if err := json.Unmarshal(ue.Detail, &detail); err != nil {
				t.Fatalf("detail %q: %v", ue.Detail, err)
			}
			if detail.Code != name || detail.CodeNumber != int(code) || detail.Message != "told to fail" {
				t.Errorf("detail = %+v", detail)
			}
		})
	}
	t.Run("details", func(t *testing.T) {
		ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"code": "NOT_FOUND", "message": "no user 42", "with_details": true}})
		wantContains(t, "detail", string(ue.Detail),
			`"@type":"type.googleapis.com/google.rpc.ErrorInfo"`, `"reason":"USER_MISSING"`,
			`"@type":"type.googleapis.com/google.rpc.BadRequest"`, `"field_violations":[{"field":"id","description":"no such id"}]`)
		if ue.Message != "NOT_FOUND: no user 42" {
			t.Errorf("message = %q", ue.Message)
		}
	})
}

// TestDeadline: the operation's timeout is the call's deadline; the server
// sees it expire; it is told apart from UNAVAILABLE.
func TestDeadline(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	expandTools(t, h, adaptertest.Call{Config: ts.cfg("Sleep")}) // descriptors loaded before the clock starts

	start := time.Now()
	ue := invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Sleep"), Args: `{"ms": 10000}`, Timeout: 300 * time.Millisecond})
	if ue.Kind != sdk.KindTimeout || ue.Status != "DEADLINE_EXCEEDED" || !ue.Retryable {
		t.Errorf("error = %+v", ue)
	}
	wantContains(t, "message", ue.Message, "did not answer within 300ms")
	if time.Since(start) > 5*time.Second {
		t.Errorf("the call took %v", time.Since(start))
	}
	// The deadline reached the server (it may see the client's cancel or
	// its own deadline first).
	if d := <-ts.deadlines; d <= 0 || d > 300*time.Millisecond {
		t.Errorf("the server's deadline was %v away, want ≤300ms", d)
	}
	ts.waitEnded(t, "Sleep")

	// The config's timeout applies when the host sets none.
	ue = invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Sleep", "timeout", "200ms"), Args: `{"ms": 10000}`})
	wantContains(t, "message", ue.Message, "within 200ms")
	if d := <-ts.deadlines; d <= 0 || d > 200*time.Millisecond {
		t.Errorf("the server's deadline was %v away, want ≤200ms", d)
	}
	ts.waitEnded(t, "Sleep")
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	dir := t.TempDir()
	set := writeDescriptorSet(t, dir)
	h := newHarness(t)
	cfg := map[string]any{"target": addr, "method": testService + "/Echo", "descriptor_set": set}
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{}`})
	if ue.Kind != sdk.KindTransport || ue.Status != "UNAVAILABLE" || !ue.Retryable {
		t.Errorf("error = %+v", ue)
	}
	wantContains(t, "message", ue.Message, "UNAVAILABLE: cannot connect to "+addr+": connection refused")

	// Reflection against a server that is down fails the load, naming the
	// target.
	delete(cfg, "descriptor_set")
	wantDiag(t, expand(t, h, adaptertest.Call{Config: cfg}).diags, "target", "cannot reach "+addr, "connection refused")
}

// TestCancel: cancelling the host's call cancels the upstream call.
func TestCancel(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	expandTools(t, h, adaptertest.Call{Config: ts.cfg("Sleep")})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, _, err := h.Invoke(ctx, adaptertest.Call{Config: ts.cfg("Sleep"), Args: `{"ms": 10000}`})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	wantContains(t, "server end", ts.waitEnded(t, "Sleep"), "context canceled")
	if err := <-done; client.CodeOf(err) != client.Cancelled {
		t.Errorf("host side: %v", err)
	}

	// The adapter maps its own context's cancellation to KindCancelled.
	a := grpcadapter.New()
	actx, acancel := context.WithCancel(ctxT(t))
	go func() { time.Sleep(200 * time.Millisecond); acancel() }()
	_, err := a.Invoke(actx, &sdk.Request{Operation: sdk.Operation{Config: mustJSON(t, ts.cfg("Sleep"))}, Arguments: []byte(`{"ms":10000}`)})
	var ue *sdk.UpstreamError
	if !errorsAs(err, &ue) || ue.Kind != sdk.KindCancelled {
		t.Errorf("error = %v", err)
	}
	ts.waitEnded(t, "Sleep")
}

// TestConversionErrors: arguments protojson refuses are reported with the
// path of the field.
func TestConversionErrors(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Zoo")
	for _, tc := range []struct{ args, want string }{
		{`{"f_bytes": "%%%"}`, "argument f_bytes: invalid value for bytes: \"%%%\" (bytes are base64: the standard or URL-safe alphabet, padding optional)"},
		{`{"f_int64": "12x"}`, "argument f_int64: invalid value for int64: \"12x\""},
		{`{"f_int32": 3000000000}`, "argument f_int32: invalid value for int32: 3000000000"},
		{`{"color": "BLUE"}`, "argument color: invalid value for enum: \"BLUE\""},
		{`{"tree": {"children": [{"label": "a"}, {"label": 5}]}}`, "argument tree.children[1].label: invalid value for string: 5"},
		{`{"animals_by_id": {"7": {"home": {"biome": false}}}}`, `argument animals_by_id["7"].home.biome: invalid value for string: false`},
		{`{"created": "yesterday"}`, `argument created: invalid google.protobuf.Timestamp value "yesterday"`},
		{`{"ids": ["1", "x"]}`, `argument ids[1]: invalid value for int64: "x"`},
		{`{"extra": {"@type": "type.googleapis.com/no.Such"}}`, "argument extra: "},
		{`{"nope": 1}`, "argument nope: unknown field of crank.test.zoo.Zoo"},
		{`{"tags": ["a", "\ud800"]}`, `argument tags[1]: a string holds an unpaired UTF-16 surrogate escape`},
		{`{"f_string": "\udc00\\ud800"}`, `argument f_string: a string holds an unpaired UTF-16 surrogate escape`},
		{`[1]`, "arguments: must be a JSON object"},
	} {
		ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: tc.args})
		if ue.Kind != sdk.KindInvalidArgument {
			t.Errorf("%s: kind %v", tc.args, ue.Kind)
		}
		wantContains(t, tc.args, ue.Message, tc.want)
	}
}

// TestWrappedTypes: a request or response whose JSON form is not an object
// (a wrapper, a Timestamp) travels under "value" / "result".
func TestWrappedTypes(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Upper")})
	if got := string(tools[0].InputSchema); got != `{"additionalProperties":false,"properties":{"value":{"type":"string"}},"required":["value"],"type":"object"}` {
		t.Errorf("input schema = %s", got)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: ts.cfg("Upper"), Args: `{"value":"shout"}`})
	if err != nil || ue != nil || string(res.Structured) != `"SHOUT"` {
		t.Fatalf("invoke: %v %v %s", err, ue, res.Structured)
	}
	tools = expandTools(t, h, adaptertest.Call{Config: ts.cfg("Now")})
	wantContains(t, "output schema", string(tools[0].OutputSchema), `"result":{"description":"An RFC 3339 timestamp`, `"required":["result"]`)
	res, _, _ = h.Invoke(ctxT(t), adaptertest.Call{Config: ts.cfg("Now")})
	if string(res.Structured) != `"2024-05-01T12:00:00Z"` {
		t.Errorf("now = %s", res.Structured)
	}
	ue = invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Upper"), Args: `{}`})
	wantContains(t, "message", ue.Message, "argument value: required")
}

func TestMaxResponseBytes(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Big", "max_response_bytes", 1000)
	if got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"bytes": 900}`}); len(got["text"].(string)) != 900 {
		t.Errorf("short answer cut")
	}
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{"bytes": 5000}`})
	if ue.Kind != sdk.KindBadResponse {
		t.Errorf("kind = %v", ue.Kind)
	}
	wantContains(t, "message", ue.Message, "larger than max_response_bytes (1000 bytes)")
}

// TestConfigDiagnostics: every config error names its field and never
// quotes a value that may be a secret.
func TestConfigDiagnostics(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const secret = "s3cr3t-value"
	for _, tc := range []struct {
		cfg   string
		field string
		want  string
	}{
		{`{}`, "target", "required"},
		{`{"target": 5, "method": "a.B/C"}`, "target", "must be a string"},
		{`{"target": "localhost", "method": "a.B/C"}`, "target", "host:port"},
		{`{"target": "127.0.0.1:99999", "method": "a.B/C"}`, "target", "port"},
		{`{"target": "http://x:1", "method": "a.B/C"}`, "target", `unsupported scheme "http"`},
		{`{"target": "127.0.0.1:1"}`, "method", "required"},
		{`{"target": "127.0.0.1:1", "method": "Echo"}`, "method", "package.Service/Method"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "service": "a.B"}`, "service", "not both"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "methods": ["C"]}`, "methods", "only applies with service"},
		{`{"target": "127.0.0.1:1", "service": "a.B", "methods": ["C", "C"]}`, "methods[1]", "listed twice"},
		{`{"target": "127.0.0.1:1", "service": "a.B", "tool_prefix": "a b"}`, "tool_prefix", "A-Z a-z 0-9"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metod": 1}`, "metod", `did you mean "method"`},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "plaintext": true, "tls": {}}`, "plaintext", "cannot be combined with tls"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "tls": {"ca_file": "/no/such/ca.pem"}}`, "tls.ca_file", "cannot read /no/such/ca.pem"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "tls": {"cert_file": "/x.pem"}}`, "tls.key_file", "required with cert_file"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "tls": {"cafile": "x"}}`, "tls.cafile", `did you mean "ca_file"`},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "descriptor_set": "/no/such.binpb"}`, "descriptor_set", "cannot read"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "descriptor_set": "/tmp", "proto_files": ["a.proto"]}`, "proto_files", "not both"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "proto_files": ["a.txt"]}`, "proto_files[0]", ".proto file"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "import_paths": ["x"]}`, "import_paths", "only applies with proto_files or proto_source"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "proto_files": ["a.proto"], "proto_source": "syntax = \"proto3\";"}`, "proto_source", "one of descriptor_set, proto_files and proto_source"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "proto_source": " "}`, "proto_source", "text of a .proto file"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "cursor_field": 5}`, "cursor_field", "must be a string"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metadata": {"Bad Key": "x"}}`, "metadata.Bad Key", "not a valid metadata key"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metadata": {"grpc-timeout": "1"}}`, "metadata.grpc-timeout", "cannot be configured"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metadata": {"authorization": "Bearer ` + secret + `\n"}}`, "metadata.authorization", "printable ASCII"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metadata": {"key-bin": "` + secret + `!"}}`, "metadata.key-bin", "base64"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "metadata": {"a": "1", "A": "2"}}`, "metadata.a", "set twice"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "timeout": "soon"}`, "timeout", "not a valid duration"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "max_response_bytes": -1}`, "max_response_bytes", "must be from 0 to 1073741824"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "field_names": "camel"}`, "field_names", "must be one of proto, json"},
		{`{"target": "127.0.0.1:1", "method": "a.B/C", "emit_defaults": "yes"}`, "emit_defaults", "must be a boolean"},
		{`[1]`, "", "must be a JSON object"},
	} {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: tc.cfg})
		if err != nil {
			t.Fatal(err)
		}
		d := wantDiag(t, diags, tc.field, tc.want)
		for _, x := range diags {
			if strings.Contains(x.Message, secret) {
				t.Errorf("%s: diagnostic quotes a secret: %q", tc.cfg, x.Message)
			}
		}
		_ = d
		// Invoke refuses the same config with the same words.
		ue := invokeErr(t, h, adaptertest.Call{Config: tc.cfg})
		if ue.Kind != sdk.KindInvalidArgument || strings.Contains(ue.Message, secret) {
			t.Errorf("%s: invoke error %+v", tc.cfg, ue)
		}
	}

	// A plaintext non-loopback target is a warning.
	diags, _ := h.Validate(ctxT(t), adaptertest.Call{Config: `{"target": "api.example.com:443", "method": "a.B/C", "plaintext": true}`})
	if len(diags) != 1 || diags[0].Severity != sdk.SeverityWarning || diags[0].Field != "plaintext" {
		t.Errorf("diagnostics = %v", diags)
	}
	// Good configs.
	for _, good := range []string{
		`{"target": "dns:///api.example.com:443", "method": "/a.B/C"}`,
		`{"target": "unix:///run/api.sock", "method": "a.B.C"}`,
		`{"target": "[::1]:50051", "service": "a.B", "methods": ["C"], "tool_prefix": ""}`,
	} {
		if diags, _ := h.Validate(ctxT(t), adaptertest.Call{Config: good}); len(diags) != 0 {
			t.Errorf("%s: %v", good, diags)
		}
	}
}

// TestSecretsStayOut: configured metadata never shows in errors.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	const secret = "Bearer tok-9f8e7d6c5b4a"
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close()
	h := newHarness(t)
	set := writeDescriptorSet(t, t.TempDir())
	cfg := map[string]any{"target": addr, "method": testService + "/Echo", "descriptor_set": set,
		"metadata": map[string]string{"authorization": secret}}
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{}`})
	if s := dump(ue); strings.Contains(s, "tok-9f8e7d6c5b4a") {
		t.Errorf("error quotes the secret: %s", s)
	}
	delete(cfg, "descriptor_set")
	for _, d := range expand(t, h, adaptertest.Call{Config: cfg}).diags {
		if strings.Contains(d.Message, "tok-9f8e7d6c5b4a") {
			t.Errorf("diagnostic quotes the secret: %s", d.Message)
		}
	}
}

func errorsAs(err error, target **sdk.UpstreamError) bool {
	ue, ok := err.(*sdk.UpstreamError)
	if ok {
		*target = ue
	}
	return ok
}

var _ = fmt.Sprintf

// Finding the argument that protojson refuses converts one field at a
// time; past a depth it stops descending, so that a deeply nested
// argument costs time in proportion to its size, not its square.
func TestConversionErrorDeepArgument(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	// (3000 levels took 10s before the bound, 0.2s after; under the race
	// detector about 20 times that. The message shows the bound.)
	const depth = 1000
	args := `{"tree":` + strings.Repeat(`{"label":"x","children":[`, depth) + `{"label":"\ud800"}` + strings.Repeat(`]}`, depth) + `}`
	start := time.Now()
	ue := invokeErr(t, h, adaptertest.Call{Config: ts.cfg("Zoo"), Args: args})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the conversion error took %s", took)
	}
	wantContains(t, "message", ue.Message, "argument tree.children[0].children[0].", "unpaired UTF-16 surrogate")
	if len(ue.Message) > 1000 {
		t.Errorf("a message of %d bytes: %.200s…", len(ue.Message), ue.Message)
	}
}

// An entry held to egress rules (a catalog's) dials only what they
// allow, checked on the address gRPC connects to: rules naming the
// server's address reach it; under * a loopback server and an abstract
// unix socket are refused, for good, naming the address.
func TestEgress(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Echo")
	if _, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"text":"hi"}`, Egress: []string{ts.addr}}); err != nil || ue != nil {
		t.Fatalf("named: %v %+v", err, ue)
	}
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{"text":"hi"}`, Egress: []string{"*"}})
	if ue.Retryable {
		t.Errorf("under *: %+v", ue)
	}
	wantContains(t, "message", ue.Message, "egress refused", "is a loopback address")
	// With its descriptors at hand, the call itself is refused.
	set := writeDescriptorSet(t, t.TempDir())
	cfg["descriptor_set"] = set
	ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{"text":"hi"}`, Egress: []string{"*"}})
	if ue.Kind != sdk.KindTransport || ue.Retryable {
		t.Errorf("under *, a call: %+v", ue)
	}
	wantContains(t, "message", ue.Message, "UNAVAILABLE: egress refused", "is a loopback address")
	abstract := ts.cfg("Echo")
	abstract["target"], abstract["plaintext"], abstract["descriptor_set"] = "unix-abstract:crank-egress-test", true, set
	ue = invokeErr(t, h, adaptertest.Call{Config: abstract, Args: `{"text":"hi"}`, Egress: []string{"*"}})
	wantContains(t, "message", ue.Message, "egress refused", "unix-abstract:crank-egress-test is a local socket")
}
