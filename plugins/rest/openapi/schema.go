package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk"
)

// maxSchemaNodes bounds the schemas of one tool written inline; past it
// every referenced schema goes to $defs once.
const maxSchemaNodes = 20000

// errSchemaTooLarge restarts a conversion with every $ref in $defs.
var errSchemaTooLarge = fmt.Errorf("schema too large")

// schemaConv turns OpenAPI schemas (3.0 or 3.1, as kin-openapi loaded
// them) into one JSON Schema 2020-12 document:
//
//   - nullable: true becomes a type array with "null" (and null in an
//     enum), or anyOf [schema, {"type": "null"}] when there is no type;
//   - boolean exclusiveMinimum/exclusiveMaximum (3.0) become the numeric
//     bounds of 2020-12;
//   - in an input schema, readOnly properties are dropped (and no longer
//     required); in an output schema, writeOnly ones;
//   - $refs are written inline, except schemas that refer to themselves
//     (directly or through others), which go to $defs and are referred to
//     as "#/$defs/Name"; a very large schema puts every $ref in $defs;
//   - example becomes examples; discriminator, xml, externalDocs and
//     extensions are left out; a pattern (and a patternProperties key) is
//     written as one both JavaScript with the u flag and Go's regexp
//     compile (sdk.PortablePattern), or left out with a warning saying
//     why.
type schemaConv struct {
	input   bool
	allDefs bool
	// unbounded: no node budget (a whole document's definitions, each
	// converted once).
	unbounded bool
	// recursive holds the schemas on a reference cycle.
	recursive map[*openapi3.Schema]bool
	defName   map[*openapi3.Schema]string
	defs      map[string]any
	names     map[string]bool
	nodes     int
	warnings  []string
	// inline guards against a cycle without $ref.
	inline map[*openapi3.Schema]bool
}

func newSchemaConv(input bool) *schemaConv {
	return &schemaConv{input: input, recursive: map[*openapi3.Schema]bool{}, defName: map[*openapi3.Schema]string{},
		defs: map[string]any{}, names: map[string]bool{}, inline: map[*openapi3.Schema]bool{}}
}

// findCycles marks the schemas on a cycle reachable from ref.
func (c *schemaConv) findCycles(ref *openapi3.SchemaRef) {
	onStack := map[*openapi3.Schema]bool{}
	done := map[*openapi3.Schema]bool{}
	var visit func(r *openapi3.SchemaRef)
	visit = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil {
			return
		}
		s := r.Value
		if onStack[s] {
			c.recursive[s] = true
			return
		}
		if done[s] {
			return
		}
		onStack[s] = true
		for _, child := range schemaChildren(s) {
			visit(child)
		}
		onStack[s] = false
		done[s] = true
	}
	visit(ref)
}

// schemaChildren lists the subschemas of s.
func schemaChildren(s *openapi3.Schema) []*openapi3.SchemaRef {
	var out []*openapi3.SchemaRef
	out = append(out, s.OneOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.AllOf...)
	out = append(out, s.PrefixItems...)
	out = append(out, s.Not, s.Items, s.Contains, s.PropertyNames, s.If, s.Then, s.Else, s.ContentSchema,
		s.AdditionalProperties.Schema, s.UnevaluatedItems.Schema, s.UnevaluatedProperties.Schema)
	for _, m := range []openapi3.Schemas{s.Properties, s.PatternProperties, s.DependentSchemas} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	}
	return out
}

// convert converts one schema reference. It panics with
// errSchemaTooLarge past the node budget (recovered by convertAll).
func (c *schemaConv) convert(ref *openapi3.SchemaRef) any {
	if ref == nil || ref.Value == nil {
		return map[string]any{}
	}
	s := ref.Value
	if c.recursive[s] || c.allDefs && ref.Ref != "" || c.inline[s] {
		name, ok := c.defName[s]
		if !ok {
			name = c.newDefName(ref.Ref)
			c.defName[s] = name
			c.defs[name] = true // reserved while converting
			// A def starts a new inline path: what is inline around the
			// $ref is not inline within the def.
			saved := c.inline
			c.inline = map[*openapi3.Schema]bool{}
			c.defs[name] = c.body(s)
			c.inline = saved
		}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	c.inline[s] = true
	defer delete(c.inline, s)
	return c.body(s)
}

var defNameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func (c *schemaConv) newDefName(ref string) string {
	base := ref
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[i+1:]
	}
	base = defNameRE.ReplaceAllString(unescapePointer(base), "_")
	if base == "" {
		base = "Schema"
	}
	name := base
	for i := 2; c.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	c.names[name] = true
	return name
}

// body converts the keywords of s.
func (c *schemaConv) body(s *openapi3.Schema) any {
	c.nodes++
	if c.nodes > maxSchemaNodes && !c.unbounded {
		panic(errSchemaTooLarge)
	}
	if s.Always != nil {
		return *s.Always
	}
	m := map[string]any{}
	var types []string
	if s.Type != nil {
		for _, t := range *s.Type {
			if t == "file" { // Swagger 2.0
				t = "string"
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	if s.Nullable && len(types) > 0 && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	switch len(types) {
	case 0:
	case 1:
		m["type"] = types[0]
	default:
		m["type"] = types
	}
	if s.Enum != nil {
		enum := append([]any(nil), s.Enum...)
		if s.Nullable && !containsNil(enum) {
			enum = append(enum, nil)
		}
		m["enum"] = enum
	}
	if s.Const != nil {
		m["const"] = s.Const
	}
	setStr(m, "title", s.Title)
	setStr(m, "description", s.Description)
	setStr(m, "format", s.Format)
	if s.Default != nil {
		m["default"] = s.Default
	}
	if s.Deprecated {
		m["deprecated"] = true
	}
	if s.ReadOnly {
		m["readOnly"] = true
	}
	if s.WriteOnly {
		m["writeOnly"] = true
	}
	switch {
	case len(s.Examples) > 0:
		m["examples"] = s.Examples
	case s.Example != nil:
		m["examples"] = []any{s.Example}
	}

	// Numbers.
	if s.Min != nil {
		m["minimum"] = *s.Min
	}
	if s.Max != nil {
		m["maximum"] = *s.Max
	}
	if s.MultipleOf != nil {
		m["multipleOf"] = *s.MultipleOf
	}
	switch b := s.ExclusiveMin; {
	case b.Value != nil:
		m["exclusiveMinimum"] = *b.Value
	case b.IsTrue() && s.Min != nil:
		m["exclusiveMinimum"] = *s.Min
		delete(m, "minimum")
	}
	switch b := s.ExclusiveMax; {
	case b.Value != nil:
		m["exclusiveMaximum"] = *b.Value
	case b.IsTrue() && s.Max != nil:
		m["exclusiveMaximum"] = *s.Max
		delete(m, "maximum")
	}

	// Strings.
	if s.MinLength > 0 {
		m["minLength"] = s.MinLength
	}
	if s.MaxLength != nil {
		m["maxLength"] = *s.MaxLength
	}
	if s.Pattern != "" {
		if p, err := sdk.PortablePattern(s.Pattern, sdk.PatternECMA); err != nil {
			c.warnings = append(c.warnings, err.Error())
		} else {
			m["pattern"] = p
		}
	}
	setStr(m, "contentMediaType", s.ContentMediaType)
	setStr(m, "contentEncoding", s.ContentEncoding)
	if s.ContentSchema != nil {
		m["contentSchema"] = c.convert(s.ContentSchema)
	}

	// Arrays.
	if s.Items != nil {
		m["items"] = c.convert(s.Items)
	}
	if len(s.PrefixItems) > 0 {
		m["prefixItems"] = c.convertList(s.PrefixItems)
	}
	if s.Contains != nil {
		m["contains"] = c.convert(s.Contains)
	}
	if s.MinContains != nil {
		m["minContains"] = *s.MinContains
	}
	if s.MaxContains != nil {
		m["maxContains"] = *s.MaxContains
	}
	if s.MinItems > 0 {
		m["minItems"] = s.MinItems
	}
	if s.MaxItems != nil {
		m["maxItems"] = *s.MaxItems
	}
	if s.UniqueItems {
		m["uniqueItems"] = true
	}
	if v := c.boolSchema(s.UnevaluatedItems); v != nil {
		m["unevaluatedItems"] = v
	}

	// Objects.
	if len(s.Properties) > 0 {
		props, dropped := c.properties(s.Properties)
		m["properties"] = props
		if req := filterOut(s.Required, dropped); len(req) > 0 {
			m["required"] = req
		}
	} else if len(s.Required) > 0 {
		m["required"] = s.Required
	}
	if s.MinProps > 0 {
		m["minProperties"] = s.MinProps
	}
	if s.MaxProps != nil {
		m["maxProperties"] = *s.MaxProps
	}
	if v := c.boolSchema(s.AdditionalProperties); v != nil {
		m["additionalProperties"] = v
	}
	if v := c.boolSchema(s.UnevaluatedProperties); v != nil {
		m["unevaluatedProperties"] = v
	}
	if len(s.PatternProperties) > 0 {
		pp := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(s.PatternProperties)) {
			p, err := sdk.PortablePattern(k, sdk.PatternECMA)
			if err != nil {
				c.warnings = append(c.warnings, "patternProperties: "+err.Error())
				continue
			}
			pp[p] = c.convert(s.PatternProperties[k])
		}
		m["patternProperties"] = pp
	}
	if len(s.DependentSchemas) > 0 {
		ds := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
			ds[k] = c.convert(s.DependentSchemas[k])
		}
		m["dependentSchemas"] = ds
	}
	if len(s.DependentRequired) > 0 {
		m["dependentRequired"] = s.DependentRequired
	}
	if s.PropertyNames != nil {
		m["propertyNames"] = c.convert(s.PropertyNames)
	}

	// Composition.
	if len(s.AllOf) > 0 {
		m["allOf"] = c.convertList(s.AllOf)
	}
	if len(s.AnyOf) > 0 {
		m["anyOf"] = c.convertList(s.AnyOf)
	}
	if len(s.OneOf) > 0 {
		m["oneOf"] = c.convertList(s.OneOf)
	}
	if s.Not != nil {
		m["not"] = c.convert(s.Not)
	}
	if s.If != nil {
		m["if"] = c.convert(s.If)
	}
	if s.Then != nil {
		m["then"] = c.convert(s.Then)
	}
	if s.Else != nil {
		m["else"] = c.convert(s.Else)
	}

	if s.Nullable && len(types) == 0 {
		// nullable without a type (e.g. over allOf): null or the schema.
		return map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
	}
	return m
}

// properties converts an object's properties, leaving out readOnly ones
// in input schemas and writeOnly ones in output schemas; it returns the
// names left out.
func (c *schemaConv) properties(props openapi3.Schemas) (map[string]any, []string) {
	out := map[string]any{}
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(props)) {
		p := props[k]
		if p != nil && p.Value != nil && (c.input && p.Value.ReadOnly || !c.input && p.Value.WriteOnly) {
			dropped = append(dropped, k)
			continue
		}
		out[k] = c.convert(p)
	}
	return out, dropped
}

func (c *schemaConv) convertList(refs openapi3.SchemaRefs) []any {
	out := make([]any, 0, len(refs))
	for _, r := range refs {
		out = append(out, c.convert(r))
	}
	return out
}

func (c *schemaConv) boolSchema(b openapi3.BoolSchema) any {
	switch {
	case b.Has != nil:
		return *b.Has
	case b.Schema != nil:
		return c.convert(b.Schema)
	}
	return nil
}

func setStr(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func containsNil(list []any) bool {
	for _, v := range list {
		if v == nil {
			return true
		}
	}
	return false
}

func filterOut(list, drop []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

// isObjectSchema reports whether every instance of s is a JSON object (a
// tool's structuredContent must be one).
func isObjectSchema(ref *openapi3.SchemaRef, depth int) bool {
	if ref == nil || ref.Value == nil || depth > 16 {
		return false
	}
	s := ref.Value
	if s.Nullable {
		return false
	}
	if s.Type != nil && len(*s.Type) > 0 {
		return len(*s.Type) == 1 && (*s.Type)[0] == "object"
	}
	for _, a := range s.AllOf {
		if isObjectSchema(a, depth+1) {
			return true
		}
	}
	for _, list := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(list) == 0 {
			continue
		}
		all := true
		for _, a := range list {
			all = all && isObjectSchema(a, depth+1)
		}
		if all {
			return true
		}
	}
	// Properties without a type: an object in practice.
	return len(s.Properties) > 0 && len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) == 0
}

// isNonObjectSchema reports whether no instance of s is an object: the
// host wraps such answers as {"result": ...}.
func isNonObjectSchema(ref *openapi3.SchemaRef) bool {
	if ref == nil || ref.Value == nil || ref.Value.Type == nil || len(*ref.Value.Type) == 0 {
		return false
	}
	return !slices.Contains(*ref.Value.Type, "object")
}

// convertRoots converts the schemas of one document with fn, which builds
// the root from c.convert calls; it retries with every $ref in $defs when
// inline writing is too large. It returns the root with its $defs.
func convertRoots(input bool, roots []*openapi3.SchemaRef, fn func(c *schemaConv) map[string]any) (map[string]any, []string) {
	for _, allDefs := range []bool{false, true} {
		c := newSchemaConv(input)
		c.allDefs = allDefs
		for _, r := range roots {
			c.findCycles(r)
		}
		root, ok := func() (root map[string]any, ok bool) {
			defer func() {
				if r := recover(); r != nil {
					if r != errSchemaTooLarge {
						panic(r)
					}
					ok = false
				}
			}()
			return fn(c), true
		}()
		if !ok {
			continue
		}
		if root == nil {
			return nil, c.warnings
		}
		if len(c.defs) > 0 {
			root["$defs"] = c.defs
		}
		return root, c.warnings
	}
	return nil, []string{"the schema is too large"}
}

// checkSchema resolves a generated schema with google/jsonschema-go, as the
// host will: a schema it refuses is never handed over.
func checkSchema(root map[string]any) (json.RawMessage, error) {
	b, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	return b, nil
}
