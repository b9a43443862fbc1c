package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store/storetest"
)

// contractDoc is the OpenAPI document of contractUpstream: pages of
// records under data (polled with a cursor), a stream of events whose
// data wraps the record (as a GraphQL subscription's does), and one
// record by id. Its schemas are strict — no members they do not name,
// formats — as vendors' documents are.
const contractDoc = `openapi: 3.2.0
info: {title: Records, version: 1.0.0}
paths:
  /pages:
    get:
      operationId: listPages
      summary: A page of records
      parameters:
        - {name: since, in: query, schema: {type: string}}
      responses:
        "200":
          description: One page.
          content:
            application/json:
              schema:
                type: object
                required: [data]
                properties:
                  data: {type: array, items: {$ref: "#/components/schemas/Record"}}
                  next: {type: string}
                  done: {type: boolean}
  /events:
    get:
      operationId: watchRecords
      summary: Watch records
      responses:
        "200":
          description: One event per record.
          content:
            text/event-stream:
              itemSchema:
                type: object
                properties:
                  data:
                    type: string
                    contentMediaType: application/json
                    contentSchema:
                      type: object
                      required: [record]
                      additionalProperties: false
                      properties:
                        record: {$ref: "#/components/schemas/Record"}
  /records/{id}:
    get:
      operationId: getRecord
      summary: Get one record
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses:
        "200":
          description: The record.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Record"}
components:
  schemas:
    Record:
      type: object
      required: [id, name]
      additionalProperties: false
      properties:
        id: {type: integer}
        name: {type: string, maxLength: 200}
        kind: {type: string, enum: [a, b]}
        at: {type: string, format: date-time}
        secret: {type: string}
`

// contractUpstream serves contractDoc: records whose names are longer
// than the windows' max_field_length, members the document does not
// name, a date that is not one; record 2 lacks its name (the document's
// promise broken).
func contractUpstream(t *testing.T) *httptest.Server {
	record := func(i int) string {
		return fmt.Sprintf(`{"id":%d,"name":"record number %d with a long name","kind":%q,"at":"yesterday","secret":"s%d","extra":true}`,
			i, i, []string{"a", "b"}[i%2], i)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		page := 0
		fmt.Sscan(r.URL.Query().Get("since"), &page)
		fmt.Fprintf(w, `{"data":[%s,%s],"next":"%d","done":%t}`, record(2*page+1), record(2*page+3), page+1, page >= 2)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") != "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		f := startSSE(w)
		for i := 1; i <= 4; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"record\":%s}\n\n", i, record(2*i+1))
		}
		f.Flush()
	})
	mux.HandleFunc("GET /records/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") == "2" {
			fmt.Fprint(w, `{"id":2,"kind":"c"}`)
			return
		}
		fmt.Fprint(w, record(1))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// contractOps are the tools of every mode over contractDoc.
const contractOps = `operations:
  - name: rec
    adapter: rest
    timeout: 5s
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        tool_prefix: rec_
        overrides:
          listPages:
            mode: window
            transport_behavior: request_response
            limits: {window_duration_ms: 5000, poll_interval_ms: 10, max_items: 5}
            aggregation: {aggregation_mode: raw_items, items_path: "$.data[*]", cursor_path: $.next, done_path: $.done}
            safety: {redacted_paths: ["$.data[*].secret"], max_field_length: 16}
          watchRecords:
            mode: window
            limits: {window_duration_ms: 5000, max_items: 3}
            aggregation: {aggregation_mode: summary_plus_samples, items_path: $.record, group_by: $.kind, sample_size: 2}
  - name: rec_latest
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10}
    aggregation: {aggregation_mode: latest_state, items_path: "$.data[*]", key_path: $.kind, cursor_path: $.next, done_path: $.done}
    config:
      openapi: {document: DOC, base_url: UPSTREAM, include: {operation_ids: [listPages]}, overrides: {listPages: {name: rec_latest}}}
  - name: rec_strict
    adapter: rest
    strict_output_schema: true
    config:
      openapi: {document: DOC, base_url: UPSTREAM, include: {operation_ids: [getRecord]}, overrides: {getRecord: {name: rec_strict}}}
  - name: follow
    adapter: rest
    mode: session
    scope: workspace
    limits: {max_items: 10}
    aggregation: {items_path: $.record}
    safety: {max_field_length: 16}
    config:
      openapi: {document: DOC, base_url: UPSTREAM, include: {operation_ids: [watchRecords]}, overrides: {watchRecords: {name: follow}}}
  - name: collect
    adapter: rest
    mode: async_job
    scope: workspace
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10, max_items: 3}
    aggregation: {items_path: "$.data[*]", cursor_path: $.next, done_path: $.done}
    config:
      openapi: {document: DOC, base_url: UPSTREAM, include: {operation_ids: [listPages]}, overrides: {listPages: {name: collect}}}
  - name: fetch
    adapter: rest
    mode: async_job
    scope: workspace
    config:
      openapi: {document: DOC, base_url: UPSTREAM, include: {operation_ids: [getRecord]}, overrides: {getRecord: {name: fetch}}}
`

// newContractHost serves contractOps with its tools' rec_ prefix
// replaced by prefix (tests running side by side count the mismatches
// of tools of their own).
func newContractHost(t *testing.T, prefix string) *host.Host {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := contractUpstream(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "records.yaml"), []byte(contractDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "adapters:\n  rest: {command: " + exe + ", env: {CRANK_HOST_TEST_ADAPTER: rest}}\n" +
		strings.NewReplacer("DOC", filepath.Join(dir, "records.yaml"), "UPSTREAM", up.URL, "rec_", prefix).Replace(contractOps)
	cat, err := opsfile.Parse(filepath.Join(dir, "ops.yaml"), []byte(yaml), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, st := storetest.Embedded(t)
	var sup *host.Supervisor
	t.Cleanup(func() {
		if sup != nil {
			sup.Close()
		}
	})
	h, err := host.New(context.Background(), host.Options{File: cat, Store: st, Adapter: func(name string) (*host.Supervisor, error) {
		if sup == nil {
			spec, err := host.AdapterSpecOf(cat, name, nil)
			if err != nil {
				return nil, err
			}
			sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
		}
		return sup, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.OwnRunners(h)(context.Background()) })
	return h
}

// TestOutputSchemasMatchEveryMode calls a tool of every mode over an
// upstream whose answers go through items_path, redaction, truncation,
// sampling of groups, latest_state, a session's buffer and a job's
// record, and checks each result against the output schema its tool
// publishes, compiled apart from the host's own check: the schemas are
// derived from the pipeline, so none of them is refused (the host's
// check counts nothing either).
func TestOutputSchemasMatchEveryMode(t *testing.T) {
	t.Parallel()
	h := newContractHost(t, "rec_")
	published := map[string]*jsonschema.Resolved{}
	for _, op := range h.Operations() {
		if len(op.OutputSchema) == 0 {
			t.Errorf("%s publishes no output schema", op.Name)
			continue
		}
		published[op.Name] = resolveOutput(t, op.OutputSchema)
	}
	before := telemetry.ToolCalls()
	check := func(tool string, res *host.Result) map[string]any {
		t.Helper()
		if len(res.Structured) == 0 {
			t.Fatalf("%s: no structured content: %s", tool, res.Text)
		}
		var v any
		_ = json.Unmarshal(res.Structured, &v)
		if err := published[tool].Validate(v); err != nil {
			t.Errorf("%s: the result does not match the published output schema: %v\n%s", tool, err, res.Structured)
		}
		m, _ := v.(map[string]any)
		return m
	}
	call := func(tool, args string) map[string]any {
		t.Helper()
		res, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool(tool), Arguments: json.RawMessage(args), WorkspaceID: "ws", AgentID: "a1"})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tool, err, res.Text)
		}
		return check(tool, res)
	}

	// A window of polls: items under $.data[*], their secret redacted,
	// their names cut, members the document does not name, a date that
	// is not one.
	w := call("rec_listPages", `{}`)
	items := w["items"].([]any)
	first := items[0].(map[string]any)
	if len(items) != 5 || first["secret"] != "[REDACTED]" || !strings.Contains(first["name"].(string), "[truncated") || first["extra"] != true {
		t.Errorf("rec_listPages items: %v", items)
	}
	if next := call("rec_listPages", `{"cursor":`+jsonString(w["cursor"].(string))+`}`); len(next["items"].([]any)) == 0 {
		t.Errorf("the next window: %v", next)
	}
	// A stream window: the items unwrapped by items_path, samples per kind.
	if w := call("rec_watchRecords", `{}`); len(w["items"].([]any)) == 0 || w["items"].([]any)[0].(map[string]any)["id"] == nil {
		t.Errorf("rec_watchRecords: %v", w)
	}
	if w := call("rec_latest", `{}`); len(w["summary"].(map[string]any)["state"].(map[string]any)) == 0 {
		t.Errorf("rec_latest: %v", w)
	}
	call("rec_getRecord", `{"id":1}`)

	// A session: its polled items are the window's items.
	id := call("follow_start", `{}`)["session_id"].(string)
	var polled []any
	cursor := ""
	deadline := time.Now().Add(20 * time.Second)
	for {
		args := `{"session_id":"` + id + `"}`
		if cursor != "" {
			args = `{"session_id":"` + id + `","cursor":` + jsonString(cursor) + `}`
		}
		p := call("follow_poll", args)
		polled = append(polled, p["items"].([]any)...)
		cursor, _ = p["cursor"].(string)
		if p["status"] == "completed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(polled) != 4 || polled[0].(map[string]any)["id"] == nil {
		t.Errorf("follow_poll items: %v", polled)
	}
	call("follow_stop", `{"session_id":"`+id+`"}`)

	// Jobs: a window's result and a unary result, as their result tools
	// hand them out.
	for _, job := range []string{"collect", "fetch"} {
		args := `{}`
		if job == "fetch" {
			args = `{"id":1}`
		}
		id := call(job+"_start", args)["job_id"].(string)
		call(job+"_status", `{"job_id":"`+id+`"}`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := call(job+"_result", `{"job_id":"`+id+`"}`)
			if r["ready"] == true {
				if r["result"] == nil {
					t.Errorf("%s_result: %v", job, r)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not ready: %v", job, r)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	after := telemetry.ToolCalls()
	for name := range published {
		if n := after[name].OutputMismatches - before[name].OutputMismatches; n != 0 {
			t.Errorf("%s: %d results refused by the host's check", name, n)
		}
	}
}

// TestOutputMismatchDeliveredAsText: an answer that breaks the document's
// promise (record 2 has no name, its kind is not in the enum) reaches the
// caller as text behind a note naming the first mismatch (the innermost), isError set
// and no structuredContent, so that no client refuses it; it is counted.
// A lenient schema (the default) admits what vendors drift on — members
// the document does not name, a format — and a strict entry publishes
// the document's word.
func TestOutputMismatchDeliveredAsText(t *testing.T) {
	t.Parallel()
	h := newContractHost(t, "bad_")
	before := telemetry.ToolCalls()["bad_getRecord"].OutputMismatches
	res := call(t, h, "bad_getRecord", `{"id":2}`)
	if !res.IsError || len(res.Structured) != 0 || len(res.Content) != 0 ||
		!strings.Contains(res.Text, `does not match the output schema tool "bad_getRecord" publishes (at /kind: must be one of "a", "b")`) ||
		!strings.Contains(res.Text, `{"id":2,"kind":"c"}`) {
		t.Errorf("mismatch: %+v", res)
	}
	if n := telemetry.ToolCalls()["bad_getRecord"].OutputMismatches - before; n != 1 {
		t.Errorf("counted %d mismatches, want 1", n)
	}
	if res := call(t, h, "bad_getRecord", `{"id":1}`); res.IsError {
		t.Errorf("lenient: %s", res.Text)
	}
	if res := call(t, h, "bad_strict", `{"id":1}`); !res.IsError || !strings.Contains(res.Text, "(at /at: must be a valid date-time)") {
		t.Errorf("strict: %+v", res)
	}
	var strict, lenient map[string]any
	for _, op := range h.Operations() {
		switch op.Name {
		case "bad_strict":
			_ = json.Unmarshal(op.OutputSchema, &strict)
		case "bad_getRecord":
			_ = json.Unmarshal(op.OutputSchema, &lenient)
		}
	}
	if strict["additionalProperties"] != false || lenient["additionalProperties"] != nil ||
		!strings.Contains(fmt.Sprint(lenient["properties"]), "Format: date-time.") || strings.Contains(fmt.Sprint(lenient), "format:") {
		t.Errorf("strict %v\nlenient %v", strict, lenient)
	}
}

// TestMismatchPointer: the note names the value that fails by JSON
// pointer, through members, $defs and array elements.
func TestMismatchPointer(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/R"}}},` +
		`"$defs":{"R":{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}}}}`
	for doc, want := range map[string]string{
		`{"items":[{"id":1},{"id":2},{"id":"x"}]}`:     `/items/2/id: must be an integer, got a string`,
		`{"items":[{"id":1},{}]}`:                      `/items/1: missing required field id`,
		`{"items":[{"id":1,"tags":["a",3]}]}`:          `/items/0/tags/1: must be a string, got an integer`,
		`{"items":[{"id":1,"tags":["a"]},{"id":2.5}]}`: `/items/1/id: must be an integer, got a number`,
		`{"items":{"id":1}}`:                           `/items: must be a list, got an object`,
	} {
		if got := host.MismatchAt(json.RawMessage(schema), doc); got != want {
			t.Errorf("%s:\n got %s\nwant %s", doc, got, want)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
