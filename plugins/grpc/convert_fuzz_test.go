package grpcadapter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fuzzMethod is a method as the adapter calls it, with its derived
// schemas resolved as the host resolves them.
type fuzzMethod struct {
	c       *config
	m       *methodInfo
	in, out *jsonschema.Resolved
}

// fuzzMethods compiles testdata/test.proto and returns Zoo (a field of
// every kind), Legacy (proto2) and Upper (a wrapper, not an object), with
// proto names and with JSON names.
func fuzzMethods(t testing.TB) []fuzzMethod {
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var out []fuzzMethod
	for _, jsonNames := range []bool{false, true} {
		c := &config{importPaths: []string{dir}, protoFiles: []string{"test.proto"}, jsonNames: jsonNames, emitDefs: jsonNames}
		set, sd := fuzzService(t, c)
		for _, name := range []protoreflect.Name{"Zoo", "Legacy", "Upper"} {
			m := newMethodInfo(c, set, sd.Methods().ByName(name))
			tool, err := m.tool("")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fuzzMethod{c: c, m: m, in: resolveSchema(t, tool.InputSchema), out: resolveSchema(t, tool.OutputSchema)})
		}
	}
	return out
}

// fuzzService compiles c's test protos and returns the Test service.
func fuzzService(t testing.TB, c *config) (*schemaSet, protoreflect.ServiceDescriptor) {
	set, err := compileProtos(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := set.service("crank.test.v1.Test")
	if err != nil {
		t.Fatal(err)
	}
	return set, sd
}

func resolveSchema(t testing.TB, raw json.RawMessage) *jsonschema.Resolved {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return r
}

// inexpressible matches arguments with a field whose protojson rules a
// JSON Schema does not (or jsonschema-go does not) check: the type of an
// Any (any registered type), a Timestamp's date-time format, a Duration's
// range, a FieldMask's path syntax.
var inexpressible = regexp.MustCompile(`"(extra|created|ttl|mask|@type)"`)

// FuzzJSONProto converts arbitrary arguments to request messages as the
// adapter does (protojson into dynamicpb): either an error naming the
// arguments, or a message whose JSON result (as the adapter renders an
// answer of the same type) is an object that the tool's output schema
// accepts, and that converts back to the same message. Arguments the
// input schema accepts always convert.
func FuzzJSONProto(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"f_int64":"12","f_uint64":7,"f_double":"NaN","f_float":"-Infinity","f_bytes":"aGk=","color":"RED","colors":[1,"GREEN"]}`,
		`{"fInt32":-1,"fSint64":"-9","counts":{"a":1},"animals_by_id":{"5":{"name":"x","home":{"biome":"sea"}}},"flags":{"true":"y"},"blobs":{"1":"AA=="}}`,
		`{"name":"n","small":1}`, `{"animal":{"name":"a"},"large":"99"}`, `{"name":"a","number":1}`,
		`{"tree":{"label":"r","children":[{"label":"c","children":[{}]}]},"ping":{"pong":{"ping":{},"n":3}}}`,
		`{"created":"2024-01-02T03:04:05.123Z","ttl":"1.5s","mask":"a.b,c","attrs":{"k":[1,{"x":null}]},"any_value":"s","list":[1,"a",true,null]}`,
		`{"extra":{"@type":"type.googleapis.com/crank.test.zoo.Animal","name":"a"},"nothing":{},"null_value":null}`,
		`{"w_double":1.5,"w_int64":"5","w_bool":true,"w_string":"s","w_bytes":"","maybe":""}`,
		`{"value":"hello"}`, `{"name":"legacy","count":3}`, `{"f_int32":1.5}`, `{"f_int32":"x"}`, `{"nope":1}`,
		`{"tree":{"children":[{"children":[{"label":5}]}]}}`, `{"f_string":"\ud800"}`, `[1]`, `null`, `{"colors":[null]}`,
	} {
		f.Add([]byte(s))
	}
	methods := fuzzMethods(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, fm := range methods {
			msg, err := fm.m.newRequest(fm.c, args, "")
			var v any
			schemaOK := json.Unmarshal(args, &v) == nil && v != nil && fm.in.Validate(v) == nil
			if err != nil {
				if s := err.Error(); !utf8.ValidString(s) || !strings.HasPrefix(s, "argument") {
					t.Fatalf("%s %s: error %q", fm.m.in.FullName(), args, s)
				}
				// (protojson refuses text that is not UTF-8 and unpaired
				// surrogate escapes, which encoding/json, and so the host,
				// read as U+FFFD: errors that say so instead.)
				if schemaOK && utf8.Valid(args) && !hasLoneSurrogate(args) && !inexpressible.Match(args) {
					t.Fatalf("%s %s: the input schema accepts the arguments, the conversion does not: %v", fm.m.in.FullName(), args, err)
				}
				continue
			}
			if fm.m.in.FullName() != fm.m.out.FullName() {
				continue // Upper: StringValue both ways, checked below
			}
			out, err := fm.m.marshalResult(msg)
			if err != nil {
				t.Fatalf("%s %s: the message cannot be rendered: %v", fm.m.in.FullName(), args, err)
			}
			var res any
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%s %s: result %s: %v", fm.m.in.FullName(), args, out, err)
			}
			if _, ok := res.(map[string]any); !ok {
				res = map[string]any{resultWrapKey: res} // the host wraps it
			}
			if err := fm.out.Validate(res); err != nil {
				t.Fatalf("%s %s: result %s does not match the output schema: %v", fm.m.in.FullName(), args, out, err)
			}
			again := out
			if fm.m.wrappedIn {
				again, _ = json.Marshal(map[string]json.RawMessage{argWrapKey: out})
			}
			back, err := fm.m.newRequest(fm.c, again, "")
			if err != nil || !proto.Equal(msg, back) {
				t.Fatalf("%s %s: result %s does not convert back: %v", fm.m.in.FullName(), args, out, err)
			}
		}
	})
}

// FuzzRequests converts arbitrary arguments of a client-streaming and a
// bidirectional method as the adapter does: either an error naming the
// arguments, or at most requests.max_items messages of at most
// requests.max_bytes bytes encoded. Arguments the input schema accepts
// convert unless they are over the byte bound, which no schema keyword
// states.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{
		`{"requests":[]}`, `{"requests":[{"text":"a","id":"1"},{"id":2}]}`, `{"requests":[{},{},{},{},{}]}`,
		`{"requests":[{"text":"` + strings.Repeat("x", 80) + `"}]}`, `{"requests":[7]}`, `{"requests":{}}`,
		`{"requests":null}`, `{}`, `null`, `[]`, `{"requests":[],"x":1}`, `{"requests":[{"id":"12x"}]}`, `{"requests":[{"text":"\ud800"}]}`,
	} {
		f.Add([]byte(s))
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		f.Fatal(err)
	}
	c := &config{importPaths: []string{dir}, protoFiles: []string{"test.proto"}, maxReqItems: 4, maxReqBytes: 64}
	set, sd := fuzzService(f, c)
	var methods []fuzzMethod
	for _, name := range []protoreflect.Name{"Upload", "Chat"} {
		m := newMethodInfo(c, set, sd.Methods().ByName(name))
		tool, err := m.tool("")
		if err != nil {
			f.Fatal(err)
		}
		methods = append(methods, fuzzMethod{c: c, m: m, in: resolveSchema(f, tool.InputSchema)})
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, fm := range methods {
			msgs, err := fm.m.newRequests(args)
			var v any
			schemaOK := json.Unmarshal(args, &v) == nil && v != nil && fm.in.Validate(v) == nil
			if err != nil {
				s := err.Error()
				if !utf8.ValidString(s) || !strings.HasPrefix(s, "argument") {
					t.Fatalf("%s %s: error %q", fm.m.desc.Name(), args, s)
				}
				if schemaOK && utf8.Valid(args) && !hasLoneSurrogate(args) && !strings.Contains(s, "requests.max_bytes") {
					t.Fatalf("%s %s: the input schema accepts the arguments, the conversion does not: %v", fm.m.desc.Name(), args, err)
				}
				continue
			}
			total := 0
			for _, m := range msgs {
				total += proto.Size(m)
			}
			if len(msgs) > c.maxReqItems || total > c.maxReqBytes {
				t.Fatalf("%s %s: %d messages of %d bytes pass the bounds", fm.m.desc.Name(), args, len(msgs), total)
			}
		}
	})
}
