package demo

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
)

// The demo gRPC upstream of `make run`: the service crank.demo.v1.Directory
// below, served by Caddy itself (handler module
// http.handlers.crank_demo_grpc, directive crank_demo_grpc) over HTTP/2
// cleartext, with server reflection (v1 and v1alpha), so the gRPC adapter
// derives its tools' schemas from the service. The site needs h2c:
//
//	{
//		servers 127.0.0.1:8082 {
//			protocols h1 h2c
//		}
//	}
//	http://127.0.0.1:8082 {
//		bind 127.0.0.1
//		crank_demo_grpc
//	}
//
// The service is described by its .proto source (grpcDemoProto), compiled when
// the handler is provisioned; handlers use dynamic messages, so there is no
// generated code. Operations that call it: demo/grpc.yaml, which carries
// the same .proto text (proto_source) since the gateway loads its tools
// before this site listens; e2e TestGRPCDemo checks that the two agree.

func init() {
	caddy.RegisterModule(GRPCDemo{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_grpc", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		g := new(GRPCDemo)
		return g, g.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_grpc", httpcaddyfile.Before, "respond")
}

// grpcDemoProto is the demo service's definition.
const grpcDemoProto = `syntax = "proto3";

package crank.demo.v1;

import "google/protobuf/timestamp.proto";

// Directory is the demo gRPC service of Crank's make run.
service Directory {
  // GetUser returns one user of the demo directory by id.
  rpc GetUser(GetUserRequest) returns (User) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  // ListUsers lists the users of the demo directory, at most limit of them.
  rpc ListUsers(ListUsersRequest) returns (ListUsersResponse) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  // WatchEvents streams directory events, one every interval_ms, until the
  // call ends (or count events, when count is set).
  rpc WatchEvents(WatchEventsRequest) returns (stream Event) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  // LookupUsers reads a stream of user ids and answers the users that
  // exist, in the order asked.
  rpc LookupUsers(stream GetUserRequest) returns (ListUsersResponse) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
  // Presence answers each user id it reads at once with that user's latest
  // event; after the last id it keeps reporting events of those users, one
  // every 200ms, until the call ends. An unknown id ends the call with
  // NOT_FOUND.
  rpc Presence(stream GetUserRequest) returns (stream Event) {
    option idempotency_level = NO_SIDE_EFFECTS;
  }
}

// A user's role.
enum Role {
  ROLE_UNSPECIFIED = 0;
  ADMIN = 1;
  MEMBER = 2;
}

// User is a person in the demo directory.
message User {
  int64 id = 1;
  string name = 2;
  string email = 3;
  Role role = 4;
  // When the user joined.
  google.protobuf.Timestamp created = 5;
}

message GetUserRequest {
  // The user's id (1 to 3 exist).
  int64 id = 1;
}

message ListUsersRequest {
  // At most this many users; 0 means all.
  int32 limit = 1;
}

message ListUsersResponse {
  repeated User users = 1;
}

message WatchEventsRequest {
  // Stop after this many events; 0 streams until the call ends.
  int32 count = 1;
  // Milliseconds between events; default 200.
  int32 interval_ms = 2;
  // Resume after this event sequence number.
  int64 after_seq = 3;
}

// Event is something that happened in the directory.
message Event {
  int64 seq = 1;
  // login, logout or update.
  string kind = 2;
  int64 user_id = 3;
  google.protobuf.Timestamp at = 4;
}
`

// GRPCDemo serves the demo gRPC service.
type GRPCDemo struct {
	srv   *grpctest.Server
	files *protoregistry.Files
}

// CaddyModule returns the Caddy module information.
func (GRPCDemo) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_grpc", New: func() caddy.Module { return new(GRPCDemo) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo_grpc`.
func (g *GRPCDemo) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

type grpcDemoUser struct {
	id          int64
	name, email string
	role        int32
	joined      time.Time
}

var grpcDemoUsers = []grpcDemoUser{
	{1, "Ada Lovelace", "ada@example.com", 1, time.Date(2021, 3, 1, 9, 0, 0, 0, time.UTC)},
	{2, "Alan Turing", "alan@example.com", 2, time.Date(2022, 6, 23, 12, 0, 0, 0, time.UTC)},
	{3, "Grace Hopper", "grace@example.com", 2, time.Date(2023, 12, 9, 8, 30, 0, 0, time.UTC)},
}

// Provision compiles the service and builds its gRPC server.
func (g *GRPCDemo) Provision(caddy.Context) error {
	files, err := grpctest.Compile(map[string]string{"crank/demo/v1/directory.proto": grpcDemoProto}, "crank/demo/v1/directory.proto")
	if err != nil {
		return fmt.Errorf("demo gRPC service: %v", err)
	}
	g.files = files
	const svc = "crank.demo.v1.Directory/"
	g.srv, err = grpctest.NewServer(files, grpctest.Handlers{
		svc + "GetUser":     grpctest.Unary(g.getUser),
		svc + "ListUsers":   grpctest.Unary(g.listUsers),
		svc + "WatchEvents": grpctest.ServerStream(g.watchEvents),
		svc + "LookupUsers": grpctest.Stream(g.lookupUsers),
		svc + "Presence":    grpctest.Stream(g.presence),
	}, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	return err
}

// Cleanup stops the gRPC server.
func (g *GRPCDemo) Cleanup() error {
	if g.srv != nil {
		g.srv.Stop()
	}
	return nil
}

// ServeHTTP serves gRPC requests (HTTP/2 with a gRPC content type); other
// requests get a short explanation.
func (g *GRPCDemo) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		// grpc-go needs an http.Flusher; Caddy's writer wrappers offer
		// flushing through http.ResponseController instead.
		g.srv.ServeHTTP(flushWriter{w, http.NewResponseController(w)}, r)
		return nil
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnsupportedMediaType)
	_, _ = fmt.Fprintln(w, "Crank demo gRPC service crank.demo.v1.Directory: speak gRPC (HTTP/2 cleartext) here.")
	return nil
}

// flushWriter gives a response writer the http.Flusher method gRPC needs.
type flushWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Flush() { _ = f.rc.Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (f flushWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (g *GRPCDemo) message(name string) *dynamicpb.Message {
	m, err := grpctest.NewMessage(g.files, "crank.demo.v1."+name)
	if err != nil {
		panic(err) // the names are this file's own
	}
	return m
}

func grpcSet(m *dynamicpb.Message, field string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(field)), v)
}

func grpcGet(m *dynamicpb.Message, field string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(field)))
}

func (g *GRPCDemo) timestamp(t time.Time) protoreflect.Value {
	ts := g.message("User").Descriptor().Fields().ByName("created").Message()
	m := dynamicpb.NewMessage(ts)
	grpcSet(m, "seconds", protoreflect.ValueOfInt64(t.Unix()))
	grpcSet(m, "nanos", protoreflect.ValueOfInt32(int32(t.Nanosecond())))
	return protoreflect.ValueOfMessage(m)
}

func (g *GRPCDemo) user(u grpcDemoUser) *dynamicpb.Message {
	m := g.message("User")
	grpcSet(m, "id", protoreflect.ValueOfInt64(u.id))
	grpcSet(m, "name", protoreflect.ValueOfString(u.name))
	grpcSet(m, "email", protoreflect.ValueOfString(u.email))
	grpcSet(m, "role", protoreflect.ValueOfEnum(protoreflect.EnumNumber(u.role)))
	grpcSet(m, "created", g.timestamp(u.joined))
	return m
}

func (g *GRPCDemo) getUser(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
	u, err := findDemoUser(grpcGet(in, "id").Int())
	if err != nil {
		return nil, err
	}
	return g.user(u), nil
}

// findDemoUser finds a user by id, or answers NOT_FOUND with an ErrorInfo.
func findDemoUser(id int64) (grpcDemoUser, error) {
	for _, u := range grpcDemoUsers {
		if u.id == id {
			return u, nil
		}
	}
	st, _ := status.New(codes.NotFound, "no user with id "+strconv.FormatInt(id, 10)).WithDetails(
		&errdetails.ErrorInfo{Reason: "USER_NOT_FOUND", Domain: "demo.crank", Metadata: map[string]string{"id": strconv.FormatInt(id, 10)}})
	return grpcDemoUser{}, st.Err()
}

// lookupUsers is client-streaming: the users of the ids it reads, in
// order, unknown ids left out.
func (g *GRPCDemo) lookupUsers(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
	out := g.message("ListUsersResponse")
	list := out.Mutable(out.Descriptor().Fields().ByName("users")).List()
	err := grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
		if u, err := findDemoUser(grpcGet(in, "id").Int()); err == nil {
			list.Append(protoreflect.ValueOfMessage(g.user(u)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return stream.SendMsg(out)
}

// presence is bidirectional: each id it reads is answered at once with an
// event of that user; after the client half-closes it reports events of
// those users every 200ms until the call ends.
func (g *GRPCDemo) presence(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error {
	var seq int64
	var users []grpcDemoUser
	event := func(u grpcDemoUser) error {
		seq++
		return stream.SendMsg(g.event(seq, u.id))
	}
	err := grpctest.Receive(stream, md, func(in *dynamicpb.Message) error {
		u, err := findDemoUser(grpcGet(in, "id").Int())
		if err != nil {
			return err
		}
		users = append(users, u)
		return event(u)
	})
	if err != nil || len(users) == 0 {
		return err
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-t.C:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
		if err := event(users[n%len(users)]); err != nil {
			return err
		}
	}
}

func (g *GRPCDemo) listUsers(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
	out := g.message("ListUsersResponse")
	list := out.Mutable(out.Descriptor().Fields().ByName("users")).List()
	limit := int(grpcGet(in, "limit").Int())
	for i, u := range grpcDemoUsers {
		if limit > 0 && i >= limit {
			break
		}
		list.Append(protoreflect.ValueOfMessage(g.user(u)))
	}
	return out, nil
}

var grpcEventKinds = []string{"login", "update", "logout"}

// event is the directory event seq, of the user userID, now.
func (g *GRPCDemo) event(seq, userID int64) *dynamicpb.Message {
	ev := g.message("Event")
	grpcSet(ev, "seq", protoreflect.ValueOfInt64(seq))
	grpcSet(ev, "kind", protoreflect.ValueOfString(grpcEventKinds[seq%int64(len(grpcEventKinds))]))
	grpcSet(ev, "user_id", protoreflect.ValueOfInt64(userID))
	grpcSet(ev, "at", g.timestamp(time.Now().UTC().Truncate(time.Millisecond)))
	return ev
}

func (g *GRPCDemo) watchEvents(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error {
	interval := time.Duration(grpcGet(in, "interval_ms").Int()) * time.Millisecond
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	interval = max(interval, 10*time.Millisecond)
	count := grpcGet(in, "count").Int()
	seq := grpcGet(in, "after_seq").Int()
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := int64(0); count <= 0 || n < count; n++ {
		if n > 0 {
			select {
			case <-t.C:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		seq++
		if err := send(g.event(seq, grpcDemoUsers[seq%int64(len(grpcDemoUsers))].id)); err != nil {
			return err
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*GRPCDemo)(nil)
	_ caddy.CleanerUpper          = (*GRPCDemo)(nil)
	_ caddyhttp.MiddlewareHandler = (*GRPCDemo)(nil)
	_ caddyfile.Unmarshaler       = (*GRPCDemo)(nil)
)
