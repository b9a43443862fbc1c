package grpcadapter_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// schemasOf expands a method entry compiled from the test protos (so
// comments become descriptions) and returns its tool.
func schemasOf(t *testing.T, method string, extra ...any) sdk.Tool {
	t.Helper()
	h := newHarness(t)
	cfg := map[string]any{"target": "127.0.0.1:1", "method": testService + "/" + method,
		"proto_files": []string{"test.proto"}, "import_paths": []string{testdataDir(t)}}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i].(string)] = extra[i+1]
	}
	tools := expandTools(t, h, adaptertest.Call{Config: cfg})
	if len(tools) != 1 {
		t.Fatalf("tools = %v", tools)
	}
	return tools[0]
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v", name, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSchemaGolden -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (go test -run TestSchemaGolden -update rewrites it):\n%s", name, buf.String())
	}
}

// TestSchemaGolden pins the schemas generated for the message zoo: every
// scalar kind, enums, maps, oneofs, nested, recursive and mutually
// recursive messages, the well-known types, proto2 required fields.
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	zoo := schemasOf(t, "Zoo")
	golden(t, "zoo.input.json", zoo.InputSchema)
	golden(t, "zoo.output.json", zoo.OutputSchema)
	golden(t, "zoo.input.json_names.json", schemasOf(t, "Zoo", "field_names", "json").InputSchema)
	legacy := schemasOf(t, "Legacy")
	golden(t, "legacy.input.json", legacy.InputSchema)
	golden(t, "legacy.output.json", legacy.OutputSchema)
	echo := schemasOf(t, "Echo")
	golden(t, "echo.input.json", echo.InputSchema)
	golden(t, "echo.output.json", echo.OutputSchema)
}

func resolve(t *testing.T, raw []byte) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	if s.Type != "object" {
		t.Fatalf("schema type %q, want object", s.Type)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return r
}

func validate(r *jsonschema.Resolved, doc string) error {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return err
	}
	return r.Validate(v)
}

// zooArgs populates every field of the zoo (one member per oneof).
const zooArgs = `{
  "f_double": 1.5, "f_float": "NaN", "f_int32": -7, "f_int64": "-9007199254740993",
  "f_uint32": 4000000000, "f_uint64": "18446744073709551615", "f_sint32": -1, "f_sint64": 12,
  "f_fixed32": 5, "f_fixed64": "6", "f_sfixed32": -5, "f_sfixed64": "-6",
  "f_bool": true, "f_string": "zebra", "f_bytes": "aGVsbG8=",
  "color": "GREEN", "colors": ["RED", "GREEN"], "maybe": "", "ids": ["1", 2], "tags": ["a"],
  "counts": {"a": 1}, "animals_by_id": {"-3": {"name": "lion", "home": {"biome": "savanna"}}},
  "flags": {"true": "yes"}, "blobs": {"7": "AQI="},
  "animal": {"name": "okapi"}, "large": "123",
  "habitat": {"biome": "forest"}, "deep": {"depth": 3},
  "tree": {"label": "root", "children": [{"label": "leaf", "children": []}]},
  "ping": {"pong": {"n": 1, "ping": {}}},
  "keeper_pet": {"name": "cat"},
  "created": "2024-05-01T12:00:00Z", "ttl": "1.500s", "mask": "fDouble,tree.label",
  "attrs": {"k": [1, "two", null]}, "any_value": 42, "list": [true, {"x": 1}],
  "extra": {"@type": "type.googleapis.com/crank.test.zoo.Animal", "name": "boxed"},
  "nothing": {}, "null_value": null,
  "w_double": 2.5, "w_float": "Infinity", "w_int64": "-1", "w_uint64": "1", "w_int32": 1, "w_uint32": 2,
  "w_bool": false, "w_string": "", "w_bytes": "AA==",
  "old": "deprecated"
}`

// TestSchemaMatchesProtojson: the input schema (as the host compiles it)
// accepts what protojson accepts, the zoo round-trips through a real
// server, and the answer matches the output schema.
func TestSchemaMatchesProtojson(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Zoo")
	tools := expandTools(t, h, adaptertest.Call{Config: cfg})
	in, out := resolve(t, tools[0].InputSchema), resolve(t, tools[0].OutputSchema)

	if err := validate(in, zooArgs); err != nil {
		t.Fatalf("the input schema refuses the zoo: %v", err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: zooArgs})
	if err != nil || ue != nil {
		t.Fatalf("invoke: %v %v", err, ue)
	}
	answer := string(res.Structured)
	if err := validate(out, answer); err != nil {
		t.Fatalf("the output schema refuses the answer %s: %v", answer, err)
	}
	for _, want := range []string{`"f_int64":"-9007199254740993"`, `"f_uint64":"18446744073709551615"`, `"f_float":"NaN"`,
		`"animals_by_id":{"-3":{"name":"lion"`, `"extra":{"@type":"type.googleapis.com/crank.test.zoo.Animal","name":"boxed"}`,
		`"ttl":"1.500s"`, `"animal":{"name":"okapi"`, `"large":"123"`, `"null_value":null`, `"w_float":"Infinity"`, `"ids":["1","2"]`} {
		if !strings.Contains(answer, want) {
			t.Errorf("answer lacks %s:\n%s", want, answer)
		}
	}
	// The empty zoo's answer (defaults emitted) matches too.
	res, _, _ = h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{}`})
	if err := validate(out, string(res.Structured)); err != nil {
		t.Errorf("the output schema refuses the empty answer %s: %v", res.Structured, err)
	}
	// The JSON-names flavour accepts lowerCamelCase and answers with it.
	jcfg := ts.cfg("Zoo", "field_names", "json")
	jtools := expandTools(t, h, adaptertest.Call{Config: jcfg})
	jin, jout := resolve(t, jtools[0].InputSchema), resolve(t, jtools[0].OutputSchema)
	jargs := `{"fInt64": "5", "animalsById": {"1": {"name": "x"}}, "wBool": true}`
	if err := validate(jin, jargs); err != nil {
		t.Fatal(err)
	}
	res, _, _ = h.Invoke(ctxT(t), adaptertest.Call{Config: jcfg, Args: jargs})
	if err := validate(jout, string(res.Structured)); err != nil || !strings.Contains(string(res.Structured), `"animalsById":{"1":{"name":"x"`) {
		t.Errorf("json-names answer %s: %v", res.Structured, err)
	}

	// What the schema refuses, by the host's validation.
	for _, bad := range []string{
		`{"name": "a", "number": 1}`,         // two members of a oneof
		`{"small": 1, "large": "2"}`,         // the other oneof
		`{"nope": 1}`,                        // unknown field
		`{"color": 1}`,                       // enums by name
		`{"f_int64": "12x"}`,                 // not a decimal
		`{"f_uint64": "-1"}`,                 // unsigned
		`{"f_int32": 3000000000}`,            // out of range
		`{"flags": {"maybe": "x"}}`,          // bool map keys
		`{"counts": {"a": "x"}}`,             // map values
		`{"tree": {"children": [{"x": 1}]}}`, // recursion is checked too
		`{"ping": {"pong": {"ping": {"pong": {"n": "x"}}}}}`,
		`{"ttl": "5m"}`,                  // Duration format
		`{"extra": {"name": "no type"}}`, // Any needs @type
		`{"f_float": "fast"}`,
	} {
		if validate(in, bad) == nil {
			t.Errorf("the input schema accepts %s", bad)
		}
	}
	// Legacy: proto2 required.
	ltools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Legacy")})
	lin := resolve(t, ltools[0].InputSchema)
	if validate(lin, `{"n": 1}`) == nil {
		t.Error("a missing required field is accepted")
	}
	res, ue, _ = h.Invoke(ctxT(t), adaptertest.Call{Config: ts.cfg("Legacy"), Args: `{"id": "a", "extra": {"note": "n"}}`})
	if ue != nil || !strings.Contains(string(res.Structured), `"id":"a"`) {
		t.Errorf("legacy: %v %s", ue, res.Structured)
	}
}

// Every pattern a protobuf-derived schema carries (the goldens: int64 as
// digits, NaN and Infinity, durations, map keys) is one JavaScript with
// the u flag and Go's regexp both read alike: sdk.PortablePattern leaves
// it as it is.
func TestSchemaPatternsPortable(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/golden/*.json")
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"pattern":\s*("(?:[^"\\]|\\.)*")`).FindAllSubmatch(b, -1) {
			var p string
			if err := json.Unmarshal(m[1], &p); err != nil || seen[p] {
				continue
			}
			seen[p] = true
			if got, err := sdk.PortablePattern(p, sdk.PatternRE2); err != nil || got != p {
				t.Errorf("%s: pattern %q: %q, %v", f, p, got, err)
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("only %d patterns in the goldens", len(seen))
	}
}
