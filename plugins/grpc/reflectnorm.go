package grpcadapter

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	refv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	refv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Descriptors from any server's reflection.
//
// Go's protodesc builds only descriptors protoc would write: type names
// fully qualified (".pkg.Msg"), every file that defines a type a file uses
// among its imports, a map field's entry message named after the field
// ("labels" → "LabelsEntry"). Other servers answer otherwise: grpc-js's
// @grpc/reflection serves what protobuf.js makes of the .proto — type
// names relative to their scope ("Kind", "Item.Dimension",
// "google.protobuf.Timestamp"), no imports (the files a file needs come in
// the same answer), map entries named like the field ("StockBySite") — and
// Go refuses them ("invalid map: incorrect implicit map entry name",
// "*.google.protobuf.Timestamp" not found). reflectionConn normalises each
// answer before the reflection client builds descriptors of it: names
// resolved as protoc resolves them (the innermost enclosing scope first)
// against every file the server has answered, the defining files added to
// the imports, map entries renamed. A descriptor protoc wrote is left as
// it is.

// reflectionConn is a connection whose server reflection answers are
// normalised (normalizeFiles).
type reflectionConn struct {
	grpc.ClientConnInterface
	mu    sync.Mutex
	files map[string]*descriptorpb.FileDescriptorProto // every file answered, by name
}

func newReflectionConn(cc grpc.ClientConnInterface) *reflectionConn {
	return &reflectionConn{ClientConnInterface: cc, files: map[string]*descriptorpb.FileDescriptorProto{}}
}

func (c *reflectionConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := c.ClientConnInterface.NewStream(ctx, desc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &reflectionStream{ClientStream: s, conn: c}, nil
}

type reflectionStream struct {
	grpc.ClientStream
	conn *reflectionConn
}

func (s *reflectionStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	switch r := m.(type) {
	case *refv1.ServerReflectionResponse:
		if fdr := r.GetFileDescriptorResponse(); fdr != nil {
			fdr.FileDescriptorProto = s.conn.normalize(fdr.FileDescriptorProto)
		}
	case *refv1alpha.ServerReflectionResponse:
		if fdr := r.GetFileDescriptorResponse(); fdr != nil {
			fdr.FileDescriptorProto = s.conn.normalize(fdr.FileDescriptorProto)
		}
	}
	return nil
}

// normalize normalises the encoded files of one answer; one that does not
// decode is left for the reflection client to report.
func (c *reflectionConn) normalize(encoded [][]byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var these []*descriptorpb.FileDescriptorProto
	for _, b := range encoded {
		fd := new(descriptorpb.FileDescriptorProto)
		if proto.Unmarshal(b, fd) != nil {
			return encoded
		}
		these = append(these, fd)
		if _, seen := c.files[fd.GetName()]; !seen {
			c.files[fd.GetName()] = fd
		}
	}
	normalizeFiles(c.files, these)
	out := make([][]byte, len(these))
	for i, fd := range these {
		b, err := proto.Marshal(fd)
		if err != nil {
			return encoded
		}
		out[i] = b
	}
	return out
}

// normalizeFiles normalises the files these, whose types may come from
// any of all (by name, these included): type names fully qualified, the
// files defining them imported, map entries named as protoc names them.
func normalizeFiles(all map[string]*descriptorpb.FileDescriptorProto, these []*descriptorpb.FileDescriptorProto) {
	defined := map[string]string{} // full name of a message, enum or service → its file
	for name, fd := range all {
		pkg := fd.GetPackage()
		for _, m := range fd.GetMessageType() {
			defineMessage(defined, join(pkg, m.GetName()), m, name)
		}
		for _, e := range fd.GetEnumType() {
			defined[join(pkg, e.GetName())] = name
		}
	}
	for _, fd := range these {
		pkg := fd.GetPackage()
		imports := map[string]bool{fd.GetName(): true}
		for _, d := range fd.GetDependency() {
			imports[d] = true
		}
		resolve := func(ref *string, scope string) {
			if ref == nil || *ref == "" {
				return
			}
			full := strings.TrimPrefix(*ref, ".")
			if !strings.HasPrefix(*ref, ".") {
				full = lookup(defined, scope, *ref)
				if full == "" {
					return // left for the builder to report
				}
				*ref = "." + full
			}
			if file := defined[full]; file != "" && !imports[file] {
				imports[file] = true
				fd.Dependency = append(fd.Dependency, file)
			}
		}
		for _, m := range fd.GetMessageType() {
			normalizeMessage(m, join(pkg, m.GetName()), resolve)
		}
		for _, x := range fd.GetExtension() {
			resolve(x.TypeName, pkg)
			resolve(x.Extendee, pkg)
		}
		for _, s := range fd.GetService() {
			for _, m := range s.GetMethod() {
				resolve(m.InputType, pkg)
				resolve(m.OutputType, pkg)
			}
		}
	}
}

// defineMessage notes the message m, full name full, of file, and its
// nested messages and enums.
func defineMessage(defined map[string]string, full string, m *descriptorpb.DescriptorProto, file string) {
	defined[full] = file
	for _, n := range m.GetNestedType() {
		defineMessage(defined, join(full, n.GetName()), n, file)
	}
	for _, e := range m.GetEnumType() {
		defined[join(full, e.GetName())] = file
	}
}

// normalizeMessage resolves the type names of m (full name full) and its
// nested messages, and names its map entries as protoc does: a map field
// "stock_by_site" (or "stockBySite") has the entry "StockBySiteEntry".
func normalizeMessage(m *descriptorpb.DescriptorProto, full string, resolve func(*string, string)) {
	for _, f := range m.GetField() {
		resolve(f.TypeName, full)
		resolve(f.Extendee, full)
	}
	for _, x := range m.GetExtension() {
		resolve(x.TypeName, full)
		resolve(x.Extendee, full)
	}
	for _, f := range m.GetField() {
		if f.GetLabel() != descriptorpb.FieldDescriptorProto_LABEL_REPEATED || f.GetType() != descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
			continue
		}
		for _, n := range m.GetNestedType() {
			want := mapEntryName(f.GetName())
			if !n.GetOptions().GetMapEntry() || f.GetTypeName() != "."+join(full, n.GetName()) || n.GetName() == want || hasNested(m, want) {
				continue
			}
			n.Name = proto.String(want)
			f.TypeName = proto.String("." + join(full, want))
		}
	}
	for _, n := range m.GetNestedType() {
		normalizeMessage(n, join(full, n.GetName()), resolve)
	}
}

// hasNested reports whether m has a nested message named name.
func hasNested(m *descriptorpb.DescriptorProto, name string) bool {
	for _, n := range m.GetNestedType() {
		if n.GetName() == name {
			return true
		}
	}
	return false
}

// lookup resolves the relative type name ref used in scope as protoc
// does: in scope, then in each enclosing scope, out to the root; "" when
// no scope defines it.
func lookup(defined map[string]string, scope, ref string) string {
	for {
		if full := join(scope, ref); defined[full] != "" {
			return full
		}
		if scope == "" {
			return ""
		}
		i := strings.LastIndexByte(scope, '.')
		if i < 0 {
			scope = ""
		} else {
			scope = scope[:i]
		}
	}
}

// join is the full name of name within scope.
func join(scope, name string) string {
	if scope == "" {
		return name
	}
	return scope + "." + name
}

// mapEntryName is the entry message protoc makes for a map field: the
// field's name in CamelCase, each letter after an underscore upper case,
// and "Entry".
func mapEntryName(field string) string {
	var b strings.Builder
	upper := true
	for _, r := range field {
		switch {
		case r == '_':
			upper = true
		case upper && 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			upper = false
		default:
			b.WriteRune(r)
			upper = false
		}
	}
	return b.String() + "Entry"
}
