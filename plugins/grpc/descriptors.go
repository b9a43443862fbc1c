package grpcadapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"github.com/jhump/protoreflect/v2/grpcreflect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	// The well-known types and google.rpc error details, linked in so that
	// descriptor sets may omit them and status details can be rendered.
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/apipb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/fieldmaskpb"
	_ "google.golang.org/protobuf/types/known/sourcecontextpb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/typepb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// schemaSet is a loaded set of descriptors: the files a service's types come
// from, and the message types for google.protobuf.Any and status details.
type schemaSet struct {
	files *protoregistry.Files
	types *typeResolver
}

// service finds a service by full name.
func (s *schemaSet) service(name string) (protoreflect.ServiceDescriptor, error) {
	d, err := s.files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil, fmt.Errorf("no service %s in the descriptors%s", name, s.knownServices())
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", name)
	}
	return sd, nil
}

// knownServices lists the services of the set for error messages.
func (s *schemaSet) knownServices() string {
	var names []string
	s.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := 0; i < svcs.Len(); i++ {
			names = append(names, string(svcs.Get(i).FullName()))
		}
		return len(names) < 50
	})
	if len(names) == 0 {
		return " (they define no service)"
	}
	slices.Sort(names)
	return " (services: " + strings.Join(names, ", ") + ")"
}

func newSchemaSet(files *protoregistry.Files) *schemaSet {
	return &schemaSet{files: files, types: &typeResolver{local: dynamicpb.NewTypes(files)}}
}

// typeResolver finds message and extension types among the loaded files,
// then among those linked into the adapter (well-known types, google.rpc).
type typeResolver struct{ local *dynamicpb.Types }

func (r *typeResolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if t, err := r.local.FindMessageByName(name); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (r *typeResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if t, err := r.local.FindMessageByURL(url); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (r *typeResolver) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if t, err := r.local.FindExtensionByName(name); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByName(name)
}

func (r *typeResolver) FindExtensionByNumber(m protoreflect.FullName, n protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if t, err := r.local.FindExtensionByNumber(m, n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(m, n)
}

// loadError is a failure to load descriptors; field names the config field
// at fault and kind the upstream error kind when it happens during a call.
type loadError struct {
	field string
	kind  sdkKind
	msg   string
}

func (e *loadError) Error() string { return e.msg }

// loadSchema loads the descriptors an operation names: from its descriptor
// set, its .proto files, or the server's reflection service.
func loadSchema(ctx context.Context, c *config, conn *grpc.ClientConn) (*schemaSet, error) {
	switch {
	case c.descriptorSet != "":
		return loadDescriptorSet(c.descriptorSet)
	case len(c.protoFiles) > 0, c.protoSource != "":
		return compileProtos(ctx, c)
	}
	return loadByReflection(ctx, c, conn)
}

func loadDescriptorSet(path string) (*schemaSet, error) {
	data, err := sdk.ReadFile(path, maxFileBytes)
	if err != nil {
		return nil, &loadError{field: "descriptor_set", kind: kindInvalid, msg: fmt.Sprintf("cannot read %s: %v", path, err)}
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(data, &set); err != nil {
		return nil, &loadError{field: "descriptor_set", kind: kindInvalid,
			msg: fmt.Sprintf("%s is not a binary FileDescriptorSet (write one with protoc --include_imports --descriptor_set_out, or buf build -o): %v", path, err)}
	}
	if len(set.GetFile()) == 0 {
		return nil, &loadError{field: "descriptor_set", kind: kindInvalid, msg: fmt.Sprintf("%s holds no files", path)}
	}
	files, err := buildFiles(set.GetFile())
	if err != nil {
		return nil, &loadError{field: "descriptor_set", kind: kindInvalid, msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return newSchemaSet(files), nil
}

// buildFiles links file descriptor protos in import order. An import the
// set lacks is taken from the descriptors linked into the adapter (the
// well-known types) when possible.
func buildFiles(fdps []*descriptorpb.FileDescriptorProto) (*protoregistry.Files, error) {
	byName := make(map[string]*descriptorpb.FileDescriptorProto, len(fdps))
	for _, f := range fdps {
		if _, dup := byName[f.GetName()]; dup {
			return nil, fmt.Errorf("file %s appears twice", f.GetName())
		}
		byName[f.GetName()] = f
	}
	files := new(protoregistry.Files)
	state := map[string]int{} // 1: in progress, 2: done
	var build func(name, importer string) error
	build = func(name, importer string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("import cycle through %s", name)
		case 2:
			return nil
		}
		fdp := byName[name]
		if fdp == nil {
			if fd, err := protoregistry.GlobalFiles.FindFileByPath(name); err == nil {
				state[name] = 2
				return files.RegisterFile(fd)
			}
			return fmt.Errorf("%s imports %s, which the set does not hold (build the set with --include_imports)", importer, name)
		}
		state[name] = 1
		for _, dep := range fdp.GetDependency() {
			if err := build(dep, name); err != nil {
				return err
			}
		}
		fd, err := protodesc.NewFile(fdp, files)
		if err != nil {
			return fmt.Errorf("file %s: %v", name, err)
		}
		if err := files.RegisterFile(fd); err != nil {
			return fmt.Errorf("file %s: %v", name, err)
		}
		state[name] = 2
		return nil
	}
	for _, f := range fdps {
		if err := build(f.GetName(), ""); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// inlineProtoName is the file name of an inline proto_source in compiler
// messages.
const inlineProtoName = "proto_source.proto"

func compileProtos(ctx context.Context, c *config) (*schemaSet, error) {
	var resolver protocompile.Resolver = &protocompile.SourceResolver{ImportPaths: c.importPaths}
	names, field := c.protoFiles, "proto_files"
	if c.protoSource != "" {
		inline := &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{inlineProtoName: c.protoSource})}
		resolver = protocompile.CompositeResolver{inline, resolver}
		names, field = []string{inlineProtoName}, "proto_source"
	}
	comp := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(resolver),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := comp.Compile(ctx, names...)
	if err != nil {
		return nil, &loadError{field: field, kind: kindInvalid, msg: "cannot compile: " + err.Error()}
	}
	files := new(protoregistry.Files)
	for _, fd := range compiled {
		if err := registerWithImports(files, fd); err != nil {
			return nil, &loadError{field: field, kind: kindInvalid, msg: err.Error()}
		}
	}
	return newSchemaSet(files), nil
}

// registerWithImports registers fd and everything it imports.
func registerWithImports(files *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := files.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := 0; i < imports.Len(); i++ {
		if err := registerWithImports(files, imports.Get(i).FileDescriptor); err != nil {
			return err
		}
	}
	if err := files.RegisterFile(fd); err != nil {
		return fmt.Errorf("file %s: %v", fd.Path(), err)
	}
	return nil
}

func loadByReflection(ctx context.Context, c *config, conn *grpc.ClientConn) (*schemaSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := grpcreflect.NewClientAuto(ctx, newReflectionConn(conn)) // reflectnorm.go
	defer client.Reset()
	fd, err := client.FileContainingSymbol(protoreflect.FullName(c.service))
	if err != nil {
		return nil, reflectionError(ctx, c, client, err)
	}
	files := new(protoregistry.Files)
	if err := registerWithImports(files, fd); err != nil {
		return nil, &loadError{field: "target", kind: kindBadResponse,
			msg: fmt.Sprintf("server reflection at %s answered unusable descriptors: %v", c.target, err)}
	}
	return newSchemaSet(files), nil
}

func reflectionError(ctx context.Context, c *config, client *grpcreflect.Client, err error) error {
	st, _ := status.FromError(err)
	switch {
	case ctx.Err() != nil:
		kind := kindTimeout
		if errors.Is(ctx.Err(), context.Canceled) {
			kind = kindCancelled
		}
		return &loadError{field: "target", kind: kind,
			msg: fmt.Sprintf("server reflection at %s did not answer in time", c.target)}
	case st.Code() == codes.Unimplemented:
		return &loadError{field: "target", kind: kindUpstream,
			msg: fmt.Sprintf("the server at %s does not offer server reflection (v1 or v1alpha): give descriptor_set or proto_files", c.target)}
	case st.Code() == codes.NotFound || grpcreflect.IsElementNotFoundError(err):
		known := ""
		if names, lerr := client.ListServices(); lerr == nil {
			var list []string
			for _, n := range names {
				if !strings.HasPrefix(string(n), "grpc.reflection.") {
					list = append(list, string(n))
				}
			}
			slices.Sort(list)
			known = " (it serves: " + strings.Join(list, ", ") + ")"
		}
		return &loadError{field: "service", kind: kindUpstream,
			msg: fmt.Sprintf("the server at %s does not know service %s%s", c.target, c.service, known)}
	case st.Code() == codes.Unavailable:
		return &loadError{field: "target", kind: kindTransport,
			msg: fmt.Sprintf("cannot reach %s for server reflection: %s", c.target, transportReason(c, st.Message()))}
	}
	return &loadError{field: "target", kind: kindUpstream,
		msg: fmt.Sprintf("server reflection at %s failed: %s: %s", c.target, codeName(st.Code()), st.Message())}
}

// schemaCache holds loaded descriptor sets by source, at most
// maxCachedSchemas (the least recently used go first). A load at
// ExpandOperation (operations file (re)load) replaces the entry; a call
// loads it only when missing (e.g. after an adapter restart).
type schemaCache struct {
	sets *lru.Cache[string, *schemaEntry]
}

type schemaEntry struct {
	mu  sync.Mutex
	set *schemaSet
}

const maxCachedSchemas = 64

func (c *schemaCache) get(key string, fresh bool, load func() (*schemaSet, error)) (*schemaSet, error) {
	e, _ := c.sets.GetOrPut(key, func() *schemaEntry { return &schemaEntry{} })
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.set != nil && !fresh {
		return e.set, nil
	}
	s, err := load()
	if err != nil {
		return nil, err
	}
	e.set = s
	return s, nil
}
