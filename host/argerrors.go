package host

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Argument errors in plain words. The JSON Schema validator explains a
// failure in its own terms ("validating /properties/id: minimum: 0/1 is
// less than 1.000000"); a caller, often a model, needs "id: must be ≥ 1,
// got 0". describeValidationError finds the field from the failing
// schema's location and rewrites the keyword's message, taking the
// keyword's own value from the schema rather than from the validator's
// rendering of it.

// describeValidationError turns a validation error of the input schema
// root over args into "field: reason".
func describeValidationError(err error, root *jsonschema.Schema, args any) string {
	ptr, reason := failingSchema(err.Error())
	field, sub := fieldOf(ptr, root, args)
	msg := plainReason(reason, sub, field == "")
	if field == "" {
		return msg
	}
	return field + ": " + msg
}

// failingSchema splits the validator's "validating A: validating B:
// reason" chain into the innermost schema location B and the reason.
func failingSchema(msg string) (ptr, reason string) {
	reason = msg
	for strings.HasPrefix(reason, "validating ") {
		loc, rest, ok := strings.Cut(strings.TrimPrefix(reason, "validating "), ": ")
		if !ok {
			break
		}
		ptr, reason = loc, rest
	}
	if ptr == "root" {
		ptr = ""
	}
	return ptr, reason
}

// fieldOf walks a schema location (a JSON pointer such as
// /properties/tags/items/properties/name) from root, and the arguments
// along with it, and returns the argument it is about ("tags[].name") and
// the schema found there (nil where the walk cannot follow). A member
// checked by additionalProperties is named when the object has exactly
// one undeclared member, else written "*".
func fieldOf(ptr string, root *jsonschema.Schema, args any) (string, *jsonschema.Schema) {
	var field strings.Builder
	s, v := root, args
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	if ptr == "" {
		segs = nil
	}
	for i := 0; i < len(segs); i++ {
		key := pointer.Unkey(segs[i])
		next := func() (string, bool) {
			if i+1 >= len(segs) {
				return "", false
			}
			i++
			return pointer.Unkey(segs[i]), true
		}
		switch key {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			name, ok := next()
			if !ok {
				return field.String(), nil
			}
			if key == "properties" || key == "patternProperties" {
				if field.Len() > 0 {
					field.WriteByte('.')
				}
				field.WriteString(name)
				obj, _ := v.(map[string]any)
				v = obj[name]
			}
			s = lookupSchema(s, key, name)
		case "items", "additionalItems", "contains":
			field.WriteString("[]")
			s, v = lookupSchema(s, key, ""), nil
		case "prefixItems":
			idx, ok := next()
			if !ok {
				return field.String(), nil
			}
			field.WriteString("[" + idx + "]")
			list, _ := v.([]any)
			if i, err := strconv.Atoi(idx); err == nil && i >= 0 && i < len(list) {
				v = list[i]
			} else {
				v = nil
			}
			s = lookupSchema(s, key, idx)
		case "additionalProperties", "unevaluatedProperties":
			if field.Len() > 0 {
				field.WriteByte('.')
			}
			name := "*"
			if obj, ok := v.(map[string]any); ok && s != nil {
				var extra []string
				for k := range obj {
					if _, declared := s.Properties[k]; !declared {
						extra = append(extra, k)
					}
				}
				if len(extra) == 1 {
					name, v = extra[0], obj[extra[0]]
				}
			}
			field.WriteString(name)
			s = lookupSchema(s, key, "")
		case "allOf", "anyOf", "oneOf":
			idx, ok := next()
			if !ok {
				return field.String(), nil
			}
			s = lookupSchema(s, key, idx)
		case "not", "if", "then", "else":
			s = lookupSchema(s, key, "")
		default:
			s = nil
		}
	}
	return field.String(), s
}

// lookupSchema is one step of fieldOf; nil when it cannot be taken.
func lookupSchema(s *jsonschema.Schema, key, name string) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	index := func(list []*jsonschema.Schema) *jsonschema.Schema {
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= len(list) {
			return nil
		}
		return list[i]
	}
	switch key {
	case "properties":
		return s.Properties[name]
	case "patternProperties":
		return s.PatternProperties[name]
	case "$defs":
		return s.Defs[name]
	case "definitions":
		return s.Definitions[name]
	case "dependentSchemas":
		return s.DependentSchemas[name]
	case "items":
		return s.Items
	case "additionalItems":
		return s.AdditionalItems
	case "contains":
		return s.Contains
	case "prefixItems":
		return index(s.PrefixItems)
	case "additionalProperties":
		return s.AdditionalProperties
	case "unevaluatedProperties":
		return s.UnevaluatedProperties
	case "allOf":
		return index(s.AllOf)
	case "anyOf":
		return index(s.AnyOf)
	case "oneOf":
		return index(s.OneOf)
	case "not":
		return s.Not
	case "if":
		return s.If
	case "then":
		return s.Then
	case "else":
		return s.Else
	}
	return nil
}

// The validator's messages (google/jsonschema-go), one pattern a keyword.
var (
	typeRE        = regexp.MustCompile(`^type: .* has type "(\w+)", want (?:"(\w+)"|one of "([\w, ]+)")$`)
	boundRE       = regexp.MustCompile(`^(minimum|maximum|exclusiveMinimum|exclusiveMaximum|multipleOf): (\S+) is `)
	lengthRE      = regexp.MustCompile(`^(minLength|maxLength): .* contains (\d+) Unicode code points`)
	itemsRE       = regexp.MustCompile(`^(minItems|maxItems): array length (\d+) is`)
	propsCountRE  = regexp.MustCompile(`^(minProperties|maxProperties): object has (\d+) properties`)
	containsRE    = regexp.MustCompile(`^(minContains|maxContains): contains validated (\d+) items`)
	uniqueRE      = regexp.MustCompile(`^uniqueItems: array items (\d+) and (\d+) are equal`)
	requiredRE    = regexp.MustCompile(`^required: missing properties: (\[.*\])$`)
	dependentRE   = regexp.MustCompile(`^dependentRequired\["(.*)"\]: missing properties (\[.*\])$`)
	additionalRE  = regexp.MustCompile(`^unexpected additional properties (\[.*\])$`)
	quotedWordsRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// plainReason rewrites one validator message; s is the schema that
// failed (nil when unknown) and top says the failure is about the
// arguments object itself.
func plainReason(reason string, s *jsonschema.Schema, top bool) string {
	keyword, _, _ := strings.Cut(reason, ":")
	switch {
	case typeRE.MatchString(reason):
		m := typeRE.FindStringSubmatch(reason)
		want := m[2]
		if want == "" {
			types := strings.Split(m[3], ", ")
			for i, t := range types {
				if t != "null" {
					types[i] = sdk.TypeName(t)
				}
			}
			return fmt.Sprintf("must be %s, got %s", strings.Join(types, " or "), sdk.TypeName(m[1]))
		}
		return fmt.Sprintf("must be %s, got %s", sdk.TypeName(want), sdk.TypeName(m[1]))
	case keyword == "enum" && s != nil && len(s.Enum) > 0:
		return "must be one of " + jsonList(s.Enum)
	case keyword == "const" && s != nil && s.Const != nil:
		return "must be " + jsonText(*s.Const)
	case boundRE.MatchString(reason):
		m := boundRE.FindStringSubmatch(reason)
		got := ratText(m[2])
		op, limit := map[string]string{"minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[m[1]], ""
		if s != nil {
			switch m[1] {
			case "minimum":
				limit = floatText(s.Minimum)
			case "maximum":
				limit = floatText(s.Maximum)
			case "exclusiveMinimum":
				limit = floatText(s.ExclusiveMinimum)
			case "exclusiveMaximum":
				limit = floatText(s.ExclusiveMaximum)
			case "multipleOf":
				limit = floatText(s.MultipleOf)
			}
		}
		if limit == "" {
			break
		}
		if m[1] == "multipleOf" {
			return fmt.Sprintf("must be a multiple of %s, got %s", limit, got)
		}
		return fmt.Sprintf("must be %s %s, got %s", op, limit, got)
	case lengthRE.MatchString(reason) && s != nil:
		m := lengthRE.FindStringSubmatch(reason)
		if m[1] == "minLength" && s.MinLength != nil {
			return fmt.Sprintf("must be at least %s long, got %s", plural(*s.MinLength, "character"), m[2])
		}
		if m[1] == "maxLength" && s.MaxLength != nil {
			return fmt.Sprintf("must be at most %s long, got %s", plural(*s.MaxLength, "character"), m[2])
		}
	case keyword == "pattern" && s != nil && s.Pattern != "":
		return fmt.Sprintf("must match the pattern %s", s.Pattern)
	case itemsRE.MatchString(reason) && s != nil:
		m := itemsRE.FindStringSubmatch(reason)
		if m[1] == "minItems" && s.MinItems != nil {
			return fmt.Sprintf("must have at least %s, got %s", plural(*s.MinItems, "item"), m[2])
		}
		if m[1] == "maxItems" && s.MaxItems != nil {
			return fmt.Sprintf("must have at most %s, got %s", plural(*s.MaxItems, "item"), m[2])
		}
	case uniqueRE.MatchString(reason):
		m := uniqueRE.FindStringSubmatch(reason)
		i, _ := strconv.Atoi(m[1])
		j, _ := strconv.Atoi(m[2])
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", min(i, j), max(i, j))
	case containsRE.MatchString(reason) && s != nil:
		m := containsRE.FindStringSubmatch(reason)
		if m[1] == "minContains" && s.MinContains != nil {
			return fmt.Sprintf("must have at least %s matching its contains schema, got %s", plural(*s.MinContains, "item"), m[2])
		}
		if m[1] == "maxContains" && s.MaxContains != nil {
			return fmt.Sprintf("must have at most %s matching its contains schema, got %s", plural(*s.MaxContains, "item"), m[2])
		}
	case keyword == "contains":
		return "must have an item matching its contains schema"
	case propsCountRE.MatchString(reason) && s != nil:
		m := propsCountRE.FindStringSubmatch(reason)
		if m[1] == "minProperties" && s.MinProperties != nil {
			return fmt.Sprintf("must have at least %s, got %s", plural(*s.MinProperties, "field"), m[2])
		}
		if m[1] == "maxProperties" && s.MaxProperties != nil {
			return fmt.Sprintf("must have at most %s, got %s", plural(*s.MaxProperties, "field"), m[2])
		}
	case requiredRE.MatchString(reason):
		names := quotedList(requiredRE.FindStringSubmatch(reason)[1])
		what := "field"
		if top {
			what = "argument"
		}
		if len(names) > 1 {
			what += "s"
		}
		return fmt.Sprintf("missing required %s %s", what, strings.Join(names, ", "))
	case dependentRE.MatchString(reason):
		m := dependentRE.FindStringSubmatch(reason)
		return fmt.Sprintf("with %s set, %s must be set too", m[1], strings.Join(quotedList(m[2]), ", "))
	case additionalRE.MatchString(reason):
		names := quotedList(additionalRE.FindStringSubmatch(reason)[1])
		if len(names) == 1 {
			return fmt.Sprintf("unknown field %s", names[0])
		}
		return fmt.Sprintf("unknown fields %s", strings.Join(names, ", "))
	case keyword == "anyOf":
		return "must match at least one of the shapes its schema allows (anyOf)"
	case strings.HasPrefix(reason, "oneOf: validated against both"):
		return "must match exactly one of the shapes its schema allows (oneOf), but matches several"
	case keyword == "oneOf":
		return "must match exactly one of the shapes its schema allows (oneOf), but matches none"
	case keyword == "not":
		return "must not match the shape its schema excludes (not)"
	}
	return reason
}

// quotedList reads the validator's %q rendering of a list of names.
func quotedList(s string) []string {
	var out []string
	for _, m := range quotedWordsRE.FindAllStringSubmatch(s, -1) {
		if u, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
			out = append(out, u)
		} else {
			out = append(out, m[1])
		}
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// ratText renders the validator's rational ("3/2", "0/1") as a decimal.
func ratText(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func floatText(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}
