package grpcadapter

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// grpcjsSet is what grpc-js's server reflection answers for a service of
// map fields, well-known types and nested types (testdata).
func grpcjsSet(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	b, err := os.ReadFile("testdata/grpcjs-reflection.txtpb")
	if err != nil {
		t.Fatal(err)
	}
	set := new(descriptorpb.FileDescriptorSet)
	if err := prototext.Unmarshal(b, set); err != nil {
		t.Fatal(err)
	}
	return set
}

// Go refuses grpc-js's descriptors as they are: its map entries are not
// named after their fields, its type names are relative and its files
// import nothing. Normalised, they build, with the types protoc would
// give them; descriptors protoc wrote (the adapter's own test protos)
// come out unchanged.
func TestNormalizeGrpcJSDescriptors(t *testing.T) {
	t.Parallel()
	raw := grpcjsSet(t)
	// Names made absolute alone, the map entries still fail as the issue
	// saw them.
	named := proto.Clone(raw).(*descriptorpb.FileDescriptorSet)
	for _, fd := range named.File {
		for _, m := range fd.MessageType {
			for _, f := range m.Field {
				if f.TypeName != nil && !strings.HasPrefix(f.GetTypeName(), ".") {
					f.TypeName = proto.String("." + lookup(map[string]string{
						"crank.js.v1.Item.Kind": "x", "crank.js.v1.Item.StockBySite": "x", "crank.js.v1.Item.Dimensions": "x",
						"crank.js.v1.Item.Dimension": "x", "google.protobuf.Timestamp": "x", "google.protobuf.StringValue": "x",
					}, "crank.js.v1."+m.GetName(), f.GetTypeName()))
				}
			}
		}
		if fd.GetPackage() == "crank.js.v1" {
			fd.Dependency = []string{"google_protobuf.proto"}
		}
	}
	if _, err := protodesc.NewFiles(named); err == nil || !strings.Contains(err.Error(), "invalid map: incorrect implicit map entry name") {
		t.Errorf("grpc-js's map entries: %v", err)
	}
	if _, err := protodesc.NewFiles(raw); err == nil {
		t.Error("grpc-js's descriptors build as they are")
	}

	all := map[string]*descriptorpb.FileDescriptorProto{}
	for _, fd := range raw.File {
		all[fd.GetName()] = fd
	}
	normalizeFiles(all, raw.File)
	files, err := protodesc.NewFiles(raw)
	if err != nil {
		t.Fatalf("normalised: %v", err)
	}
	d, err := files.FindDescriptorByName("crank.js.v1.Item")
	if err != nil {
		t.Fatal(err)
	}
	item := d.(protoreflect.MessageDescriptor)
	for field, want := range map[string]string{
		"stockBySite": "map<string, int32>", "dimensions": "map<string, crank.js.v1.Item.Dimension>",
		"updatedAt": "google.protobuf.Timestamp", "note": "google.protobuf.StringValue", "kind": "crank.js.v1.Item.Kind",
	} {
		f := item.Fields().ByName(protoreflect.Name(field))
		if got := typeOf(f); got != want {
			t.Errorf("%s: %s, want %s", field, got, want)
		}
	}
	svc, err := files.FindDescriptorByName("crank.js.v1.Inventory")
	if err != nil || svc.(protoreflect.ServiceDescriptor).Methods().ByName("PutItem").Input() != item {
		t.Errorf("Inventory: %v", err)
	}

	// protoc's descriptors are left as they are.
	fd := descriptorOf(t, "test.proto")
	before := proto.Clone(fd)
	normalizeFiles(map[string]*descriptorpb.FileDescriptorProto{fd.GetName(): fd}, []*descriptorpb.FileDescriptorProto{fd})
	if !proto.Equal(before, fd) {
		t.Error("normalizing protoc's descriptor changed it")
	}
}

// typeOf names a field's type as a .proto does.
func typeOf(f protoreflect.FieldDescriptor) string {
	switch {
	case f == nil:
		return "missing"
	case f.IsMap():
		return "map<" + typeOf(f.MapKey()) + ", " + typeOf(f.MapValue()) + ">"
	case f.Message() != nil:
		return string(f.Message().FullName())
	case f.Enum() != nil:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// The map entry name protoc gives a field's entry message.
func TestMapEntryName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"stock_by_site": "StockBySiteEntry", "stockBySite": "StockBySiteEntry", "labels": "LabelsEntry", "x_2y": "X2yEntry"} {
		if got := mapEntryName(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// descriptorOf is the descriptor protoc would write of a .proto.
func descriptorOf(t *testing.T, path string) *descriptorpb.FileDescriptorProto {
	t.Helper()
	comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"testdata"}})}
	files, err := comp.Compile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return protodesc.ToFileDescriptorProto(files[0])
}
