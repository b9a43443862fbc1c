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
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
}

func startGRPCUpstream(t testing.TB) *grpcUpstream {
	t.Helper()
	files := grpctest.MustCompile(t, map[string]string{"accounts.proto": grpcE2EProto}, "accounts.proto")
	u := &grpcUpstream{files: files, slowEnd: make(chan string, 8)}
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

	if !window {
		return
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
