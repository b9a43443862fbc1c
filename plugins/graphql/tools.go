package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/crankmcp/crank/plugins/sdk"
)

// maxGeneratedFields bounds the fields one generated tool selects.
const maxGeneratedFields = 200

// derivedTool is one tool an entry stands for.
type derivedTool struct {
	// name is the tool name; empty for the entry itself.
	name        string
	description string
	input       json.RawMessage
	output      json.RawMessage
	mutation    bool
	// stream: a subscription, a stream source (its output is the item
	// schema of the window or session).
	stream bool
	// generated: a tool of generate.query_fields, named after its field.
	generated bool
	spec      toolSpec
	// compiled is set when an entry is invoked without expansion.
	compiled *tool
}

// derive loads the schema and the document of an entry and returns the
// tools it stands for. Diagnostics name the config field.
func (a *adapter) derive(ctx context.Context, c *config, op *sdk.Operation) ([]*derivedTool, []sdk.Diagnostic) {
	var d diags
	schema := a.loadSchema(ctx, c, op, &d)
	if schema == nil {
		return nil, d.List()
	}
	var tools []*derivedTool
	if c.documentFile != "" || c.hasQuery {
		tools = documentTools(schema, c, op, &d)
		if d.Failed() {
			return nil, d.List()
		}
	}
	var generated []*derivedTool
	if c.generate != nil && op.Mode == sdk.ModeWindow {
		d.Errorf("generate", "makes query tools, and this entry reads a stream (mode window, session or async_job with server_stream): only subscriptions are stream sources")
		return nil, d.List()
	}
	if c.generate != nil {
		generated = generateTools(schema, c, &d)
		if d.Failed() {
			return nil, d.List()
		}
	}
	if len(tools) == 1 && len(generated) == 0 {
		tools[0].name = "" // the entry itself: its name is the tool's
	} else {
		for _, t := range tools {
			if t.spec.Operation == "" {
				d.Errorf(docField(c), "the anonymous operation needs a name: the entry serves several tools, named after their operations")
				return nil, d.List()
			}
			t.name = c.prefix + t.spec.Operation
		}
	}
	tools = append(tools, generated...)
	if len(tools) == 0 {
		d.Errorf("generate.query_fields", "no tools: no Query field could be turned into a tool")
		return nil, d.List()
	}
	seen := map[string]bool{}
	for _, t := range tools {
		if t.name != "" && seen[t.name] {
			d.Errorf("generate.query_fields", "tool name %q is derived twice (from the document and from generate): rename the operation or set tool_prefix", t.name)
		}
		seen[t.name] = true
	}
	if d.Failed() {
		return nil, d.List()
	}
	return tools, d.List()
}

func docField(c *config) string {
	if c.hasQuery {
		return "query"
	}
	return "document"
}

// loadSchema reads the SDL file or introspects the endpoint.
func (a *adapter) loadSchema(ctx context.Context, c *config, op *sdk.Operation, d *diags) *ast.Schema {
	if c.schemaFile != "" {
		path := op.ResolvePath(c.schemaFile)
		sdl, err := readFile(path)
		if err != nil {
			d.Errorf("schema", "%v", err)
			return nil
		}
		s, merged, err := loadSDL(filepath.Base(path), sdl)
		if err != nil {
			d.Errorf("schema", "not a valid GraphQL schema: %v", err)
			return nil
		}
		for _, m := range merged {
			d.Warnf("schema", "%s", m)
		}
		return s
	}
	s, err := a.introspect(ctx, c, c.callTimeout(op.Timeout))
	if err != nil {
		d.Errorf("schema", "introspection of %s failed: %v (a server without introspection needs schema: an SDL file)", c.upstream, err)
		return nil
	}
	return s
}

// documentTools turns the document's operations into tools.
func documentTools(schema *ast.Schema, c *config, op *sdk.Operation, d *diags) []*derivedTool {
	field := docField(c)
	text, name := c.query, "" // errors in an inline document say "line L:C"
	if c.documentFile != "" {
		path := op.ResolvePath(c.documentFile)
		var err error
		if text, err = readFile(path); err != nil {
			d.Errorf(field, "%v", err)
			return nil
		}
		name = filepath.Base(path)
	}
	doc, err := parser.ParseQuery(&ast.Source{Name: name, Input: text})
	if err != nil {
		d.Errorf(field, "not a valid GraphQL document: %v", describeGQLError(err))
		return nil
	}
	if len(doc.Operations) == 0 {
		d.Errorf(field, "the document has no query, mutation or subscription")
		return nil
	}
	if errs := validator.Validate(schema, doc); len(errs) > 0 {
		d.Errorf(field, "does not match the schema: %v", describeGQLError(errs))
		return nil
	}
	ops := doc.Operations
	if len(c.operations) > 0 {
		ops = nil
		var names []string
		for _, o := range doc.Operations {
			names = append(names, opLabel(o))
		}
		for i, want := range c.operations {
			o := doc.Operations.ForName(want)
			if o == nil || o.Name != want {
				d.Errorf(fmt.Sprintf("operations[%d]", i), "no operation named %q in the document (it has: %s)", want, strings.Join(names, ", "))
				continue
			}
			ops = append(ops, o)
		}
		if d.Failed() {
			return nil
		}
	}
	var tools []*derivedTool
	for _, o := range ops {
		if stream := op.Mode == sdk.ModeWindow; stream != (o.Operation == ast.Subscription) {
			if stream {
				d.Errorf(field, "%s %s is one request, and this entry reads a stream (mode window, session or async_job with server_stream): only subscriptions are stream sources; serve queries and mutations from a unary entry, or pick the subscriptions with operations", o.Operation, opLabel(o))
				continue
			}
			if !op.ToolExecution {
				d.Errorf(field, "subscription %s is a stream, and this host serves every tool of a unary entry as unary: give the entry mode window or session", opLabel(o))
				continue
			}
		}
		t, err := buildTool(schema, doc, o, describeOperation(schema, o))
		if err != nil {
			d.Errorf(field, "operation %s: %v", opLabel(o), err)
			continue
		}
		tools = append(tools, t)
	}
	return tools
}

func opLabel(o *ast.OperationDefinition) string {
	if o.Name == "" {
		return "(anonymous " + string(o.Operation) + ")"
	}
	return o.Name
}

// buildTool derives one tool from a validated operation.
func buildTool(schema *ast.Schema, doc *ast.QueryDocument, o *ast.OperationDefinition, description string) (*derivedTool, error) {
	text, err := printOperation(doc, o)
	if err != nil {
		return nil, err
	}
	// The printed document must stand on its own.
	if _, errs := gqlparser.LoadQuery(schema, text); len(errs) > 0 {
		return nil, fmt.Errorf("internal error: the operation does not print back to a valid document: %v", describeGQLError(errs))
	}
	spec := toolSpec{Operation: o.Name, Kind: string(o.Operation), Document: text}
	for _, v := range o.VariableDefinitions {
		spec.Variables = append(spec.Variables, inSpec{Name: v.Variable, Type: v.Type.String(), HasDefault: v.DefaultValue != nil})
	}
	spec.Types = collectTypes(schema, o.VariableDefinitions)
	return &derivedTool{
		description: description,
		input:       inputSchema(schema, o.VariableDefinitions),
		output:      outputSchema(schema, o),
		mutation:    o.Operation == ast.Mutation,
		stream:      o.Operation == ast.Subscription,
		spec:        spec,
	}, nil
}

// printOperation prints the operation with the fragments it uses, and
// nothing else: no descriptions, no comments.
func printOperation(doc *ast.QueryDocument, o *ast.OperationDefinition) (string, error) {
	used := map[string]bool{}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch x := sel.(type) {
			case *ast.Field:
				walk(x.SelectionSet)
			case *ast.InlineFragment:
				walk(x.SelectionSet)
			case *ast.FragmentSpread:
				if !used[x.Name] {
					used[x.Name] = true
					if f := doc.Fragments.ForName(x.Name); f != nil {
						walk(f.SelectionSet)
					}
				}
			}
		}
	}
	walk(o.SelectionSet)
	cp := *o
	cp.Description, cp.Comment = "", nil
	cp.VariableDefinitions = nil
	for _, v := range o.VariableDefinitions {
		vc := *v
		vc.Description, vc.Comment = "", nil
		cp.VariableDefinitions = append(cp.VariableDefinitions, &vc)
	}
	out := &ast.QueryDocument{Operations: ast.OperationList{&cp}}
	for _, f := range doc.Fragments {
		if used[f.Name] {
			out.Fragments = append(out.Fragments, f)
		}
	}
	var b bytes.Buffer
	formatter.NewFormatter(&b, formatter.WithoutDescription(), formatter.WithIndent(" ")).FormatQueryDocument(out)
	return strings.TrimSpace(b.String()), nil
}

// collectTypes describes the enums, input objects and custom scalars the
// variables refer to, for argument coercion at call time.
func collectTypes(schema *ast.Schema, vars ast.VariableDefinitionList) map[string]typeSpec {
	out := map[string]typeSpec{}
	var visit func(name string)
	visit = func(name string) {
		if builtinScalars[name] {
			return
		}
		if _, ok := out[name]; ok {
			return
		}
		def := schema.Types[name]
		if def == nil {
			return
		}
		switch def.Kind {
		case ast.Enum:
			ts := typeSpec{Kind: "enum"}
			for _, v := range def.EnumValues {
				ts.Values = append(ts.Values, v.Name)
			}
			out[name] = ts
		case ast.InputObject:
			ts := typeSpec{Kind: "input", OneOf: def.Directives.ForName("oneOf") != nil}
			for _, f := range def.Fields {
				ts.Fields = append(ts.Fields, inSpec{Name: f.Name, Type: f.Type.String(), HasDefault: f.DefaultValue != nil})
			}
			out[name] = ts
			for _, f := range def.Fields {
				visit(namedOf(f.Type))
			}
		default:
			out[name] = typeSpec{Kind: "scalar"}
		}
	}
	for _, v := range vars {
		visit(namedOf(v.Type))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// describeOperation is the tool description: the operation's description
// or the comment right above it; otherwise what it selects.
func describeOperation(schema *ast.Schema, o *ast.OperationDefinition) string {
	if d := strings.TrimSpace(o.Description); d != "" {
		return d
	}
	if d := commentText(o.Comment); d != "" {
		return d
	}
	root := rootType(schema, o)
	var b strings.Builder
	if o.Name == "" {
		fmt.Fprintf(&b, "GraphQL %s.", o.Operation)
	} else {
		fmt.Fprintf(&b, "GraphQL %s %s.", o.Operation, o.Name)
	}
	for _, sel := range o.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || strings.HasPrefix(f.Name, "__") || root == nil {
			continue
		}
		fmt.Fprintf(&b, " %s.%s", root.Name, f.Name)
		if f.Definition != nil && f.Definition.Description != "" {
			b.WriteString(": " + strings.TrimSpace(f.Definition.Description))
			if !strings.HasSuffix(b.String(), ".") {
				b.WriteByte('.')
			}
		} else {
			b.WriteByte('.')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// generateTools turns top-level Query fields into query tools selecting
// their result to a bounded depth.
func generateTools(schema *ast.Schema, c *config, d *diags) []*derivedTool {
	g := c.generate
	if schema.Query == nil {
		d.Errorf("generate", "the schema has no query type")
		return nil
	}
	var fields ast.FieldList
	if g.fields == nil {
		for _, f := range schema.Query.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				fields = append(fields, f)
			}
		}
	} else {
		for i, name := range g.fields {
			f := schema.Query.Fields.ForName(name)
			if f == nil || strings.HasPrefix(name, "__") {
				d.Errorf(fmt.Sprintf("generate.query_fields[%d]", i), "type %s has no field %q", schema.Query.Name, name)
				continue
			}
			fields = append(fields, f)
		}
		if d.Failed() {
			return nil
		}
	}
	var tools []*derivedTool
	for _, f := range fields {
		text := generatedQuery(schema, f, g.maxDepth)
		doc, errs := gqlparser.LoadQuery(schema, text)
		if len(errs) > 0 {
			d.Warnf("generate.query_fields", "Query.%s is skipped: the generated query is not valid: %v", f.Name, describeGQLError(errs))
			continue
		}
		o := doc.Operations[0]
		for _, v := range o.VariableDefinitions {
			if a := f.Arguments.ForName(v.Variable); a != nil {
				v.Description = strings.TrimSpace(a.Description)
			}
		}
		desc := strings.TrimSpace(f.Description)
		if desc == "" {
			desc = fmt.Sprintf("Query %s.%s.", schema.Query.Name, f.Name)
		}
		desc += fmt.Sprintf("\n(Generated GraphQL query of %s.%s, selecting its result %d level(s) deep.)", schema.Query.Name, f.Name, g.maxDepth)
		t, err := buildTool(schema, doc, o, desc)
		if err != nil {
			d.Warnf("generate.query_fields", "Query.%s is skipped: %v", f.Name, err)
			continue
		}
		t.name, t.generated = c.prefix+f.Name, true
		tools = append(tools, t)
	}
	return tools
}

// generatedQuery writes the query of one Query field: every argument a
// variable (with the argument's default), the result selected depth
// levels deep.
func generatedQuery(schema *ast.Schema, f *ast.FieldDefinition, depth int) string {
	var b strings.Builder
	b.WriteString("query " + f.Name)
	if len(f.Arguments) > 0 {
		b.WriteString("(")
		for i, a := range f.Arguments {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + a.Name + ": " + a.Type.String())
			if a.DefaultValue != nil {
				b.WriteString(" = " + a.DefaultValue.String())
			}
		}
		b.WriteString(")")
	}
	b.WriteString(" { " + f.Name)
	if len(f.Arguments) > 0 {
		b.WriteString("(")
		for i, a := range f.Arguments {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.Name + ": $" + a.Name)
		}
		b.WriteString(")")
	}
	if def := schema.Types[namedOf(f.Type)]; def != nil && !isLeaf(def) {
		budget := maxGeneratedFields
		b.WriteString(" " + selectionText(schema, def, 1, depth, &budget))
	}
	b.WriteString(" }")
	return b.String()
}

func isLeaf(def *ast.Definition) bool { return def.Kind == ast.Scalar || def.Kind == ast.Enum }

// selectionText selects the fields of def: leaves always, objects while
// depth allows; fields that need arguments and deprecated fields are left
// out. The selection is never empty (__typename at worst).
func selectionText(schema *ast.Schema, def *ast.Definition, depth, maxDepth int, budget *int) string {
	return memberSelection(schema, def, depth, maxDepth, budget, nil)
}

// memberSelection is selectionText of def; for a member of a union, taken
// (nil otherwise) holds the type of each field an earlier member selects
// by name: a field of this name and another type (String and String!, a
// list and not) would make the selections conflict, so it is selected
// under an alias, <field>_<Member>.
func memberSelection(schema *ast.Schema, def *ast.Definition, depth, maxDepth int, budget *int, taken map[string]string) string {
	var parts []string
	switch def.Kind {
	case ast.Object, ast.Interface:
		if def.Kind == ast.Interface {
			parts = append(parts, "__typename")
		}
		for _, f := range def.Fields {
			if *budget <= 0 {
				break
			}
			if strings.HasPrefix(f.Name, "__") || needsArguments(f) || f.Directives.ForName("deprecated") != nil {
				continue
			}
			ft := schema.Types[namedOf(f.Type)]
			if ft == nil {
				continue
			}
			if !isLeaf(ft) && depth >= maxDepth {
				continue
			}
			name := f.Name
			if taken != nil {
				if t, ok := taken[f.Name]; ok && t != f.Type.String() {
					name = f.Name + "_" + def.Name + ": " + f.Name
				} else if !ok {
					taken[f.Name] = f.Type.String()
				}
			}
			*budget--
			if isLeaf(ft) {
				parts = append(parts, name)
				continue
			}
			parts = append(parts, name+" "+selectionText(schema, ft, depth+1, maxDepth, budget))
		}
	case ast.Union:
		parts = append(parts, "__typename")
		taken := map[string]string{}
		for _, m := range schema.GetPossibleTypes(def) {
			if *budget <= 0 {
				break
			}
			parts = append(parts, "... on "+m.Name+" "+memberSelection(schema, m, depth, maxDepth, budget, taken))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "__typename")
	}
	return "{ " + strings.Join(parts, " ") + " }"
}

func needsArguments(f *ast.FieldDefinition) bool {
	for _, a := range f.Arguments {
		if a.Type.NonNull && a.DefaultValue == nil {
			return true
		}
	}
	return false
}
