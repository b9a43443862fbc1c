package schemacheck

import (
	"testing"
)

// Every keyword a tool's input schema may use explains a refusal in
// plain words, naming the argument.
func TestArgumentErrorMessages(t *testing.T) {
	const schema = `{
		"type": "object",
		"properties": {
			"id": {"type": "integer", "minimum": 1, "maximum": 100},
			"ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
			"color": {"enum": ["red", "green", 3]},
			"kind": {"const": "fixed"},
			"name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
			"tags": {"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": true, "items": {"type": "string"}},
			"point": {"type": "object", "required": ["x"], "properties": {"x": {"type": "number"}}, "additionalProperties": false,
				"minProperties": 1, "maxProperties": 1},
			"either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
			"one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
			"notnull": {"not": {"type": "null"}},
			"count": {"type": ["integer", "null"]},
			"pair": {"type": "object", "dependentRequired": {"a": ["b"]}},
			"nums": {"type": "array", "contains": {"type": "integer"}, "minContains": 2},
			"labels": {"type": "object", "properties": {"team": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
			"pairs": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}
		},
		"required": ["id"]
	}`
	t.Parallel()
	s, err := Compile([]byte(schema), Arguments)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, want string }{
		{`{"id": 0}`, "id: must be ≥ 1, got 0"},
		{`{"id": 101}`, "id: must be ≤ 100, got 101"},
		{`{"id": "seven"}`, "id: must be an integer, got a string"},
		{`{"id": [7]}`, "id: must be an integer, got a list"},
		{`{"id": null}`, "id: must be an integer, got null"},
		{`{}`, "missing required argument id"},
		{`{"id": 1, "ratio": 0}`, "ratio: must be > 0, got 0"},
		{`{"id": 1, "ratio": 1}`, "ratio: must be < 1, got 1"},
		{`{"id": 1, "ratio": 0.3}`, "ratio: must be a multiple of 0.25, got 0.3"},
		{`{"id": 1, "color": "blue"}`, `color: must be one of "red", "green", 3`},
		{`{"id": 1, "kind": "other"}`, `kind: must be "fixed"`},
		{`{"id": 1, "name": "a"}`, "name: must be at least 2 characters long, got 1"},
		{`{"id": 1, "name": "abcdefg"}`, "name: must be at most 5 characters long, got 7"},
		{`{"id": 1, "name": "ABC"}`, "name: must match the pattern ^[a-z]+$"},
		{`{"id": 1, "tags": []}`, "tags: must have at least 1 item, got 0"},
		{`{"id": 1, "tags": ["a", "b", "c"]}`, "tags: must have at most 2 items, got 3"},
		{`{"id": 1, "tags": ["a", "a"]}`, "tags: items must be unique, but items 0 and 1 are equal"},
		{`{"id": 1, "tags": [1]}`, "tags[0]: must be a string, got an integer"},
		{`{"id": 1, "point": {}}`, "point: must have at least 1 field, got 0"},
		{`{"id": 1, "point": {"y": 1}}`, `point: unknown field y`},
		{`{"id": 1, "point": {"x": "a"}}`, "point.x: must be a number, got a string"},
		{`{"id": 1, "either": true}`, "either: must match at least one of the shapes its schema allows (anyOf)"},
		{`{"id": 1, "one": 2}`, "one: must match exactly one of the shapes its schema allows (oneOf), but matches several"},
		{`{"id": 1, "notnull": null}`, "notnull: must not match the shape its schema excludes (not)"},
		{`{"id": 1, "count": "x"}`, "count: must be an integer or null, got a string"},
		{`{"id": 1, "pair": {"a": 1}}`, "pair: with a set, b must be set too"},
		{`{"id": 1, "nums": [1, "x"]}`, "nums: must have at least 2 items matching its contains schema, got 1"},
		{`{"id": 1, "labels": {"team": "a", "size": "big"}}`, "labels.size: must be an integer, got a string"},
		{`{"id": 1, "pairs": ["a", "b"]}`, "pairs[1]: must be an integer, got a string"},
	} {
		v, err := Decode([]byte(c.args))
		if err != nil {
			t.Fatal(err)
		}
		f := s.Check(v)
		if f == nil {
			t.Errorf("%s: valid", c.args)
			continue
		}
		if got := f.Error(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}
