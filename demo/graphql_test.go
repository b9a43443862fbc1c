package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"sigs.k8s.io/yaml"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
)

// TestGraphQLDemo expands the entries of graphql.yaml with the GraphQL
// adapter against the demo API (on a loopback test server instead of
// 127.0.0.1:8083) and calls the tools `make run` serves.
func TestGraphQLDemo(t *testing.T) {
	api := new(GraphQLAPI)
	if err := api.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = api.ServeHTTP(w, r, nil) }))
	defer srv.Close()

	raw, err := os.ReadFile("graphql.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Operations []struct {
			Name   string         `json:"name"`
			Mode   string         `json:"mode"`
			Config map[string]any `json:"config"`
		} `json:"operations"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs(".")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := graphql.New()
	tools := map[string]sdk.Tool{}
	for _, e := range file.Operations {
		if e.Config["endpoint"] != "http://127.0.0.1:8083/graphql" {
			t.Errorf("%s: endpoint %v", e.Name, e.Config["endpoint"])
		}
		e.Config["endpoint"] = srv.URL + "/graphql"
		cfg, _ := json.Marshal(e.Config)
		op := &sdk.Operation{Name: e.Name, Config: cfg, BaseDir: dir, Mode: sdk.ModeUnary, ToolExecution: true}
		if e.Mode == "window" || e.Mode == "session" {
			op.Mode = sdk.ModeWindow
		}
		if diags := a.(sdk.OperationValidator).ValidateOperation(ctx, op); len(diags) > 0 {
			t.Fatalf("%s: %v", e.Name, diags)
		}
		derived, diags := a.(sdk.OperationExpander).ExpandOperation(ctx, op)
		if len(diags) > 0 {
			t.Fatalf("%s: %v", e.Name, diags)
		}
		for _, tool := range derived {
			if tool.Name == "" {
				tool.Name = e.Name
			}
			tools[tool.Name] = tool
		}
	}
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "add_book,book_events,book_events_window,delete_book,find_books,get_book,list_authors" {
		t.Fatalf("tools = %v", names)
	}
	call := func(name, args string) (*sdk.Result, error) {
		return a.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Name: name, Config: tools[name].Config}, Arguments: json.RawMessage(args)})
	}
	res, err := call("get_book", `{"id":"2"}`)
	if err != nil || string(res.Structured) != `{"data":{"book":{"id":"2","title":"Cosmos","genre":"SCIENCE","year":1980,"author":{"name":"Carl Sagan"},"rating":4.7}}}` {
		t.Errorf("get_book: %v %s", err, res.Structured)
	}
	res, err = call("get_book", `{"id":"3"}`)
	if err != nil || !strings.HasPrefix(res.Text, "PARTIAL RESULT") {
		t.Errorf("get_book 3: %v %+v", err, res)
	}
	res, err = call("add_book", `{"input":{"title":"Contact","genre":"FICTION","authorId":"a2","year":1985}}`)
	if err != nil || !strings.Contains(string(res.Structured), `"title":"Contact"`) {
		t.Errorf("add_book: %v %+v", err, res)
	}
	res, err = call("find_books", `{"search":"contact"}`)
	if err != nil || !strings.Contains(string(res.Structured), `"title":"Contact"`) {
		t.Errorf("find_books: %v %+v", err, res)
	}
	res, err = call("list_authors", `{}`)
	if err != nil || !strings.Contains(string(res.Structured), `"name":"Mary Beard"`) {
		t.Errorf("list_authors: %v %+v", err, res)
	}

	// The subscription, over graphql-transport-ws (the window) and
	// GraphQL over SSE (the session): endless events, book 3's partial
	// (data with an error beside it), until the reader stops.
	for _, name := range []string{"book_events_window", "book_events"} {
		sctx, stop := context.WithCancel(ctx)
		rec := &demoEvents{stop: stop, want: 4}
		req := &sdk.Request{Operation: sdk.Operation{Name: name, Config: tools[name].Config, Mode: sdk.ModeWindow}, Arguments: json.RawMessage(`{"genre":"HISTORY"}`)}
		if err := a.(sdk.Streamer).Stream(sctx, req, rec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		stop()
		if len(rec.items) < 2 || !strings.Contains(rec.items[0], `"kind":"BORROWED"`) || !strings.Contains(rec.items[0], `"title":"SPQR"`) ||
			len(rec.gaps) > 0 || len(rec.partial) == 0 || !strings.Contains(rec.partial[0], "the ratings service is unavailable") {
			t.Errorf("%s: items %v gaps %v partial %v", name, rec.items, rec.gaps, rec.partial)
		}
	}
}

// demoEvents collects stream events and stops the stream after want.
type demoEvents struct {
	items, gaps, partial []string
	want                 int
	stop                 func()
}

func (d *demoEvents) Item(it sdk.Item) error {
	d.items = append(d.items, string(it.Data))
	if it.Partial != "" {
		d.partial = append(d.partial, it.Partial)
	}
	d.check()
	return nil
}

func (d *demoEvents) Gap(reason string) error {
	d.gaps = append(d.gaps, reason)
	d.check()
	return nil
}

func (d *demoEvents) check() {
	if len(d.items)+len(d.gaps) >= d.want {
		d.stop()
	}
}

// wrappedWriter is a response writer as Caddy's handlers get one: it
// hides the connection's http.Flusher behind Unwrap, which only an
// http.ResponseController finds. Its second SSE event waits until the
// client read the first (or 10 s), and says whether it had to.
type wrappedWriter struct {
	w        http.ResponseWriter
	events   int
	read     <-chan struct{}
	heldBack chan<- bool
}

func (w *wrappedWriter) Header() http.Header         { return w.w.Header() }
func (w *wrappedWriter) WriteHeader(code int)        { w.w.WriteHeader(code) }
func (w *wrappedWriter) Unwrap() http.ResponseWriter { return w.w }

func (w *wrappedWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "event: next") {
		if w.events++; w.events == 2 {
			select {
			case <-w.read:
				w.heldBack <- false
			case <-time.After(10 * time.Second):
				w.heldBack <- true
			}
		}
	}
	return w.w.Write(b)
}

// TestGraphQLSSEFlushesEachEvent: behind a writer that hides
// http.Flusher (Caddy's), each GraphQL over SSE event reaches the client
// before the upstream sends the next, rather than the events waiting in
// the buffer for seconds and arriving in a burst.
func TestGraphQLSSEFlushesEachEvent(t *testing.T) {
	api := new(GraphQLAPI)
	if err := api.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	heldBack := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = api.ServeHTTP(&wrappedWriter{w: w, read: read, heldBack: heldBack}, r, nil)
	}))
	defer srv.Close()
	body := `{"query":"subscription { bookEvents { seq kind } }"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "event: next") {
		n, err := res.Body.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (got %q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	close(read)
	if <-heldBack {
		t.Fatalf("the first event reached the client only after the second was written: %q", got.String())
	}
}
