package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/crankmcp/crank/plugins/sdk"
)

// introspectionQuery is the classic introspection query, without the
// fields newer servers add (the schema's description, specifiedByURL,
// isRepeatable, deprecated arguments) so that older servers answer it too.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name }
    mutationType { name }
    subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) {
    name description
    args { ...InputValue }
    type { ...TypeRef }
    isDeprecated deprecationReason
  }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name
    ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}`

// readFile reads a document or SDL file, bounded.
func readFile(path string) (string, error) {
	b, err := sdk.ReadFile(path, maxDocumentBytes)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, err)
	}
	return string(b), nil
}

// loadSDL parses and validates an SDL schema. A field a type (or an
// extension of it) defines twice the same way — GitHub's published
// schema does — is merged into one, and merged says so; two different
// definitions of one field stay an error.
func loadSDL(name, sdl string) (s *ast.Schema, merged []string, err error) {
	doc, perr := parser.ParseSchemas(validator.Prelude, &ast.Source{Name: name, Input: sdl})
	if perr != nil {
		return nil, nil, describeGQLError(perr)
	}
	for _, defs := range []ast.DefinitionList{doc.Definitions, doc.Extensions} {
		for _, def := range defs {
			def.Fields, merged = mergeFields(def, def.Fields, merged)
		}
	}
	s, verr := validator.ValidateSchemaDocument(doc)
	if verr != nil {
		return nil, nil, describeGQLError(verr)
	}
	return s, merged, nil
}

// mergeFields drops the fields of def that repeat an earlier field of the
// same name with the same type, arguments and directives, noting each in
// merged.
func mergeFields(def *ast.Definition, fields ast.FieldList, merged []string) (ast.FieldList, []string) {
	seen := map[string]*ast.FieldDefinition{}
	out := fields[:0:0]
	for _, f := range fields {
		first := seen[f.Name]
		if first == nil {
			seen[f.Name] = f
			out = append(out, f)
			continue
		}
		if fieldSignature(first) != fieldSignature(f) {
			out = append(out, f) // the validator names the conflict
			continue
		}
		merged = append(merged, fmt.Sprintf("%s.%s is defined twice the same way (lines %d and %d): merged into one",
			def.Name, f.Name, lineOf(first.Position), lineOf(f.Position)))
	}
	return out, merged
}

// fieldSignature is what makes two definitions of a field the same one:
// its type, its arguments (name, type, default) and its directives.
func fieldSignature(f *ast.FieldDefinition) string {
	var b strings.Builder
	b.WriteString(f.Type.String())
	for _, a := range f.Arguments {
		fmt.Fprintf(&b, "|%s:%s", a.Name, a.Type.String())
		if a.DefaultValue != nil {
			b.WriteString("=" + a.DefaultValue.String())
		}
	}
	for _, d := range f.Directives {
		b.WriteString("|@" + d.Name)
		for _, a := range d.Arguments {
			b.WriteString(" " + a.Name + ":" + a.Value.String())
		}
	}
	return b.String()
}

func lineOf(p *ast.Position) int {
	if p == nil {
		return 0
	}
	return p.Line
}

// describeGQLError renders a gqlparser error as "file:line:col: message".
func describeGQLError(err error) error {
	var list gqlerror.List
	var one *gqlerror.Error
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = gqlerror.List{one}
	default:
		return err
	}
	var msgs []string
	for i, e := range list {
		if i == 5 {
			msgs = append(msgs, fmt.Sprintf("… and %d more", len(list)-5))
			break
		}
		msgs = append(msgs, gqlErrorText(e))
	}
	return errors.New(strings.Join(msgs, "; "))
}

func gqlErrorText(e *gqlerror.Error) string {
	var loc string
	if len(e.Locations) > 0 {
		loc = fmt.Sprintf("%d:%d", e.Locations[0].Line, e.Locations[0].Column)
	}
	file := ""
	if e.Extensions != nil {
		if f, ok := e.Extensions["file"].(string); ok && f != "" {
			file = filepath.Base(f)
		}
	}
	switch {
	case file != "" && loc != "":
		return file + ":" + loc + ": " + e.Message
	case loc != "":
		return "line " + loc + ": " + e.Message
	case file != "":
		return file + ": " + e.Message
	}
	return e.Message
}

// introspect fetches the endpoint's schema through introspection.
func (a *adapter) introspect(ctx context.Context, c *config, timeout time.Duration) (*ast.Schema, error) {
	body, err := json.Marshal(map[string]any{"query": introspectionQuery, "operationName": "IntrospectionQuery"})
	if err != nil {
		return nil, err
	}
	intro := &tool{label: "introspection query"}
	gr, _, ue := a.post(ctx, c, intro, body, maxIntrospectionBytes, timeout, nil)
	if ue != nil {
		return nil, errors.New(ue.Error())
	}
	if len(gr.errors) > 0 {
		return nil, fmt.Errorf("the server refused the introspection query: %s", summarizeErrors(gr.errors))
	}
	var resp struct {
		Schema *introSchema `json:"__schema"`
	}
	if err := json.Unmarshal(gr.data, &resp); err != nil || resp.Schema == nil {
		return nil, errors.New("the answer to the introspection query has no __schema")
	}
	sdl, err := resp.Schema.sdl()
	if err != nil {
		return nil, err
	}
	s, _, err := loadSDL("introspection", sdl)
	if err != nil {
		return nil, fmt.Errorf("the introspected schema is not valid: %v", err)
	}
	return s, nil
}

type introSchema struct {
	QueryType        *introName       `json:"queryType"`
	MutationType     *introName       `json:"mutationType"`
	SubscriptionType *introName       `json:"subscriptionType"`
	Types            []introType      `json:"types"`
	Directives       []introDirective `json:"directives"`
}

type introName struct {
	Name string `json:"name"`
}

type introType struct {
	Kind          string       `json:"kind"`
	Name          string       `json:"name"`
	Description   *string      `json:"description"`
	Fields        []introField `json:"fields"`
	InputFields   []introInput `json:"inputFields"`
	Interfaces    []introRef   `json:"interfaces"`
	EnumValues    []introEnum  `json:"enumValues"`
	PossibleTypes []introRef   `json:"possibleTypes"`
}

type introField struct {
	Name              string       `json:"name"`
	Description       *string      `json:"description"`
	Args              []introInput `json:"args"`
	Type              *introRef    `json:"type"`
	IsDeprecated      bool         `json:"isDeprecated"`
	DeprecationReason *string      `json:"deprecationReason"`
}

type introInput struct {
	Name         string    `json:"name"`
	Description  *string   `json:"description"`
	Type         *introRef `json:"type"`
	DefaultValue *string   `json:"defaultValue"`
}

type introEnum struct {
	Name              string  `json:"name"`
	Description       *string `json:"description"`
	IsDeprecated      bool    `json:"isDeprecated"`
	DeprecationReason *string `json:"deprecationReason"`
}

type introRef struct {
	Kind   string    `json:"kind"`
	Name   *string   `json:"name"`
	OfType *introRef `json:"ofType"`
}

type introDirective struct {
	Name        string       `json:"name"`
	Description *string      `json:"description"`
	Locations   []string     `json:"locations"`
	Args        []introInput `json:"args"`
}

// preludeNames are the types and directives gqlparser declares itself.
var preludeTypes, preludeDirectives = func() (map[string]bool, map[string]bool) {
	doc := validator.PreludeDocument()
	types, dirs := map[string]bool{}, map[string]bool{}
	for _, d := range doc.Definitions {
		types[d.Name] = true
	}
	for _, d := range doc.Directives {
		dirs[d.Name] = true
	}
	return types, dirs
}()

// sdl renders an introspection result as SDL for gqlparser to load.
func (s *introSchema) sdl() (string, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if s.QueryType == nil || s.QueryType.Name == "" {
		return "", errors.New("the introspected schema has no query type")
	}
	w("schema {\n  query: %s\n", s.QueryType.Name)
	if s.MutationType != nil && s.MutationType.Name != "" {
		w("  mutation: %s\n", s.MutationType.Name)
	}
	if s.SubscriptionType != nil && s.SubscriptionType.Name != "" {
		w("  subscription: %s\n", s.SubscriptionType.Name)
	}
	w("}\n")
	for _, d := range s.Directives {
		if preludeDirectives[d.Name] || !validGraphQLName(d.Name) || len(d.Locations) == 0 {
			continue
		}
		writeDescription(&b, d.Description, "")
		w("directive @%s", d.Name)
		if err := writeArgs(&b, d.Args); err != nil {
			return "", fmt.Errorf("directive @%s: %v", d.Name, err)
		}
		w(" on %s\n", strings.Join(d.Locations, " | "))
	}
	for _, t := range s.Types {
		if preludeTypes[t.Name] || strings.HasPrefix(t.Name, "__") {
			continue
		}
		if !validGraphQLName(t.Name) {
			return "", fmt.Errorf("type name %q is not a GraphQL name", t.Name)
		}
		writeDescription(&b, t.Description, "")
		switch t.Kind {
		case "SCALAR":
			w("scalar %s\n", t.Name)
		case "OBJECT", "INTERFACE":
			kw := "type"
			if t.Kind == "INTERFACE" {
				kw = "interface"
			}
			w("%s %s", kw, t.Name)
			for i, iface := range t.Interfaces {
				sep := " & "
				if i == 0 {
					sep = " implements "
				}
				name, err := refString(&iface)
				if err != nil {
					return "", err
				}
				w("%s%s", sep, name)
			}
			if len(t.Fields) == 0 {
				return "", fmt.Errorf("type %s has no fields", t.Name)
			}
			w(" {\n")
			for _, f := range t.Fields {
				writeDescription(&b, f.Description, "  ")
				w("  %s", f.Name)
				if err := writeArgs(&b, f.Args); err != nil {
					return "", fmt.Errorf("%s.%s: %v", t.Name, f.Name, err)
				}
				typ, err := refString(f.Type)
				if err != nil {
					return "", fmt.Errorf("%s.%s: %v", t.Name, f.Name, err)
				}
				w(": %s%s\n", typ, deprecated(f.IsDeprecated, f.DeprecationReason))
			}
			w("}\n")
		case "UNION":
			var names []string
			for _, p := range t.PossibleTypes {
				n, err := refString(&p)
				if err != nil {
					return "", err
				}
				names = append(names, n)
			}
			if len(names) == 0 {
				return "", fmt.Errorf("union %s has no members", t.Name)
			}
			w("union %s = %s\n", t.Name, strings.Join(names, " | "))
		case "ENUM":
			w("enum %s {\n", t.Name)
			for _, v := range t.EnumValues {
				writeDescription(&b, v.Description, "  ")
				w("  %s%s\n", v.Name, deprecated(v.IsDeprecated, v.DeprecationReason))
			}
			w("}\n")
		case "INPUT_OBJECT":
			w("input %s {\n", t.Name)
			for _, f := range t.InputFields {
				writeDescription(&b, f.Description, "  ")
				if err := writeInput(&b, f); err != nil {
					return "", fmt.Errorf("%s.%s: %v", t.Name, f.Name, err)
				}
				w("\n")
			}
			w("}\n")
		default:
			return "", fmt.Errorf("type %s has an unknown kind %q", t.Name, t.Kind)
		}
	}
	return b.String(), nil
}

func writeDescription(b *strings.Builder, d *string, indent string) {
	if d == nil || *d == "" {
		return
	}
	b.WriteString(indent)
	b.Write(marshalString(*d)) // JSON string escapes are GraphQL string escapes
	b.WriteByte('\n')
}

func writeArgs(b *strings.Builder, args []introInput) error {
	if len(args) == 0 {
		return nil
	}
	b.WriteString("(")
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		writeDescription(b, a.Description, "")
		if err := writeInput(b, a); err != nil {
			return err
		}
	}
	b.WriteString(")")
	return nil
}

func writeInput(b *strings.Builder, in introInput) error {
	typ, err := refString(in.Type)
	if err != nil {
		return fmt.Errorf("%s: %v", in.Name, err)
	}
	b.WriteString(in.Name + ": " + typ)
	if in.DefaultValue != nil {
		b.WriteString(" = " + *in.DefaultValue)
	}
	return nil
}

func deprecated(is bool, reason *string) string {
	if !is {
		return ""
	}
	if reason == nil || *reason == "" {
		return " @deprecated"
	}
	return " @deprecated(reason: " + string(marshalString(*reason)) + ")"
}

func refString(r *introRef) (string, error) {
	if r == nil {
		return "", errors.New("missing type")
	}
	switch r.Kind {
	case "NON_NULL":
		s, err := refString(r.OfType)
		return s + "!", err
	case "LIST":
		s, err := refString(r.OfType)
		return "[" + s + "]", err
	}
	if r.Name == nil || !validGraphQLName(*r.Name) {
		return "", errors.New("a type reference has no valid name (is the type nested deeper than the introspection query reaches?)")
	}
	return *r.Name, nil
}

// parseResponse splits a GraphQL response. ok is false when body is not a
// JSON object with data or errors.
func parseResponse(body []byte) (gqlResponse, bool) {
	var r struct {
		Data       json.RawMessage `json:"data"`
		Errors     json.RawMessage `json:"errors"`
		Extensions json.RawMessage `json:"extensions"`
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &r) != nil {
		return gqlResponse{}, false
	}
	if r.Data == nil && r.Errors == nil {
		return gqlResponse{}, false
	}
	gr := gqlResponse{data: r.Data, extensions: r.Extensions, requestError: r.Data == nil}
	if isNull(gr.data) {
		gr.data = nil
	}
	if len(r.Errors) > 0 && !isNull(r.Errors) {
		if json.Unmarshal(r.Errors, &gr.errors) != nil {
			// errors is not a list of objects: keep it as one message.
			gr.errors = []gqlError{{Message: "malformed errors entry: " + clip(string(r.Errors), 200)}}
		}
		gr.rawErrors = r.Errors
	}
	return gr, true
}

type gqlResponse struct {
	data       json.RawMessage // nil when absent or null
	errors     []gqlError
	rawErrors  json.RawMessage
	extensions json.RawMessage
	// requestError: no data entry at all, a request error (the document
	// or the variables refused before execution).
	requestError bool
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// summarizeErrors renders GraphQL errors as "message (at a.b[0]); ...",
// bounded.
func summarizeErrors(errs []gqlError) string {
	var b strings.Builder
	for i, e := range errs {
		if i == 10 {
			fmt.Fprintf(&b, "; … and %d more", len(errs)-10)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		msg := strings.TrimSpace(e.Message)
		if msg == "" {
			msg = "(no message)"
		}
		b.WriteString(clip(msg, 500))
		if p := pathString(e.Path); p != "" {
			b.WriteString(" (at " + p + ")")
		}
		if code, ok := e.Extensions["code"].(string); ok && code != "" {
			b.WriteString(" [" + clip(code, 64) + "]")
		}
	}
	return b.String()
}

// pathString renders a response path: ["books", 1, "author"] → books[1].author.
func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch x := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(clip(x, 64))
		case float64:
			fmt.Fprintf(&b, "[%d]", int64(x))
		}
	}
	return b.String()
}
