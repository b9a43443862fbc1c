package graphql

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// obj is a JSON Schema object under construction. encoding/json writes its
// keys sorted, so schemas are deterministic (and golden files stable).
type obj = map[string]any

// intSchema is GraphQL's Int: a signed 32-bit integer.
func intSchema() obj {
	return obj{"type": "integer", "minimum": -2147483648, "maximum": 2147483647}
}

// inputSchemaGen builds the input schema of an operation from its
// variable definitions.
type inputSchemaGen struct {
	schema *ast.Schema
	// recursive holds the input types that contain themselves: they live
	// in $defs and are referenced, every other type is inlined.
	recursive map[string]bool
	refs      map[string]bool
	defs      obj
}

// inputSchema is the JSON Schema (2020-12) of an operation's arguments:
// one property per variable, non-null variables without a default
// required, nullable ones accepting null.
func inputSchema(s *ast.Schema, vars ast.VariableDefinitionList) json.RawMessage {
	g := &inputSchemaGen{schema: s, recursive: recursiveInputs(s, vars), refs: map[string]bool{}, defs: obj{}}
	props := obj{}
	required := []string{}
	for _, v := range vars {
		p := g.typeSchema(v.Type)
		if desc := describeVariable(v); desc != "" {
			p["description"] = desc
		}
		if v.DefaultValue != nil {
			if dv, ok := literalJSON(v.DefaultValue); ok {
				p["default"] = dv
			}
		} else if v.Type.NonNull {
			required = append(required, v.Variable)
		}
		props[v.Variable] = p
	}
	out := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	// A definition may refer to further definitions: build them until
	// every referenced one exists. Types on a cycle are always referenced,
	// never inlined, so this ends.
	for {
		var missing []string
		for name := range g.refs {
			if _, ok := g.defs[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			break
		}
		sort.Strings(missing)
		for _, name := range missing {
			g.defs[name] = g.inputObject(g.schema.Types[name])
		}
	}
	if len(g.defs) > 0 {
		out["$defs"] = g.defs
	}
	b, _ := json.Marshal(out)
	return b
}

func (g *inputSchemaGen) typeSchema(t *ast.Type) obj {
	var s obj
	if t.Elem != nil {
		s = obj{"type": "array", "items": g.typeSchema(t.Elem)}
	} else {
		s = g.namedSchema(t.NamedType)
	}
	if !t.NonNull {
		s = nullable(s)
	}
	return s
}

func (g *inputSchemaGen) namedSchema(name string) obj {
	switch name {
	case "Int":
		return intSchema()
	case "Float":
		return obj{"type": "number"}
	case "String":
		return obj{"type": "string"}
	case "Boolean":
		return obj{"type": "boolean"}
	case "ID":
		return obj{"type": "string"}
	}
	def := g.schema.Types[name]
	if def == nil {
		return obj{}
	}
	switch def.Kind {
	case ast.Enum:
		return enumSchema(def)
	case ast.InputObject:
		if g.recursive[name] {
			g.refs[name] = true
			return obj{"$ref": "#/$defs/" + name}
		}
		return g.inputObject(def)
	}
	return customScalarSchema(def)
}

func enumSchema(def *ast.Definition) obj {
	values := make([]any, 0, len(def.EnumValues))
	for _, v := range def.EnumValues {
		values = append(values, v.Name)
	}
	s := obj{"type": "string", "enum": values}
	if def.Description != "" {
		s["description"] = def.Description
	}
	return s
}

// customScalarSchema accepts any JSON value: the server parses custom
// scalars. Its description says what the scalar is.
func customScalarSchema(def *ast.Definition) obj {
	desc := "GraphQL scalar " + def.Name
	if def.Description != "" {
		desc += ": " + def.Description
	}
	if d := def.Directives.ForName("specifiedBy"); d != nil {
		if u := d.Arguments.ForName("url"); u != nil && u.Value != nil {
			desc += " (specified by " + u.Value.Raw + ")"
		}
	}
	return obj{"description": desc}
}

func (g *inputSchemaGen) inputObject(def *ast.Definition) obj {
	props := obj{}
	required := []string{}
	for _, f := range def.Fields {
		p := g.typeSchema(f.Type)
		if f.Description != "" {
			p["description"] = f.Description
		}
		if f.DefaultValue != nil {
			if dv, ok := literalJSON(f.DefaultValue); ok {
				p["default"] = dv
			}
		} else if f.Type.NonNull {
			required = append(required, f.Name)
		}
		props[f.Name] = p
	}
	s := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	if def.Description != "" {
		s["description"] = def.Description
	}
	if def.Directives.ForName("oneOf") != nil {
		s["minProperties"], s["maxProperties"] = 1, 1
	}
	return s
}

// literalJSON converts a constant GraphQL literal (a default value) to the
// JSON value it stands for.
func literalJSON(v *ast.Value) (any, bool) {
	switch v.Kind {
	case ast.IntValue, ast.FloatValue:
		return json.Number(v.Raw), true
	case ast.StringValue, ast.BlockValue, ast.EnumValue:
		return v.Raw, true
	case ast.BooleanValue:
		return v.Raw == "true", true
	case ast.NullValue:
		return nil, true
	case ast.ListValue:
		out := make([]any, 0, len(v.Children))
		for _, c := range v.Children {
			e, ok := literalJSON(c.Value)
			if !ok {
				return nil, false
			}
			out = append(out, e)
		}
		return out, true
	case ast.ObjectValue:
		out := make(map[string]any, len(v.Children))
		for _, c := range v.Children {
			e, ok := literalJSON(c.Value)
			if !ok {
				return nil, false
			}
			out[c.Name] = e
		}
		return out, true
	}
	return nil, false // a variable: not a constant
}

// nullable lets s accept null too.
func nullable(s obj) obj {
	if _, ok := s["$ref"]; ok {
		return obj{"anyOf": []any{s, obj{"type": "null"}}}
	}
	if t, ok := s["type"].(string); ok {
		s["type"] = []any{t, "null"}
		if e, ok := s["enum"].([]any); ok {
			s["enum"] = append(e, nil)
		}
	}
	return s // custom scalars accept anything already
}

// recursiveInputs returns the input object types reachable from vars
// that contain themselves (directly or through other input types).
func recursiveInputs(s *ast.Schema, vars ast.VariableDefinitionList) map[string]bool {
	out := map[string]bool{}
	var reach func(from string, target string, seen map[string]bool) bool
	reach = func(from, target string, seen map[string]bool) bool {
		def := s.Types[from]
		if def == nil || def.Kind != ast.InputObject {
			return false
		}
		for _, f := range def.Fields {
			n := namedOf(f.Type)
			if n == target {
				return true
			}
			if !seen[n] {
				seen[n] = true
				if reach(n, target, seen) {
					return true
				}
			}
		}
		return false
	}
	visited := map[string]bool{}
	var walk func(name string)
	walk = func(name string) {
		if visited[name] {
			return
		}
		visited[name] = true
		def := s.Types[name]
		if def == nil || def.Kind != ast.InputObject {
			return
		}
		if reach(name, name, map[string]bool{}) {
			out[name] = true
		}
		for _, f := range def.Fields {
			walk(namedOf(f.Type))
		}
	}
	for _, v := range vars {
		walk(namedOf(v.Type))
	}
	return out
}

func namedOf(t *ast.Type) string {
	for t.Elem != nil {
		t = t.Elem
	}
	return t.NamedType
}

// describeVariable is a variable's description: a """description""" or
// the comment lines right before it.
func describeVariable(v *ast.VariableDefinition) string {
	if d := strings.TrimSpace(v.Description); d != "" {
		return d
	}
	return commentText(v.Comment)
}

// commentText joins the lines of a comment group, without the '#'.
func commentText(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	// Only the run of lines right above the definition: a comment
	// separated from it by a blank line is about something else.
	list := c.List
	for i := len(list) - 1; i > 0; i-- {
		a, b := list[i-1].Position, list[i].Position
		if a != nil && b != nil && b.Line-a.Line > 1 {
			list = list[i:]
			break
		}
	}
	var lines []string
	for _, l := range list {
		t := l.Text()
		t = strings.TrimPrefix(t, " ")
		lines = append(lines, strings.TrimRight(t, " \t\r"))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// outputSchema is the JSON Schema of a tool's structured result: the
// GraphQL response with data shaped by the operation's selection set.
// errors and partial are present only in a partial result. A
// subscription's is the schema of one item: the data of an event.
func outputSchema(s *ast.Schema, op *ast.OperationDefinition) json.RawMessage {
	data := selectionSchema(s, rootType(s, op), []ast.SelectionSet{op.SelectionSet})
	if op.Operation == ast.Subscription {
		// A subscription's items are the data of its events.
		b, _ := json.Marshal(data)
		return b
	}
	out := obj{
		"type": "object",
		"properties": obj{
			"data":       nullable(data),
			"errors":     obj{"type": "array", "items": obj{"type": "object"}, "description": "GraphQL errors of a partial result: message, path, extensions."},
			"partial":    obj{"type": "boolean", "description": "true when data is incomplete because some fields failed (see errors)."},
			"extensions": obj{"type": "object"},
		},
		"required": []string{"data"},
	}
	b, _ := json.Marshal(out)
	return b
}

// rootType is the type an operation selects on.
func rootType(s *ast.Schema, op *ast.OperationDefinition) *ast.Definition {
	switch op.Operation {
	case ast.Mutation:
		return s.Mutation
	case ast.Subscription:
		return s.Subscription
	}
	return s.Query
}

// fieldOccurrence is one selection of a response key.
type fieldOccurrence struct {
	field       *ast.Field
	conditional bool
}

// selectionSchema describes the object that selection sets select on a
// value of type parent.
func selectionSchema(s *ast.Schema, parent *ast.Definition, sets []ast.SelectionSet) obj {
	var keys []string
	occ := map[string][]fieldOccurrence{}
	var collect func(set ast.SelectionSet, conditional bool)
	collect = func(set ast.SelectionSet, conditional bool) {
		for _, sel := range set {
			switch x := sel.(type) {
			case *ast.Field:
				key := x.Alias
				if key == "" {
					key = x.Name
				}
				if _, ok := occ[key]; !ok {
					keys = append(keys, key)
				}
				occ[key] = append(occ[key], fieldOccurrence{x, conditional || hasCondition(x.Directives)})
			case *ast.InlineFragment:
				cond := conditional || hasCondition(x.Directives) ||
					(x.TypeCondition != "" && parent != nil && x.TypeCondition != parent.Name)
				collect(x.SelectionSet, cond)
			case *ast.FragmentSpread:
				if x.Definition == nil {
					continue
				}
				cond := conditional || hasCondition(x.Directives) ||
					(parent != nil && x.Definition.TypeCondition != parent.Name)
				collect(x.Definition.SelectionSet, cond)
			}
		}
	}
	for _, set := range sets {
		collect(set, false)
	}
	props := obj{}
	required := []string{}
	for _, key := range keys {
		list := occ[key]
		always := false
		var subs []ast.SelectionSet
		for _, o := range list {
			if !o.conditional {
				always = true
			}
			if len(o.field.SelectionSet) > 0 {
				subs = append(subs, o.field.SelectionSet)
			}
		}
		f := list[0].field
		var p obj
		switch {
		case f.Name == "__typename":
			p = obj{"type": "string"}
		case f.Definition == nil:
			p = obj{}
		default:
			p = outputType(s, f.Definition.Type, subs)
		}
		props[key] = p
		if always {
			required = append(required, key)
		}
	}
	out := obj{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

func outputType(s *ast.Schema, t *ast.Type, subs []ast.SelectionSet) obj {
	var p obj
	if t.Elem != nil {
		p = obj{"type": "array", "items": outputType(s, t.Elem, subs)}
	} else {
		switch t.NamedType {
		case "Int":
			p = obj{"type": "integer"}
		case "Float":
			p = obj{"type": "number"}
		case "String", "ID":
			p = obj{"type": "string"}
		case "Boolean":
			p = obj{"type": "boolean"}
		default:
			def := s.Types[t.NamedType]
			switch {
			case def == nil:
				p = obj{}
			case def.Kind == ast.Enum:
				p = enumSchema(def)
				delete(p, "description")
			case def.Kind == ast.Scalar:
				p = obj{}
			default:
				p = selectionSchema(s, def, subs)
			}
		}
	}
	if !t.NonNull {
		p = nullable(p)
	}
	return p
}

func hasCondition(d ast.DirectiveList) bool {
	return d.ForName("skip") != nil || d.ForName("include") != nil
}
