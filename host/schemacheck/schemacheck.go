// Package schemacheck is Crank's one JSON Schema validator: a tool's
// arguments against its input schema, and a result's structuredContent
// against the output schema the tool publishes. It compiles a schema
// once (santhosh-tekuri/jsonschema/v6) and explains a failure from the
// validator's structured output — the error's kind, its instance
// location, the keyword's own limit — never from its English: "id: must
// be ≥ 1, got 0", "tags[2]: must be a string, got an integer".
//
// Choices, made to agree with the clients that validate what Crank
// publishes (the TypeScript SDK's Ajv with ajv-formats; the agreement is
// tested against it on some 4,000 values, e2e TestValidatorAgreesWithTSClient):
//
//   - Dialect: JSON Schema 2020-12 unless a schema's $schema says another
//     (MCP's default). Ajv as the SDK builds it reads draft-07, so it
//     ignores the keywords 2019-09 and 2020-12 added (prefixItems,
//     dependentRequired, unevaluated*, …) where Crank checks them.
//   - Regular expressions (pattern, patternProperties, format "regex")
//     are ECMA-262's, as Ajv's `new RegExp(p, "u")`: regexp2 in its
//     ECMAScript and Unicode modes, so a lookahead or a backreference in a
//     vendor's pattern works as clients read it. regexp2 backtracks: a
//     match is bounded by MatchTimeout and a backtracking stack, and one
//     that runs out counts as no match (pattern refuses the value).
//   - format: asserted for results as ajv-formats does (the formats it
//     knows, with its "byte", "int32", … besides the standard ones); for
//     arguments an annotation only — an upstream is the judge of its own
//     formats, and a model's "2024-05-01T10:00" should reach it.
//   - References: within the schema only. A $ref to another document is
//     an error at compile time; nothing is fetched or read from disk.
//   - Numbers: decimal-exact (multipleOf 0.1 admits 0.3, which Ajv's
//     floating point division refuses).
package schemacheck

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/lru"
	"github.com/crankmcp/crank/plugins/sdk/pointer"
)

// Use is what a schema checks, which decides how format is read and how
// a message names what it is about.
type Use int

const (
	// Arguments: a tool's input schema. format is an annotation; the
	// top-level object's members are "arguments".
	Arguments Use = iota
	// Results: an output schema. format is asserted as ajv-formats does.
	Results
)

// MatchTimeout bounds one regular expression match.
const MatchTimeout = 100 * time.Millisecond

// Schema is a compiled schema.
type Schema struct {
	s   *jsonschema.Schema
	use Use
}

// Failure is why a value does not match a schema: the first failure
// found, in a stable order (the innermost value first).
type Failure struct {
	// Pointer is the failing value's JSON pointer in the checked value.
	Pointer string
	// Field names it as a path ("tags[2].name"); "" for the whole value.
	Field string
	// Reason says what the schema wants there, with its limit.
	Reason string
}

func (f *Failure) Error() string {
	if f.Field == "" {
		return f.Reason
	}
	return f.Field + ": " + f.Reason
}

// location is the one URL a compiled schema has.
const location = "crank:schema.json"

// compiled are schemas compiled lately, by use and the SHA-256 of their
// text: the tools of a family, a window's and reloads share them, and a
// compile (the schema checked against its metaschema) costs some
// hundreds of µs. A compiled Schema is immutable and safe for
// concurrent use.
var compiled = lru.New[[33]byte, *Schema](1024, nil)

// Compile compiles raw, a JSON Schema, for use.
func Compile(raw []byte, use Use) (*Schema, error) {
	var key [33]byte
	sum := sha256.Sum256(raw)
	key[0] = byte(use)
	copy(key[1:], sum[:])
	if s, ok := compiled.Get(key); ok {
		return s, nil
	}
	s, err := compile(raw, use)
	if err == nil {
		compiled.Put(key, s)
	}
	return s, err
}

func compile(raw []byte, use Use) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(ecmaRegexp)
	if use == Results {
		c.AssertFormat()
		for _, f := range ajvFormats {
			c.RegisterFormat(f)
		}
	} else {
		for _, name := range formatNames {
			c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
		}
	}
	if err := c.AddResource(location, doc); err != nil {
		return nil, compileError(err)
	}
	s, err := c.Compile(location)
	if err != nil {
		return nil, compileError(err)
	}
	return &Schema{s: s, use: use}, nil
}

// compileError is err without the schema's made-up URL.
func compileError(err error) error {
	msg := strings.ReplaceAll(err.Error(), location, "the schema")
	return errors.New(msg)
}

// noLoader fetches nothing: a schema refers within itself only.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refers to %s: only references within the schema are followed", url)
}

// ecmaRegexp compiles a pattern as ECMA-262 with the u flag reads it.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	if c := letterEscape(s); c != "" {
		// With the u flag, ECMA-262 refuses an escaped letter it does
		// not define; regexp2 would read .NET's (\A, \Z, \z, …).
		return nil, fmt.Errorf("invalid regular expression %q: \\%s is not ECMA-262", s, c)
	}
	re, err := regexp2.Compile(ecmaDot(s), regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return &ecma{re: re, src: s}, nil
}

// letterEscape is the first escaped letter of s that ECMA-262 with the
// u flag does not define, "" when there is none.
func letterEscape(s string) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		c := s[i+1]
		i++
		if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') && !strings.ContainsRune("bBdDsSwWfnrtvcuxpPk", rune(c)) {
			return string(c)
		}
	}
	return ""
}

// ecmaDot spells ECMA-262's "." outside a class as what it matches:
// any character but a line terminator (regexp2's "." takes all but
// "\n").
func ecmaDot(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	var b strings.Builder
	class := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case c == '[':
			class = true
			b.WriteByte(c)
		case c == ']':
			class = false
			b.WriteByte(c)
		case c == '.' && !class:
			b.WriteString(`[^\n\r\u2028\u2029]`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ecma is a compiled pattern and its source as written.
type ecma struct {
	re  *regexp2.Regexp
	src string
}

func (re *ecma) MatchString(s string) bool {
	ok, err := re.re.MatchString(s)
	return err == nil && ok
}

func (re *ecma) String() string { return re.src }

// Decode decodes a JSON value as Check takes it.
func Decode(data []byte) (any, error) {
	var v any
	err := json.Unmarshal(data, &v)
	return v, err
}

// Check checks v (decoded JSON: Decode's, or encoding/json's) and
// returns nil when it matches, else the first failure. For Arguments,
// members of the top-level object the schema closes out are named first,
// with the arguments the tool takes.
func (s *Schema) Check(v any) *Failure {
	if s.use == Arguments {
		if msg := s.undeclared(v); msg != "" {
			return &Failure{Reason: msg}
		}
	}
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Failure{Reason: err.Error()}
	}
	leaf := first(ve)
	loc := leaf.InstanceLocation
	reason := s.reason(leaf, &loc, v)
	return &Failure{Pointer: pointer.Join("", loc...), Field: fieldOf(loc, v), Reason: reason}
}

// first is the failure a message is about: the causes of the kinds that
// only gather others (the schema, a group, a $ref, allOf) are followed,
// the innermost value first (it names the member precisely; its object's
// own failures, a missing member, after), then an unknown member, then
// by schema location (the validator walks maps in no fixed order).
func first(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		default:
			return e
		}
		causes := slices.Clone(e.Causes)
		slices.SortStableFunc(causes, func(a, b *jsonschema.ValidationError) int {
			if d := len(b.InstanceLocation) - len(a.InstanceLocation); d != 0 {
				return d
			}
			if d := slices.Compare(a.InstanceLocation, b.InstanceLocation); d != 0 {
				return d
			}
			if d := rank(a) - rank(b); d != 0 {
				return d
			}
			return strings.Compare(a.SchemaURL, b.SchemaURL)
		})
		e = causes[0]
	}
	return e
}

// rank orders failures of one value: an unknown member first (often a
// misspelt required one), then the validator's order.
func rank(e *jsonschema.ValidationError) int {
	if _, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
		return 0
	}
	return 1
}

// reason says what leaf wants; it may move loc to the member it names.
func (s *Schema) reason(leaf *jsonschema.ValidationError, loc *[]string, root any) string {
	switch k := leaf.ErrorKind.(type) {
	case *kind.Type:
		var want []string
		for _, t := range k.Want {
			if t != "null" {
				want = append(want, sdk.TypeName(t))
			}
		}
		if slices.Contains(k.Want, "null") {
			want = append(want, "null")
		}
		return fmt.Sprintf("must be %s, got %s", strings.Join(want, " or "), sdk.TypeName(typeOf(valueAt(root, *loc))))
	case *kind.Enum:
		return "must be one of " + jsonList(k.Want)
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("must be ≥ %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be ≤ %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %s long, got %d", plural(k.Want, "character"), k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %s long, got %d", plural(k.Want, "character"), k.Got)
	case *kind.Pattern:
		return "must match the pattern " + k.Want
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s", k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s, got %d", plural(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s, got %d", plural(k.Want, "item"), k.Got)
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %s more than its schema allows", plural(k.Count, "item"))
	case *kind.UniqueItems:
		i, j := k.Duplicates[0], k.Duplicates[1]
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", min(i, j), max(i, j))
	case *kind.Contains:
		return "must have an item matching its contains schema"
	case *kind.MinContains:
		return fmt.Sprintf("must have at least %s matching its contains schema, got %d", plural(k.Want, "item"), len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("must have at most %s matching its contains schema, got %d", plural(k.Want, "item"), len(k.Got))
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s, got %d", plural(k.Want, "field"), k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s, got %d", plural(k.Want, "field"), k.Got)
	case *kind.Required:
		what := "field"
		if len(*loc) == 0 && s.use == Arguments {
			what = "argument"
		}
		if len(k.Missing) > 1 {
			what += "s"
		}
		return fmt.Sprintf("missing required %s %s", what, strings.Join(sorted(k.Missing), ", "))
	case *kind.DependentRequired:
		return fmt.Sprintf("with %s set, %s must be set too", k.Prop, strings.Join(sorted(k.Missing), ", "))
	case *kind.Dependency:
		return fmt.Sprintf("with %s set, %s must be set too", k.Prop, strings.Join(sorted(k.Missing), ", "))
	case *kind.AdditionalProperties:
		return unknownFields(k.Properties)
	case *kind.PropertyNames:
		return fmt.Sprintf("field name %q does not match its propertyNames schema", k.Property)
	case *kind.FalseSchema:
		// unevaluatedProperties: false (or additionalProperties a
		// schema false) fails the member: name it at its object.
		if n := len(*loc); n > 0 && isObject(valueAt(root, (*loc)[:n-1])) {
			name := (*loc)[n-1]
			*loc = (*loc)[:n-1]
			return unknownFields([]string{name})
		}
		return "is not allowed here (its schema admits no value)"
	case *kind.AnyOf:
		return "must match at least one of the shapes its schema allows (anyOf)"
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return "must match exactly one of the shapes its schema allows (oneOf), but matches several"
		}
		return "must match exactly one of the shapes its schema allows (oneOf), but matches none"
	case *kind.Not:
		return "must not match the shape its schema excludes (not)"
	}
	// Kinds no tool schema meets in practice (content*, a $ref cycle):
	// the keyword.
	return "does not satisfy its schema's " + strings.Join(leaf.ErrorKind.KeywordPath(), "/")
}

func unknownFields(names []string) string {
	names = sorted(names)
	if len(names) == 1 {
		return "unknown field " + names[0]
	}
	return "unknown fields " + strings.Join(names, ", ")
}

func sorted(names []string) []string {
	names = slices.Clone(names)
	slices.Sort(names)
	return names
}

// valueAt is the value at loc in v (nil where there is none).
func valueAt(v any, loc []string) any {
	for _, tok := range loc {
		switch t := v.(type) {
		case map[string]any:
			v = t[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// fieldOf names loc in v as a path: members joined by ".", elements
// as "[i]" ("tags[2].name").
func fieldOf(loc []string, v any) string {
	var b strings.Builder
	for _, tok := range loc {
		if list, ok := v.([]any); ok {
			b.WriteString("[" + tok + "]")
			i, _ := strconv.Atoi(tok)
			if i >= 0 && i < len(list) {
				v = list[i]
			} else {
				v = nil
			}
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
		obj, _ := v.(map[string]any)
		v = obj[tok]
	}
	return b.String()
}

// typeOf is v's JSON type, integer for a number with no fraction.
func typeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case json.Number:
		if r, ok := new(big.Rat).SetString(v.String()); ok && r.IsInt() {
			return "integer"
		}
		return "number"
	}
	return "value"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// ratText renders a number the validator holds as a decimal.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(b.String(), "\n")
}

func jsonList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}
