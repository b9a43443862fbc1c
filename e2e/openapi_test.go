package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oaPetDoc is the OpenAPI document of the pet store upstream below: the
// gateway imports it as tools.
const oaPetDoc = `openapi: 3.0.3
info: {title: Pet store, version: 1.0.0}
servers: [{url: "http://petstore.invalid"}]
security: [{api_key: []}]
paths:
  /pets:
    get:
      operationId: listPets
      summary: List pets
      parameters:
        - {name: limit, in: query, schema: {type: integer, minimum: 1}}
        - {name: tags, in: query, explode: false, schema: {type: array, items: {type: string}}}
        - {name: X-Request-ID, in: header, schema: {type: string}}
      responses:
        "200":
          description: The pets.
          content:
            application/json:
              schema: {type: array, items: {$ref: "#/components/schemas/Pet"}}
    post:
      operationId: createPet
      summary: Create a pet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Pet"}
      responses:
        "201":
          description: The new pet.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: integer, minimum: 1}}
    get:
      operationId: getPet
      summary: One pet
      responses:
        "200":
          description: The pet.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
    delete:
      operationId: deletePet
      summary: Delete a pet
      responses:
        "204": {description: Deleted.}
  /whoami:
    get:
      operationId: whoami
      summary: Echo the caller's key (a leaky upstream)
      responses:
        "200":
          description: The key the upstream got.
          content:
            application/json:
              schema: {type: object, properties: {key: {type: string}}}
  /broken:
    get:
      operationId: broken
      responses:
        "200":
          description: Refers to nothing.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Missing"}
components:
  securitySchemes:
    api_key: {type: apiKey, in: header, name: X-API-Key}
  schemas:
    Pet:
      type: object
      required: [id, name]
      properties:
        id: {type: integer, readOnly: true}
        name: {type: string}
        tag: {type: string, nullable: true}
`

const oaPetKey = "e2e-pet-key-31337"

// oaPetUpstream serves oaPetDoc's API; every call needs the API key.
func oaPetUpstream(t testing.TB) *httptest.Server {
	var mu sync.Mutex
	pets := map[int]map[string]any{1: {"id": 1, "name": "Rex", "tag": "dog"}, 2: {"id": 2, "name": "Tom", "tag": nil}}
	next := 3
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pets", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		tags := strings.Split(r.URL.Query().Get("tags"), ",")
		mu.Lock()
		out := []map[string]any{}
		for id := 1; id < next; id++ {
			if p, ok := pets[id]; ok && (tags[0] == "" || p["tag"] != nil && strings.Contains(","+strings.Join(tags, ",")+",", ","+p["tag"].(string)+",")) {
				out = append(out, p)
			}
		}
		mu.Unlock()
		if limit > 0 && limit < len(out) {
			out = out[:limit]
		}
		w.Header().Set("X-Seen-Request-ID", r.Header.Get("X-Request-ID"))
		reply(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /pets", func(w http.ResponseWriter, r *http.Request) {
		var p map[string]any
		if json.NewDecoder(r.Body).Decode(&p) != nil || p["name"] == nil || p["id"] != nil {
			reply(w, http.StatusBadRequest, map[string]string{"message": "a pet has a name and no id"})
			return
		}
		mu.Lock()
		p["id"] = next
		pets[next] = p
		next++
		mu.Unlock()
		reply(w, http.StatusCreated, p)
	})
	mux.HandleFunc("GET /pets/{petId}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.PathValue("petId"))
		mu.Lock()
		p, ok := pets[id]
		mu.Unlock()
		if !ok {
			reply(w, http.StatusNotFound, map[string]string{"message": "no pet " + r.PathValue("petId")})
			return
		}
		reply(w, http.StatusOK, p)
	})
	mux.HandleFunc("DELETE /pets/{petId}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.PathValue("petId"))
		mu.Lock()
		delete(pets, id)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]string{"key": r.Header.Get("X-API-Key")})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != oaPetKey {
			reply(w, http.StatusUnauthorized, map[string]string{"message": "no key"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenAPIImport: an operations entry names the upstream's OpenAPI
// document; the gateway serves one MCP tool per operation, with schemas
// and hints from the document, credentials from a placeholder that never
// shows, and the broken operation skipped with a warning.
func TestOpenAPIImport(t *testing.T) {
	t.Parallel()
	up := oaPetUpstream(t)
	docDir := t.TempDir()
	writeFile(t, filepath.Join(docDir, "petstore.yaml"), oaPetDoc)
	ops := fmt.Sprintf(`version: 1
operations:
  - name: petstore
    adapter: rest
    timeout: 5s
    config:
      openapi:
        document: %s
        base_url: %s
        credentials: {api_key: "{env.E2E_PET_KEY}"}
        overrides:
          getPet: {name: get_pet, description: Fetch one pet by id.}
`, filepath.Join(docDir, "petstore.yaml"), up.URL)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"E2E_PET_KEY=" + oaPetKey}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "createPet,deletePet,get_pet,listPets,whoami" {
		t.Fatalf("tools = %v", names)
	}
	if a := tools["listPets"].Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint {
		t.Errorf("listPets annotations = %+v", a)
	}
	if a := tools["deletePet"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("deletePet annotations = %+v", a)
	}
	if tools["get_pet"].Description != "Fetch one pet by id." || tools["createPet"].Title != "Create a pet" {
		t.Errorf("descriptions: %q %q", tools["get_pet"].Description, tools["createPet"].Title)
	}
	in, _ := json.Marshal(tools["createPet"].InputSchema)
	if !strings.Contains(string(in), `"tag":{"type":["string","null"]}`) || strings.Contains(string(in), `"id"`) {
		t.Errorf("createPet input schema = %s", in)
	}
	for _, tool := range list.Tools {
		b, _ := json.Marshal(tool)
		if strings.Contains(string(b), oaPetKey) || strings.Contains(string(b), "X-API-Key") {
			t.Errorf("tool %s shows the credential: %s", tool.Name, b)
		}
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	res := call("listPets", map[string]any{"limit": 5, "tags": []string{"dog", "cat"}, "X-Request-ID": "r-1"})
	got, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(got) != `{"result":[{"id":1,"name":"Rex","tag":"dog"}]}` {
		t.Errorf("listPets = %s %s", got, textOf(res))
	}
	res = call("createPet", map[string]any{"name": "Kitty", "tag": nil})
	got, _ = json.Marshal(res.StructuredContent)
	if res.IsError || string(got) != `{"id":3,"name":"Kitty","tag":null}` {
		t.Errorf("createPet = %s %s", got, textOf(res))
	}
	res = call("get_pet", map[string]any{"petId": 3})
	if got, _ = json.Marshal(res.StructuredContent); res.IsError || !strings.Contains(string(got), `"name":"Kitty"`) {
		t.Errorf("get_pet = %s %s", got, textOf(res))
	}
	res = call("get_pet", map[string]any{"petId": 0})
	if !res.IsError || !strings.Contains(textOf(res), "petId") {
		t.Errorf("get_pet 0 = %s", textOf(res))
	}
	res = call("get_pet", map[string]any{"petId": 9})
	if !res.IsError || !strings.Contains(textOf(res), "404") || !strings.Contains(textOf(res), "no pet 9") {
		t.Errorf("get_pet 9 = %s", textOf(res))
	}
	if res = call("deletePet", map[string]any{"petId": 3}); res.IsError {
		t.Errorf("deletePet = %s", textOf(res))
	}
	// An upstream that echoes the credential: the gateway redacts it.
	res = call("whoami", nil)
	if got, _ = json.Marshal(res.StructuredContent); res.IsError || strings.Contains(string(got)+textOf(res), oaPetKey) ||
		!strings.Contains(string(got), "[REDACTED]") {
		t.Errorf("whoami = %s %s", got, textOf(res))
	}

	log := g.log.String()
	if !strings.Contains(log, "operation GET /broken skipped") || !strings.Contains(log, `#/components/schemas/Missing`) {
		t.Errorf("the gateway log does not report the skipped operation:\n%s", log)
	}
	if strings.Contains(log, oaPetKey) {
		t.Error("the gateway log shows the credential")
	}
}

// TestOpenAPIBrokenDocument: a document that cannot be used fails `crank
// validate` (the adapter reads it) with the file, the entry, the field and
// the JSON pointer of the bad part; `crank run` serves the other entries
// and retries it (TestOneBadEntry).
func TestOpenAPIBrokenDocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "api.yaml"), "openapi: 4.0.0\npaths: {}\n")
	writeFile(t, filepath.Join(dir, "ops.yaml"), "operations:\n  - {name: api, adapter: rest, config: {openapi: {document: api.yaml}}}\n")
	out := loadFailure(t, dir, "validate")
	want := `ops.yaml:2: operation \"api\": /config/openapi/document: the OpenAPI document cannot be used: #/openapi: unsupported OpenAPI version`
	if !strings.Contains(out, want) {
		t.Fatalf("want %s in:\n%s", want, out)
	}
}

// TestOpenAPIDemo: the demo upstream of `make run` serves its own OpenAPI
// document, and demo/openapi.yaml imports it (from the same file) as
// working tools, the log stream as a window tool of its own: its
// override's limits, aggregation and redaction, its items described by
// the stream's item schema, and results that match it.
func TestOpenAPIDemo(t *testing.T) {
	t.Parallel()
	addr := startDemoREST(t)
	file, err := os.ReadFile(filepath.Join(repoRoot, "demo", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(served, file) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json does not serve demo/openapi.json (%s)", resp.Header.Get("Content-Type"))
	}

	demoOps, err := os.ReadFile(filepath.Join(repoRoot, "demo", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops := strings.ReplaceAll(string(demoOps), "127.0.0.1:8081", addr)
	ops = strings.ReplaceAll(ops, "document: openapi.json", "document: "+filepath.Join(repoRoot, "demo", "openapi.json"))
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_DEMO_TOKEN=demo-token-e2e"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var watch *mcp.Tool
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if tool.Name == "api_watch_logs" {
			watch = tool
		}
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "api_create_user,api_delete_user,api_get_user,api_health,api_list_users,api_slow_call,api_watch_logs" {
		t.Fatalf("tools = %v", names)
	}
	out, _ := json.Marshal(watch.OutputSchema)
	meta, _ := json.Marshal(watch.Meta)
	if !strings.Contains(string(out), `"level":{"enum":["info","warn","error"],"type":"string"}`) ||
		!strings.Contains(string(out), `"email":{"anyOf":[{"type":"string"},{"const":"[REDACTED]"}]}`) ||
		!strings.Contains(string(meta), `"aggregation_mode":"summary_plus_samples"`) || !strings.Contains(string(meta), `"max_items":500`) ||
		!strings.Contains(watch.Description, "three seconds") || watch.Annotations == nil || !watch.Annotations.ReadOnlyHint {
		t.Errorf("api_watch_logs: %s\noutput schema %s\nmeta %s", watch.Description, out, meta)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "api_get_user", Arguments: map[string]any{"id": 2}})
	if err != nil || res.IsError {
		t.Fatalf("api_get_user: %v %s", err, textOf(res))
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"email":"alan@example.com","id":2,"name":"Alan Turing"}` {
		t.Errorf("api_get_user = %s", got)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "api_list_users", Arguments: map[string]any{"limit": 1}})
	if got, _ := json.Marshal(res.StructuredContent); res.IsError || !strings.Contains(string(got), `"count":1`) {
		t.Errorf("api_list_users = %s %s", got, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "api_watch_logs", Arguments: map[string]any{"service": "auth"}})
	if err != nil || res.IsError {
		t.Fatalf("api_watch_logs: %v %s", err, textOf(res))
	}
	var w struct {
		Items   []map[string]any `json:"items"`
		Summary struct {
			Count int `json:"count"`
		} `json:"summary"`
		WindowComplete bool   `json:"window_complete"`
		Cursor         string `json:"cursor"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &w); err != nil || w.Summary.Count == 0 || len(w.Items) == 0 || w.Cursor == "" {
		t.Fatalf("api_watch_logs = %s", b)
	}
	for _, it := range w.Items {
		if it["service"] != "auth" || strings.Contains(fmt.Sprint(it["user"]), "@example.com") {
			t.Errorf("item %v: not filtered or not redacted", it)
		}
	}
	// The window matches the output schema the tool lists.
	var schema jsonschema.Schema
	if err := json.Unmarshal(out, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	if err := resolved.Validate(v); err != nil {
		t.Errorf("api_watch_logs' result does not match its output schema: %v\n%s", err, b)
	}

	// The official TypeScript SDK checks a result against the tool's
	// output schema (with formats): it takes the window.
	if !tsClientAvailable(t) {
		return
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "client.mjs"), g.MCPURL,
		`[{"op":"listTools"},{"op":"callTool","name":"api_watch_logs","arguments":{"service":"search"}}]`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	ts, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				StructuredContent struct {
					Items []map[string]any `json:"items"`
				}
				IsError bool
			}
		}
	}
	if err := json.Unmarshal(ts, &run); err != nil || len(run.Steps) != 2 || !run.Steps[1].OK || run.Steps[1].Result.IsError ||
		len(run.Steps[1].Result.StructuredContent.Items) == 0 {
		t.Errorf("the TypeScript SDK refused api_watch_logs' window: %v\n%s", err, ts)
	}
}

// startDemoREST runs crank with only the demo REST site (crank_demo and
// crank_demo_streams, as the root Caddyfile serves them) on a free port,
// and returns its address.
func startDemoREST(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	writeFile(t, filepath.Join(dir, "Caddyfile"), fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
}

http://%s {
	bind 127.0.0.1
	crank_demo_streams
	crank_demo
}
`, freePort(t), addr))
	log := &syncBuffer{}
	cmd := exec.Command(crankBin, "run", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("demo REST log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the demo REST API exited:\n%s", log.String())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo REST API did not come up:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
