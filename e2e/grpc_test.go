package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/grpc/grpctest"
)

// A real grpc-go upstream with server reflection, for the gRPC adapter's
// end-to-end tests: its schemas reach the MCP client from the service's
// own descriptors.
const grpcE2EProto = `syntax = "proto3";
package e2e.v1;
import "google/protobuf/timestamp.proto";

// Accounts is the end-to-end tests' gRPC service.
service Accounts {
  // GetAccount returns one account.
  rpc GetAccount(GetAccountRequest) returns (Account);
  // Slow answers after ms milliseconds.
  rpc Slow(SlowRequest) returns (Account);
  // Whoami answers with the authorization metadata it received.
  rpc Whoami(SlowRequest) returns (Account);
  // Ticks streams n ticks.
  rpc Ticks(SlowRequest) returns (stream Account);
  // Merge reads accounts and answers one whose id is the sum of theirs and
  // whose owner joins their owners.
  rpc Merge(stream Account) returns (Account);
  // Follow answers each account id at once; id 0 makes it stream ticks
  // until the call ends; id 404 ends the call with NOT_FOUND.
  rpc Follow(stream GetAccountRequest) returns (stream Account);
}

message GetAccountRequest { int64 id = 1; }
message SlowRequest { int32 ms = 1; }

message Account {
  int64 id = 1;
  string owner = 2;
  Tier tier = 3;
  google.protobuf.Timestamp opened = 4;
  map<string, string> labels = 5;
}

enum Tier { TIER_UNSPECIFIED = 0; FREE = 1; PRO = 2; }
`

type grpcUpstream struct {
	addr    string
	files   *protoregistry.Files
	slowEnd chan string
	// streamCalls counts the Merge and Follow calls that reached the
	// server; followEnd receives the end of a Follow call cut short.
	streamCalls atomic.Int64
	followEnd   chan string
}

func startGRPCUpstream(t testing.TB) *grpcUpstream {
	t.Helper()
	files := grpctest.MustCompile(t, map[string]string{"accounts.proto": grpcE2EProto}, "accounts.proto")
	u := &grpcUpstream{files: files, slowEnd: make(chan string, 8), followEnd: make(chan string, 8)}
	account := func(id int64, owner string) *dynamicpb.Message {
		m, _ := grpctest.NewMessage(files, "e2e.v1.Account")
		f := m.Descriptor().Fields()
		m.Set(f.ByName("id"), protoreflect.ValueOfInt64(id))
		m.Set(f.ByName("owner"), protoreflect.ValueOfString(owner))
		m.Set(f.ByName("tier"), protoreflect.ValueOfEnum(2))
		ts := dynamicpb.NewMessage(f.ByName("opened").Message())
		ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1714564800))
		m.Set(f.ByName("opened"), protoreflect.ValueOfMessage(ts))
		return m
	}
	intArg := func(in *dynamicpb.Message, name string) int64 {
		return in.Get(in.Descriptor().Fields().ByName(protoreflect.Name(name))).Int()
	}
	const svc = "e2e.v1.Accounts/"
	_, u.addr = grpctest.Start(t, files, grpctest.Handlers{
		svc + "GetAccount": grpctest.Unary(func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
			id := intArg(in, "id")
			if id == 404 {
				return nil, status.Error(codes.NotFound, "no account 404")
			}
			return account(id, fmt.Sprintf("owner-%d", id)), nil
		}),
		svc + "Slow": grpctest.Unary(func(ctx context.Context, in *dynamicpb.Message) (proto.Message, error) {
			select {
			case <-time.After(time.Duration(intArg(in, "ms")) * time.Millisecond):
				return account(1, "slow"), nil
			case <-ctx.Done():
				u.slowEnd <- ctx.Err().Error()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
		}),
		svc + "Whoami": grpctest.Unary(func(ctx context.Context, _ *dynamicpb.Message) (proto.Message, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			return account(7, strings.Join(md.Get("authorization"), ",")), nil
		}),
		svc + "Ticks": grpctest.ServerStream(func(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error {
			for i := int64(1); ; i++ {
				if err := send(account(i, "tick")); err != nil {
					return err
				}
				select {
				case <-time.After(time.Duration(max(intArg(in, "ms"), 5)) * time.Millisecond):
				case <-ctx.Done():
					return status.FromContextError(ctx.Err()).Err()
				}
			}
		}),
		svc + "Merge": grpctest.Stream(func(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
			u.streamCalls.Add(1)
			var sum int64
			var owners []string
			err := grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
				sum += intArg(in, "id")
				owners = append(owners, in.Get(in.Descriptor().Fields().ByName("owner")).String())
				return nil
			})
			if err != nil {
				return err
			}
			return stream.SendMsg(account(sum, strings.Join(owners, "+")))
		}),
		svc + "Follow": grpctest.Stream(func(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
			u.streamCalls.Add(1)
			ctx := stream.Context()
			return grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
				switch id := intArg(in, "id"); id {
				case 404:
					return status.Error(codes.NotFound, "no account 404")
				case 0:
					for i := int64(1); ; i++ {
						if err := stream.SendMsg(account(i, "tick")); err != nil {
							return err
						}
						select {
						case <-time.After(5 * time.Millisecond):
						case <-ctx.Done():
							u.followEnd <- ctx.Err().Error()
							return status.FromContextError(ctx.Err()).Err()
						}
					}
				default:
					return stream.SendMsg(account(id, fmt.Sprintf("owner-%d", id)))
				}
			})
		}),
	}, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	return u
}

const grpcSecret = "grpc-tok-71c2e9-very-secret"

func grpcOps(addr string) string {
	return fmt.Sprintf(`
operations:
  - name: get_account
    adapter: grpc
    timeout: 5s
    config: {target: "%[1]s", method: e2e.v1.Accounts/GetAccount}
  - name: accounts
    adapter: grpc
    timeout: 300ms
    config:
      target: "%[1]s"
      service: e2e.v1.Accounts
      methods: [Slow, Whoami]
      metadata: {authorization: "Bearer {env.CRANK_E2E_GRPC_TOKEN}"}
`, addr)
}

// TestGRPCGateway drives gRPC tools end to end: schemas derived from
// server reflection, a unary call, a status error, a timeout whose
// cancellation reaches the server, secret metadata kept out of results and
// logs.
func TestGRPCGateway(t *testing.T) {
	t.Parallel()
	up := startGRPCUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: grpcOps(up.addr), Env: []string{"CRANK_E2E_GRPC_TOKEN=" + grpcSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "accounts_slow,accounts_whoami,get_account" {
		t.Fatalf("tools = %v", names)
	}
	get := byName["get_account"]
	if get.Description != "GetAccount returns one account." {
		t.Errorf("description = %q", get.Description)
	}
	in, _ := json.Marshal(get.InputSchema)
	out, _ := json.Marshal(get.OutputSchema)
	for what, s := range map[string]string{"input": string(in), "output": string(out)} {
		if !strings.Contains(s, `"id":{`) || !strings.Contains(s, `"pattern":"^-?[0-9]+$"`) {
			t.Errorf("%s schema = %s", what, s)
		}
	}
	if !strings.Contains(string(out), `"tier":{"anyOf":[{"enum":["TIER_UNSPECIFIED","FREE","PRO"]`) {
		t.Errorf("output schema = %s", out)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_account", Arguments: map[string]any{"id": "42"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, textOf(res))
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"id":"42","labels":{},"opened":"2024-05-01T12:00:00Z","owner":"owner-42","tier":"PRO"}` {
		t.Errorf("structured = %s", got)
	}

	// The host checks arguments against the derived schema.
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_account", Arguments: map[string]any{"id": "x"}})
	if !res.IsError || !strings.Contains(textOf(res), "id") {
		t.Errorf("bad argument: %s", textOf(res))
	}

	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_account", Arguments: map[string]any{"id": 404}})
	if !res.IsError || !strings.Contains(textOf(res), "NOT_FOUND: no account 404") ||
		!strings.Contains(textOf(res), "gRPC e2e.v1.Accounts/GetAccount at "+up.addr) {
		t.Errorf("status error: %s", textOf(res))
	}

	start := time.Now()
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "accounts_slow", Arguments: map[string]any{"ms": 10000}})
	if !res.IsError || !strings.Contains(textOf(res), "DEADLINE_EXCEEDED") || time.Since(start) > 5*time.Second {
		t.Errorf("timeout after %v: %s", time.Since(start), textOf(res))
	}
	select {
	case <-up.slowEnd:
	case <-time.After(10 * time.Second):
		t.Error("the upstream never saw the call end")
	}

	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "accounts_whoami", Arguments: map[string]any{}})
	if res.IsError || strings.Contains(textOf(res), grpcSecret) {
		t.Errorf("whoami: %s", textOf(res))
	}
	if !strings.Contains(textOf(res), "Bearer") {
		t.Errorf("the metadata did not reach the upstream: %s", textOf(res))
	}
	if strings.Contains(g.log.String(), grpcSecret) {
		t.Error("the secret shows in the gateway's log")
	}
}

// TestGRPCWindow reads a server stream through the host's window engine,
// when this build's host serves mode window.
func TestGRPCWindow(t *testing.T) {
	t.Parallel()
	if !grpcWindowSupported() {
		t.Skip("this build's host does not serve mode window")
	}
	up := startGRPCUpstream(t)
	ops := fmt.Sprintf(`
operations:
  - name: ticks
    description: Read ticks for a while.
    adapter: grpc
    mode: window
    limits: {window_duration_ms: 3000, max_items: 4, upstream_timeout_ms: 2000}
    aggregation: {aggregation_mode: raw_items}
    config: {target: "%s", method: e2e.v1.Accounts/Ticks}
`, up.addr)
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticks", Arguments: map[string]any{"ms": 10}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, textOf(res))
	}
	var w struct {
		Items     []map[string]any `json:"items"`
		EndReason string           `json:"end_reason"`
		Truncated bool             `json:"truncated"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	if len(w.Items) != 4 || w.EndReason != "max_items" || w.Items[0]["owner"] != "tick" || w.Items[3]["id"] != "4" {
		t.Errorf("window = %s", b)
	}
}

// TestGRPCDemo runs the demo gRPC service of `make run` (crank_demo_grpc
// over h2c) in one crank process and a gateway with demo/grpc.yaml in
// another: the tools work, and the schemas compiled from the file's
// proto_source equal those the running service's reflection gives.
func TestGRPCDemo(t *testing.T) {
	t.Parallel()
	addr := startDemoGRPC(t)
	demoOps, err := os.ReadFile(filepath.Join(repoRoot, "demo", "grpc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops := strings.ReplaceAll(string(demoOps), "127.0.0.1:8082", addr)
	window := grpcWindowSupported()
	if !strings.Contains(ops, "  - name: grpc_watch_events") {
		t.Fatal("demo/grpc.yaml lost its window entry")
	}
	ops += fmt.Sprintf(`
  - name: reflected_get_user
    adapter: grpc
    config: {target: "%s", method: crank.demo.v1.Directory/GetUser}
`, addr)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_DEMO_TOKEN=demo-token-e2e"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	fromFile, reflected := byName["grpc_get_user"], byName["reflected_get_user"]
	if fromFile == nil || reflected == nil || byName["directory_list_users"] == nil {
		t.Fatalf("tools = %v", byName)
	}
	for what, pair := range map[string][2]any{
		"input":  {fromFile.InputSchema, reflected.InputSchema},
		"output": {fromFile.OutputSchema, reflected.OutputSchema},
	} {
		a, _ := json.Marshal(pair[0])
		b, _ := json.Marshal(pair[1])
		if string(a) != string(b) {
			t.Errorf("%s schema from demo/grpc.yaml's proto_source differs from the service's (demo/grpc.go):\n%s\n%s", what, a, b)
		}
	}
	if fromFile.Description != "GetUser returns one user of the demo directory by id." || fromFile.Title != "Get a user (gRPC)" {
		t.Errorf("tool = %q %q", fromFile.Title, fromFile.Description)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_get_user", Arguments: map[string]any{"id": "2"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, textOf(res))
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"created":"2022-06-23T12:00:00Z","email":"alan@example.com","id":"2","name":"Alan Turing","role":"MEMBER"}` {
		t.Errorf("structured = %s", got)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_get_user", Arguments: map[string]any{"id": 9}})
	if !res.IsError || !strings.Contains(textOf(res), "NOT_FOUND: no user with id 9") || !strings.Contains(textOf(res), "USER_NOT_FOUND") {
		t.Errorf("missing user: %s", textOf(res))
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "directory_list_users", Arguments: map[string]any{"limit": 1}})
	got, _ = json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(got), `"users":[{"created":"2021-03-01T09:00:00Z","email":"ada@example.com","id":"1"`) {
		t.Errorf("list: %s", got)
	}

	// The client-streaming tool: the users of the ids sent, unknown ones
	// left out.
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_lookup_users", Arguments: map[string]any{
		"requests": []any{map[string]any{"id": "3"}, map[string]any{"id": 9}, map[string]any{"id": 1}}}})
	got, _ = json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(got), `"users":[{"created":"2023-12-09T08:30:00Z","email":"grace@example.com","id":"3"`) ||
		strings.Count(string(got), `"email"`) != 2 {
		t.Errorf("lookup: %s %s", got, textOf(res))
	}

	if !window {
		return
	}
	// The bidirectional window: an event of each user asked for at once,
	// then the server's reports until the window (6 events) ends it.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_presence", Arguments: map[string]any{
		"requests": []any{map[string]any{"id": 1}, map[string]any{"id": 2}}}})
	var pw struct {
		Items []struct {
			Seq    string `json:"seq"`
			UserID string `json:"user_id"`
		} `json:"items"`
		EndReason string `json:"end_reason"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err != nil || res.IsError || json.Unmarshal(b, &pw) != nil || len(pw.Items) != 6 || pw.EndReason != "max_items" ||
		pw.Items[0].UserID != "1" || pw.Items[1].UserID != "2" || pw.Items[5].Seq != "6" {
		t.Errorf("presence: %v %s", err, b)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_presence", Arguments: map[string]any{"requests": []any{map[string]any{"id": 9}}}})
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(textOf(res)+string(b), "NOT_FOUND: no user with id 9") {
		t.Errorf("presence of a missing user: %s %s", textOf(res), b)
	}

	// Two windows of the event stream: the second resumes after the first.
	var w struct {
		Items     []struct{ Seq string } `json:"items"`
		EndReason string                 `json:"end_reason"`
		Cursor    string                 `json:"cursor"`
	}
	for i, args := range []map[string]any{{"interval_ms": 20}, {"interval_ms": 20}} {
		if w.Cursor != "" {
			args["cursor"] = w.Cursor
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "grpc_watch_events", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("window %d: %v %s", i, err, textOf(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &w); err != nil {
			t.Fatal(err)
		}
		want := []string{"1", "2", "3", "4", "5"}
		if i == 1 {
			want = []string{"6", "7", "8", "9", "10"}
		}
		var seqs []string
		for _, it := range w.Items {
			seqs = append(seqs, it.Seq)
		}
		if !slices.Equal(seqs, want) || w.EndReason != "max_items" || windowCursorValue(w.Cursor) != want[4] {
			t.Errorf("window %d = %s", i, b)
		}
	}
}

// grpcWindowSupported reports whether this build's host serves mode window.
func grpcWindowSupported() bool {
	probe := "operations:\n  - {name: w, description: d, adapter: grpc, mode: window, config: {target: \"127.0.0.1:1\", method: a.B/C}}\n"
	_, err := opsfile.Parse("probe.yaml", []byte(probe), opsfile.LoadOptions{})
	return err == nil || !strings.Contains(err.Error(), "not supported by this build")
}

// startDemoGRPC runs crank with only the demo gRPC site, as the root
// Caddyfile serves it, on a free port, and returns its address.
func startDemoGRPC(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	servers %[2]s {
		protocols h1 h2c
	}
}

http://%[2]s {
	bind 127.0.0.1
	crank_demo_grpc
}
`, freePort(t), addr)
	writeFile(t, filepath.Join(dir, "Caddyfile"), caddyfile)
	log := &syncBuffer{}
	cmd := exec.Command(crankBin, "run", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("demo gRPC log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the demo gRPC service exited:\n%s", log.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo gRPC service did not come up:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grpcStreamOps serves the upstream's client-streaming method Merge as a
// unary tool and its bidirectional method Follow as a window and as a
// session.
func grpcStreamOps(addr string) string {
	return fmt.Sprintf(`
operations:
  # Bidirectional: the requests go out, the answers are a window's items.
  - name: follow
    description: Follow some accounts.
    adapter: grpc
    mode: window
    limits: {window_duration_ms: 10000, max_items: 5, upstream_timeout_ms: 5000}
    aggregation: {aggregation_mode: raw_items}
    config: {target: "%[1]s", method: e2e.v1.Accounts/Follow, requests: {max_items: 4}}
  - name: merge
    adapter: grpc
    timeout: 5s
    config: {target: "%[1]s", method: e2e.v1.Accounts/Merge, requests: {max_items: 3, max_bytes: 256}}
  # The same stream read by a session between polls.
  - name: follow_live
    description: Follow some accounts in a session.
    adapter: grpc
    mode: session
    limits: {max_items: 50, idle_timeout_ms: 60000}
    config: {target: "%[1]s", method: e2e.v1.Accounts/Follow}
`, addr)
}

// grpcWindowResult is a window result's structuredContent.
type grpcWindowResult struct {
	Items          []map[string]any `json:"items"`
	Truncated      bool             `json:"truncated"`
	WindowComplete bool             `json:"window_complete"`
	EndReason      string           `json:"end_reason"`
	Error          any              `json:"error"`
}

// TestGRPCClientAndBidiStreaming drives a real grpc-go server's
// client-streaming and bidirectional methods through the go-sdk client:
// the typed, bounded requests array; an oversize array refused before a
// byte is sent; a window with progress that ends with the server, one
// that ends before a server that never completes, one the server ends
// with an error mid-stream; a session's start, poll and stop.
func TestGRPCClientAndBidiStreaming(t *testing.T) {
	t.Parallel()
	if !grpcWindowSupported() {
		t.Skip("this build's host does not serve mode window")
	}
	var progress progressLog
	up := startGRPCUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: grpcStreamOps(up.addr)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := g.connectProgress(ctx, &progress)

	tools := listToolsNamed(ctx, t, cs, "follow,follow_live_poll,follow_live_start,follow_live_stop,merge")
	for name, maxItems := range map[string]string{"merge": `"maxItems":3`, "follow": `"maxItems":4`, "follow_live_start": `"maxItems":100`} {
		b, _ := json.Marshal(tools[name].InputSchema)
		if s := string(b); !strings.Contains(s, `"requests":{`) || !strings.Contains(s, maxItems) || name == "merge" && !strings.Contains(s, `"owner":{`) {
			t.Errorf("%s input schema: %s", name, s)
		}
	}

	// Client-streaming: the requests in order, the one answer as result.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "merge", Arguments: map[string]any{
		"requests": []any{map[string]any{"id": 1, "owner": "ann"}, map[string]any{"id": "2", "owner": "bob"}}}})
	if err != nil || res.IsError {
		t.Fatalf("merge: %v %s", err, textOf(res))
	}
	got, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(got), `"id":"3"`) || !strings.Contains(string(got), `"owner":"ann+bob"`) {
		t.Errorf("merge = %s", got)
	}

	// Oversize arrays are refused before anything reaches the server: too
	// many messages (the schema's maxItems, the host's check) and too many
	// bytes (requests.max_bytes, the adapter's).
	calls := up.streamCalls.Load()
	four := []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}, map[string]any{"id": 4}}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "merge", Arguments: map[string]any{"requests": four}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "requests") {
		t.Errorf("four requests: %v %s", err, textOf(res))
	}
	big := strings.Repeat("x", 200)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "merge", Arguments: map[string]any{
		"requests": []any{map[string]any{"owner": big}, map[string]any{"owner": big}}}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "more than the 256 a call may send (requests.max_bytes); nothing was sent") {
		t.Errorf("oversize requests: %v %s", err, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "follow", Arguments: map[string]any{"requests": []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}, map[string]any{"id": 4}, map[string]any{"id": 5}}}})
	if err != nil || !res.IsError {
		t.Errorf("five follow requests: %v %s", err, textOf(res))
	}
	if n := up.streamCalls.Load(); n != calls {
		t.Errorf("%d refused calls reached the server", n-calls)
	}

	follow := func(ids ...int) (*mcp.CallToolResult, grpcWindowResult) {
		t.Helper()
		var reqs []any
		for _, id := range ids {
			reqs = append(reqs, map[string]any{"id": id})
		}
		params := &mcp.CallToolParams{Name: "follow", Arguments: map[string]any{"requests": reqs}}
		params.SetProgressToken(fmt.Sprint("follow", ids))
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("follow %v: %v", ids, err)
		}
		var w grpcWindowResult
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &w)
		return res, w
	}

	// The server answers each request and ends after the half-close: the
	// window ends with it; each item came as a progress notification.
	res, w := follow(1, 2)
	if res.IsError || len(w.Items) != 2 || w.Items[1]["owner"] != "owner-2" || w.EndReason != "upstream_end" || !w.WindowComplete || w.Truncated {
		t.Errorf("follow 1 2: %s %+v", textOf(res), w)
	}
	if got := progress.take(2); len(got) < 2 || !strings.Contains(got[1].Message, "owner-2") {
		t.Errorf("progress: %d notifications", len(got))
	}

	// A server that never completes: the window ends first, and the
	// cancellation reaches the server.
	res, w = follow(7, 0)
	if res.IsError || len(w.Items) != 5 || w.Items[0]["owner"] != "owner-7" || w.EndReason != "max_items" || !w.Truncated {
		t.Errorf("follow 7 0: %s %+v", textOf(res), w)
	}
	select {
	case e := <-up.followEnd:
		if e != context.Canceled.Error() {
			t.Errorf("the server saw %q", e)
		}
	case <-time.After(20 * time.Second):
		t.Error("the server never saw the window end")
	}

	// A status mid-stream ends the window with the upstream's error.
	res, w = follow(1, 404, 2)
	if text := textOf(res); !strings.Contains(text, "NOT_FOUND: no account 404") && !strings.Contains(fmt.Sprint(w.Error), "NOT_FOUND: no account 404") {
		t.Errorf("follow 1 404: %s %+v", text, w)
	}

	// A session reads the same stream in the background between polls.
	start := callOK(t, cs, "follow_live_start", map[string]any{"requests": []any{map[string]any{"id": 9}, map[string]any{"id": 0}}})
	id, _ := start["session_id"].(string)
	if id == "" {
		t.Fatalf("start: %v", start)
	}
	var seen []any
	waitFor(t, "items in the session", func() bool {
		items, _ := callOK(t, cs, "follow_live_poll", map[string]any{"session_id": id})["items"].([]any)
		seen = append(seen, items...)
		return len(seen) >= 3
	})
	if first, _ := seen[0].(map[string]any); first["owner"] != "owner-9" {
		t.Errorf("session items: %v", seen)
	}
	callOK(t, cs, "follow_live_stop", map[string]any{"session_id": id})
	select {
	case <-up.followEnd:
	case <-time.After(20 * time.Second):
		t.Error("the server never saw the session stop")
	}
}

// TestGRPCStreamingTypeScript drives the same tools with the official
// TypeScript SDK, which checks each structured result against the tool's
// output schema.
func TestGRPCStreamingTypeScript(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	if !grpcWindowSupported() {
		t.Skip("this build's host does not serve mode window")
	}
	up := startGRPCUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: grpcStreamOps(up.addr)})
	run := runTSCalls(t, g.MCPURL, `[
		{"op":"callTool","name":"merge","arguments":{"requests":[{"id":"5","owner":"ann"},{"id":6,"owner":"bob"}]}},
		{"op":"callTool","name":"merge","arguments":{"requests":[{"owner":"`+strings.Repeat("x", 200)+`"},{"owner":"`+strings.Repeat("y", 200)+`"}]}},
		{"op":"callTool","name":"follow","arguments":{"requests":[{"id":3},{"id":0}]},"progress":true},
		{"op":"callTool","name":"follow_live_start","arguments":{"requests":[{"id":0}]}},
		{"op":"callTool","name":"follow_live_poll","arguments":{"session_id":"{{3.session_id}}","max_items":2},"until":{"field":"has_more","equals":true}},
		{"op":"callTool","name":"follow_live_stop","arguments":{"session_id":"{{3.session_id}}"}}
	]`, 6)
	for i, s := range run.Steps {
		if !s.OK || s.Result.IsError != (i == 1) {
			t.Fatalf("step %d: %s\n%+v", i, s.Error.Message, s)
		}
	}
	st := run.Steps
	if sc := st[0].Result.StructuredContent; sc["id"] != "11" || sc["owner"] != "ann+bob" {
		t.Errorf("merge: %v", sc)
	}
	if c := st[1].Result.Content; len(c) == 0 || !strings.Contains(c[0].Text, "requests.max_bytes") {
		t.Errorf("oversize: %+v", st[1].Result)
	}
	if sc := st[2].Result.StructuredContent; sc["end_reason"] != "max_items" || len(sc["items"].([]any)) != 5 || len(st[2].Result.Progress) != 5 {
		t.Errorf("follow: %v, %d progress", sc, len(st[2].Result.Progress))
	}
	if items, _ := st[4].Result.StructuredContent["items"].([]any); len(items) == 0 {
		t.Errorf("poll: %v", st[4].Result.StructuredContent)
	}
}
