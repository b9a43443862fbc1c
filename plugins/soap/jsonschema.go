package soap

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Keys of the JSON form of XML content.
const (
	attrPrefix = "@"      // an attribute "id" is the property "@id"
	valueKey   = "_value" // the text of an element with attributes
)

type obj = map[string]any

// simpleSchema maps an XSD built-in type with facets to JSON Schema.
func simpleSchema(t *xsdType) obj {
	s := obj{}
	jt := jsonKind(t.Base)
	if t.List {
		jt = "string"
	}
	switch jt {
	case "integer":
		s["type"] = "integer"
		if b, ok := intBounds[t.Base]; ok {
			s["minimum"], s["maximum"] = b[0], b[1]
		}
		switch t.Base {
		case "unsignedLong", "nonNegativeInteger":
			s["minimum"] = 0
		case "positiveInteger":
			s["minimum"] = 1
		case "negativeInteger":
			s["maximum"] = -1
		case "nonPositiveInteger":
			s["maximum"] = 0
		}
	case "number", "boolean":
		s["type"] = jt
	default:
		s["type"] = "string"
		switch t.Base {
		case "dateTime":
			s["format"] = "date-time"
		case "date":
			s["format"] = "date"
		case "time":
			s["format"] = "time"
		case "base64Binary":
			s["contentEncoding"] = "base64"
		}
	}
	num := jt == "integer" || jt == "number"
	if len(t.Enum) > 0 {
		var e []any
		for _, v := range t.Enum {
			if x, ok := scalar(v, jt); ok {
				e = append(e, x)
			}
		}
		s["enum"] = e
	}
	if t.Pattern != "" && jt == "string" {
		s["pattern"] = t.Pattern // anchored, portable (xsd.go)
	}
	if jt == "string" {
		if t.MinLength != nil {
			s["minLength"] = *t.MinLength
		}
		if t.MaxLength != nil {
			s["maxLength"] = *t.MaxLength
		}
	}
	if num {
		for k, v := range map[string]string{"minimum": t.MinInc, "maximum": t.MaxInc, "exclusiveMinimum": t.MinExc, "exclusiveMaximum": t.MaxExc} {
			if f, err := strconv.ParseFloat(v, 64); v != "" && err == nil {
				s[k] = json.Number(strconv.FormatFloat(f, 'g', -1, 64))
			}
		}
	}
	return s
}

// intBounds are the value spaces of the fixed-size integer types.
var intBounds = map[string][2]int64{
	"int": {-1 << 31, 1<<31 - 1}, "short": {-1 << 15, 1<<15 - 1}, "byte": {-1 << 7, 1<<7 - 1},
	"unsignedInt": {0, 1<<32 - 1}, "unsignedShort": {0, 1<<16 - 1}, "unsignedByte": {0, 1<<8 - 1},
}

// jsonKind is the JSON type of an XSD built-in type.
func jsonKind(base string) string {
	switch base {
	case "int", "integer", "long", "short", "byte", "unsignedLong", "unsignedInt", "unsignedShort",
		"unsignedByte", "nonNegativeInteger", "positiveInteger", "negativeInteger", "nonPositiveInteger":
		return "integer"
	case "decimal", "float", "double":
		return "number"
	case "boolean":
		return "boolean"
	}
	return "string"
}

// scalar converts XML text to the JSON value of kind; ok is false when the
// text does not parse.
func scalar(v, kind string) (any, bool) {
	switch kind {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(n, 10)), true
		}
		if isDigits(v) && len(v) < 400 {
			// Beyond int64, still an integer: written canonically.
			neg := v[0] == '-'
			d := strings.TrimLeft(strings.TrimLeft(v, "+-"), "0")
			if d == "" {
				return json.Number("0"), true
			}
			if neg {
				d = "-" + d
			}
			return json.Number(d), true
		}
		return v, false
	case "number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
			return v, false // NaN, INF and out of range have no JSON form
		}
		if v[0] == '-' || v[0] >= '0' && v[0] <= '9' {
			if len(v) < 64 && json.Valid([]byte(v)) {
				return json.Number(v), true // as written: decimals keep their digits
			}
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
	case "boolean":
		switch v {
		case "true", "1":
			return true, true
		case "false", "0":
			return false, true
		}
		return v, false
	}
	return v, true
}

func isDigits(v string) bool {
	if v != "" && (v[0] == '-' || v[0] == '+') {
		v = v[1:]
	}
	if v == "" {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// typeSchema is the JSON Schema of a type's JSON form.
func typeSchema(t *xsdType) obj {
	switch t.Kind {
	case kindSimple:
		return simpleSchema(t)
	case kindAny:
		return obj{}
	}
	props := obj{}
	var required []string
	var choice []string
	for _, a := range t.Attrs {
		props[attrPrefix+a.Name] = simpleSchema(a.Type)
		if a.Required {
			required = append(required, attrPrefix+a.Name)
		}
	}
	if t.Value != nil {
		props[valueKey] = simpleSchema(t.Value)
	}
	open := false
	for _, f := range t.Fields {
		if f.Name == "*" {
			open = true
			continue
		}
		props[f.Name] = fieldSchema(f)
		if f.Min > 0 {
			required = append(required, f.Name)
		}
		if f.Choice {
			choice = append(choice, f.Name)
		}
	}
	// Open content (xsd:any) takes any further member, and says so: the
	// host refuses arguments a tool's schema does not declare.
	s := obj{"type": "object", "properties": props, "additionalProperties": open}
	if len(required) > 0 {
		s["required"] = required
	}
	if len(choice) > 1 {
		s["description"] = "A choice: give one of " + joinNames(choice) + "."
	}
	return s
}

func joinNames(n []string) string {
	s := ""
	for i, x := range n {
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}

// fieldSchema is the schema of one element field: arrays for repeated
// elements, null allowed for nillable ones.
func fieldSchema(f *xsdField) obj {
	s := typeSchema(f.Type)
	if f.Nillable {
		s = obj{"anyOf": []any{s, obj{"type": "null"}}}
	}
	if f.repeated() {
		a := obj{"type": "array", "items": s}
		if f.Min > 0 {
			a["minItems"] = f.Min
		}
		if f.Max > 1 {
			a["maxItems"] = f.Max
		}
		return a
	}
	return s
}
