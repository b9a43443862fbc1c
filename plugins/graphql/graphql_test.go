package graphql_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func abs(t testing.TB, path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// entry is the config of an entry serving testdata/library.graphql.
func entry(t testing.TB, u *upstream, extra map[string]any) map[string]any {
	cfg := map[string]any{"endpoint": u.URL, "document": abs(t, "testdata/library.graphql")}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = v
		}
	}
	return cfg
}

// expand expands an entry and requires no error diagnostics.
func expand(t *testing.T, h *adaptertest.Harness, cfg any) map[string]sdk.Tool {
	t.Helper()
	list, diags, err := h.Expand(ctxT(t), adaptertest.Call{Operation: "library", Config: cfg})
	if err != nil {
		t.Fatalf("expand: %v", err)
	}
	for _, d := range diags {
		if d.Severity == sdk.SeverityError {
			t.Fatalf("expand: %s: %s", d.Field, d.Message)
		}
	}
	tools := map[string]sdk.Tool{}
	for _, tool := range list {
		tools[tool.Name] = tool
	}
	return tools
}

// expandErr expands an entry and requires an error diagnostic on field
// whose message contains every want.
func expandErr(t *testing.T, h *adaptertest.Harness, cfg any, field string, want ...string) {
	t.Helper()
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Operation: "library", Config: cfg})
	if err != nil {
		t.Fatalf("expand: %v", err)
	}
	for _, d := range diags {
		if d.Severity == sdk.SeverityError && d.Field == field {
			for _, w := range want {
				if !strings.Contains(d.Message, w) {
					t.Errorf("diagnostic %s: %q, want it to contain %q", field, d.Message, w)
				}
			}
			if len(tools) > 0 {
				t.Errorf("tools derived despite an error: %d", len(tools))
			}
			return
		}
	}
	t.Fatalf("no error diagnostic on %q; got %v", field, diags)
}

func names(tools map[string]sdk.Tool) string {
	var n []string
	for k := range tools {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ",")
}

func invokeOK(t *testing.T, h *adaptertest.Harness, tool sdk.Tool, args any) *sdk.Result {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Operation: tool.Name, Config: json.RawMessage(tool.Config), Args: args})
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue != nil {
		t.Fatalf("invoke: upstream error: %+v", ue)
	}
	return res
}

func invokeErr(t *testing.T, h *adaptertest.Harness, tool sdk.Tool, args any) *sdk.UpstreamError {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Operation: tool.Name, Config: json.RawMessage(tool.Config), Args: args})
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue == nil {
		t.Fatalf("invoke: want an upstream error, got %+v", res)
	}
	return ue
}

// dump renders v as JSON, for checking that no secret leaks into it.
func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// isTrue reads an annotation: nil is not said.
func isTrue(b *bool) bool { return b != nil && *b }

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s = %q, want it to contain %q", what, s, sub)
		}
	}
}

func wantKind(t *testing.T, ue *sdk.UpstreamError, kind sdk.ErrorKind) {
	t.Helper()
	if ue.Kind != kind {
		t.Fatalf("kind = %v, want %v (%+v)", ue.Kind, kind, ue)
	}
}

// golden compares JSON with testdata/golden/name, indented; -update
// rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
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
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, buf.Bytes(), want)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	d, err := h.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "graphql" || graphql.Name != "graphql" {
		t.Errorf("name = %q", d.Name)
	}
	if len(d.Modes) != 2 || d.Modes[0] != sdk.ModeUnary || d.Modes[1] != sdk.ModeWindow {
		t.Errorf("modes = %v, want unary and window (subscriptions)", d.Modes)
	}
	if d.Capabilities != (client.Capabilities{Validate: true, Expand: true, Stream: true, Streams: true, StreamsInvoke: true, Egress: true}) {
		t.Errorf("capabilities = %+v, want validate, expand, streams, unary calls on streams and egress", d.Capabilities)
	}
	var schema map[string]any
	if err := json.Unmarshal(d.ConfigSchema, &schema); err != nil {
		t.Errorf("config schema is not JSON: %v", err)
	}
}

// TestExpandIntrospection: the schema comes from introspecting the
// endpoint, every operation of the document becomes a tool with golden
// input and output schemas, and the annotations say which tools write.
func TestExpandIntrospection(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))
	if got := names(tools); got != "AddBook,BookReviews,Broken,DeleteBook,Echo,GetBook,ListBooks,Search" {
		t.Fatalf("tools = %s", got)
	}
	if !strings.Contains(u.lastBody(), "IntrospectionQuery") {
		t.Errorf("the endpoint was not introspected: %q", u.lastBody())
	}
	for name, tool := range tools {
		golden(t, name+".input.json", tool.InputSchema)
		golden(t, name+".output.json", tool.OutputSchema)
		a := tool.Annotations
		mutation := name == "AddBook" || name == "DeleteBook"
		if isTrue(a.ReadOnly) == mutation || isTrue(a.Destructive) != mutation || isTrue(a.Idempotent) == mutation {
			t.Errorf("%s: annotations %+v (mutation=%v)", name, a, mutation)
		}
	}
	for name, want := range map[string]string{
		"GetBook":   "Fetch one book by its id, with its author.",
		"ListBooks": "List books, optionally filtered by genre, title and size.",
		"Echo":      "Echo the variables back.",
		"Broken":    "GraphQL query Broken. Query.broken: A field that always fails.",
		"AddBook":   "Add a book to the library.",
	} {
		if got := tools[name].Description; got != want {
			t.Errorf("%s description = %q, want %q", name, got, want)
		}
	}
	// The tool config is self-contained: the operation with the fragments
	// it uses and nothing else.
	var cfg struct {
		Endpoint string `json:"endpoint"`
		Tool     struct {
			Operation, Kind, Document string
		} `json:"tool"`
	}
	if err := json.Unmarshal(tools["GetBook"].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint != u.URL || cfg.Tool.Operation != "GetBook" || cfg.Tool.Kind != "query" ||
		!strings.Contains(cfg.Tool.Document, "fragment BookFields on Book") || strings.Contains(cfg.Tool.Document, "ListBooks") ||
		strings.Contains(cfg.Tool.Document, "#") {
		t.Errorf("GetBook config: %s", tools["GetBook"].Config)
	}
}

// TestExpandSDL: an SDL file gives the same tools as introspection, which
// checks the introspection-to-schema conversion too.
func TestExpandSDL(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	fromSDL := expand(t, h, entry(t, u, map[string]any{"schema": abs(t, "testdata/library.graphqls"), "endpoint": u.Server.URL + "/closed/graphql"}))
	fromIntrospection := expand(t, h, entry(t, u, nil))
	if names(fromSDL) != names(fromIntrospection) {
		t.Fatalf("tools %s vs %s", names(fromSDL), names(fromIntrospection))
	}
	for name, a := range fromSDL {
		b := fromIntrospection[name]
		if !bytes.Equal(a.InputSchema, b.InputSchema) || !bytes.Equal(a.OutputSchema, b.OutputSchema) ||
			a.Description != b.Description {
			t.Errorf("%s differs:\nSDL:           %s\nintrospection: %s", name, a.InputSchema, b.InputSchema)
		}
	}

	// Relative paths are resolved against the operations file's directory.
	x := graphql.New().(sdk.OperationExpander)
	cfg, _ := json.Marshal(map[string]any{"endpoint": u.URL, "schema": "library.graphqls", "document": "library.graphql"})
	tools, diags := x.ExpandOperation(ctxT(t), &sdk.Operation{Name: "library", Config: cfg, BaseDir: abs(t, "testdata")})
	if len(tools) != len(fromSDL) || len(diags) != 0 {
		t.Errorf("relative paths: %d tools, diagnostics %v", len(tools), diags)
	}
}

func TestExpandSingleOperationIsTheEntry(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, map[string]any{"endpoint": u.URL, "query": "# Count the books.\nquery { books { id } }"})
	tool, ok := tools[""]
	if len(tools) != 1 || !ok {
		t.Fatalf("tools = %s, want the entry itself (no name)", names(tools))
	}
	if tool.Description != "Count the books." {
		t.Errorf("description = %q", tool.Description)
	}
	res := invokeOK(t, h, tool, nil)
	if got := string(res.Structured); got != `{"data":{"books":[{"id":"1"},{"id":"2"},{"id":"3"}]}}` {
		t.Errorf("result = %s", got)
	}

	tools = expand(t, h, map[string]any{"endpoint": u.URL, "query": "{ books { id } book(id: 1) { id } }"})
	if d := tools[""].Description; d != "GraphQL query. Query.books: List books, optionally filtered. Query.book: Fetch one book by id." {
		t.Errorf("derived description = %q", d)
	}

	// operations picks some operations of a document; tool_prefix names them.
	tools = expand(t, h, entry(t, u, map[string]any{"operations": []string{"GetBook", "AddBook"}, "tool_prefix": "lib_"}))
	if got := names(tools); got != "lib_AddBook,lib_GetBook" {
		t.Errorf("tools = %s", got)
	}
	tools = expand(t, h, entry(t, u, map[string]any{"operations": []string{"GetBook"}}))
	if got := names(tools); got != "" {
		t.Errorf("one picked operation: tools = %q, want the entry itself", got)
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, map[string]any{"headers": map[string]any{"X-Api-Key": "k-123", "User-Agent": "lib-client"}}))

	res := invokeOK(t, h, tools["GetBook"], map[string]any{"id": "1"})
	want := `{"data":{"book":{"id":"1","title":"Dune","genre":"FICTION","published":"1965-08-01","pages":412,"rating":4.5,"author":{"id":"a1","name":"Frank Herbert"}}}}`
	if got := string(res.Structured); got != want {
		t.Errorf("GetBook = %s\nwant      %s", got, want)
	}
	if res.Text != "" {
		t.Errorf("text = %q, want empty (the host renders the JSON)", res.Text)
	}
	var sent struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName"`
		Variables     map[string]any `json:"variables"`
	}
	if err := json.Unmarshal([]byte(u.lastBody()), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.OperationName != "GetBook" || sent.Variables["id"] != "1" || !strings.HasPrefix(sent.Query, "query GetBook (") {
		t.Errorf("request body: %s", u.lastBody())
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json",
		"Accept":       "application/graphql-response+json, application/json;q=0.9",
		"X-Api-Key":    "k-123",
		"User-Agent":   "lib-client",
	} {
		if got := u.lastHeader(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}

	// An ID given as an integer is sent as a string; an absent nullable
	// variable is left out, so the server applies the default.
	invokeOK(t, h, tools["GetBook"], map[string]any{"id": 2})
	if !strings.Contains(u.lastBody(), `"variables":{"id":"2"}`) {
		t.Errorf("body = %s", u.lastBody())
	}
	res = invokeOK(t, h, tools["ListBooks"], map[string]any{"filter": map[string]any{"and": []any{map[string]any{"minPages": 300}}}})
	if got := string(res.Structured); !strings.Contains(got, `"title":"Dune"`) || strings.Contains(got, "Histor") {
		t.Errorf("ListBooks = %s", got)
	}
	res = invokeOK(t, h, tools["ListBooks"], map[string]any{"first": 1, "filter": nil})
	if got := string(res.Structured); strings.Count(got, `"id"`) != 1 {
		t.Errorf("ListBooks first=1 = %s", got)
	}
	res = invokeOK(t, h, tools["Search"], map[string]any{"text": "her"})
	if got := string(res.Structured); got != `{"data":{"search":[{"__typename":"Author","id":"a1","name":"Frank Herbert"},{"__typename":"Author","id":"a3","name":"Herodotus"}]}}` {
		t.Errorf("Search = %s", got)
	}
	// A book that does not exist is data, not an error.
	res = invokeOK(t, h, tools["GetBook"], map[string]any{"id": "404"})
	if got := string(res.Structured); got != `{"data":{"book":null}}` {
		t.Errorf("GetBook 404 = %s", got)
	}
}

// TestVariableCoercion: arguments reach the server as GraphQL input
// coercion says: a single value for a list, integers for Float, IDs as
// strings, custom scalars and enums as given.
func TestVariableCoercion(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	echo := expand(t, h, entry(t, u, nil))["Echo"]
	for _, c := range []struct {
		args any
		want string
	}{
		{map[string]any{"ids": []any{1, "b"}}, `ids=["1" "b"]`},
		{map[string]any{"ids": "solo"}, `ids=["solo"]`},
		{map[string]any{"n": -2147483648, "x": 3}, `n=-2147483648 x=3`},
		{map[string]any{"n": 7.0, "x": 2.5e-3}, `n=7 x=0.0025`},
		{map[string]any{"when": "2024-02-29", "genre": "SCIENCE", "flag": false}, `when=2024-02-29 genre=SCIENCE flag=false`},
		{map[string]any{"ids": nil, "n": nil}, ``},
		{nil, ``},
	} {
		res := invokeOK(t, h, echo, c.args)
		var got struct{ Data struct{ Echo string } }
		json.Unmarshal(res.Structured, &got)
		if got.Data.Echo != c.want {
			t.Errorf("%v: echo = %q, want %q", c.args, got.Data.Echo, c.want)
		}
	}
}

// TestVariableErrors: arguments wrong in type, missing or extra are
// refused before any request, naming the variable.
func TestVariableErrors(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{"GetBook", map[string]any{}, "$id: missing required variable (ID!)"},
		{"GetBook", map[string]any{"id": nil}, "$id: must not be null (ID!)"},
		{"GetBook", map[string]any{"id": true}, "$id: expected ID (a string or an integer), got a boolean"},
		{"GetBook", map[string]any{"id": 1.5}, "$id: expected ID (a string or an integer), got the number 1.5"},
		{"GetBook", map[string]any{"id": "1", "extra": 1, "more": 2}, `unknown argument "extra", "more": the query GetBook takes $id`},
		{"Broken", map[string]any{"x": 1}, `unknown argument "x": the query Broken takes no variables`},
		{"Echo", map[string]any{"n": "7"}, "$n: expected Int (a 32-bit integer), got a string"},
		{"Echo", map[string]any{"n": 2147483648}, "$n: expected Int (a 32-bit integer), got 2147483648: out of range"},
		{"Echo", map[string]any{"n": 1.5}, "$n: expected Int (a 32-bit integer), got 1.5"},
		{"Echo", map[string]any{"x": "1.5"}, "$x: expected Float (a number), got a string"},
		{"Echo", map[string]any{"flag": "yes"}, "$flag: expected Boolean (true or false), got a string"},
		{"Echo", map[string]any{"genre": "ROMANCE"}, `$genre: "ROMANCE" is not a value of enum Genre (one of FICTION, SCIENCE, HISTORY, POETRY)`},
		{"Echo", map[string]any{"ids": []any{"a", nil}}, "$ids[1]: must not be null (ID!)"},
		{"Echo", map[string]any{"ids": []any{"a", map[string]any{}}}, "$ids[1]: expected ID (a string or an integer), got an object"},
		{"ListBooks", map[string]any{"filter": "FICTION"}, "$filter: expected input object BookFilter, got a string"},
		{"ListBooks", map[string]any{"filter": map[string]any{"genre": "X"}}, `$filter.genre: "X" is not a value of enum Genre`},
		{"ListBooks", map[string]any{"filter": map[string]any{"and": []any{map[string]any{"pages": 3}}}}, `$filter.and[0]: unknown field "pages" of input BookFilter (fields: genre, titleContains, minPages, publishedAfter, and)`},
		{"AddBook", map[string]any{"input": map[string]any{"title": "T", "genre": "FICTION"}}, "$input.authorId: missing required field of input AddBookInput (ID!)"},
		{"AddBook", map[string]any{"input": map[string]any{"title": "T", "genre": "FICTION", "authorId": "a1", "tags": []any{1}}}, "$input.tags[0]: expected String, got the number 1"},
		{"GetBook", []any{1}, "the tool arguments must be a JSON object"},
	} {
		before := u.requests()
		ue := invokeErr(t, h, tools[c.tool], c.args)
		wantKind(t, ue, sdk.KindInvalidArgument)
		wantContains(t, fmt.Sprintf("%s %v", c.tool, c.args), ue.Message, c.want)
		if ue.Upstream != "query "+c.tool+" at "+u.Server.URL && ue.Upstream != "mutation "+c.tool+" at "+u.Server.URL {
			t.Errorf("upstream = %q", ue.Upstream)
		}
		if u.requests() != before {
			t.Errorf("%s %v: a request was sent despite bad arguments", c.tool, c.args)
		}
	}
}

func TestMutation(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))
	res := invokeOK(t, h, tools["AddBook"], map[string]any{"input": map[string]any{
		"title": "Cosmos", "genre": "SCIENCE", "authorId": "a2", "pages": 365, "published": "1980-10-01", "tags": "space",
	}})
	want := `{"data":{"addBook":{"id":"4","title":"Cosmos","genre":"SCIENCE","published":"1980-10-01","pages":365,"rating":null}}}`
	if got := string(res.Structured); got != want {
		t.Errorf("AddBook = %s\nwant      %s", got, want)
	}
	if !strings.Contains(u.lastBody(), `"tags":["space"]`) {
		t.Errorf("a single tag is not sent as a list: %s", u.lastBody())
	}
	res = invokeOK(t, h, tools["GetBook"], map[string]any{"id": "4"})
	if !strings.Contains(string(res.Structured), `"name":"Stephen Hawking"`) {
		t.Errorf("the added book: %s", res.Structured)
	}
	res = invokeOK(t, h, tools["DeleteBook"], map[string]any{"id": 4})
	if got := string(res.Structured); got != `{"data":{"deleteBook":true}}` {
		t.Errorf("DeleteBook = %s", got)
	}
	// A resolver error on a non-null root field: no data, only errors.
	ue := invokeErr(t, h, tools["AddBook"], map[string]any{"input": map[string]any{"title": "X", "genre": "FICTION", "authorId": "nobody"}})
	wantKind(t, ue, sdk.KindUpstreamStatus)
	wantContains(t, "message", ue.Message, "the GraphQL server answered with 1 error: no author with id nobody (at addBook)")
	if ue.Retryable || ue.Rejected {
		t.Errorf("a failed mutation is marked retryable or rejected: %+v", ue)
	}
}

func TestGraphQLErrors(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))

	// Partial: data and errors together; the result carries both, marked.
	res := invokeOK(t, h, tools["BookReviews"], map[string]any{"id": "3"})
	want := `{"data":{"book":{"id":"3","title":"The Histories","reviews":null}},"errors":[{"message":"the reviews service is unavailable","path":["book","reviews"]}],"partial":true}`
	if got := string(res.Structured); got != want {
		t.Errorf("partial = %s\nwant      %s", got, want)
	}
	wantContains(t, "text", res.Text,
		"PARTIAL RESULT: the GraphQL server returned data together with 1 error: the reviews service is unavailable (at book.reviews)\n", want)

	// Only errors: an upstream error with the messages and paths.
	ue := invokeErr(t, h, tools["Broken"], nil)
	wantKind(t, ue, sdk.KindUpstreamStatus)
	if ue.Status != "GRAPHQL_ERROR" || ue.Rejected {
		t.Errorf("status = %q, rejected %v (a field error is not the request refused)", ue.Status, ue.Rejected)
	}
	wantContains(t, "message", ue.Message, "the GraphQL server answered with 1 error: this field is broken on purpose (at broken)")
	wantContains(t, "detail", string(ue.Detail), `"errors":[{"message":"this field is broken on purpose","path":["broken"]}]`, `"http_status":200`)
	if ue.Upstream != "query Broken at "+u.Server.URL { // never the endpoint's path
		t.Errorf("upstream = %q", ue.Upstream)
	}

	// GraphQL-over-HTTP: a 401 with a GraphQL error body is a GraphQL
	// error (with its code), not an HTTP failure.
	secure := expand(t, h, entry(t, u, map[string]any{"endpoint": u.Server.URL + "/secure/graphql", "schema": abs(t, "testdata/library.graphqls")}))
	ue = invokeErr(t, h, secure["GetBook"], map[string]any{"id": "1"})
	wantKind(t, ue, sdk.KindUpstreamStatus)
	if ue.Status != "UNAUTHENTICATED" || !ue.Rejected {
		t.Errorf("status = %q, rejected %v", ue.Status, ue.Rejected)
	}
	wantContains(t, "message", ue.Message, "not authenticated [UNAUTHENTICATED]")
	wantContains(t, "detail", string(ue.Detail), `"http_status":401`)
	// With the token from config the same call works, and the token
	// appears in no error.
	secure = expand(t, h, entry(t, u, map[string]any{"endpoint": u.Server.URL + "/secure/graphql", "headers": map[string]any{"Authorization": "Bearer s3cret-token"}}))
	invokeOK(t, h, secure["GetBook"], map[string]any{"id": "1"})
	ue = invokeErr(t, h, secure["Broken"], nil)
	if strings.Contains(dump(ue), "s3cret") {
		t.Errorf("the secret appears in an error: %+v", ue)
	}
}

// TestHTTPFailures: failures of HTTP are told apart from GraphQL errors.
func TestHTTPFailures(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))
	with := func(name, endpoint string, extra map[string]any) sdk.Tool {
		var cfg map[string]any
		json.Unmarshal(tools[name].Config, &cfg)
		cfg["endpoint"] = endpoint
		for k, v := range extra {
			cfg[k] = v
		}
		b, _ := json.Marshal(cfg)
		return sdk.Tool{Name: name, Config: b}
	}

	ue := invokeErr(t, h, with("GetBook", u.Server.URL+"/status/503", nil), map[string]any{"id": "1"})
	wantKind(t, ue, sdk.KindUpstreamStatus)
	if ue.Status != "503" || !ue.Retryable || ue.Body != "upstream trouble" {
		t.Errorf("503: %+v", ue)
	}
	wantContains(t, "message", ue.Message, "the GraphQL endpoint answered HTTP 503 Service Unavailable")
	wantContains(t, "detail", string(ue.Detail), `"status_code":503`, `"retry_after":"7"`)

	ue = invokeErr(t, h, with("GetBook", u.Server.URL+"/status/404", nil), map[string]any{"id": "1"})
	if ue.Status != "404" || ue.Retryable || !ue.Rejected {
		t.Errorf("404: %+v", ue)
	}

	ue = invokeErr(t, h, with("GetBook", u.Server.URL+"/html", nil), map[string]any{"id": "1"})
	wantKind(t, ue, sdk.KindBadResponse)
	wantContains(t, "message", ue.Message, "not a GraphQL response", "text/html")
	wantContains(t, "body", ue.Body, "login page")

	ue = invokeErr(t, h, with("GetBook", u.Server.URL+"/huge", map[string]any{"max_response_bytes": 4096}), map[string]any{"id": "1"})
	wantKind(t, ue, sdk.KindBadResponse)
	wantContains(t, "message", ue.Message, "larger than max_response_bytes (4096 bytes)")

	// Server down: nothing listens on the port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/graphql?key=secret-in-query"
	l.Close()
	ue = invokeErr(t, h, with("GetBook", down, nil), map[string]any{"id": "1"})
	wantKind(t, ue, sdk.KindTransport)
	wantContains(t, "message", ue.Message, "cannot connect to "+l.Addr().String()+": connection refused")
	if !ue.Retryable || strings.Contains(dump(ue), "secret-in-query") {
		t.Errorf("down: %+v", ue)
	}
	// A mutation that may not have reached the server is still retryable
	// when the connection was refused: nothing was sent.
	ue = invokeErr(t, h, with("DeleteBook", down, nil), map[string]any{"id": "1"})
	if !ue.Retryable {
		t.Errorf("refused mutation not retryable: %+v", ue)
	}

	// The call's timeout (long enough for the expansion's introspection on
	// a loaded machine, far shorter than the slow answer).
	slow := expand(t, h, map[string]any{"endpoint": u.URL, "query": "query Slow($ms: Int!) { slow(ms: $ms) }", "timeout": "1s"})[""]
	start := time.Now()
	ue = invokeErr(t, h, slow, map[string]any{"ms": 5000})
	wantKind(t, ue, sdk.KindTimeout)
	wantContains(t, "message", ue.Message, "did not answer within 1s")
	if time.Since(start) > 4*time.Second {
		t.Errorf("the timeout took %v", time.Since(start))
	}
}

// TestConfigErrors: bad configs are refused at load, naming the field,
// never quoting a value.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	for _, c := range []struct {
		cfg   map[string]any
		field string
		want  string
	}{
		{map[string]any{"query": "{a}"}, "endpoint", "required"},
		{map[string]any{"endpoint": "ftp://x/graphql", "query": "{a}"}, "endpoint", "http or https"},
		{map[string]any{"endpoint": "http:///graphql", "query": "{a}"}, "endpoint", "missing host"},
		{map[string]any{"endpoint": "http://x/g"}, "document", "required"},
		{map[string]any{"endpoint": "http://x/g", "document": "a.graphql", "query": "{a}"}, "query", "not both"},
		{map[string]any{"endpoint": "http://x/g", "query": "  "}, "query", "must not be empty"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "headers": map[string]any{"X-Key": "a\nb"}}, "headers.X-Key", "control character"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "headers": map[string]any{"Content-Type": "text/plain"}}, "headers.Content-Type", "set by the adapter"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "headers": map[string]any{"Bad Name": "v"}}, "headers.Bad Name", "not a valid HTTP header name"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "timeout": "soon"}, "timeout", "not a valid duration"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "max_response_bytes": -1}, "max_response_bytes", "must be at least 0"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "operations": []string{}}, "operations", "must not be empty"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "operations": []string{"a-b"}}, "operations[0]", "not a GraphQL operation name"},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "tool_prefix": "a b"}, "tool_prefix", "A-Z a-z 0-9"},
		{map[string]any{"endpoint": "http://x/g", "generate": map[string]any{"query_fields": true, "max_depth": 9}}, "generate.max_depth", "from 1 to 5"},
		{map[string]any{"endpoint": "http://x/g", "generate": map[string]any{"query_fields": "all"}}, "generate.query_fields", "true or a list"},
		{map[string]any{"endpoint": "http://x/g", "generate": map[string]any{"query_fields": true, "maxdepth": 2}}, "generate.maxdepth", `did you mean "max_depth"`},
		{map[string]any{"endpoint": "http://x/g", "query": "{a}", "endpoitn": "x"}, "endpoitn", `did you mean "endpoint"`},
		{map[string]any{"endpoint": "http://x/g", "tool": map[string]any{"kind": "query", "document": "{a}"}}, "tool", "derived by the adapter"},
	} {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: c.cfg})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range diags {
			if d.Field == c.field && d.Severity == sdk.SeverityError {
				found = true
				wantContains(t, c.field, d.Message, c.want)
			}
			if strings.Contains(d.Message, "a\nb") {
				t.Errorf("a header value is quoted: %q", d.Message)
			}
		}
		if !found {
			t.Errorf("%v: no error on %q, got %v", c.cfg, c.field, diags)
		}
	}
	// A good config has no diagnostics.
	diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"endpoint": "https://api.example.com/graphql", "query": "{a}", "headers": map[string]any{"Authorization": "Bearer x"}}})
	if err != nil || len(diags) != 0 {
		t.Errorf("good config: %v %v", diags, err)
	}
}

// TestDocumentErrors: a document that does not match the schema, or
// does not say which tools to make, is refused at load with its location.
func TestDocumentErrors(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	sdl := abs(t, "testdata/library.graphqls")
	base := func(extra map[string]any) map[string]any {
		cfg := map[string]any{"endpoint": u.URL, "schema": sdl}
		for k, v := range extra {
			cfg[k] = v
		}
		return cfg
	}
	expandErr(t, h, base(map[string]any{"query": "query A {\n  book(id: 1) { isbn }\n}"}), "query",
		`does not match the schema: line 2:17: Cannot query field "isbn" on type "Book".`)
	expandErr(t, h, base(map[string]any{"query": "query A { book(id: 1) { id }"}), "query", "not a valid GraphQL document", "Expected")
	expandErr(t, h, base(map[string]any{"query": "fragment F on Book { id }"}), "query", "no query, mutation or subscription")
	expandErr(t, h, base(map[string]any{"document": abs(t, "testdata/library.graphql"), "operations": []string{"GetBook", "Nope"}}),
		"operations[1]", `no operation named "Nope" in the document (it has: GetBook, ListBooks`)
	expandErr(t, h, base(map[string]any{"document": abs(t, "testdata/missing.graphql")}), "document", "cannot read", "missing.graphql", "no such file")
	expandErr(t, h, base(map[string]any{"query": "{ broken }", "generate": map[string]any{"query_fields": []string{"book"}}}),
		"query", "the anonymous operation needs a name")
	expandErr(t, h, base(map[string]any{"generate": map[string]any{"query_fields": []string{"book", "nope"}}}),
		"generate.query_fields[1]", `type Query has no field "nope"`)
	expandErr(t, h, base(map[string]any{"query": "query book { broken }", "generate": map[string]any{"query_fields": []string{"book"}}}),
		"generate.query_fields", `tool name "book" is derived twice`)

	// Schema problems name the schema field.
	bad := filepath.Join(t.TempDir(), "bad.graphqls")
	os.WriteFile(bad, []byte("type Query {\n  a: Nope\n}\n"), 0o644)
	expandErr(t, h, base(map[string]any{"schema": bad, "query": "{ a }"}), "schema", "not a valid GraphQL schema", "bad.graphqls:2", "Nope")
	expandErr(t, h, map[string]any{"endpoint": u.Server.URL + "/closed/graphql", "query": "{ broken }"}, "schema",
		"introspection of "+u.Server.URL+" failed", "a server without introspection needs schema: an SDL file")
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	expandErr(t, h, map[string]any{"endpoint": "http://" + addr + "/graphql", "query": "{ broken }"}, "schema",
		"introspection of http://"+addr+" failed", "connection refused")
}

// TestGenerate: tools for top-level Query fields, selected to a bounded
// depth.
func TestGenerate(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, map[string]any{"endpoint": u.URL, "generate": map[string]any{"query_fields": true}, "tool_prefix": "q_"})
	if got := names(tools); got != "q_author,q_book,q_books,q_broken,q_echo,q_node,q_search,q_slow" {
		t.Fatalf("tools = %s", got)
	}
	for _, name := range []string{"q_book", "q_books", "q_search", "q_node"} {
		golden(t, "generated."+name+".input.json", tools[name].InputSchema)
		var cfg struct{ Tool struct{ Document string } }
		json.Unmarshal(tools[name].Config, &cfg)
		golden(t, "generated."+name+".document.json", must(json.Marshal(cfg.Tool.Document)))
	}
	if d := tools["q_book"].Description; d != "Fetch one book by id.\n(Generated GraphQL query of Query.book, selecting its result 2 level(s) deep.)" {
		t.Errorf("description = %q", d)
	}
	res := invokeOK(t, h, tools["q_book"], map[string]any{"id": "2"})
	want := `{"data":{"book":{"id":"2","title":"A Brief History of Time","genre":"SCIENCE","published":"1988-04-01","pages":256,"rating":null,"author":{"id":"a2","name":"Stephen Hawking"},"reviews":["Great read.","Loved it."]}}}`
	if got := string(res.Structured); got != want {
		t.Errorf("q_book = %s\nwant     %s", got, want)
	}
	res = invokeOK(t, h, tools["q_books"], map[string]any{"first": 1})
	if got := string(res.Structured); !strings.HasPrefix(got, `{"data":{"books":[{"id":"1",`) || strings.Contains(got, `"id":"2"`) {
		t.Errorf("q_books = %s", got)
	}

	// A list of fields and a depth of 1: only the scalars of the result.
	tools = expand(t, h, map[string]any{"endpoint": u.URL, "generate": map[string]any{"query_fields": []string{"author"}, "max_depth": 1}})
	var cfg struct{ Tool struct{ Document string } }
	json.Unmarshal(tools["author"].Config, &cfg)
	if want := "query author ($id: ID!) {\n author(id: $id) {\n  id\n  name\n }\n}"; cfg.Tool.Document != want {
		t.Errorf("document = %q\nwant       %q", cfg.Tool.Document, want)
	}
	// A document and generated tools together.
	tools = expand(t, h, entry(t, u, map[string]any{"generate": map[string]any{"query_fields": []string{"author"}}, "operations": []string{"GetBook"}}))
	if got := names(tools); got != "GetBook,author" {
		t.Errorf("tools = %s", got)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestEntryInvokedDirectly: a host that does not expand entries can call
// an entry config as is; the adapter expands it on first use.
func TestEntryInvokedDirectly(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	cfg := entry(t, u, map[string]any{"schema": abs(t, "testdata/library.graphqls")})
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Operation: "GetBook", Config: cfg, Args: map[string]any{"id": "1"}})
	if err != nil || ue != nil || !strings.Contains(string(res.Structured), `"title":"Dune"`) {
		t.Fatalf("invoke: %v %v %s", err, ue, res.Structured)
	}
	_, ue, err = h.Invoke(ctxT(t), adaptertest.Call{Operation: "Nope", Config: cfg})
	if err != nil || ue == nil || !strings.Contains(ue.Message, `several tools (GetBook, ListBooks, Search`) {
		t.Fatalf("unknown tool: %v %v", err, ue)
	}
	_, ue, err = h.Invoke(ctxT(t), adaptertest.Call{Config: map[string]any{"endpoint": u.URL, "query": "{ nope }", "schema": abs(t, "testdata/library.graphqls")}})
	if err != nil || ue == nil || !strings.Contains(ue.Message, `cannot be expanded into tools: query: does not match the schema`) {
		t.Fatalf("bad document: %v %v", err, ue)
	}
}

// TestTraceContext: the caller's W3C trace context reaches the upstream.
func TestTraceContext(t *testing.T) {
	// Not parallel: the spans an in-process adapter finishes leave with
	// whichever of its answers comes next, so another test's call running
	// meanwhile could take this test's spans.
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, nil))
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	call := adaptertest.Call{Operation: "GetBook", Config: tools["GetBook"].Config, Args: `{"id":"1"}`,
		Context: sdk.RequestContext{TraceParent: tp, TraceState: "k=v"}}
	if _, ue, err := h.Invoke(ctxT(t), call); err != nil || ue != nil {
		t.Fatal(err, ue)
	}
	if u.lastHeader("Traceparent") != tp || u.lastHeader("Tracestate") != "k=v" {
		t.Errorf("trace headers: %q %q", u.lastHeader("Traceparent"), u.lastHeader("Tracestate"))
	}
	// Traced by the host: the upstream sees the span of its request.
	call.Context.RecordSpans = true
	if _, ue, err := h.Invoke(ctxT(t), call); err != nil || ue != nil {
		t.Fatal(err, ue)
	}
	spans := h.Spans()
	if len(spans) != 2 || spans[0].Kind != sdk.SpanClient || spans[0].Name != "POST 127.0.0.1" {
		t.Fatalf("spans = %+v", spans)
	}
	if want := fmt.Sprintf("00-%x-%x-01", spans[0].TraceID, spans[0].SpanID); u.lastHeader("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", u.lastHeader("Traceparent"), want)
	}
}

type v1Root struct{}

func (v1Root) Hello() string { return "hello" }

type v2Root struct{ v1Root }

func (v2Root) Bye() string { return "bye" }

// TestIntrospectionRefreshes: every expansion (every config load)
// introspects again, so a reload picks up a changed schema.
func TestIntrospectionRefreshes(t *testing.T) {
	t.Parallel()
	v1 := &relay.Handler{Schema: gql.MustParseSchema(`type Query { hello: String! }`, &v1Root{})}
	v2 := &relay.Handler{Schema: gql.MustParseSchema(`type Query { hello: String! bye: String! }`, &v2Root{})}
	var current atomic.Pointer[relay.Handler]
	current.Store(v1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	defer srv.Close()
	h := adaptertest.New(t, graphql.New())
	cfg := map[string]any{"endpoint": srv.URL, "query": "query Bye { bye }"}
	expandErr(t, h, cfg, "query", `Cannot query field "bye" on type "Query"`)
	current.Store(v2)
	tool := expand(t, h, cfg)[""]
	if res := invokeOK(t, h, tool, nil); string(res.Structured) != `{"data":{"bye":"bye"}}` {
		t.Errorf("bye = %s", res.Structured)
	}
}
