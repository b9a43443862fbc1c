package grpcadapter_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	grpcadapter "github.com/crankmcp/crank/plugins/grpc"
	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

const testService = "crank.test.v1.Test"

// testdataDir is the absolute testdata directory.
func testdataDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// sources reads the test protos.
func sources(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"test.proto", "zoo.proto", "legacy.proto"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

var (
	filesOnce sync.Once
	files     *protoregistry.Files
	filesErr  error
)

// testFiles compiles the test protos once per test binary.
func testFiles(t testing.TB) *protoregistry.Files {
	t.Helper()
	filesOnce.Do(func() {
		files, filesErr = grpctest.Compile(sources(t), "test.proto")
	})
	if filesErr != nil {
		t.Fatal(filesErr)
	}
	return files
}

// testServer is a real grpc-go server of the Test service on loopback. It
// records the ends of calls that were cancelled or timed out.
type testServer struct {
	addr  string
	ended chan string // "Method: context error" when a call's context ends first
	// deadlines receives how far away each Sleep call's deadline was
	// when it arrived (0: none).
	deadlines chan time.Duration
	// streamCalls counts the Upload and Chat calls that reached the
	// server.
	streamCalls atomic.Int64
}

func startTestServer(t testing.TB, opts grpctest.Options) *testServer {
	t.Helper()
	ts := &testServer{ended: make(chan string, 64), deadlines: make(chan time.Duration, 64)}
	fs := testFiles(t)
	h := grpctest.Handlers{
		testService + "/Echo":    grpctest.Unary(ts.echo),
		testService + "/OldEcho": grpctest.Unary(ts.echo),
		testService + "/Fail":    grpctest.Unary(ts.fail),
		testService + "/Sleep":   grpctest.Unary(ts.sleep),
		testService + "/Big":     grpctest.Unary(ts.big),
		testService + "/Zoo": grpctest.Unary(func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
			return in, nil
		}),
		testService + "/Legacy": grpctest.Unary(func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
			return in, nil
		}),
		testService + "/Now":     grpctest.Unary(ts.now),
		testService + "/Upper":   grpctest.Unary(ts.upper),
		testService + "/Count":   grpctest.ServerStream(ts.count),
		testService + "/Forever": grpctest.ServerStream(ts.forever),
		testService + "/Upload":  grpctest.Stream(ts.upload),
		testService + "/Chat":    grpctest.Stream(ts.chat),
	}
	_, ts.addr = grpctest.Start(t, fs, h, opts)
	return ts
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return fd
}

func getString(m *dynamicpb.Message, name string) string { return m.Get(field(m, name)).String() }
func getInt(m *dynamicpb.Message, name string) int64     { return m.Get(field(m, name)).Int() }

func (ts *testServer) method(name string) protoreflect.MethodDescriptor {
	md, err := grpctest.Method(files, testService+"/"+name)
	if err != nil {
		panic(err)
	}
	return md
}

func (ts *testServer) echo(ctx context.Context, in *dynamicpb.Message) (proto.Message, error) {
	out := dynamicpb.NewMessage(ts.method("Echo").Output())
	out.Set(field(out, "text"), protoreflect.ValueOfString(getString(in, "text")))
	out.Set(field(out, "id"), protoreflect.ValueOfInt64(getInt(in, "id")))
	md, _ := metadata.FromIncomingContext(ctx)
	mm := out.Mutable(field(out, "metadata")).Map()
	for k, v := range md {
		if strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" {
			continue
		}
		mm.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(strings.Join(v, ",")))
	}
	return out, nil
}

var codeByName = func() map[string]codes.Code {
	m := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		m[strings.ToUpper(snake(c.String()))] = c
	}
	m["CANCELLED"] = codes.Canceled
	return m
}()

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (ts *testServer) fail(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
	st := status.New(codeByName[getString(in, "code")], getString(in, "message"))
	if in.Get(field(in, "with_details")).Bool() {
		var err error
		st, err = st.WithDetails(
			&errdetails.ErrorInfo{Reason: "USER_MISSING", Domain: "test.crank", Metadata: map[string]string{"user": "42"}},
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "id", Description: "no such id"}}},
		)
		if err != nil {
			return nil, err
		}
	}
	return nil, st.Err()
}

func (ts *testServer) sleep(ctx context.Context, in *dynamicpb.Message) (proto.Message, error) {
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	ts.deadlines <- left
	select {
	case <-time.After(time.Duration(getInt(in, "ms")) * time.Millisecond):
	case <-ctx.Done():
		ts.ended <- "Sleep: " + ctx.Err().Error()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	out := dynamicpb.NewMessage(ts.method("Sleep").Output())
	out.Set(field(out, "text"), protoreflect.ValueOfString("slept"))
	return out, nil
}

func (ts *testServer) big(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
	out := dynamicpb.NewMessage(ts.method("Big").Output())
	out.Set(field(out, "text"), protoreflect.ValueOfString(strings.Repeat("x", int(getInt(in, "bytes")))))
	return out, nil
}

var fixedTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func (ts *testServer) now(context.Context, *dynamicpb.Message) (proto.Message, error) {
	out := dynamicpb.NewMessage(ts.method("Now").Output())
	out.Set(field(out, "seconds"), protoreflect.ValueOfInt64(fixedTime.Unix()))
	return out, nil
}

func (ts *testServer) upper(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
	out := dynamicpb.NewMessage(ts.method("Upper").Output())
	out.Set(field(out, "value"), protoreflect.ValueOfString(strings.ToUpper(getString(in, "value"))))
	return out, nil
}

func (ts *testServer) tick(n int) *dynamicpb.Message {
	out := dynamicpb.NewMessage(ts.method("Count").Output())
	out.Set(field(out, "n"), protoreflect.ValueOfInt32(int32(n)))
	at := dynamicpb.NewMessage(field(out, "at").Message())
	at.Set(field(at, "seconds"), protoreflect.ValueOfInt64(fixedTime.Unix()+int64(n)))
	out.Set(field(out, "at"), protoreflect.ValueOfMessage(at))
	return out
}

func (ts *testServer) count(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error {
	interval := time.Duration(getInt(in, "interval_ms")) * time.Millisecond
	after, _ := strconv.Atoi(getString(in, "after"))
	if d := time.Duration(getInt(in, "first_delay_ms")) * time.Millisecond; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			ts.ended <- "Count: " + ctx.Err().Error()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	for n := after + 1; n <= after+int(getInt(in, "count")); n++ {
		if n > after+1 && interval > 0 {
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				ts.ended <- "Count: " + ctx.Err().Error()
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		if err := send(ts.tick(n)); err != nil {
			return err
		}
	}
	if code := getString(in, "end_code"); code != "" {
		return status.Error(codeByName[code], "the stream ends with "+code)
	}
	return nil
}

func (ts *testServer) forever(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error {
	interval := max(time.Duration(getInt(in, "interval_ms"))*time.Millisecond, time.Millisecond)
	for n := 1; ; n++ {
		if err := send(ts.tick(n)); err != nil {
			ts.ended <- "Forever: send: " + err.Error()
			return err
		}
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			ts.ended <- "Forever: " + ctx.Err().Error()
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// upload is client-streaming: it reads every EchoRequest, then answers
// their texts joined by "," and the sum of their ids. A text "fail:CODE"
// ends the call with that status at once.
func (ts *testServer) upload(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
	ts.streamCalls.Add(1)
	var texts []string
	var sum int64
	err := grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
		text := getString(in, "text")
		if code, ok := strings.CutPrefix(text, "fail:"); ok {
			return status.Error(codeByName[code], "the upload ends with "+code)
		}
		texts = append(texts, text)
		sum += getInt(in, "id")
		return nil
	})
	if err != nil {
		return err
	}
	out := dynamicpb.NewMessage(md.Output())
	out.Set(field(out, "text"), protoreflect.ValueOfString(strings.Join(texts, ",")))
	out.Set(field(out, "id"), protoreflect.ValueOfInt64(sum))
	return stream.SendMsg(out)
}

// chat is bidirectional: it answers each EchoRequest at once with its text
// in upper case and its id, and ends when the client half-closes. A text
// "fail:CODE" ends the call with that status; "forever" makes it answer
// "tick" until the call is cancelled.
func (ts *testServer) chat(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
	ts.streamCalls.Add(1)
	reply := func(text string, id int64) error {
		out := dynamicpb.NewMessage(md.Output())
		out.Set(field(out, "text"), protoreflect.ValueOfString(text))
		out.Set(field(out, "id"), protoreflect.ValueOfInt64(id))
		return stream.SendMsg(out)
	}
	return grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
		text := getString(in, "text")
		if code, ok := strings.CutPrefix(text, "fail:"); ok {
			return status.Error(codeByName[code], "the chat ends with "+code)
		}
		if text == "forever" {
			ctx := stream.Context()
			for n := int64(1); ; n++ {
				if err := reply("tick", n); err != nil {
					ts.ended <- "Chat: send: " + err.Error()
					return err
				}
				select {
				case <-time.After(time.Millisecond):
				case <-ctx.Done():
					ts.ended <- "Chat: " + ctx.Err().Error()
					return status.FromContextError(ctx.Err()).Err()
				}
			}
		}
		return reply(strings.ToUpper(text), getInt(in, "id"))
	})
}

// waitEnded waits for the server to report that a call ended early.
func (ts *testServer) waitEnded(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-ts.ended:
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case <-timeout:
			t.Fatalf("the server never saw the end of %s", prefix)
			return ""
		}
	}
}

func newHarness(t testing.TB) *adaptertest.Harness {
	t.Helper()
	return adaptertest.New(t, grpcadapter.New())
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cfg returns a method config for the test server.
func (ts *testServer) cfg(method string, extra ...any) map[string]any {
	c := map[string]any{"target": ts.addr, "method": testService + "/" + method}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func invokeOK(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) map[string]any {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), c)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue != nil {
		t.Fatalf("invoke: upstream error: %+v", ue)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Structured, &out); err != nil {
		t.Fatalf("result %q: %v", res.Structured, err)
	}
	return out
}

func invokeErr(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) *sdk.UpstreamError {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), c)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue == nil {
		t.Fatalf("invoke: want an upstream error, got %+v", res)
	}
	return ue
}

// expansion is what an entry expands to.
type expansion struct {
	tools []sdk.Tool
	diags []sdk.Diagnostic
}

func expand(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) expansion {
	t.Helper()
	tools, diags, err := h.Expand(ctxT(t), c)
	if err != nil {
		t.Fatalf("expand: %v", err)
	}
	return expansion{tools, diags}
}

// expandTools expands and requires no error diagnostics.
func expandTools(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) []sdk.Tool {
	t.Helper()
	resp := expand(t, h, c)
	for _, d := range resp.diags {
		if d.Severity == sdk.SeverityError {
			t.Fatalf("expand: %s: %s", d.Field, d.Message)
		}
	}
	return resp.tools
}

// wantDiag requires an error diagnostic on field whose message holds subs.
func wantDiag(t *testing.T, diags []sdk.Diagnostic, field string, subs ...string) sdk.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Field == field && d.Severity == sdk.SeverityError {
			for _, s := range subs {
				if !strings.Contains(d.Message, s) {
					t.Errorf("diagnostic %s = %q, want it to contain %q", field, d.Message, s)
				}
			}
			return d
		}
	}
	t.Fatalf("no error diagnostic on %q in %v", field, diags)
	return sdk.Diagnostic{}
}

// dump renders v as JSON, for checking that no secret leaks into it.
func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// isTrue reads an annotation: nil is not said.
func isTrue(b *bool) bool { return b != nil && *b }

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s = %q, want it to contain %q", what, s, sub)
		}
	}
}

// directCall is a plain grpc-go call with dynamic messages, the baseline.
func directCall(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor, in proto.Message) (*dynamicpb.Message, error) {
	out := dynamicpb.NewMessage(md.Output())
	err := conn.Invoke(ctx, "/"+string(md.Parent().FullName())+"/"+string(md.Name()), in, out)
	return out, err
}

func newAdapter() sdk.Adapter { return grpcadapter.New() }
