package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/plugins/sdk"
)

// Document is a catalog's content: an operations file (format version 1)
// without adapter declarations. Each entry is kept as the operator wrote
// it — the same fields and values, placeholders unexpanded — as a JSON
// object with sorted keys (so equal entries are equal bytes and diffs are
// stable; YAML comments and key order are not kept).
type Document struct {
	Operations []json.RawMessage
}

// Problem is a validation error or warning, placed for a form: Pointer is
// an RFC 6901 JSON pointer to the field in the request body ("" for the
// body as a whole), Line the body's line when it was YAML or JSON text,
// Message a sentence fit to show beside the field.
type Problem struct {
	Pointer   string `json:"pointer"`
	Operation string `json:"operation,omitempty"`
	Line      int    `json:"line,omitempty"`
	Message   string `json:"message"`
}

func (p Problem) String() string {
	loc := p.Pointer
	if loc == "" {
		loc = "(document)"
	}
	if p.Line > 0 {
		loc = fmt.Sprintf("line %d: %s", p.Line, loc)
	}
	return loc + ": " + p.Message
}

// Problems is a list of problems as one error.
type Problems []Problem

func (ps Problems) Error() string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.String()
	}
	return strings.Join(msgs, "; ")
}

// ErrAdapters explains why a catalog cannot declare adapter executables.
var ErrAdapters = errors.New("a catalog cannot declare adapter executables: whoever can write the catalog would run commands on every replica; declare them in an operations file of the handler, and the catalog's operations may use them")

// Known fields: an entry's (host.OperationDecl) and its annotations'.
var (
	entryFields      = host.JSONFields(reflect.TypeFor[host.OperationDecl]())
	annotationFields = host.JSONFields(reflect.TypeFor[host.Annotations]())
	fileFields       = []string{"version", "adapters", "operations"}
)

// ParseDocument reads an operations file (YAML or JSON) as a catalog
// document. Problems name the field with a pointer and the line: text
// that is not YAML or JSON, unknown fields, wrong types, an adapters
// block. What the host and the adapters check is Validate's.
func ParseDocument(data []byte) (*Document, Problems) {
	root, v, probs := parseText(data)
	if probs != nil {
		return nil, probs
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Problems{{Message: "an operations file is a mapping with version and operations"}}
	}
	var out Problems
	for _, k := range sortedKeys(m) {
		if !slices.Contains(fileFields, k) {
			out = append(out, Problem{Pointer: "/" + escape(k), Message: unknownField(k, fileFields)})
		}
	}
	if _, ok := m["adapters"]; ok {
		out = append(out, Problem{Pointer: "/adapters", Message: ErrAdapters.Error()})
	}
	if ver, ok := m["version"]; ok {
		if n, ok := ver.(json.Number); !ok || n.String() != "1" {
			out = append(out, Problem{Pointer: "/version", Message: fmt.Sprintf("unsupported version %v (this build reads version 1)", ver)})
		}
	}
	doc := &Document{}
	switch ops := m["operations"].(type) {
	case nil: // no operations: an empty catalog
	case []any:
		for i, e := range ops {
			raw, ps := checkEntry(fmt.Sprintf("/operations/%d", i), e)
			out = append(out, ps...)
			doc.Operations = append(doc.Operations, raw)
		}
	default:
		out = append(out, Problem{Pointer: "/operations", Message: fmt.Sprintf("must be a list of operations, got %s", typeName(ops))})
	}
	if len(out) == 0 {
		names := map[string]int{}
		for i, e := range doc.Operations {
			n := entryName(e)
			if j, dup := names[n]; dup && n != "" {
				out = append(out, Problem{Pointer: fmt.Sprintf("/operations/%d/name", i), Operation: n,
					Message: fmt.Sprintf("duplicate operation name (also /operations/%d)", j)})
			}
			names[n] = i
		}
	}
	if len(out) > 0 {
		return nil, withLines(root, out)
	}
	return doc, nil
}

// ParseEntry reads one operation entry (YAML or JSON), as in an
// operations file's list. Pointers are relative to the entry.
func ParseEntry(data []byte) (json.RawMessage, Problems) {
	root, v, probs := parseText(data)
	if probs != nil {
		return nil, probs
	}
	raw, ps := checkEntry("", v)
	if len(ps) > 0 {
		return nil, withLines(root, ps)
	}
	return raw, nil
}

// parseText reads YAML 1.2 or JSON into a node tree (for line numbers)
// and a JSON-like value with exact numbers.
func parseText(data []byte) (*yaml.Node, any, Problems) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, Problems{{Message: "the body is empty: send an operations file (YAML or JSON)"}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, Problems{yamlProblem(err)}
	}
	var v any
	if err := root.Decode(&v); err != nil {
		return nil, nil, Problems{yamlProblem(err)}
	}
	raw, err := json.Marshal(host.StringKeyed(v))
	if err != nil {
		return nil, nil, Problems{{Message: "not valid YAML or JSON: " + err.Error()}}
	}
	v, err = decodeJSON(raw)
	if err != nil {
		return nil, nil, Problems{{Message: "not valid YAML or JSON: " + err.Error()}}
	}
	return &root, v, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{Message: "not valid YAML or JSON: " + msg}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
	}
	return p
}

// checkEntry checks one entry's shape — an object of known fields with
// the right types — and returns it in canonical form.
func checkEntry(at string, v any) (json.RawMessage, Problems) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, Problems{{Pointer: at, Message: fmt.Sprintf("an operation is a mapping of fields (name, adapter, config, ...), got %s", typeName(v))}}
	}
	name, _ := m["name"].(string)
	var out Problems
	for _, k := range sortedKeys(m) {
		if !slices.Contains(entryFields, k) {
			out = append(out, Problem{Pointer: at + "/" + escape(k), Operation: name, Message: unknownField(k, entryFields)})
		}
	}
	if a, ok := m["annotations"].(map[string]any); ok {
		for _, k := range sortedKeys(a) {
			if !slices.Contains(annotationFields, k) {
				out = append(out, Problem{Pointer: at + "/annotations/" + escape(k), Operation: name, Message: unknownField(k, annotationFields)})
			}
		}
	}
	raw := canonical(m)
	if len(out) == 0 {
		var d host.OperationDecl
		if err := json.Unmarshal(raw, &d); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				out = append(out, Problem{Pointer: at + "/" + strings.ReplaceAll(te.Field, ".", "/"), Operation: name,
					Message: fmt.Sprintf("must be %s, got %s", goTypeName(te.Type), te.Value)})
			} else {
				out = append(out, Problem{Pointer: at, Operation: name, Message: err.Error()})
			}
		}
	}
	if len(out) > 0 {
		return nil, out
	}
	return raw, nil
}

func unknownField(k string, known []string) string {
	msg := fmt.Sprintf("unknown field %q", k)
	if s := sdk.Suggest(k, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func goTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "a mapping"
	}
	return t.String()
}

func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonical is v as JSON with sorted keys and no HTML escaping.
func canonical(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escape escapes a key for a JSON pointer (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func unescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// withLines adds each problem's line in the text it was parsed from.
func withLines(root *yaml.Node, ps Problems) Problems {
	for i := range ps {
		if ps[i].Line == 0 {
			ps[i].Line = lineOf(root, ps[i].Pointer)
		}
	}
	return ps
}

// lineOf returns the line of the node at pointer in a parsed text (the
// nearest existing ancestor's, for a field that is missing), or 0.
func lineOf(root *yaml.Node, pointer string) int {
	if root == nil {
		return 0
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	if pointer == "" {
		return line
	}
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		seg = unescape(seg)
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// entryName is an entry's name ("" when it has none).
func entryName(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Name
}

// Names returns the entries' names in order.
func (d *Document) Names() []string {
	out := make([]string, len(d.Operations))
	for i, e := range d.Operations {
		out[i] = entryName(e)
	}
	return out
}

// Index returns the position of the entry named name, or -1.
func (d *Document) Index(name string) int {
	for i, e := range d.Operations {
		if entryName(e) == name {
			return i
		}
	}
	return -1
}

// Entry returns the entry named name, or nil.
func (d *Document) Entry(name string) json.RawMessage {
	if i := d.Index(name); i >= 0 {
		return d.Operations[i]
	}
	return nil
}

// With returns a copy of d with entry in place of the entry of the same
// name, or added at the end.
func (d *Document) With(entry json.RawMessage) *Document {
	out := &Document{Operations: slices.Clone(d.Operations)}
	if i := d.Index(entryName(entry)); i >= 0 {
		out.Operations[i] = entry
	} else {
		out.Operations = append(out.Operations, entry)
	}
	return out
}

// Without returns a copy of d without the entry named name.
func (d *Document) Without(name string) *Document {
	out := &Document{}
	for _, e := range d.Operations {
		if entryName(e) != name {
			out.Operations = append(out.Operations, e)
		}
	}
	return out
}

// JSON is the document as an operations file in JSON, as it is stored.
func (d *Document) JSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"operations":[`)
	for i, e := range d.Operations {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// Decode reads a stored document (Document.JSON's form).
func Decode(raw []byte) (*Document, error) {
	var f struct {
		Operations []json.RawMessage `json:"operations"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("catalog document: %w", err)
	}
	return &Document{Operations: f.Operations}, nil
}

// Compile checks the document as the host loads an operations file —
// names, modes, limits, schemas, placeholders — and returns the host's
// catalog, its placeholders expanded with opts.Expand and its relative
// paths resolved against opts.Dir. Its entries reach what opts.Allow
// allows, nothing when it is nil. source names the catalog in errors
// ("catalog <name>").
func (d *Document) Compile(source string, opts host.LoadOptions) (*host.Catalog, error) {
	opts.AllowEmpty = true
	if opts.Allow == nil {
		opts.Allow = &host.CatalogAllow{}
	}
	return host.Parse(source, d.JSON(), opts)
}
