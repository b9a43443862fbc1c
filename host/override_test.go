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
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/store/storetest"
)

// overrideDoc is an OpenAPI 3.2 document with a stream whose events'
// data has a declared schema, and a JSON operation.
const overrideDoc = `openapi: 3.2.0
info: {title: Events, version: 1.0.0}
paths:
  /events:
    get:
      operationId: watchEvents
      summary: Watch events
      parameters:
        - {name: level, in: query, schema: {type: string}}
      responses:
        "200":
          description: One event per change.
          content:
            text/event-stream:
              itemSchema:
                type: object
                properties:
                  data:
                    type: string
                    contentMediaType: application/json
                    contentSchema: {$ref: "#/components/schemas/Event"}
  /pets/{id}:
    get:
      operationId: getPet
      summary: One pet
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses:
        "200":
          description: The pet.
          content:
            application/json:
              schema: {type: object, properties: {id: {type: integer}}}
components:
  schemas:
    Event:
      type: object
      required: [n, level, user]
      additionalProperties: false
      properties:
        n: {type: integer}
        level: {type: string, enum: [info, warn]}
        user:
          type: object
          properties:
            id: {type: integer}
            email: {type: string, format: email}
`

// overrideUpstream serves overrideDoc's API: five events, then the end of
// the stream (a reconnection gets 204: nothing more).
func overrideUpstream(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") != "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		f := startSSE(w)
		for i := 1; i <= 5; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"level\":%q,\"user\":{\"id\":%d,\"email\":\"u%d@example.com\"}}\n\n",
				i, i, []string{"info", "warn"}[i%2], 7, i)
		}
		f.Flush()
	})
	mux.HandleFunc("GET /pets/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s}`, r.PathValue("id"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newOverrideHost(t *testing.T, ops string, opts ...func(*host.Options)) (*host.Host, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := overrideUpstream(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "events.yaml"), []byte(overrideDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "adapters:\n  rest: {command: " + exe + ", env: {CRANK_HOST_TEST_ADAPTER: rest}}\n" +
		strings.NewReplacer("DOC", filepath.Join(dir, "events.yaml"), "UPSTREAM", up.URL).Replace(ops)
	cat, err := opsfile.Parse(filepath.Join(dir, "ops.yaml"), []byte(yaml), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sup *host.Supervisor
	t.Cleanup(func() {
		if sup != nil {
			sup.Close()
		}
	})
	o := host.Options{File: cat, Adapter: func(name string) (*host.Supervisor, error) {
		if sup == nil {
			spec, err := host.AdapterSpecOf(cat, name, nil)
			if err != nil {
				return nil, err
			}
			sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
		}
		return sup, nil
	}}
	for _, f := range opts {
		f(&o)
	}
	return host.New(context.Background(), o)
}

// An expanded tool with a mode override becomes a window tool with the
// override's limits, aggregation and safety, beside the entry's unary
// tools; its output schema describes its items with the stream's item
// schema, and a window's result matches it.
func TestExpandedToolOverrides(t *testing.T) {
	t.Parallel()
	h, err := newOverrideHost(t, `operations:
  # A unary entry: the stream becomes a window tool of its own.
  - name: api
    adapter: rest
    timeout: 2s
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        overrides:
          watchEvents:
            name: watch
            mode: window
            limits: {max_items: 3, window_duration_ms: 20000}
            aggregation: {aggregation_mode: raw_items}
            safety: {redacted_paths: [$.user.email]}
  # The stream alone, without an override: the entry itself, with the
  # default window.
  - name: watch_default
    adapter: rest
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        include: {operation_ids: [watchEvents]}
        overrides: {watchEvents: {name: watch_default}}
  # A window entry: its tools take its window config; a redacted path that
  # may hit any value leaves items undescribed; getPet is unary.
  - name: win
    adapter: rest
    mode: window
    limits: {max_items: 2}
    aggregation: {aggregation_mode: summary_plus_samples, sample_size: 2}
    safety: {redacted_paths: ["$.user[*]"]}
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        tool_prefix: win_
        overrides: {getPet: {mode: unary}}
`)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]*opsfile.Operation{}
	var names []string
	for _, op := range h.Operations() {
		ops[op.Name] = op
		names = append(names, op.Name)
	}
	if strings.Join(names, ",") != "watch,getPet,watch_default,win_watchEvents,win_getPet" {
		t.Fatalf("tools = %v", names)
	}

	w := ops["watch"]
	if w.Mode != opsfile.ModeWindow || w.Execution == nil || w.Execution.TransportBehavior != window.ServerStream ||
		w.Execution.Limits.MaxItems != 3 || w.Execution.Limits.WindowDurationMS != 20000 ||
		w.Execution.Limits.MaxBytes != 1<<20 || w.Execution.Aggregation.Mode != window.AggRawItems ||
		w.Timeout != 25*time.Second {
		t.Errorf("watch: mode %s timeout %s execution %+v", w.Mode, w.Timeout, w.Execution)
	}
	if p := ops["getPet"]; p.Mode != opsfile.ModeUnary || p.Execution != nil || p.Timeout != 2*time.Second || len(p.OutputSchema) == 0 {
		t.Errorf("getPet: mode %s timeout %s output %s", p.Mode, p.Timeout, p.OutputSchema)
	}
	if d := ops["watch_default"]; d.Mode != opsfile.ModeWindow || d.Execution == nil || d.Execution.Limits.MaxItems != 1000 {
		t.Errorf("watch_default: mode %s execution %+v", d.Mode, d.Execution)
	}
	if x := ops["win_watchEvents"]; x.Execution == nil || x.Execution.Limits.MaxItems != 2 || x.Execution.Aggregation.SampleSize != 2 {
		t.Errorf("win_watchEvents: execution %+v", x.Execution)
	}
	if g := ops["win_getPet"]; g.Mode != opsfile.ModeUnary || g.Execution != nil || g.Timeout != 10*time.Second+5*time.Second {
		t.Errorf("win_getPet: mode %s timeout %s", g.Mode, g.Timeout)
	}
	if res := call(t, h, "win_getPet", `{"id": 4}`); res.IsError || string(res.Structured) != `{"id":4}` {
		t.Errorf("win_getPet: %+v", res)
	}

	// The item schema: under items.items, widened to what the safety
	// layer makes of items (the redacted member may be the redaction mark,
	// a string cut by max_field_length that has a format ends in the
	// truncation mark); none where items are not the upstream's own or
	// any value may be redacted.
	resolved := resolveOutput(t, w.OutputSchema)
	window := func(item string) any {
		var v any
		_ = json.Unmarshal([]byte(`{"items":[`+item+`],"summary":{"count":1},"stats":{"received":1,"counted":1,"returned":1,"dropped_duplicates":0,"sampled_out":0,"skipped_oversize":0,"fields_truncated":0,"redacted":0,"bytes":9,"duration_ms":1},"truncated":false,"window_complete":true,"has_more":false,"end_reason":"done"}`), &v)
		return v
	}
	for item, ok := range map[string]bool{
		`{"n":1,"level":"info","user":{"id":7,"email":"a@example.com"}}`:            true,
		`{"n":1,"level":"info","user":{"id":7,"email":"[REDACTED]"}}`:               true,
		`{"n":1,"level":"info","user":{"id":7,"email":"aaaa…[truncated 9 bytes]"}}`: true,
		`{"n":1,"level":"debug","user":{"id":7}}`:                                   false,
		`{"n":1,"level":"info…[truncated 3 bytes]","user":{}}`:                      false,
		`{"n":1,"level":"info","user":{"id":"[REDACTED]"}}`:                         false,
		// Lenient by default: a member the document does not name passes
		// (its additionalProperties: false is not published).
		`{"n":1,"level":"info","user":{"id":7},"extra":true}`: true,
	} {
		if err := resolved.Validate(window(item)); (err == nil) != ok {
			t.Errorf("item %s: valid %t, want %t: %v", item, err == nil, ok, err)
		}
	}
	var out struct {
		Properties struct {
			Items struct {
				Items json.RawMessage `json:"items"`
			} `json:"items"`
		} `json:"properties"`
	}
	for _, name := range []string{"watch_default", "win_watchEvents"} {
		out.Properties.Items.Items = nil
		_ = json.Unmarshal(ops[name].OutputSchema, &out)
		if got := len(out.Properties.Items.Items) > 0; got != (name == "watch_default") {
			t.Errorf("%s: item schema %s", name, out.Properties.Items.Items)
		}
	}
	if !strings.Contains(string(w.InputSchema), `"cursor"`) || !strings.Contains(string(w.InputSchema), `"level"`) {
		t.Errorf("watch input schema: %s", w.InputSchema)
	}

	// A window: three items, redacted, matching the output schema.
	res := call(t, h, "watch", `{"level": "info"}`)
	var win struct {
		Items     []map[string]any `json:"items"`
		EndReason string           `json:"end_reason"`
	}
	if err := json.Unmarshal(res.Structured, &win); res.IsError || err != nil || len(win.Items) != 3 || win.EndReason != "max_items" {
		t.Fatalf("watch: %s", res.Text)
	}
	if u := win.Items[0]["user"].(map[string]any); u["email"] != redact.Mark {
		t.Errorf("item not redacted: %v", win.Items[0])
	}
	var v any
	_ = json.Unmarshal(res.Structured, &v)
	if err := resolved.Validate(v); err != nil {
		t.Errorf("the window does not match its output schema: %v\n%s", err, res.Structured)
	}
}

func resolveOutput(t *testing.T, raw json.RawMessage) *jsonschema.Resolved {
	t.Helper()
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return resolved
}

// A bad window override is a load error naming the entry, the tool and
// the field.
func TestExpandedToolBadOverride(t *testing.T) {
	t.Parallel()
	_, err := newOverrideHost(t, `operations:
  - name: api
    adapter: rest
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        overrides:
          watchEvents:
            name: watch
            limits: {max_items: 0, idle_timeout_ms: 5}
            aggregation: {aggregation_mode: averages}
`)
	if err == nil {
		t.Fatal("a bad override loaded")
	}
	for _, want := range []string{
		`ops.yaml:6: operation "api": /config: tool "watch": `,
		`/limits/max_items: must be from 1 to 1000000, got 0`,
		`/aggregation/aggregation_mode: must be one of raw_items,`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
}

// A session entry over an OpenAPI stream: the operation's derived window
// mode does not replace the entry's session; the tool becomes a session
// family named after it, reading the stream the entry's way.
func TestExpandedToolInSessionEntry(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	h, err := newOverrideHost(t, `operations:
  - name: follow
    adapter: rest
    mode: session
    limits: {max_items: 10}
    config:
      openapi:
        document: DOC
        base_url: UPSTREAM
        include: {operation_ids: [watchEvents]}
`, func(o *host.Options) { o.Store = st })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range h.Operations() {
		names = append(names, op.Name+"/"+op.Role)
	}
	if got := strings.Join(names, ","); got != "watchEvents_start/start,watchEvents_poll/poll,watchEvents_stop/stop" {
		t.Fatalf("tools: %s", got)
	}
	m := famOK(t, h, "a1", "watchEvents_start", `{}`)
	id := m["session_id"].(string)
	end := pollUntil(t, h, "watchEvents_poll", `{"session_id":"`+id+`"}`, func(m map[string]any) bool { return m["status"] == "completed" })
	if len(end["items"].([]any)) != 5 {
		t.Errorf("items of the stream: %v", end)
	}
}
