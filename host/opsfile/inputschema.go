package opsfile

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/schemacheck"
)

// Input schemas, closed to undeclared arguments. A tool's arguments are
// the properties its input schema declares: the host refuses any other
// one before a request is built, for every adapter (the REST adapter's
// auto body would forward it to the upstream). An input schema that says nothing about further
// properties at its top level is closed when it is compiled: with
// "additionalProperties": false, or "unevaluatedProperties": false when
// its properties come from allOf, anyOf, oneOf, if/then/else,
// dependentSchemas or $ref, so that what they declare still passes. An
// operation opts in to more arguments with a top-level
// additionalProperties (true or a schema) or unevaluatedProperties.
// Names in required that no properties declare are declared as any
// value.

// compositionKeywords let a schema declare properties outside its own
// properties.
var compositionKeywords = []string{"allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "$ref", "$dynamicRef"}

// closeInputSchema returns the object schema raw closed to undeclared
// properties, or raw itself when its top level already says what other
// properties may be.
func closeInputSchema(raw json.RawMessage) json.RawMessage {
	v, err := jsonpath.Decode(raw)
	m, _ := v.(map[string]any)
	if err != nil || m == nil {
		return raw // compiling reports it
	}
	if _, ok := m["additionalProperties"]; ok {
		return raw
	}
	if _, ok := m["unevaluatedProperties"]; ok {
		return raw
	}
	if req, ok := m["required"].([]any); ok {
		props, _ := m["properties"].(map[string]any)
		for _, r := range req {
			name, ok := r.(string)
			if _, has := props[name]; !ok || has {
				continue
			}
			if props == nil {
				props = map[string]any{}
				m["properties"] = props
			}
			props[name] = map[string]any{}
		}
	}
	key := "additionalProperties"
	for _, k := range compositionKeywords {
		if _, ok := m[k]; ok {
			key = "unevaluatedProperties"
		}
	}
	m[key] = false
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return raw // decoded JSON always encodes
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// CheckOutputSchema checks a tool's output schema: a JSON Schema of an
// object that compiles.
func CheckOutputSchema(raw json.RawMessage) error {
	_, err := compileObjectSchema(raw, schemacheck.Results, "structuredContent is an object")
	return err
}

func compileInputSchema(raw json.RawMessage) (json.RawMessage, *schemacheck.Schema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	raw = closeInputSchema(raw)
	s, err := compileObjectSchema(raw, schemacheck.Arguments, "tool arguments are an object")
	return raw, s, err
}

// compileObjectSchema compiles raw, a schema whose type must be object
// (why says why).
func compileObjectSchema(raw json.RawMessage, use schemacheck.Use, why string) (*schemacheck.Schema, error) {
	var top struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	if top.Type != "object" {
		return nil, fmt.Errorf(`must have "type": "object" (%s)`, why)
	}
	return schemacheck.Compile(raw, use)
}
