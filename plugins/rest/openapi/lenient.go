package openapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Documents as their vendors meant them. Published documents carry
// quirks that change nothing a call needs: a keyword of no JSON Schema
// dialect beside real ones (max_items), 2019-09's $recursiveRef, 3.0's
// boolean exclusiveMinimum in a 3.1 document, a required name listed
// twice. kin-openapi refuses each, and with it the operation; the
// importer reads them first (readLeniently), so that an operation is
// skipped only when it cannot be served:
//
//   - a keyword no schema dialect of OpenAPI knows (not x-) is ignored;
//   - $recursiveRef (and $recursiveAnchor) is read as an open schema: any
//     value, the siblings (a description) kept;
//   - a boolean exclusiveMinimum/exclusiveMaximum in a 3.1 or later
//     document is read as 3.0's: true makes minimum/maximum exclusive,
//     false says nothing;
//   - required names are listed once;
//   - a discriminator's own fields other than OpenAPI's (a type beside
//     propertyName) are ignored.
//
// One warning says what was read so.

// schemaKeywords are the keywords of the schemas kin-openapi reads (JSON
// Schema 2020-12 and OpenAPI's own); x- extensions are kept too.
var schemaKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`$ref oneOf anyOf allOf not type title format description enum default example
		externalDocs uniqueItems exclusiveMinimum exclusiveMaximum nullable readOnly writeOnly allowEmptyValue deprecated
		xml minimum maximum multipleOf minLength maxLength pattern minItems maxItems items required properties
		minProperties maxProperties additionalProperties discriminator const examples prefixItems contains minContains
		maxContains patternProperties dependentSchemas propertyNames unevaluatedItems unevaluatedProperties if then else
		dependentRequired $defs $schema $comment $id $anchor $dynamicRef $dynamicAnchor contentMediaType contentEncoding
		contentSchema`) {
		schemaKeywords[k] = true
	}
}

// discriminatorFields are the fields of OpenAPI's Discriminator Object.
var discriminatorFields = map[string]bool{"propertyName": true, "mapping": true, "defaultMapping": true}

// Where a schema holds subschemas.
var (
	subschemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	subschemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	subschemaOne   = []string{"not", "if", "then", "else", "contains", "additionalProperties", "unevaluatedProperties",
		"unevaluatedItems", "propertyNames", "contentSchema", "additionalItems", "items"}
)

// leniency counts what readLeniently changed, by what.
type leniency struct {
	v31     bool
	ignored map[string]int
	changed map[string]int
}

// readLeniently rewrites the quirks of the schemas in a document tree
// (version "2.0", "3.0", "3.1", "3.2") in place and returns the warning
// that says what it read so, "" when nothing.
func readLeniently(root map[string]any, version string) string {
	l := &leniency{v31: version >= "3.1", ignored: map[string]int{}, changed: map[string]int{}}
	l.walk(root, false)
	if len(l.ignored)+len(l.changed) == 0 {
		return ""
	}
	var parts []string
	if len(l.ignored) > 0 {
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(l.ignored)) {
			ks = append(ks, fmt.Sprintf("%s (%d)", k, l.ignored[k]))
		}
		parts = append(parts, "schema keywords of no OpenAPI dialect ignored: "+strings.Join(ks, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(l.changed)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", k, l.changed[k]))
	}
	return "read as the vendor meant: " + strings.Join(parts, "; ")
}

// walk visits the document's objects; inSchema says v is a schema.
func (l *leniency) walk(v any, inSchema bool) {
	switch t := v.(type) {
	case map[string]any:
		if inSchema {
			l.schema(t)
			return
		}
		for k, e := range t {
			switch k {
			case "example", "examples", "default", "enum", "const":
				continue
			case "schema", "itemSchema":
				l.walk(e, true)
			case "schemas", "definitions":
				if m, ok := e.(map[string]any); ok {
					for _, s := range m {
						l.walk(s, true)
					}
				}
			default:
				l.walk(e, false)
			}
		}
	case []any:
		for _, e := range t {
			l.walk(e, inSchema)
		}
	}
}

// schema reads one schema and its subschemas.
func (l *leniency) schema(s map[string]any) {
	for k := range s {
		switch {
		case schemaKeywords[k] || strings.HasPrefix(k, "x-"):
		case k == "$recursiveRef" || k == "$recursiveAnchor":
			delete(s, k)
			if k == "$recursiveRef" {
				l.changed["$recursiveRef read as any value"]++
			}
		default:
			delete(s, k)
			l.ignored[k]++
		}
	}
	if d, ok := s["discriminator"].(map[string]any); ok {
		for k := range d {
			if !discriminatorFields[k] && !strings.HasPrefix(k, "x-") {
				delete(d, k)
				l.ignored["discriminator."+k]++
			}
		}
	}
	if l.v31 {
		for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
			b, ok := s[k].(bool)
			if !ok {
				continue
			}
			bound := map[string]string{"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}[k]
			delete(s, k)
			if n, has := s[bound]; b && has {
				s[k] = n
				delete(s, bound)
			}
			l.changed["boolean "+k+" read as OpenAPI 3.0's"]++
		}
	}
	if req, ok := s["required"].([]any); ok {
		var out []any
		for _, r := range req {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
		if len(out) < len(req) {
			s["required"] = out
			l.changed["required names listed twice merged"]++
		}
	}
	for _, k := range subschemaMaps {
		if m, ok := s[k].(map[string]any); ok {
			for _, sub := range m {
				l.walk(sub, true)
			}
		}
	}
	for _, k := range subschemaLists {
		if list, ok := s[k].([]any); ok {
			l.walk(list, true)
		}
	}
	for _, k := range subschemaOne {
		switch sub := s[k].(type) {
		case map[string]any:
			l.walk(sub, true)
		case []any: // items as a list (a tuple, before 2020-12)
			l.walk(sub, true)
		}
	}
}
