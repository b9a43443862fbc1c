package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// toolSpec is the "tool" of a per-tool config: everything a call needs,
// derived from the schema and the document at load, so that calls never
// need the schema (and survive an adapter restart without reloading it).
type toolSpec struct {
	// Operation is the GraphQL operation name; empty for an anonymous one.
	Operation string `json:"operation,omitempty"`
	// Kind is "query", "mutation" or "subscription".
	Kind string `json:"kind"`
	// Document is the operation and the fragments it uses.
	Document  string   `json:"document"`
	Variables []inSpec `json:"variables,omitempty"`
	// Types are the enums, input objects and custom scalars the variables
	// refer to, by name.
	Types map[string]typeSpec `json:"types,omitempty"`
}

// inSpec is a variable or an input-object field.
type inSpec struct {
	Name string `json:"name"`
	// Type is a GraphQL type reference such as "[ID!]!".
	Type       string `json:"type"`
	HasDefault bool   `json:"has_default,omitempty"`
}

type typeSpec struct {
	// Kind is "input", "enum" or "scalar" (a custom scalar).
	Kind   string   `json:"kind"`
	Fields []inSpec `json:"fields,omitempty"`
	Values []string `json:"values,omitempty"`
	OneOf  bool     `json:"one_of,omitempty"`
}

// tool is a compiled toolSpec.
type tool struct {
	spec     toolSpec
	mutation bool
	// subscription: a stream source (Stream), never invoked.
	subscription bool
	// label names the operation in errors, e.g. `query GetBook`.
	label string
	// prefix is the request body up to the variables:
	// {"query":"...","operationName":"..."
	prefix []byte
	vars   []*inField
	byName map[string]*inField
	types  map[string]*inType
	// varList names the variables for error messages: "$id, $first".
	varList string
}

type inField struct {
	name     string
	typ      *typeRef
	required bool // non-null without a default
}

type inType struct {
	name   string
	kind   string
	fields []*inField
	byName map[string]*inField
	values map[string]bool
	// valueList and fieldList are for error messages.
	valueList string
	fieldList string
	oneOf     bool
}

// typeRef is a parsed GraphQL type reference.
type typeRef struct {
	named   string   // set for a named type
	elem    *typeRef // set for a list
	nonNull bool
}

func (t *typeRef) String() string {
	s := t.named
	if t.elem != nil {
		s = "[" + t.elem.String() + "]"
	}
	if t.nonNull {
		s += "!"
	}
	return s
}

// parseTypeRef parses "[[Int!]]!" and the like.
func parseTypeRef(s string) (*typeRef, error) {
	t, rest, err := parseTypeRefPrefix(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(rest) != "" {
		return nil, fmt.Errorf("type %q: unexpected %q", s, rest)
	}
	return t, nil
}

func parseTypeRefPrefix(s string) (*typeRef, string, error) {
	t := &typeRef{}
	if strings.HasPrefix(s, "[") {
		elem, rest, err := parseTypeRefPrefix(strings.TrimSpace(s[1:]))
		if err != nil {
			return nil, "", err
		}
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "]") {
			return nil, "", fmt.Errorf("type: missing ]")
		}
		t.elem, s = elem, strings.TrimSpace(rest[1:])
	} else {
		i := 0
		for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
			i++
		}
		if !validGraphQLName(s[:i]) {
			return nil, "", fmt.Errorf("type: expected a type name")
		}
		t.named, s = s[:i], strings.TrimSpace(s[i:])
	}
	if strings.HasPrefix(s, "!") {
		t.nonNull, s = true, s[1:]
	}
	return t, s, nil
}

// builtinScalars are the scalars every schema has.
var builtinScalars = map[string]bool{"Int": true, "Float": true, "String": true, "Boolean": true, "ID": true}

// compileTool checks a tool spec and prepares it for calls.
func compileTool(raw json.RawMessage) (*tool, error) {
	var spec toolSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, errors.New("not a tool derived by the graphql adapter (write document or query instead)")
	}
	t := &tool{spec: spec, byName: map[string]*inField{}, types: map[string]*inType{}}
	switch spec.Kind {
	case "query":
	case "mutation":
		t.mutation = true
	case "subscription":
		t.subscription = true
	default:
		return nil, fmt.Errorf("kind must be query, mutation or subscription")
	}
	if strings.TrimSpace(spec.Document) == "" {
		return nil, errors.New("document is empty")
	}
	if spec.Operation != "" && !validGraphQLName(spec.Operation) {
		return nil, fmt.Errorf("operation %q is not a GraphQL name", spec.Operation)
	}
	t.label = spec.Kind
	if spec.Operation != "" {
		t.label += " " + spec.Operation
	}
	for name, ts := range spec.Types {
		it := &inType{name: name, kind: ts.Kind, oneOf: ts.OneOf}
		switch ts.Kind {
		case "scalar":
		case "enum":
			it.values = map[string]bool{}
			for _, v := range ts.Values {
				it.values[v] = true
			}
			it.valueList = listNames(ts.Values, "", 20)
		case "input":
			it.byName = map[string]*inField{}
			var names []string
			for _, f := range ts.Fields {
				fld, err := compileIn(f)
				if err != nil {
					return nil, fmt.Errorf("type %s: %v", name, err)
				}
				it.fields = append(it.fields, fld)
				it.byName[fld.name] = fld
				names = append(names, fld.name)
			}
			it.fieldList = listNames(names, "", 20)
		default:
			return nil, fmt.Errorf("type %s: unknown kind %q", name, ts.Kind)
		}
		t.types[name] = it
	}
	var names []string
	for _, v := range spec.Variables {
		fld, err := compileIn(v)
		if err != nil {
			return nil, fmt.Errorf("variable $%s: %v", v.Name, err)
		}
		if t.byName[fld.name] != nil {
			return nil, fmt.Errorf("variable $%s is declared twice", fld.name)
		}
		t.vars = append(t.vars, fld)
		t.byName[fld.name] = fld
		names = append(names, fld.name)
	}
	t.varList = listNames(names, "$", 30)
	// Every named type must be known.
	check := func(where string, r *typeRef) error {
		for r.elem != nil {
			r = r.elem
		}
		if !builtinScalars[r.named] && t.types[r.named] == nil {
			return fmt.Errorf("%s: type %s is not described", where, r.named)
		}
		return nil
	}
	for _, v := range t.vars {
		if err := check("$"+v.name, v.typ); err != nil {
			return nil, err
		}
	}
	for _, it := range t.types {
		for _, f := range it.fields {
			if err := check(it.name+"."+f.name, f.typ); err != nil {
				return nil, err
			}
		}
	}

	var b bytes.Buffer
	b.WriteString(`{"query":`)
	b.Write(marshalString(spec.Document))
	if spec.Operation != "" {
		b.WriteString(`,"operationName":`)
		b.Write(marshalString(spec.Operation))
	}
	t.prefix = b.Bytes()
	return t, nil
}

func compileIn(s inSpec) (*inField, error) {
	if !validGraphQLName(s.Name) {
		return nil, fmt.Errorf("%q is not a GraphQL name", s.Name)
	}
	r, err := parseTypeRef(s.Type)
	if err != nil {
		return nil, err
	}
	return &inField{name: s.Name, typ: r, required: r.nonNull && !s.HasDefault}, nil
}

func listNames(names []string, prefix string, max int) string {
	var b strings.Builder
	for i, n := range names {
		if i == max {
			fmt.Fprintf(&b, ", … (%d more)", len(names)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(prefix + n)
	}
	return b.String()
}

func marshalString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// argError is a problem with one variable; path names it ("$filter.tags[2]").
type argError struct {
	path string
	msg  string
}

func (e *argError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// variables checks the tool arguments against the operation's variables,
// applies GraphQL input coercion, and returns the "variables" JSON object
// to send. Errors name the variable.
func (t *tool) variables(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, &argError{msg: "the tool arguments must be a JSON object"}
	}
	if len(t.vars) == 0 && bytes.Equal(raw, []byte("{}")) {
		return raw, nil
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, &argError{msg: "the tool arguments are not a valid JSON object"}
	}
	// Unknown arguments first: they usually explain everything else.
	var unknown []string
	for k := range args {
		if t.byName[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		takes := "takes no variables"
		if t.varList != "" {
			takes = "takes " + t.varList
		}
		return nil, &argError{msg: fmt.Sprintf("unknown argument %s: the %s %s", quoteList(unknown), t.label, takes)}
	}
	out := make(map[string]any, len(args))
	for _, v := range t.vars {
		val, ok := args[v.name]
		if !ok {
			if v.required {
				return nil, &argError{path: "$" + v.name, msg: fmt.Sprintf("missing required variable (%s)", v.typ)}
			}
			continue // the server applies the default, if any
		}
		c, err := t.coerce(val, v.typ, "$"+v.name)
		if err != nil {
			return nil, err
		}
		out[v.name] = c
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, &argError{msg: "the variables cannot be encoded as JSON"}
	}
	return b, nil
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(clip(n, 64))
	}
	return strings.Join(q, ", ")
}

// coerce applies GraphQL input coercion to one value of type r.
func (t *tool) coerce(v any, r *typeRef, path string) (any, error) {
	if v == nil {
		if r.nonNull {
			return nil, &argError{path: path, msg: fmt.Sprintf("must not be null (%s)", r)}
		}
		return nil, nil
	}
	if r.elem != nil {
		list, ok := v.([]any)
		if !ok {
			// A single value stands for a list of one.
			c, err := t.coerce(v, r.elem, path)
			if err != nil {
				return nil, err
			}
			return []any{c}, nil
		}
		out := make([]any, len(list))
		for i, e := range list {
			c, err := t.coerce(e, r.elem, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	switch r.named {
	case "Int":
		n, ok := v.(json.Number)
		if !ok {
			return nil, typeErr(path, "Int (a 32-bit integer)", v)
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(n.String(), 64)
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return nil, &argError{path: path, msg: fmt.Sprintf("expected Int (a 32-bit integer), got %s", clip(n.String(), 32))}
			}
			i = int64(f)
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return nil, &argError{path: path, msg: fmt.Sprintf("expected Int (a 32-bit integer), got %s: out of range", clip(n.String(), 32))}
		}
		return i, nil
	case "Float":
		n, ok := v.(json.Number)
		if !ok {
			return nil, typeErr(path, "Float (a number)", v)
		}
		if f, err := strconv.ParseFloat(n.String(), 64); err != nil || math.IsInf(f, 0) {
			return nil, &argError{path: path, msg: "expected Float (a number), got a number out of range"}
		}
		return n, nil
	case "String":
		if _, ok := v.(string); !ok {
			return nil, typeErr(path, "String", v)
		}
		return v, nil
	case "Boolean":
		if _, ok := v.(bool); !ok {
			return nil, typeErr(path, "Boolean (true or false)", v)
		}
		return v, nil
	case "ID":
		switch x := v.(type) {
		case string:
			return x, nil
		case json.Number:
			if _, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
				return x.String(), nil
			}
		}
		return nil, typeErr(path, "ID (a string or an integer)", v)
	}
	it := t.types[r.named]
	if it == nil {
		return nil, &argError{path: path, msg: fmt.Sprintf("type %s is not described", r.named)}
	}
	switch it.kind {
	case "scalar":
		return v, nil // custom scalar: the server checks it
	case "enum":
		s, ok := v.(string)
		if !ok {
			return nil, typeErr(path, "a value of enum "+it.name+" ("+it.valueList+")", v)
		}
		if !it.values[s] {
			return nil, &argError{path: path, msg: fmt.Sprintf("%s is not a value of enum %s (one of %s)", strconv.Quote(clip(s, 64)), it.name, it.valueList)}
		}
		return s, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, typeErr(path, "input object "+it.name, v)
	}
	var unknown []string
	for k := range obj {
		if it.byName[k] == nil {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &argError{path: path, msg: fmt.Sprintf("unknown field %s of input %s (fields: %s)", quoteList(unknown), it.name, it.fieldList)}
	}
	out := make(map[string]any, len(obj))
	set := 0
	for _, f := range it.fields {
		fv, ok := obj[f.name]
		if !ok {
			if f.required {
				return nil, &argError{path: path + "." + f.name, msg: fmt.Sprintf("missing required field of input %s (%s)", it.name, f.typ)}
			}
			continue
		}
		c, err := t.coerce(fv, f.typ, path+"."+f.name)
		if err != nil {
			return nil, err
		}
		if c != nil {
			set++
		}
		out[f.name] = c
	}
	if it.oneOf && (set != 1 || len(out) != 1) {
		return nil, &argError{path: path, msg: fmt.Sprintf("input %s is a @oneOf input: set exactly one of its fields (%s) to a non-null value", it.name, it.fieldList)}
	}
	return out, nil
}

func typeErr(path, want string, got any) error {
	return &argError{path: path, msg: "expected " + want + ", got " + jsonKind(got)}
}

// jsonKind describes a decoded JSON value without quoting it.
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + clip(x.String(), 32)
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// invalidArg wraps an argument error for the host.
func (c *config) invalidArg(t *tool, err error) *sdk.UpstreamError {
	return &sdk.UpstreamError{
		Kind:     sdk.KindInvalidArgument,
		Upstream: c.upstreamLabel(t),
		Message:  err.Error(),
	}
}

// upstreamLabel names the call in errors: "query GetBook at http://h/graphql".
func (c *config) upstreamLabel(t *tool) string {
	if t == nil {
		return c.upstream
	}
	return t.label + " at " + c.upstream
}
