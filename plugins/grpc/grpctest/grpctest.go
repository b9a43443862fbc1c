// Package grpctest serves gRPC services straight from their descriptors,
// with handlers written against dynamicpb messages: no generated code. The
// gRPC adapter's tests, the end-to-end tests and the demo use it to run real
// grpc-go servers on loopback, with or without server reflection.
//
//	files, _ := grpctest.Compile(map[string]string{"echo.proto": src}, "echo.proto")
//	srv := grpctest.NewServer(files, grpctest.Handlers{
//		"echo.v1.Echo/Say": grpctest.Unary(func(ctx context.Context, in *dynamicpb.Message) (proto.Message, error) {
//			return in, nil
//		}),
//	}, grpctest.Options{Reflection: grpctest.ReflectionBoth})
//	addr := srv.Listen(t)
//
// It does not import package testing, so a demo can use it too.
package grpctest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Compile compiles .proto sources held in memory (file name → content,
// with the standard google/protobuf imports available) and returns the
// named files and everything they import.
func Compile(sources map[string]string, names ...string) (*protoregistry.Files, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(sources),
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), names...)
	if err != nil {
		return nil, err
	}
	files := new(protoregistry.Files)
	var add func(fd protoreflect.FileDescriptor) error
	add = func(fd protoreflect.FileDescriptor) error {
		if _, err := files.FindFileByPath(fd.Path()); err == nil {
			return nil
		}
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			if err := add(imports.Get(i).FileDescriptor); err != nil {
				return err
			}
		}
		return files.RegisterFile(fd)
	}
	for _, fd := range compiled {
		if err := add(fd); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// MustCompile is Compile for tests: it fails the test on an error.
func MustCompile(t TB, sources map[string]string, names ...string) *protoregistry.Files {
	t.Helper()
	files, err := Compile(sources, names...)
	if err != nil {
		t.Fatalf("grpctest: compile: %v", err)
	}
	return files
}

// DescriptorSet returns the files (with their imports) as a
// FileDescriptorSet, as `protoc --include_imports --descriptor_set_out`
// writes it.
func DescriptorSet(files *protoregistry.Files) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		add(fd)
		return true
	})
	return set
}

// Handler serves one method: a UnaryHandler, a ServerStreamHandler or a
// StreamHandler (client-streaming and bidirectional methods).
type Handler interface{ handler() }

// Handlers maps "package.Service/Method" to its handler. Methods without a
// handler answer UNIMPLEMENTED.
type Handlers map[string]Handler

// UnaryHandler answers a unary call.
type UnaryHandler func(ctx context.Context, in *dynamicpb.Message) (proto.Message, error)

// ServerStreamHandler answers a server-streaming call: it sends messages
// until it returns; its error is the call's status.
type ServerStreamHandler func(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error

// StreamHandler serves a client-streaming or bidirectional call.
type StreamHandler func(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error

func (UnaryHandler) handler()        {}
func (ServerStreamHandler) handler() {}
func (StreamHandler) handler()       {}

// Unary, ServerStream and Stream convert functions to handlers.
func Unary(f func(ctx context.Context, in *dynamicpb.Message) (proto.Message, error)) Handler {
	return UnaryHandler(f)
}

// ServerStream is the Handler of a server-streaming method.
func ServerStream(f func(ctx context.Context, in *dynamicpb.Message, send func(proto.Message) error) error) Handler {
	return ServerStreamHandler(f)
}

// Stream is the Handler of a client-streaming or bidirectional method.
func Stream(f func(stream grpc.ServerStream, md protoreflect.MethodDescriptor) error) Handler {
	return StreamHandler(f)
}

// Receive reads the request messages of a client-streaming or
// bidirectional call, calling f with each, until the client half-closes
// (Receive then returns nil) or f or the stream fails.
func Receive(stream grpc.ServerStream, md protoreflect.MethodDescriptor, f func(in *dynamicpb.Message) error) error {
	for {
		in := dynamicpb.NewMessage(md.Input())
		if err := stream.RecvMsg(in); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := f(in); err != nil {
			return err
		}
	}
}

// Reflection selects the server reflection services a server offers.
type Reflection int

// Reflection choices.
const (
	ReflectionNone Reflection = iota
	ReflectionV1
	ReflectionV1Alpha
	ReflectionBoth
)

// Options tune a server.
type Options struct {
	Reflection Reflection
	// TLS, when set, makes the server speak TLS.
	TLS *tls.Config
	// ServerOptions are extra grpc.Server options.
	ServerOptions []grpc.ServerOption
	// Services limits the served services to these full names; default:
	// every service of the files.
	Services []string
}

// Server is a gRPC server serving descriptors with dynamic handlers.
type Server struct {
	*grpc.Server
	Files *protoregistry.Files
}

// NewServer builds a gRPC server for every service in files (or those in
// opts.Services).
func NewServer(files *protoregistry.Files, handlers Handlers, opts Options) (*Server, error) {
	sopts := append([]grpc.ServerOption(nil), opts.ServerOptions...)
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s := grpc.NewServer(sopts...)
	want := map[string]bool{}
	for _, n := range opts.Services {
		want[n] = true
	}
	used := map[string]bool{}
	var err error
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := 0; i < svcs.Len(); i++ {
			sd := svcs.Get(i)
			if len(want) > 0 && !want[string(sd.FullName())] {
				continue
			}
			desc := serviceDesc(sd, handlers, used)
			s.RegisterService(desc, struct{}{})
		}
		return true
	})
	for name := range handlers {
		if !used[name] {
			err = errors.Join(err, fmt.Errorf("grpctest: handler for unknown method %q", name))
		}
	}
	if err != nil {
		return nil, err
	}
	res := Resolver(files)
	ropts := reflection.ServerOptions{Services: s, DescriptorResolver: res}
	switch opts.Reflection {
	case ReflectionV1:
		reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(ropts))
	case ReflectionV1Alpha:
		reflectionv1alpha.RegisterServerReflectionServer(s, reflection.NewServer(ropts))
	case ReflectionBoth:
		reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(ropts))
		reflectionv1alpha.RegisterServerReflectionServer(s, reflection.NewServer(ropts))
	}
	return &Server{Server: s, Files: files}, nil
}

// Start builds a server and serves it on a free loopback port until the
// test ends; it returns the server and its address.
func Start(t TB, files *protoregistry.Files, handlers Handlers, opts Options) (*Server, string) {
	t.Helper()
	s, err := NewServer(files, handlers, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s, s.Listen(t)
}

// Listen serves on a free loopback port until the test ends and returns
// the address.
func (s *Server) Listen(t TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("grpctest: listen: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

func serviceDesc(sd protoreflect.ServiceDescriptor, handlers Handlers, used map[string]bool) *grpc.ServiceDesc {
	desc := &grpc.ServiceDesc{
		ServiceName: string(sd.FullName()),
		HandlerType: (*any)(nil),
		Metadata:    sd.ParentFile().Path(),
	}
	methods := sd.Methods()
	for i := 0; i < methods.Len(); i++ {
		md := methods.Get(i)
		name := string(sd.FullName()) + "/" + string(md.Name())
		h := handlers[name]
		if h != nil {
			used[name] = true
		}
		if !md.IsStreamingClient() && !md.IsStreamingServer() {
			desc.Methods = append(desc.Methods, grpc.MethodDesc{
				MethodName: string(md.Name()),
				Handler:    unaryHandler(name, md, h),
			})
			continue
		}
		desc.Streams = append(desc.Streams, grpc.StreamDesc{
			StreamName:    string(md.Name()),
			Handler:       streamHandler(name, md, h),
			ServerStreams: md.IsStreamingServer(),
			ClientStreams: md.IsStreamingClient(),
		})
	}
	return desc
}

func unaryHandler(name string, md protoreflect.MethodDescriptor, h Handler) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := dynamicpb.NewMessage(md.Input())
		if err := dec(in); err != nil {
			return nil, err
		}
		f, ok := h.(UnaryHandler)
		if !ok {
			return nil, status.Errorf(codes.Unimplemented, "method %s is not implemented by this test server", name)
		}
		call := func(ctx context.Context, req any) (any, error) { return f(ctx, req.(*dynamicpb.Message)) }
		if icpt == nil {
			return call(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/" + name}, call)
	}
}

func streamHandler(name string, md protoreflect.MethodDescriptor, h Handler) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		switch f := h.(type) {
		case ServerStreamHandler:
			if md.IsStreamingClient() {
				break
			}
			in := dynamicpb.NewMessage(md.Input())
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			var mu sync.Mutex
			return f(stream.Context(), in, func(m proto.Message) error {
				mu.Lock()
				defer mu.Unlock()
				return stream.SendMsg(m)
			})
		case StreamHandler:
			return f(stream, md)
		}
		return status.Errorf(codes.Unimplemented, "method %s is not implemented by this test server", name)
	}
}

// Resolver returns a descriptor resolver over files that falls back to the
// descriptors linked into the binary (the well-known types), as server
// reflection needs for imports.
func Resolver(files *protoregistry.Files) interface {
	protodesc.Resolver
} {
	return fallbackResolver{files}
}

type fallbackResolver struct{ files *protoregistry.Files }

func (r fallbackResolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.files.FindFileByPath(path); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (r fallbackResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.files.FindDescriptorByName(name); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}

// Method returns the descriptor of "package.Service/Method" in files.
func Method(files *protoregistry.Files, name string) (protoreflect.MethodDescriptor, error) {
	svc, m, ok := strings.Cut(name, "/")
	if !ok {
		return nil, fmt.Errorf("grpctest: %q is not package.Service/Method", name)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("grpctest: %s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(m))
	if md == nil {
		return nil, fmt.Errorf("grpctest: service %s has no method %s", svc, m)
	}
	return md, nil
}

// NewMessage returns an empty dynamic message of the named type in files.
func NewMessage(files *protoregistry.Files, name string) (*dynamicpb.Message, error) {
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("grpctest: %s is not a message", name)
	}
	return dynamicpb.NewMessage(md), nil
}
