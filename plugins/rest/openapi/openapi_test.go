package openapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

var updateOpenAPI = flag.Bool("update-openapi", false, "rewrite the golden files in testdata/golden")

// Credentials of the pet store tests; they must never show in schemas,
// descriptions or diagnostics.
const (
	petKey   = "pet-key-4711"
	petToken = "pet-token-0815"
)

// petServer implements testdata/petstore.yaml under /v1 on a
// loopback port. It checks the credentials each operation needs and keeps
// the last request of each kind for the tests to inspect.
type petServer struct {
	*httptest.Server
	mu   sync.Mutex
	pets map[int]map[string]any
	next int
	last map[string]*http.Request
	body map[string]string
}

func newPetServer(t testing.TB) *petServer {
	ps := &petServer{pets: map[int]map[string]any{
		1: {"id": 1, "name": "Rex", "tag": "dog", "status": "available"},
		2: {"id": 2, "name": "Tom", "tag": nil, "status": "sold"},
	}, next: 3, last: map[string]*http.Request{}, body: map[string]string{}}
	mux := http.NewServeMux()
	apiKey := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-API-Key") != petKey {
				writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"message": "missing or wrong X-API-Key"})
				return
			}
			h(w, r)
		}
	}
	bearer := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+petToken {
				writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"message": "bearer token required"})
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /v1/pets", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("listPets", r)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		tags := r.URL.Query()["tags"]
		ps.mu.Lock()
		var out []map[string]any
		for id := 1; id < ps.next; id++ {
			p, ok := ps.pets[id]
			if !ok {
				continue
			}
			if len(tags) > 0 {
				tag, _ := p["tag"].(string)
				if !containsStr(tags, tag) {
					continue
				}
			}
			out = append(out, p)
		}
		ps.mu.Unlock()
		if limit > 0 && limit < len(out) {
			out = out[:limit]
		}
		writeJSONStatus(w, http.StatusOK, out)
	}))
	mux.HandleFunc("POST /v1/pets", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("createPet", r)
		var p map[string]any
		if err := json.Unmarshal([]byte(ps.body["createPet"]), &p); err != nil || p["name"] == nil {
			writeJSONStatus(w, http.StatusBadRequest, map[string]any{"message": "body must be a pet with a name"})
			return
		}
		if _, has := p["id"]; has {
			writeJSONStatus(w, http.StatusBadRequest, map[string]any{"message": "id is read-only"})
			return
		}
		ps.mu.Lock()
		p["id"] = ps.next
		ps.pets[ps.next] = p
		ps.next++
		ps.mu.Unlock()
		writeJSONStatus(w, http.StatusCreated, p)
	}))
	mux.HandleFunc("GET /v1/pets/{petId}", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("showPetById", r)
		id, _ := strconv.Atoi(r.PathValue("petId"))
		ps.mu.Lock()
		p, ok := ps.pets[id]
		ps.mu.Unlock()
		if !ok {
			writeJSONStatus(w, http.StatusNotFound, map[string]any{"message": "no pet " + r.PathValue("petId")})
			return
		}
		writeJSONStatus(w, http.StatusOK, p)
	}))
	mux.HandleFunc("PUT /v1/pets/{petId}", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("updatePet", r)
		if ct := r.Header.Get("Content-Type"); ct != "application/merge-patch+json" {
			writeJSONStatus(w, http.StatusUnsupportedMediaType, map[string]any{"message": "want merge-patch, got " + ct})
			return
		}
		var patch map[string]any
		_ = json.Unmarshal([]byte(ps.body["updatePet"]), &patch)
		id, _ := strconv.Atoi(r.PathValue("petId"))
		writeJSONStatus(w, http.StatusOK, map[string]any{"id": id, "name": patch["name"]})
	}))
	mux.HandleFunc("DELETE /v1/pets/{petId}", bearer(func(w http.ResponseWriter, r *http.Request) {
		ps.record("deletePet", r)
		id, _ := strconv.Atoi(r.PathValue("petId"))
		ps.mu.Lock()
		delete(ps.pets, id)
		ps.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("GET /v1/styles/", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("styleEcho", r)
		writeJSONStatus(w, http.StatusOK, map[string]any{"uri": r.RequestURI, "header": r.Header})
	}))
	mux.HandleFunc("GET /v1/tree", apiKey(func(w http.ResponseWriter, r *http.Request) {
		writeJSONStatus(w, http.StatusOK, map[string]any{"name": "root", "children": []any{
			map[string]any{"name": "a", "children": []any{map[string]any{"name": "a1"}}}}})
	}))
	mux.HandleFunc("POST /v1/tree", apiKey(func(w http.ResponseWriter, r *http.Request) {
		ps.record("plantTree", r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, ps.body["plantTree"])
	}))
	mux.HandleFunc("GET /v1/admin/stats", bearer(func(w http.ResponseWriter, r *http.Request) {
		writeJSONStatus(w, http.StatusOK, map[string]int{"pets": len(ps.pets)})
	}))
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, "testdata/petstore.yaml")
	})
	ps.Server = httptest.NewServer(mux)
	t.Cleanup(ps.Close)
	return ps
}

func (ps *petServer) record(op string, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	ps.mu.Lock()
	ps.last[op] = r
	ps.body[op] = string(b)
	ps.mu.Unlock()
}

func (ps *petServer) lastRequest(op string) (*http.Request, string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.last[op], ps.body[op]
}

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// petEntry is the config of an entry importing the pet store.
func petEntry(baseURL string, extra map[string]any) map[string]any {
	o := map[string]any{
		"document":    "testdata/petstore.yaml",
		"credentials": map[string]any{"api_key": petKey, "bearerAuth": petToken},
	}
	if baseURL != "" {
		o["base_url"] = baseURL
	}
	for k, v := range extra {
		if v == nil {
			delete(o, k)
		} else {
			o[k] = v
		}
	}
	return map[string]any{"openapi": o}
}

// imported is the outcome of expanding an entry.
type imported struct {
	tools map[string]*sdk.Tool
	order []string
	diags []sdk.Diagnostic
}

func (im *imported) warnings() string {
	var b strings.Builder
	for _, d := range im.diags {
		if d.Severity == sdk.SeverityWarning {
			fmt.Fprintf(&b, "%s: %s\n", d.Field, d.Message)
		}
	}
	return b.String()
}

func (im *imported) errors() string {
	var b strings.Builder
	for _, d := range im.diags {
		if d.Severity == sdk.SeverityError {
			fmt.Fprintf(&b, "%s: %s\n", d.Field, d.Message)
		}
	}
	return b.String()
}

func expandEntry(t *testing.T, h *adaptertest.Harness, cfg any, mode sdk.Mode) *imported {
	t.Helper()
	return expandFor(t, h, cfg, mode, false)
}

// expandOldHost expands an entry as a host that predates tools' own
// modes asks (no host capabilities).
func expandOldHost(t *testing.T, h *adaptertest.Harness, cfg any, mode sdk.Mode) *imported {
	t.Helper()
	return expandFor(t, h, cfg, mode, true)
}

func expandFor(t *testing.T, h *adaptertest.Harness, cfg any, mode sdk.Mode, oldHost bool) *imported {
	t.Helper()
	dir, _ := os.Getwd()
	tools, diags, err := h.Expand(t.Context(), adaptertest.Call{Operation: "import", Config: cfg, Mode: mode, BaseDir: dir,
		Timeout: 10 * time.Second, OldHost: oldHost})
	if err != nil {
		t.Fatalf("expand: %v", err)
	}
	im := &imported{tools: map[string]*sdk.Tool{}, diags: diags}
	for i := range tools {
		im.tools[tools[i].Name] = &tools[i]
		im.order = append(im.order, tools[i].Name)
	}
	return im
}

// expandOK expands an entry and requires no error diagnostic.
func expandOK(t *testing.T, h *adaptertest.Harness, cfg any) *imported {
	t.Helper()
	im := expandEntry(t, h, cfg, sdk.ModeUnary)
	if e := im.errors(); e != "" {
		t.Fatalf("expand: errors:\n%s", e)
	}
	return im
}

func (im *imported) names() string {
	n := append([]string(nil), im.order...)
	sort.Strings(n)
	return strings.Join(n, ",")
}

func callTool(t *testing.T, h *adaptertest.Harness, tool *sdk.Tool, args any) (*sdk.Result, *sdk.UpstreamError) {
	t.Helper()
	if tool == nil {
		t.Fatal("no such tool")
	}
	res, ue, err := h.Invoke(t.Context(), adaptertest.Call{Operation: tool.Name, Config: json.RawMessage(tool.Config), Args: args})
	if err != nil {
		t.Fatalf("invoke %s: %v", tool.Name, err)
	}
	return res, ue
}

func callOK(t *testing.T, h *adaptertest.Harness, tool *sdk.Tool, args any) map[string]any {
	t.Helper()
	res, ue := callTool(t, h, tool, args)
	if ue != nil {
		t.Fatalf("invoke %s: upstream error: %+v", tool.Name, ue)
	}
	var out map[string]any
	if len(res.Structured) > 0 && res.Structured[0] == '{' {
		if err := json.Unmarshal(res.Structured, &out); err != nil {
			t.Fatal(err)
		}
	} else if len(res.Structured) > 0 {
		var v any
		_ = json.Unmarshal(res.Structured, &v)
		out = map[string]any{"result": v}
	}
	// The answer must match the tool's output schema, as a client checks.
	if s := tool.OutputSchema; len(s) > 0 && out != nil {
		if err := resolveSchema(t, s).Validate(out); err != nil {
			t.Errorf("%s: the answer does not match the output schema: %v\nanswer: %v", tool.Name, err, out)
		}
	}
	return out
}

func newHarness(t testing.TB) *adaptertest.Harness {
	t.Helper()
	return adaptertest.New(t, rest.New())
}

// dump renders v as JSON, for checking that no secret leaks into it.
func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// isTrue reads an annotation: nil is not said.
func isTrue(b *bool) bool { return b != nil && *b }

func resolveSchema(t *testing.T, raw []byte) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("schema: %v\n%s", err, raw)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema does not resolve: %v\n%s", err, raw)
	}
	return r
}

// goldenOpenAPI compares JSON with testdata/golden/name, indented;
// -update-openapi rewrites it.
func goldenOpenAPI(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if len(got) == 0 {
		buf.WriteString("null")
	} else if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name)
	if *updateOpenAPI {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update-openapi to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (go test -update-openapi rewrites it):\n--- got\n%s\n--- want\n%s", name, buf.Bytes(), want)
	}
}

// TestOpenAPIGolden: the pet store becomes one tool per usable operation;
// the tool list (names, descriptions, annotations, rest configs) and every
// schema are golden files, and every schema resolves as JSON Schema
// 2020-12 with google/jsonschema-go, as the host resolves it.
func TestOpenAPIGolden(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, petEntry("", nil))
	type listed struct {
		Name        string          `json:"name"`
		Title       string          `json:"title,omitempty"`
		Description string          `json:"description"`
		Annotations json.RawMessage `json:"annotations"`
		Config      json.RawMessage `json:"config"`
	}
	var list []listed
	for _, name := range im.order {
		tool := im.tools[name]
		ann, _ := json.Marshal(map[string]any{"read_only": tool.Annotations.ReadOnly, "destructive": tool.Annotations.Destructive,
			"idempotent": tool.Annotations.Idempotent})
		list = append(list, listed{name, tool.Title, tool.Description, ann, tool.Config})
		goldenOpenAPI(t, "petstore."+name+".input.json", tool.InputSchema)
		goldenOpenAPI(t, "petstore."+name+".output.json", tool.OutputSchema)
		resolveSchema(t, tool.InputSchema)
		if len(tool.OutputSchema) > 0 {
			resolveSchema(t, tool.OutputSchema)
		}
		if !strings.Contains(string(tool.InputSchema), `"type":"object"`) {
			t.Errorf("%s: input schema is not an object schema", name)
		}
	}
	b, _ := json.Marshal(list)
	goldenOpenAPI(t, "petstore.tools.json", b)
	b, _ = json.Marshal(strings.Split(strings.TrimSpace(im.warnings()), "\n"))
	goldenOpenAPI(t, "petstore.warnings.json", b)

	want := "createPet,deletePet,getTree,get_admin_stats,listPets,plantTree,showPetById,styleEcho,updatePet"
	if got := im.names(); got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
}

// TestOpenAPISchemaQuirks: OpenAPI 3.0's nullable, boolean exclusive
// bounds and readOnly/writeOnly become valid 2020-12 and behave.
func TestOpenAPISchemaQuirks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, petEntry("", nil))
	in := resolveSchema(t, im.tools["createPet"].InputSchema)
	for _, c := range []struct {
		args map[string]any
		ok   bool
	}{
		{map[string]any{"name": "Rex"}, true},
		{map[string]any{"name": "Rex", "tag": nil, "status": nil, "owner": nil}, true}, // nullable
		{map[string]any{"name": "Rex", "owner": map[string]any{"name": "Ann"}}, true},  // nullable allOf
		{map[string]any{"name": "Rex", "weight": 0.5}, true},                           // exclusive minimum 0
		{map[string]any{"name": "Rex", "weight": 0}, false},                            // ... excludes 0
		{map[string]any{"name": "Rex", "weight": 500}, true},                           // exclusiveMaximum false
		{map[string]any{"name": "Rex", "status": "lost"}, false},                       // enum
		{map[string]any{"name": ""}, false},                                            // minLength
		{map[string]any{"tag": "x"}, false},                                            // name required
		{map[string]any{"name": "Rex", "secret": "s"}, true},                           // writeOnly is input
	} {
		err := in.Validate(c.args)
		if (err == nil) != c.ok {
			t.Errorf("createPet input %v: valid = %v, want %v (%v)", c.args, err == nil, c.ok, err)
		}
	}
	var schema map[string]any
	_ = json.Unmarshal(im.tools["createPet"].InputSchema, &schema)
	props := schema["properties"].(map[string]any)
	if _, has := props["id"]; has {
		t.Error("readOnly id is an input argument")
	}
	_ = json.Unmarshal(im.tools["showPetById"].OutputSchema, &schema)
	props = schema["properties"].(map[string]any)
	if _, has := props["secret"]; has {
		t.Error("writeOnly secret is in the output schema")
	}
	if _, has := props["id"]; !has {
		t.Error("readOnly id is missing from the output schema")
	}
}

// TestOpenAPICalls: the generated tools call a real server implementing
// the document: path, query, header and body arguments, credentials.
func TestOpenAPICalls(t *testing.T) {
	t.Parallel()
	ps := newPetServer(t)
	h := newHarness(t)
	im := expandOK(t, h, petEntry(ps.URL+"/v1", nil))

	// Query (list repeated, form explode) and header parameters.
	out := callOK(t, h, im.tools["listPets"], map[string]any{"limit": 5, "tags": []string{"dog", "cat"}, "X-Request-ID": "req-1"})
	if pets, _ := out["result"].([]any); len(pets) != 1 {
		t.Errorf("listPets = %v, want Rex only", out)
	}
	r, _ := ps.lastRequest("listPets")
	if r.URL.RawQuery != "limit=5&tags=dog&tags=cat" || r.Header.Get("X-Request-ID") != "req-1" || r.Header.Get("X-API-Key") != petKey {
		t.Errorf("listPets sent %q headers %v", r.URL.RawQuery, r.Header)
	}

	// A JSON body made of the remaining arguments (flattened object).
	out = callOK(t, h, im.tools["createPet"], map[string]any{"name": "Kitty", "tag": "cat", "weight": 4.5})
	if out["id"] != float64(3) || out["name"] != "Kitty" {
		t.Errorf("createPet = %v", out)
	}
	_, body := ps.lastRequest("createPet")
	if body != `{"name":"Kitty","tag":"cat","weight":4.5}` {
		t.Errorf("createPet body = %s", body)
	}

	// Path parameter.
	out = callOK(t, h, im.tools["showPetById"], map[string]any{"petId": 3})
	if out["name"] != "Kitty" {
		t.Errorf("showPetById = %v", out)
	}
	if _, ue := callTool(t, h, im.tools["showPetById"], map[string]any{"petId": 99}); ue == nil || ue.Status != "404" ||
		!strings.Contains(ue.Body, "no pet 99") || !strings.HasSuffix(ue.Upstream, "/v1/pets/99") {
		t.Errorf("showPetById 99: %v", ue)
	}

	// A body that is one argument (a property clashes with a parameter)
	// with the document's JSON media type.
	out = callOK(t, h, im.tools["updatePet"], map[string]any{"petId": 3, "body": map[string]any{"petId": 3, "name": "Kit"}})
	if out["name"] != "Kit" {
		t.Errorf("updatePet = %v", out)
	}
	if _, body := ps.lastRequest("updatePet"); body != `{"name":"Kit","petId":3}` {
		t.Errorf("updatePet body = %s", body)
	}

	// Bearer credentials for one operation, API key for the others.
	if out := callOK(t, h, im.tools["deletePet"], map[string]any{"petId": 3}); len(out) != 0 {
		t.Errorf("deletePet = %v, want {}", out)
	}
	if r, _ := ps.lastRequest("deletePet"); r.Header.Get("X-API-Key") != "" {
		t.Error("deletePet sent the API key its security requirement does not name")
	}
	out = callOK(t, h, im.tools["get_admin_stats"], nil)
	if out["pets"] != float64(2) {
		t.Errorf("admin stats = %v", out)
	}

	// A cyclic schema in both directions.
	tree := map[string]any{"name": "root", "children": []any{map[string]any{"name": "a", "children": []any{map[string]any{"name": "a1"}}}}}
	if err := resolveSchema(t, im.tools["plantTree"].InputSchema).Validate(tree); err != nil {
		t.Errorf("plantTree input rejects a tree: %v", err)
	}
	bad := map[string]any{"name": "root", "children": []any{map[string]any{"children": []any{}}}}
	if err := resolveSchema(t, im.tools["plantTree"].InputSchema).Validate(bad); err == nil {
		t.Error("plantTree input accepts a child without a name")
	}
	out = callOK(t, h, im.tools["plantTree"], tree)
	if fmt.Sprint(out) != fmt.Sprint(tree) {
		t.Errorf("plantTree = %v", out)
	}
	callOK(t, h, im.tools["getTree"], nil)
}

// TestOpenAPIStyles: parameters are serialized by the document's style and
// explode rules (oapi-codegen/runtime), in the path, query and headers.
func TestOpenAPIStyles(t *testing.T) {
	t.Parallel()
	ps := newPetServer(t)
	h := newHarness(t)
	im := expandOK(t, h, petEntry(ps.URL+"/v1", nil))
	tool := im.tools["styleEcho"]
	callOK(t, h, tool, map[string]any{
		"ids":      []int{1, 2, 3},                          // simple
		"label":    []string{"a", "b"},                      // label, explode
		"matrix":   map[string]any{"x": "1", "y": "2"},      // matrix
		"csv":      []string{"a", "b c"},                    // form, explode false
		"space":    []string{"a", "b"},                      // spaceDelimited
		"pipe":     []string{"a", "b"},                      // pipeDelimited
		"filter":   map[string]any{"kind": "cat", "age": 3}, // deepObject
		"point":    map[string]any{"x": 1.5, "y": 2},        // form, explode, object
		"where":    map[string]any{"a": []int{1}},           // content: application/json
		"X-Trace":  []string{"t1", "t2"},                    // header, simple
		"reserved": "a/b?c",                                 // allowReserved
	})
	r, _ := ps.lastRequest("styleEcho")
	want := "/v1/styles/1,2,3/.a.b/;matrix=x,1,y,2?csv=a,b+c&filter[age]=3&filter[kind]=cat&pipe=a%7Cb&x=1.5&y=2" +
		"&reserved=a/b?c&space=a%20b&where=%7B%22a%22%3A%5B1%5D%7D"
	if r.RequestURI != want {
		t.Errorf("request URI\n got %s\nwant %s", r.RequestURI, want)
	}
	if got := r.Header.Values("X-Trace"); len(got) != 1 || got[0] != "t1,t2" {
		t.Errorf("X-Trace = %q, want one t1,t2", got)
	}
	q := r.URL.Query()
	if q.Get("csv") != "a,b c" || q.Get("space") != "a b" || q.Get("pipe") != "a|b" || q.Get("filter[kind]") != "cat" {
		t.Errorf("decoded query = %v", q)
	}

	// Values a style cannot carry are refused, naming the argument.
	_, ue := callTool(t, h, tool, map[string]any{"ids": []any{1}, "label": []string{"a"}, "matrix": map[string]any{"x": "1"},
		"point": map[string]any{"x": map[string]any{"deep": 1}}})
	if ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, `argument "point"`) {
		t.Errorf("nested object in a form parameter: %v", ue)
	}
	_, ue = callTool(t, h, tool, map[string]any{"ids": []any{}, "label": []string{"a"}, "matrix": map[string]any{"x": "1"}})
	if ue == nil || !strings.Contains(ue.Message, `"ids"`) {
		t.Errorf("empty path parameter: %v", ue)
	}
	// A key cannot inject a query separator.
	callOK(t, h, tool, map[string]any{"ids": []int{1}, "label": []string{"a"}, "matrix": map[string]any{"x": "1"},
		"point": map[string]any{"a&b=c": 1}})
	r, _ = ps.lastRequest("styleEcho")
	if !strings.Contains(r.RequestURI, "a%26b%3Dc=1") {
		t.Errorf("object key not escaped: %s", r.RequestURI)
	}
}

// TestOpenAPIFilters: include and exclude by tag, operationId glob,
// method and path prefix.
func TestOpenAPIFilters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		name             string
		include, exclude map[string]any
		want             string
	}{
		{"tag", map[string]any{"tags": []string{"admin"}}, nil, "deletePet,get_admin_stats"},
		{"glob", map[string]any{"operation_ids": []string{"*Pet", "show*"}}, nil, "createPet,deletePet,showPetById,updatePet"},
		{"method", map[string]any{"methods": []string{"post", "PUT"}}, nil, "createPet,plantTree,updatePet"},
		{"path prefix", map[string]any{"paths": []string{"/pets/"}}, nil, "createPet,deletePet,listPets,showPetById,updatePet"},
		{"segments", map[string]any{"paths": []string{"/pet"}}, nil, ""},
		{"tag and method", map[string]any{"tags": []string{"pets"}, "methods": []string{"GET"}}, nil, "listPets,showPetById"},
		{"exclude tag", nil, map[string]any{"tags": []string{"pets"}}, "getTree,get_admin_stats,plantTree,styleEcho"},
		{"exclude method or path", map[string]any{"tags": []string{"pets"}},
			map[string]any{"methods": []string{"DELETE"}, "paths": []string{"/pets/{petId}"}}, "createPet,listPets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := map[string]any{}
			if c.include != nil {
				extra["include"] = c.include
			}
			if c.exclude != nil {
				extra["exclude"] = c.exclude
			}
			im := expandEntry(t, h, petEntry("", extra), sdk.ModeUnary)
			if got := im.names(); got != c.want {
				t.Errorf("tools = %q, want %q\n%s%s", got, c.want, im.errors(), im.warnings())
			}
			if c.want == "" && !strings.Contains(im.errors(), "no operation of the document can be served (after openapi.include and openapi.exclude)") {
				t.Errorf("no tools and no clear error: %s", im.errors())
			}
			if c.want != "" && strings.Contains(im.warnings(), "brokenRef") != strings.Contains(c.want, "broken") {
				t.Errorf("filtered-out operations reported:\n%s", im.warnings())
			}
		})
	}
	// Filters are checked when the entry is validated.
	diags, err := h.Validate(t.Context(), adaptertest.Call{Config: petEntry("", map[string]any{
		"include": map[string]any{"operation_ids": []string{"[x"}, "methods": []string{"FETCH"}, "paths": []string{"pets"}, "colour": []string{}}})})
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, d := range diags {
		fields = append(fields, d.Field)
	}
	sort.Strings(fields)
	if got := strings.Join(fields, ","); got != "openapi.include.colour,openapi.include.methods[0],openapi.include.operation_ids[0],openapi.include.paths[0]" {
		t.Errorf("filter diagnostics on %s", got)
	}
}

// TestOpenAPIOverrides: per-operation name, title, description,
// annotations, mode and window config.
func TestOpenAPIOverrides(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, petEntry("", map[string]any{
		"tool_prefix": "pets_",
		"overrides": map[string]any{
			"showPetById":      map[string]any{"name": "get_pet", "title": "Get a pet", "description": "One pet by id."},
			"GET /admin/stats": map[string]any{"annotations": map[string]any{"open_world": false, "read_only": true}},
			"deletePet":        map[string]any{"annotations": map[string]any{"destructive": false}},
			"listPets": map[string]any{"mode": "window", "transport_behavior": "request_response",
				"limits": map[string]any{"max_items": 5}, "aggregation": map[string]any{"aggregation_mode": "raw_items", "items_path": "$[*]"}},
			"noSuchOperation":    map[string]any{"name": "x"},
			"get /pets/{petId}2": map[string]any{"description": "nothing"},
		},
	}))
	if got := im.names(); got != "get_pet,pets_createPet,pets_deletePet,pets_getTree,pets_get_admin_stats,pets_listPets,pets_plantTree,pets_styleEcho,pets_updatePet" {
		t.Errorf("tools = %s", got)
	}
	// listPets is a window tool polling its JSON answer, with the
	// override's window config as written (the host checks it).
	if l := im.tools["pets_listPets"]; l.Mode != sdk.ModeWindow ||
		string(l.Execution) != `{"aggregation":{"aggregation_mode":"raw_items","items_path":"$[*]"},"limits":{"max_items":5},"transport_behavior":"request_response"}` ||
		len(l.OutputSchema) != 0 || strings.Contains(string(l.InputSchema), `"cursor"`) {
		t.Errorf("listPets: mode %v, execution %s, output schema %s", l.Mode, l.Execution, l.OutputSchema)
	}
	if g := im.tools["get_pet"]; g.Mode != 0 || len(g.Execution) != 0 {
		t.Errorf("get_pet: mode %v, execution %s", g.Mode, g.Execution)
	}
	if p := im.tools["get_pet"]; p.Title != "Get a pet" || p.Description != "One pet by id." {
		t.Errorf("get_pet = %q %q", p.Title, p.Description)
	}
	if a := im.tools["pets_get_admin_stats"].Annotations; isTrue(a.OpenWorld) || !isTrue(a.ReadOnly) || !isTrue(a.Idempotent) {
		t.Errorf("admin stats annotations = %v", a)
	}
	if a := im.tools["pets_deletePet"].Annotations; isTrue(a.Destructive) || !isTrue(a.Idempotent) || isTrue(a.ReadOnly) {
		t.Errorf("deletePet annotations = %v", a)
	}
	w := im.warnings()
	for _, want := range []string{
		"openapi.overrides.noSuchOperation: no imported operation",
		"openapi.overrides.GET /pets/{petId}2: no imported operation",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}

	// A host that gives every tool its entry's mode: the window override
	// is skipped, its window config is an error saying what to do.
	old := expandOldHost(t, h, petEntry("", map[string]any{"overrides": map[string]any{"listPets": map[string]any{"mode": "window"}}}), sdk.ModeUnary)
	if !strings.Contains(old.warnings(), "operation GET /pets (listPets) skipped: #/paths/~1pets/get/responses: it is overridden to mode window: serve it from an operations entry with mode: window") {
		t.Errorf("old host, mode override: %s\n%s", old.names(), old.warnings())
	}
	old = expandOldHost(t, h, petEntry("", map[string]any{"overrides": map[string]any{"listPets": map[string]any{"mode": "window", "limits": map[string]any{"max_items": 5}}}}), sdk.ModeUnary)
	if !strings.Contains(old.errors(), "openapi.overrides.listPets.limits: this Crank host gives every tool its entry's window config") {
		t.Errorf("old host, limits override: %s", old.errors())
	}
	// Window config on an operation that stays unary.
	un := expandEntry(t, h, petEntry("", map[string]any{"overrides": map[string]any{"showPetById": map[string]any{"limits": map[string]any{"max_items": 5}}}}), sdk.ModeUnary)
	if !strings.Contains(un.errors(), "openapi.overrides.showPetById.limits: configures a window, and operation GET /pets/{petId} (showPetById) is unary: set mode: window") {
		t.Errorf("limits on a unary operation: %s", un.errors())
	}

	// Shapes are checked here, window fields by the host.
	diags, _ := h.Validate(t.Context(), adaptertest.Call{Config: petEntry("", map[string]any{
		"overrides": map[string]any{
			"listPets":    map[string]any{"limits": 5, "aggregation": []int{1}, "transport_behavior": 1, "mode": "stream", "name": "bad name"},
			"showPetById": map[string]any{"mode": "unary", "safety": map[string]any{"drop_duplicates": true}},
			"createPet":   map[string]any{"mode": "window", "limits": map[string]any{"max_items": 0, "colour": 1}},
		}})})
	got := map[string]string{}
	for _, d := range diags {
		got[d.Field] = d.Message
	}
	if len(got) != 6 || !strings.Contains(got["openapi.overrides.listPets.limits"], "must be an object") ||
		!strings.Contains(got["openapi.overrides.listPets.aggregation"], "must be an object") ||
		!strings.Contains(got["openapi.overrides.listPets.transport_behavior"], `"server_stream" or "request_response"`) ||
		!strings.Contains(got["openapi.overrides.listPets.mode"], `"unary" or "window"`) ||
		!strings.Contains(got["openapi.overrides.listPets.name"], "1-128 characters") ||
		!strings.Contains(got["openapi.overrides.showPetById.safety"], "configures a window, and this override sets mode unary") {
		t.Errorf("override diagnostics = %v", got)
	}

	// Two operations given the same name.
	diags, _ = h.Validate(t.Context(), adaptertest.Call{Config: petEntry("", map[string]any{
		"overrides": map[string]any{"listPets": map[string]any{"name": "same"}, "createPet": map[string]any{"name": "same"}}})})
	if len(diags) != 1 || !strings.Contains(diags[0].Message, `"same" is also given to`) {
		t.Errorf("duplicate override names: %v", diags)
	}
}

// TestOpenAPIWindowEntry: a text/event-stream operation is served by an
// entry in mode window, as a window tool reading the SSE stream; the
// response's item schema (OpenAPI 3.2 itemSchema) is passed on.
func TestOpenAPIWindowEntry(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/events":
			w.Header().Set("Content-Type", "text/event-stream")
			if r.Header.Get("Last-Event-ID") != "" {
				return // reopened: nothing more
			}
			for i := 1; i <= 3; i++ {
				fmt.Fprintf(w, "id: %d\ndata: {\"pet\":\"p%d\",\"kind\":%q}\n\n", i, i, r.URL.Query().Get("kind"))
			}
		case "/openapi.yaml":
			http.ServeFile(w, r, "testdata/events.yaml")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t)
	// From a URL: the relative server URL resolves against it.
	entry := map[string]any{"openapi": map[string]any{"document": srv.URL + "/openapi.yaml",
		"include": map[string]any{"operation_ids": []string{"watchEvents"}}, "overrides": map[string]any{"watchEvents": map[string]any{"name": "import"}}}}
	im := expandEntry(t, h, entry, sdk.ModeWindow)
	if e := im.errors(); e != "" {
		t.Fatal(e)
	}
	tool := im.tools["import"]
	if tool == nil {
		t.Fatalf("tools = %s", im.names())
	}
	goldenOpenAPI(t, "events.watchEvents.input.json", tool.InputSchema)
	goldenOpenAPI(t, "events.watchEvents.item.json", tool.ItemSchema)
	if tool.Mode != 0 || len(tool.OutputSchema) != 0 {
		t.Errorf("the entry's own window: mode %v, output schema %s", tool.Mode, tool.OutputSchema)
	}
	var cfg map[string]any
	_ = json.Unmarshal(tool.Config, &cfg)
	if cfg["url"] != srv.URL+"/api/events" {
		t.Errorf("url = %v", cfg["url"])
	}
	events, ue, err := h.Stream(t.Context(), adaptertest.Call{Config: json.RawMessage(tool.Config), Args: map[string]any{"kind": "born"}}, 0)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	var items []string
	for _, ev := range events {
		if ev.Kind == client.EventItem {
			items = append(items, string(ev.Item.Data))
		}
	}
	if len(items) != 3 || items[0] != `{"pet":"p1","kind":"born"}` {
		t.Errorf("items = %v", items)
	}
	// The items match the item schema passed on.
	var v any
	_ = json.Unmarshal([]byte(items[0]), &v)
	if err := resolveSchema(t, tool.ItemSchema).Validate(v); err != nil {
		t.Errorf("item does not match the item schema: %v", err)
	}

	// The same document in a unary entry: the stream is a window tool of
	// its own (with the host's default window, or the override's), getPet
	// a unary one.
	doc := func(overrides map[string]any) map[string]any {
		return map[string]any{"openapi": map[string]any{"document": srv.URL + "/openapi.yaml", "overrides": overrides}}
	}
	im = expandEntry(t, h, doc(nil), sdk.ModeUnary)
	if im.names() != "getPet,watchEvents" || im.warnings() != "" || im.tools["watchEvents"].Mode != sdk.ModeWindow ||
		len(im.tools["watchEvents"].Execution) != 0 || im.tools["getPet"].Mode != 0 {
		t.Errorf("unary entry: %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
	if !bytes.Equal(im.tools["watchEvents"].ItemSchema, tool.ItemSchema) {
		t.Errorf("item schema %s", im.tools["watchEvents"].ItemSchema)
	}
	im = expandEntry(t, h, doc(map[string]any{"watchEvents": map[string]any{"limits": map[string]any{"window_duration_ms": 2000},
		"aggregation": map[string]any{"aggregation_mode": "summary_only", "group_by": "$.kind"}}}), sdk.ModeUnary)
	if w := im.tools["watchEvents"]; w.Mode != sdk.ModeWindow ||
		string(w.Execution) != `{"aggregation":{"aggregation_mode":"summary_only","group_by":"$.kind"},"limits":{"window_duration_ms":2000}}` {
		t.Errorf("watchEvents override: %v %s\n%s", w.Mode, w.Execution, im.errors())
	}
	// A host that predates tools' own modes: the stream is skipped, with
	// what to do.
	im = expandOldHost(t, h, doc(nil), sdk.ModeUnary)
	if im.names() != "getPet" || !strings.Contains(im.warnings(), "GET /events (watchEvents) skipped: #/paths/~1events/get/responses: it answers a text/event-stream") {
		t.Errorf("unary entry, old host: %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
	// A window entry serves every operation it imports as a window (a JSON
	// operation is polled or read as one item), except those overridden to
	// unary: unary tools of their own, or skipped by an older host.
	im = expandEntry(t, h, doc(nil), sdk.ModeWindow)
	if im.names() != "getPet,watchEvents" || im.warnings() != "" || im.tools["getPet"].Mode != 0 {
		t.Errorf("window entry: %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
	im = expandEntry(t, h, doc(map[string]any{"getPet": map[string]any{"mode": "unary"}}), sdk.ModeWindow)
	if g := im.tools["getPet"]; im.names() != "getPet,watchEvents" || g.Mode != sdk.ModeUnary || len(g.OutputSchema) == 0 ||
		im.tools["watchEvents"].Mode != 0 {
		t.Errorf("window entry, unary override: %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
	im = expandOldHost(t, h, doc(map[string]any{"getPet": map[string]any{"mode": "unary"}}), sdk.ModeWindow)
	if im.names() != "watchEvents" || !strings.Contains(im.warnings(), "operation GET /pets/{petId} (getPet) skipped: #/paths/~1pets~1{petId}/get: this entry has mode window and the operation is overridden to mode unary") {
		t.Errorf("window entry, old host: %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
}

// TestOpenAPISSESchemaItems: without OpenAPI 3.2's itemSchema, the schema
// of the text/event-stream content gives the item schema when it
// describes events (an object, or an array of them), not the stream's
// text.
func TestOpenAPISSESchemaItems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const doc = `openapi: 3.1.0
info: {title: Ticks, version: 1.0.0}
servers: [{url: "http://ticks.invalid"}]
paths:
  /ticks:
    get:
      operationId: ticks
      responses:
        "200":
          description: One event per tick.
          content:
            text/event-stream:
              schema: {type: array, items: {$ref: "#/components/schemas/Tick"}}
  /raw:
    get:
      operationId: raw
      responses:
        "200":
          description: The stream as text.
          content:
            text/event-stream:
              schema: {type: string}
components:
  schemas:
    Tick:
      type: object
      properties:
        n: {type: integer}
        next: {$ref: "#/components/schemas/Tick"}
`
	if err := os.WriteFile(filepath.Join(dir, "ticks.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	im := expandEntry(t, h, map[string]any{"openapi": map[string]any{"document": filepath.Join(dir, "ticks.yaml")}}, sdk.ModeUnary)
	if im.names() != "raw,ticks" || im.errors() != "" {
		t.Fatalf("tools %s\n%s%s", im.names(), im.errors(), im.warnings())
	}
	if len(im.tools["raw"].ItemSchema) != 0 || im.tools["raw"].Mode != sdk.ModeWindow {
		t.Errorf("raw: %v %s", im.tools["raw"].Mode, im.tools["raw"].ItemSchema)
	}
	// A recursive item: its $defs at its own root.
	goldenOpenAPI(t, "ticks.ticks.item.json", im.tools["ticks"].ItemSchema)
	if err := resolveSchema(t, im.tools["ticks"].ItemSchema).Validate(map[string]any{"n": 1, "next": map[string]any{"n": 2}}); err != nil {
		t.Error(err)
	}
}

// TestOpenAPISkippedOperations: unusable operations are skipped, each
// with a warning naming the JSON pointer of the bad part; the rest load.
func TestOpenAPISkippedOperations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, petEntry("", nil))
	w := im.warnings()
	for _, want := range []string{
		`operation GET /broken/ref skipped: #/paths/~1broken~1ref/get: unusable: #/paths/~1broken~1ref/get/responses/200/content/application~1json/schema/$ref: $ref "#/components/schemas/DoesNotExist" does not resolve`,
		`operation GET /broken/cookie (needsCookie) skipped: #/paths/~1broken~1cookie/get/parameters/0: required cookie parameter "session"`,
		`operation POST /broken/upload (uploadPhoto) skipped: #/paths/~1broken~1upload/post/requestBody/content/application~1xml: request body application/xml: it is sent raw from a string, and its schema is object`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack\n%s\nin\n%s", want, w)
		}
	}
	// Without credentials for bearerAuth, its operations are skipped.
	im = expandOK(t, h, petEntry("", map[string]any{"credentials": map[string]any{"api_key": petKey}}))
	if _, ok := im.tools["deletePet"]; ok {
		t.Error("deletePet served without its credentials")
	}
	if !strings.Contains(im.warnings(), "operation DELETE /pets/{petId} (deletePet) skipped: #/paths/~1pets~1{petId}/delete/security: it needs credentials for security scheme bearerAuth") ||
		!strings.Contains(im.warnings(), "bearerAuth, or basicAuth") {
		t.Errorf("warnings:\n%s", im.warnings())
	}
	// Basic credentials for the alternative scheme.
	im = expandOK(t, h, petEntry("", map[string]any{"credentials": map[string]any{"api_key": petKey,
		"basicAuth": map[string]any{"username": "admin", "password": "pw-secret-1"}}}))
	if !strings.Contains(string(im.tools["get_admin_stats"].Config), `"Authorization":"Basic YWRtaW46cHctc2VjcmV0LTE="`) {
		t.Errorf("basic auth config = %s", im.tools["get_admin_stats"].Config)
	}
}

// TestOpenAPIBrokenDocuments: a document that cannot be used fails the
// load with a clear error naming the JSON pointer of the bad part.
func TestOpenAPIBrokenDocuments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := newHarness(t)
	for _, c := range []struct {
		name, doc, field, want string
	}{
		{"yaml", write("a.yaml", "openapi: 3.0.0\npaths: [\n"), "openapi.document", "the OpenAPI document cannot be used: #: not valid YAML or JSON"},
		{"json", write("b.json", `{"openapi": "3.0.0", "paths": {`), "openapi.document", "#: not valid JSON"},
		{"not openapi", write("c.yaml", "hello: world\n"), "openapi.document", `#: not an OpenAPI document: it has neither "openapi" nor "swagger"`},
		{"version", write("d.yaml", "openapi: 4.0.0\npaths: {}\n"), "openapi.document", "#/openapi: unsupported OpenAPI version"},
		{"swagger 1.2", write("e.yaml", "swagger: '1.2'\npaths: {}\n"), "openapi.document", `#/swagger: unsupported version`},
		{"no paths", write("f.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'}\n"), "openapi.document", "#/paths: the document has no paths"},
		{"paths list", write("g.yaml", "openapi: 3.0.3\npaths: [1]\n"), "openapi.document", "#/paths: must be an object"},
		{"missing component", "testdata/broken.yaml", "openapi.document", "no operation of the document can be served"},
		{"missing file", filepath.Join(dir, "nope.yaml"), "openapi.document", "nope.yaml: no such file or directory"},
		{"malformed operation", write("h.yaml", "openapi: 3.0.3\nservers: [{url: 'http://x.invalid'}]\npaths:\n  /a:\n    get:\n      parameters: 7\n      responses: {'200': {description: ok}}\n"),
			"openapi.document", "no operation of the document can be served"},
		{"relative server", write("i.yaml", "openapi: 3.0.3\nservers: [{url: /v1}]\npaths:\n  /a:\n    get:\n      responses: {'200': {description: ok}}\n"),
			"openapi.base_url", "its server URL is relative and the document was read from a file (#/servers/0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			im := expandEntry(t, h, map[string]any{"openapi": map[string]any{"document": c.doc}}, sdk.ModeUnary)
			found := false
			for _, d := range im.diags {
				found = found || d.Severity == sdk.SeverityError && d.Field == c.field && strings.Contains(d.Message, c.want)
			}
			if !found {
				t.Errorf("no error on %s containing %q:\n%s%s", c.field, c.want, im.errors(), im.warnings())
			}
			if len(im.tools) != 0 {
				t.Errorf("tools despite the error: %s", im.names())
			}
		})
	}
	// The broken component is named by its pointer.
	im := expandEntry(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/broken.yaml"}}, sdk.ModeUnary)
	if !strings.Contains(im.warnings(), `#/components/schemas/Thing/properties/part/$ref: $ref "#/components/schemas/Part" does not resolve`) {
		t.Errorf("warnings:\n%s", im.warnings())
	}
	im = expandEntry(t, h, map[string]any{"openapi": map[string]any{"document": write("j.yaml",
		"openapi: 3.0.3\nservers: [{url: 'http://x.invalid'}]\npaths:\n  /a:\n    get:\n      parameters: 7\n      responses: {'200': {description: ok}}\n")}}, sdk.ModeUnary)
	if !strings.Contains(im.warnings(), "operation GET /a skipped: #/paths/~1a/get: malformed operation") {
		t.Errorf("warnings:\n%s", im.warnings())
	}
}

// TestOpenAPIExternalRefs: $refs to other documents are off unless
// allowed.
func TestOpenAPIExternalRefs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/remote-ref.yaml"}})
	if im.names() != "local" || !strings.Contains(im.warnings(),
		`operation GET /remote skipped: #/paths/~1remote/get: unusable: #/paths/~1remote/get/responses/200/content/application~1json/schema/$ref: $ref "common.yaml#/components/schemas/Thing" points outside the document and external $refs are off (set openapi.allow_external_refs)`) {
		t.Errorf("tools %s\n%s", im.names(), im.warnings())
	}
	im = expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/remote-ref.yaml", "allow_external_refs": true}})
	if im.names() != "local,remote" {
		t.Fatalf("tools %s\n%s", im.names(), im.warnings())
	}
	if s := string(im.tools["remote"].OutputSchema); s != `{"properties":{"name":{"type":"string"}},"type":"object"}` {
		t.Errorf("remote output schema = %s", s)
	}
}

// TestOpenAPIVersions: Swagger 2.0 (converted) and OpenAPI 3.1 documents.
func TestOpenAPIVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/petstore-v2.yaml",
		"credentials": map[string]any{"api_key": petKey}}})
	for _, name := range im.order {
		goldenOpenAPI(t, "v2."+name+".input.json", im.tools[name].InputSchema)
		goldenOpenAPI(t, "v2."+name+".config.json", im.tools[name].Config)
	}
	if im.names() != "addPet,getPetById" {
		t.Errorf("2.0 tools = %s", im.names())
	}
	im = expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/petstore-31.yaml"}})
	for _, name := range im.order {
		goldenOpenAPI(t, "v31."+name+".input.json", im.tools[name].InputSchema)
		goldenOpenAPI(t, "v31."+name+".output.json", im.tools[name].OutputSchema)
		goldenOpenAPI(t, "v31."+name+".config.json", im.tools[name].Config)
	}
	if !strings.Contains(im.warnings(), `pattern "^(?!x)" is left out`) {
		t.Errorf("3.1 warnings:\n%s", im.warnings())
	}
}

// TestOpenAPIEntryValidation: the entry passes ValidateOperation when it is
// well-formed, its own mistakes are named, and calling it says what it is.
func TestOpenAPIEntryValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	diags, err := h.Validate(t.Context(), adaptertest.Call{Config: petEntry("http://h/v1", nil)})
	if err != nil || len(diags) != 0 {
		t.Fatalf("valid entry: %v %v", diags, err)
	}
	diags, _ = h.Validate(t.Context(), adaptertest.Call{Config: map[string]any{"method": "GET", "openapi": map[string]any{
		"documnet": "x", "base_url": "ftp://h", "timeout": "soon", "headers": map[string]any{"Content-Length": "1"},
		"credentials": map[string]any{"k": 5, "b": map[string]any{"username": "a:b", "pin": "1"}}, "tool_prefix": "a b",
		"output_schemas": "yes", "max_response_bytes": -1}}})
	got := map[string]string{}
	for _, d := range diags {
		got[d.Field] = d.Message
	}
	for field, want := range map[string]string{
		"method":                         "inside openapi",
		"openapi.documnet":               `did you mean "document"`,
		"openapi.document":               "required",
		"openapi.base_url":               "http or https",
		"openapi.timeout":                "Go duration",
		"openapi.headers.Content-Length": "set by the adapter",
		"openapi.credentials.k":          "a string (API key or token) or {username, password}",
		"openapi.credentials.b.pin":      "unknown field",
		"openapi.credentials.b.username": "':'",
		"openapi.tool_prefix":            "at most 64",
		"openapi.output_schemas":         "must be a boolean",
		"openapi.max_response_bytes":     "must be at least 0",
	} {
		if !strings.Contains(got[field], want) {
			t.Errorf("%s: %q, want it to contain %q", field, got[field], want)
		}
	}
	_, ue, err := h.Invoke(t.Context(), adaptertest.Call{Config: petEntry("http://h/v1", nil)})
	if err != nil || ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, "expands it at load") {
		t.Errorf("invoking the entry: %v %v", ue, err)
	}
	// A plain rest entry expands to itself, its input schema the arguments
	// its config uses.
	tools, _, err := h.Expand(t.Context(), adaptertest.Call{Config: map[string]any{"method": "GET", "url": "http://h/x"}})
	if err != nil || len(tools) != 1 || tools[0].Name != "" || len(tools[0].Config) != 0 ||
		string(tools[0].InputSchema) != `{"additionalProperties":false,"properties":{},"type":"object"}` {
		t.Errorf("plain entry expands to %v %v", tools, err)
	}
	tools, _, err = h.Expand(t.Context(), adaptertest.Call{Config: map[string]any{"method": "PUT", "url": "http://h/x/{id}/{part}",
		"query": []string{"id", "q"}, "header_args": map[string]string{"X-A": "a"}, "body": "doc",
		"param_styles": map[string]any{"part": map[string]any{"style": "label"}}}})
	want := `{"additionalProperties":false,"properties":{"a":{"description":"Sent as the header X-A."},` +
		`"doc":{"description":"The request body."},"id":{"description":"Fills the path parameter {id}.","type":["string","number","boolean"]},` +
		`"part":{"description":"Fills the path parameter {part}."},"q":{"description":"Sent as the query parameter q."}},` +
		`"required":["id","part"],"type":"object"}`
	if err != nil || len(tools) != 1 || string(tools[0].InputSchema) != want {
		t.Errorf("plain entry with arguments expands to %v %v\nwant %s", tools, err, want)
	}
}

// TestOpenAPIURLDocument: the document is read from a URL; one that
// cannot be fetched is a clear error that quotes no query string.
func TestOpenAPIURLDocument(t *testing.T) {
	t.Parallel()
	ps := newPetServer(t)
	h := newHarness(t)
	im := expandOK(t, h, petEntry(ps.URL+"/v1", map[string]any{"document": ps.URL + "/openapi.yaml"}))
	if len(im.tools) != 9 {
		t.Errorf("tools = %s", im.names())
	}
	callOK(t, h, im.tools["showPetById"], map[string]any{"petId": 1})
	im = expandEntry(t, h, petEntry("", map[string]any{"document": ps.URL + "/missing.yaml?token=secret-token"}), sdk.ModeUnary)
	if e := im.errors(); !strings.Contains(e, "cannot fetch "+ps.URL+"/missing.yaml: it answered 404") || strings.Contains(e, "secret-token") {
		t.Errorf("errors: %s", e)
	}
	// A redirect to another origin is not followed, and says so.
	away := httptest.NewServer(http.RedirectHandler(ps.URL+"/openapi.yaml?token=secret-token", http.StatusFound))
	t.Cleanup(away.Close)
	im = expandEntry(t, h, petEntry("", map[string]any{"document": away.URL + "/openapi.yaml"}), sdk.ModeUnary)
	if e := im.errors(); !strings.Contains(e, "cannot fetch "+away.URL+"/openapi.yaml: "+away.URL+" answered a redirect to another origin ("+ps.URL+")") ||
		strings.Contains(e, "secret-token") {
		t.Errorf("errors: %s", e)
	}
}

// TestOpenAPICredentialsStayOut: credentials reach the upstream and no
// schema, description or diagnostic.
func TestOpenAPICredentialsStayOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandEntry(t, h, petEntry("", map[string]any{"credentials": map[string]any{"api_key": petKey, "bearerAuth": petToken,
		"unknownScheme": "unknown-secret-9"}}), sdk.ModeUnary)
	for _, tool := range im.tools {
		for _, s := range []string{string(tool.InputSchema), string(tool.OutputSchema), tool.Description, tool.Title} {
			for _, secret := range []string{petKey, petToken, "unknown-secret-9"} {
				if strings.Contains(s, secret) {
					t.Errorf("%s shows a credential: %s", tool.Name, s)
				}
			}
		}
		var schema map[string]any
		_ = json.Unmarshal(tool.InputSchema, &schema)
		if _, ok := schema["properties"].(map[string]any)["X-API-Key"]; ok {
			t.Errorf("%s: the API key header is an argument", tool.Name)
		}
	}
	for _, d := range im.diags {
		for _, secret := range []string{petKey, petToken, "unknown-secret-9"} {
			if strings.Contains(d.Message, secret) {
				t.Errorf("diagnostic shows a credential: %s", d.Message)
			}
		}
	}
	if !strings.Contains(im.warnings(), "openapi.credentials.unknownScheme: the document has no security scheme of this name") {
		t.Errorf("warnings:\n%s", im.warnings())
	}
}

// TestOpenAPIConfigSchema: Describe's config schema resolves and describes
// both kinds of entries (a plain rest config, an import) and param_styles.
func TestOpenAPIConfigSchema(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	d, err := h.Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	schema := resolveSchema(t, d.ConfigSchema)
	for _, c := range []struct {
		cfg string
		ok  bool
	}{
		{`{"method":"GET","url":"http://h/x/{id}","param_styles":{"id":{"style":"label","explode":true}}}`, true},
		{`{"openapi":{"document":"pets.yaml","include":{"tags":["pets"]},"credentials":{"k":"v","b":{"username":"u","password":"p"}}}}`, true},
		{`{"openapi":{"document":"pets.yaml"},"method":"GET"}`, false},
		{`{"openapi":{}}`, false},
		{`{"method":"GET","url":"http://h/x","param_styles":{"id":{"style":"fancy"}}}`, false},
	} {
		var v any
		_ = json.Unmarshal([]byte(c.cfg), &v)
		if err := schema.Validate(v); (err == nil) != c.ok {
			t.Errorf("%s: valid = %v, want %v (%v)", c.cfg, err == nil, c.ok, err)
		}
	}
}

// TestOpenAPIReusableParts: $ref'd path items, parameters and request
// bodies; a 2XX answer; servers per operation; HEAD; unsupported TRACE;
// header names that clash by case.
func TestOpenAPIReusableParts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/reuse.yaml"}})
	if got := im.names(); got != "getA,getA_2,head_a_id,head_b_id,postA,postA_2" {
		t.Errorf("tools = %s", got)
	}
	w := im.warnings()
	for _, want := range []string{
		"operation TRACE /c skipped: #/paths/~1c/trace: the rest adapter does not send TRACE requests",
		`operation GET /c skipped: #/paths/~1c/get/parameters/2: header parameter "q" is declared twice (header names are case-insensitive)`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	var cfg map[string]any
	_ = json.Unmarshal(im.tools["getA"].Config, &cfg)
	if cfg["url"] != "http://other.invalid/a/{id}" {
		t.Errorf("getA url = %v (the operation's server)", cfg["url"])
	}
	_ = json.Unmarshal(im.tools["getA_2"].Config, &cfg)
	if cfg["url"] != "http://other.invalid/b/{id}" {
		t.Errorf("getA_2 url = %v", cfg["url"])
	}
	_ = json.Unmarshal(im.tools["postA"].Config, &cfg)
	if cfg["url"] != "http://misc.invalid/api/a/{id}" || cfg["body"] != "body" {
		t.Errorf("postA config = %v", cfg)
	}
	if d := im.tools["getA"].Description; d != "Deprecated. GET /a/{id}" {
		t.Errorf("getA description = %q", d)
	}
	out := im.tools["getA"].OutputSchema
	resolveSchema(t, out)
	if !strings.Contains(string(out), `"$ref":"#/$defs/Cat"`) {
		t.Errorf("getA output schema (2XX, a cycle through allOf) = %s", out)
	}
	if a := im.tools["head_a_id"].Annotations; !isTrue(a.ReadOnly) || len(im.tools["head_a_id"].OutputSchema) != 0 {
		t.Errorf("HEAD tool: %v %s", a, im.tools["head_a_id"].OutputSchema)
	}
}

// TestOpenAPIBodies: form, multipart and raw bodies are published with
// their properties and sent as the document says (encoding per
// property); a body whose schema requires properties is required though
// requestBody.required is false; path parameters may not be empty; the
// Accept header lists the answer's media types when they are not JSON,
// and a binary answer is content with its media type.
func TestOpenAPIBodies(t *testing.T) {
	t.Parallel()
	type seen struct {
		uri, accept, contentType, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.RequestURI, r.Header.Get("Accept"), r.Header.Get("Content-Type"), string(b)}
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte{0x89, 'P', 'N', 'G'})
		case r.Method == http.MethodPut || r.URL.Path == "/notes":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/bodies.yaml", "base_url": "https://api.example.com"}})
	if im.names() != "createCustomer,createFile,createIssue,getBlob,postAny,postNote,putBlob" {
		t.Fatalf("tools = %s\n%s", im.names(), im.warnings())
	}
	for _, name := range []string{"createCustomer", "createFile", "createIssue", "getBlob", "postAny", "postNote", "putBlob"} {
		goldenOpenAPI(t, "bodies."+name+".input.json", im.tools[name].InputSchema)
		goldenOpenAPI(t, "bodies."+name+".config.json", im.tools[name].Config)
	}
	im = expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/bodies.yaml", "base_url": srv.URL}})

	callOK(t, h, im.tools["createCustomer"], map[string]any{"email": "a@b.c", "metadata": map[string]any{"order": "1"}, "expand": []string{"x", "y"}})
	s := <-got
	if want := "email=a%40b.c&expand%5B%5D=x&expand%5B%5D=y&metadata%5Border%5D=1"; s.body != want || s.contentType != "application/x-www-form-urlencoded" {
		t.Errorf("form body %q (%s), want %q", s.body, s.contentType, want)
	}

	callOK(t, h, im.tools["createFile"], map[string]any{"file": "aGk=", "purpose": "dispute_evidence", "file_link_data": map[string]any{"create": true}})
	s = <-got
	for _, want := range []string{`name="file"; filename="file"`, "\r\n\r\nhi\r\n", `name="file_link_data[create]"`, "\r\n\r\ntrue\r\n", "dispute_evidence"} {
		if !strings.Contains(s.body, want) {
			t.Errorf("multipart body lacks %q:\n%s", want, s.body)
		}
	}
	if !strings.HasPrefix(s.contentType, "multipart/form-data; boundary=") {
		t.Errorf("multipart Content-Type = %q", s.contentType)
	}

	callOK(t, h, im.tools["putBlob"], map[string]any{"name": "a", "body": "aGk="})
	if s = <-got; s.body != "hi" || s.contentType != "application/octet-stream" {
		t.Errorf("raw body %+v", s)
	}
	callOK(t, h, im.tools["postAny"], map[string]any{"body": "aGk="})
	if s = <-got; s.body != "hi" || s.contentType != "application/octet-stream" {
		t.Errorf("*/* body %+v", s)
	}
	callOK(t, h, im.tools["postNote"], map[string]any{"body": "a note"})
	if s = <-got; s.body != "a note" || s.contentType != "text/plain" {
		t.Errorf("text body %+v", s)
	}

	res, ue := callTool(t, h, im.tools["getBlob"], map[string]any{"name": "a"})
	if ue != nil {
		t.Fatal(ue)
	}
	if s = <-got; s.accept != "application/octet-stream, image/png" {
		t.Errorf("Accept = %q", s.accept)
	}
	if want := `[{"data":"iVBORw==","mimeType":"image/png","type":"image"}]`; string(res.Content) != want {
		t.Errorf("content = %s, want %s", res.Content, want)
	}

	// title is required although the body is optional; the path's
	// arguments cannot be empty.
	in := resolveSchema(t, im.tools["createIssue"].InputSchema)
	if err := in.Validate(map[string]any{"owner": "o", "repo": "r"}); err == nil {
		t.Error("createIssue accepts a call without title")
	}
	if err := in.Validate(map[string]any{"owner": "", "repo": "r", "title": "t"}); err == nil {
		t.Error("createIssue accepts an empty owner")
	}
}
