package grpcadapter

import (
	"encoding/json"
	"math"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// JSON Schema generation from message descriptors, following the proto3
// JSON mapping as protojson implements it: 64-bit integers as decimal
// strings (numbers accepted on input), enums by name, bytes as base64,
// maps as objects, repeated fields as arrays, the well-known types by
// their JSON forms, NaN and infinities as strings. Messages used once are
// inlined; messages used more than once or recursively are $defs entries
// referenced by $ref. Input schemas are strict (additionalProperties:
// false, at most one member of a oneof); output schemas describe what the
// adapter emits and stay permissive.

// schemaOptions select the schema's flavour.
type schemaOptions struct {
	// jsonNames uses lowerCamelCase JSON names instead of the .proto names.
	jsonNames bool
	// output describes a response (what protojson emits), not arguments.
	output bool
}

// jsonKind is how a message appears in JSON.
type jsonKind int

const (
	jsonObject jsonKind = iota // an object: ordinary messages, Any, Struct, Empty
	jsonScalar                 // a string, number or boolean: Timestamp, Duration, FieldMask, wrappers
	jsonArray                  // ListValue
	jsonAny                    // Value: any JSON value
)

// wellKnown are the messages with a special JSON form.
var wellKnown = map[protoreflect.FullName]jsonKind{
	"google.protobuf.Any":         jsonObject,
	"google.protobuf.Struct":      jsonObject,
	"google.protobuf.Value":       jsonAny,
	"google.protobuf.ListValue":   jsonArray,
	"google.protobuf.Timestamp":   jsonScalar,
	"google.protobuf.Duration":    jsonScalar,
	"google.protobuf.FieldMask":   jsonScalar,
	"google.protobuf.DoubleValue": jsonScalar,
	"google.protobuf.FloatValue":  jsonScalar,
	"google.protobuf.Int64Value":  jsonScalar,
	"google.protobuf.UInt64Value": jsonScalar,
	"google.protobuf.Int32Value":  jsonScalar,
	"google.protobuf.UInt32Value": jsonScalar,
	"google.protobuf.BoolValue":   jsonScalar,
	"google.protobuf.StringValue": jsonScalar,
	"google.protobuf.BytesValue":  jsonScalar,
}

// messageJSONKind says how md appears in JSON.
func messageJSONKind(md protoreflect.MessageDescriptor) jsonKind {
	if k, ok := wellKnown[md.FullName()]; ok {
		return k
	}
	return jsonObject
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	_, ok := wellKnown[md.FullName()]
	return ok
}

// toolSchema returns the JSON Schema of a message as a tool's input or
// output schema: an object schema. A message whose JSON form is not an
// object (a wrapper, Timestamp, ...) becomes an object with one property,
// wrapKey; wrapped reports it. ok is false when no object schema can
// describe the message (an output of google.protobuf.Value, which may or
// may not be an object).
func toolSchema(md protoreflect.MessageDescriptor, opts schemaOptions, wrapKey string) (schema json.RawMessage, wrapped, ok bool) {
	g := newSchemaGen(md, opts)
	var top map[string]any
	switch messageJSONKind(md) {
	case jsonObject:
		top = g.object(md)
	case jsonAny:
		if opts.output {
			return nil, false, false
		}
		fallthrough
	default:
		wrapped = true
		top = map[string]any{
			"type":       "object",
			"properties": map[string]any{wrapKey: g.message(md)},
			"required":   []string{wrapKey},
		}
		if !opts.output {
			top["additionalProperties"] = false
		}
	}
	if len(g.defs) > 0 {
		top["$defs"] = g.defs
	}
	b, err := json.Marshal(top)
	if err != nil {
		return nil, false, false
	}
	return b, wrapped, true
}

type schemaGen struct {
	opts schemaOptions
	// shared holds the messages that go to $defs: recursive ones and those
	// referenced from more than one field.
	shared  map[protoreflect.FullName]bool
	defs    map[string]any
	defined map[protoreflect.FullName]bool
}

func newSchemaGen(root protoreflect.MessageDescriptor, opts schemaOptions) *schemaGen {
	g := &schemaGen{opts: opts, shared: map[protoreflect.FullName]bool{},
		defs: map[string]any{}, defined: map[protoreflect.FullName]bool{}}
	g.analyze(root)
	return g
}

// msgEdges lists the ordinary (not well-known) message types md's fields
// refer to, once per field.
func msgEdges(md protoreflect.MessageDescriptor) []protoreflect.MessageDescriptor {
	var out []protoreflect.MessageDescriptor
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		var t protoreflect.MessageDescriptor
		switch {
		case fd.IsMap():
			if v := fd.MapValue(); v.Message() != nil {
				t = v.Message()
			}
		case fd.Message() != nil:
			t = fd.Message()
		}
		if t != nil && !isWellKnown(t) {
			out = append(out, t)
		}
	}
	return out
}

// analyze finds the messages reachable from root that are referenced more
// than once or sit on a cycle (Tarjan's strongly connected components).
func (g *schemaGen) analyze(root protoreflect.MessageDescriptor) {
	refs := map[protoreflect.FullName]int{root.FullName(): 1}
	index := map[protoreflect.FullName]int{}
	low := map[protoreflect.FullName]int{}
	onStack := map[protoreflect.FullName]bool{}
	var stack []protoreflect.FullName
	next := 0
	var visit func(md protoreflect.MessageDescriptor)
	visit = func(md protoreflect.MessageDescriptor) {
		n := md.FullName()
		index[n], low[n] = next, next
		next++
		stack = append(stack, n)
		onStack[n] = true
		for _, t := range msgEdges(md) {
			tn := t.FullName()
			refs[tn]++
			if tn == n {
				g.shared[n] = true // a self-reference
			}
			if _, seen := index[tn]; !seen {
				visit(t)
				low[n] = min(low[n], low[tn])
			} else if onStack[tn] {
				low[n] = min(low[n], index[tn])
			}
		}
		if low[n] == index[n] {
			var comp []protoreflect.FullName
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				comp = append(comp, top)
				if top == n {
					break
				}
			}
			if len(comp) > 1 {
				for _, c := range comp {
					g.shared[c] = true
				}
			}
		}
	}
	visit(root)
	for n, c := range refs {
		if c > 1 {
			g.shared[n] = true
		}
	}
}

// object is the schema of an ordinary message as an inline object.
func (g *schemaGen) object(md protoreflect.MessageDescriptor) map[string]any {
	props := map[string]any{}
	var required []string
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := g.name(fd)
		props[name] = g.field(fd)
		if fd.Cardinality() == protoreflect.Required && !g.opts.output {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	if !g.opts.output {
		s["additionalProperties"] = false
		var groups []any
		oneofs := md.Oneofs()
		for i := 0; i < oneofs.Len(); i++ {
			od := oneofs.Get(i)
			if od.IsSynthetic() || od.Fields().Len() < 2 {
				continue
			}
			// Exactly one member, or none of them.
			var alts, members []any
			for j := 0; j < od.Fields().Len(); j++ {
				req := map[string]any{"required": []string{g.name(od.Fields().Get(j))}}
				alts = append(alts, req)
				members = append(members, req)
			}
			alts = append(alts, map[string]any{"not": map[string]any{"anyOf": members}})
			groups = append(groups, map[string]any{"oneOf": alts})
		}
		switch len(groups) {
		case 0:
		case 1:
			s["oneOf"] = groups[0].(map[string]any)["oneOf"]
		default:
			s["allOf"] = groups
		}
	}
	if c := comment(md); c != "" {
		s["description"] = c
	}
	return s
}

func (g *schemaGen) name(fd protoreflect.FieldDescriptor) string {
	if g.opts.jsonNames {
		return fd.JSONName()
	}
	return string(fd.Name())
}

// field is the schema of one field, with its comment as description.
func (g *schemaGen) field(fd protoreflect.FieldDescriptor) map[string]any {
	var s map[string]any
	switch {
	case fd.IsMap():
		s = map[string]any{"type": "object", "additionalProperties": g.single(fd.MapValue())}
		switch fd.MapKey().Kind() {
		case protoreflect.BoolKind:
			s["propertyNames"] = map[string]any{"enum": []string{"true", "false"}}
		case protoreflect.StringKind:
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			s["propertyNames"] = map[string]any{"pattern": "^[0-9]+$"}
		default:
			s["propertyNames"] = map[string]any{"pattern": "^-?[0-9]+$"}
		}
	case fd.IsList():
		s = map[string]any{"type": "array", "items": g.single(fd)}
	default:
		s = g.single(fd)
	}
	desc := comment(fd)
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && od.Fields().Len() > 1 {
		var names []string
		for j := 0; j < od.Fields().Len(); j++ {
			names = append(names, g.name(od.Fields().Get(j)))
		}
		note := "Part of oneof " + string(od.Name()) + ": set at most one of " + strings.Join(names, ", ") + "."
		if desc == "" {
			desc = note
		} else {
			desc += "\n" + note
		}
	}
	if desc != "" {
		s["description"] = desc
	}
	if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
		s["deprecated"] = true
	}
	return s
}

// single is the schema of one value of the field's type.
func (g *schemaGen) single(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return bytesSchema()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return map[string]any{"type": "integer", "minimum": math.MinInt32, "maximum": math.MaxInt32}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": math.MaxUint32}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return g.int64Schema(true)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return g.int64Schema(false)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return floatSchema()
	case protoreflect.EnumKind:
		return g.enum(fd.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return g.message(fd.Message())
	}
	return map[string]any{}
}

func bytesSchema() map[string]any {
	return map[string]any{"type": "string", "contentEncoding": "base64"}
}

func floatSchema() map[string]any {
	// A number, or "NaN", "Infinity", "-Infinity" (pattern applies to
	// strings only).
	return map[string]any{"type": []string{"number", "string"}, "pattern": "^(NaN|-?Infinity)$"}
}

func (g *schemaGen) int64Schema(signed bool) map[string]any {
	pattern := "^-?[0-9]+$"
	if !signed {
		pattern = "^[0-9]+$"
	}
	if g.opts.output {
		return map[string]any{"type": "string", "pattern": pattern}
	}
	s := map[string]any{"type": []string{"string", "integer"}, "pattern": pattern}
	if !signed {
		s["minimum"] = 0
	}
	return s
}

func (g *schemaGen) enum(ed protoreflect.EnumDescriptor) map[string]any {
	if ed.FullName() == "google.protobuf.NullValue" {
		return map[string]any{"type": "null"}
	}
	var names []string
	values := ed.Values()
	for i := 0; i < values.Len(); i++ {
		names = append(names, string(values.Get(i).Name()))
	}
	s := map[string]any{"type": "string", "enum": names}
	if g.opts.output {
		// protojson writes a value the descriptor does not name as its number.
		s = map[string]any{"anyOf": []any{s, map[string]any{"type": "integer"}}}
	}
	if c := comment(ed); c != "" {
		s["description"] = c
	}
	return s
}

// message is the schema of a message-typed value: a well-known type's JSON
// form, a $ref to a shared message, or the inline object.
func (g *schemaGen) message(md protoreflect.MessageDescriptor) map[string]any {
	switch md.FullName() {
	case "google.protobuf.Any":
		s := map[string]any{
			"type": "object",
			"properties": map[string]any{"@type": map[string]any{
				"type":        "string",
				"description": "The type URL of the packed message, e.g. type.googleapis.com/package.Message; its fields sit beside @type (or in value, for well-known types).",
			}},
		}
		if !g.opts.output {
			// An answer may hold an empty Any, which protojson renders as {}.
			s["required"] = []string{"@type"}
			s["properties"].(map[string]any)["@type"].(map[string]any)["minLength"] = 1
		}
		return s
	case "google.protobuf.Struct":
		return map[string]any{"type": "object"}
	case "google.protobuf.Value":
		return map[string]any{}
	case "google.protobuf.ListValue":
		return map[string]any{"type": "array"}
	case "google.protobuf.Timestamp":
		return map[string]any{"type": "string", "format": "date-time", "description": `An RFC 3339 timestamp, e.g. "2024-05-01T12:00:00Z".`}
	case "google.protobuf.Duration":
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+(\.[0-9]{1,9})?s$`, "description": `A duration in seconds with an "s" suffix, e.g. "1.5s".`}
	case "google.protobuf.FieldMask":
		return map[string]any{"type": "string", "description": `Comma-separated lowerCamelCase field paths, e.g. "name,address.city".`}
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue":
		return floatSchema()
	case "google.protobuf.Int64Value":
		return g.int64Schema(true)
	case "google.protobuf.UInt64Value":
		return g.int64Schema(false)
	case "google.protobuf.Int32Value":
		return map[string]any{"type": "integer", "minimum": math.MinInt32, "maximum": math.MaxInt32}
	case "google.protobuf.UInt32Value":
		return map[string]any{"type": "integer", "minimum": 0, "maximum": math.MaxUint32}
	case "google.protobuf.BoolValue":
		return map[string]any{"type": "boolean"}
	case "google.protobuf.StringValue":
		return map[string]any{"type": "string"}
	case "google.protobuf.BytesValue":
		return bytesSchema()
	}
	if !g.shared[md.FullName()] {
		return g.object(md)
	}
	name := string(md.FullName())
	if !g.defined[md.FullName()] {
		g.defined[md.FullName()] = true
		g.defs[name] = g.object(md)
	}
	return map[string]any{"$ref": "#/$defs/" + name}
}

// maxCommentBytes bounds a description taken from a .proto comment.
const maxCommentBytes = 2 << 10

// comment returns the leading (else trailing) comment of a descriptor,
// when the descriptors carry source info.
func comment(d protoreflect.Descriptor) string {
	file := d.ParentFile()
	if file == nil {
		return ""
	}
	loc := file.SourceLocations().ByDescriptor(d)
	text := loc.LeadingComments
	if strings.TrimSpace(text) == "" {
		text = loc.TrailingComments
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return bounded(strings.TrimSpace(strings.Join(lines, "\n")), maxCommentBytes)
}
