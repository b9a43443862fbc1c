package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// echoed is what the echo server answers: the request as it arrived.
type echoed struct {
	Method string              `json:"method"`
	URI    string              `json:"uri"`
	Host   string              `json:"host"`
	Header map[string][]string `json:"header"`
	Body   *string             `json:"body"`
}

func echoHandler(w http.ResponseWriter, r *http.Request) {
	e := echoed{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header}
	b, _ := io.ReadAll(r.Body)
	if len(b) > 0 {
		s := string(b)
		e.Body = &s
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(e)
}

// dump renders v as JSON, for checking that no secret leaks into it.
func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func newHarness(t testing.TB) *adaptertest.Harness {
	t.Helper()
	return adaptertest.New(t, rest.New())
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// invokeOK calls and requires a result.
func invokeOK(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) *sdk.Result {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), c)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue != nil {
		t.Fatalf("invoke: upstream error: %+v", ue)
	}
	return res
}

// invokeErr calls and requires an upstream error.
func invokeErr(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) *sdk.UpstreamError {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), c)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if ue == nil {
		t.Fatalf("invoke: want an upstream error, got result %+v", res)
	}
	return ue
}

// invokeEcho calls an echo server and decodes what it saw.
func invokeEcho(t *testing.T, h *adaptertest.Harness, c adaptertest.Call) echoed {
	t.Helper()
	res := invokeOK(t, h, c)
	var e echoed
	if err := json.Unmarshal(res.Structured, &e); err != nil {
		t.Fatalf("decode echo %q: %v", res.Structured, err)
	}
	return e
}

func wantKind(t *testing.T, ue *sdk.UpstreamError, kind sdk.ErrorKind) {
	t.Helper()
	if ue.Kind != kind {
		t.Fatalf("kind = %v, want %v (%+v)", ue.Kind, kind, ue)
	}
}

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s = %q, want it to contain %q", what, s, sub)
		}
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	d, err := h.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != rest.Name || rest.Name != "rest" {
		t.Errorf("name = %q", d.Name)
	}
	if len(d.Modes) != 2 || d.Modes[0] != sdk.ModeUnary || d.Modes[1] != sdk.ModeWindow {
		t.Errorf("modes = %v, want unary and window", d.Modes)
	}
	if d.Capabilities != (client.Capabilities{Validate: true, Expand: true, Stream: true, Streams: true, StreamsInvoke: true, Egress: true}) {
		t.Errorf("capabilities = %+v, want validate, expand, stream, streams and egress", d.Capabilities)
	}
	var schema map[string]any
	if err := json.Unmarshal(d.ConfigSchema, &schema); err != nil {
		t.Errorf("config schema is not JSON: %v", err)
	}
	if _, ok := rest.New().(sdk.OperationValidator); !ok {
		t.Error("New() does not implement sdk.OperationValidator")
	}
}

func TestPathParams(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	cfg := map[string]any{"method": "get", "url": srv.URL + "/users/{id}/files/{name}.json"}

	e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "a b/c", "name": "x?y#z%"}})
	if want := "/users/a%20b%2Fc/files/x%3Fy%23z%25.json"; e.URI != want {
		t.Errorf("uri = %q, want %q", e.URI, want)
	}
	if e.Method != "GET" {
		t.Errorf("method = %q", e.Method)
	}

	e = invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": 42, "name": true, "extra": 1}})
	if want := "/users/42/files/true.json"; e.URI != want {
		t.Errorf("uri = %q, want %q", e.URI, want)
	}
	if e.Body != nil {
		t.Errorf("GET sent a body %q", *e.Body)
	}

	for _, tc := range []struct {
		name string
		args any
		want string
	}{
		{"missing", map[string]any{"name": "n"}, `missing argument "id"`},
		{"null", map[string]any{"id": nil, "name": "n"}, `"id"`},
		{"empty", map[string]any{"id": "", "name": "n"}, "must not be empty"},
		{"list", map[string]any{"id": []int{1}, "name": "n"}, `"id"`},
		{"object", map[string]any{"id": map[string]int{"a": 1}, "name": "n"}, `"id"`},
		{"dotdot", map[string]any{"id": "..", "name": "n"}, `".."`},
		{"not an object", []int{1}, "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: tc.args})
			wantKind(t, ue, sdk.KindInvalidArgument)
			wantContains(t, "message", ue.Message, tc.want)
		})
	}
}

func TestLiteralPathIsEscaped(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	e := invokeEcho(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + "/a b/%2F/{id}"}, Args: map[string]any{"id": "ü"}})
	if want := "/a%20b/%2F/%C3%BC"; e.URI != want {
		t.Errorf("uri = %q, want %q", e.URI, want)
	}
}

func TestQuery(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)

	t.Run("list", func(t *testing.T) {
		e := invokeEcho(t, h, adaptertest.Call{
			Config: map[string]any{"method": "GET", "url": srv.URL + "/search?v=1", "query": []string{"verbose", "limit", "tags", "q", "absent", "none", "ratio"}},
			Args: map[string]any{
				"verbose": true, "limit": 10, "tags": []any{"a", "b c", nil, 3}, "q": `x&y="z"`,
				"none": nil, "ratio": 0.5, "ignored": "i",
			},
		})
		want := "/search?v=1&verbose=true&limit=10&tags=a&tags=b+c&tags=3&q=x%26y%3D%22z%22&ratio=0.5"
		if e.URI != want {
			t.Errorf("uri = %q\nwant  %q", e.URI, want)
		}
	})
	t.Run("object", func(t *testing.T) {
		e := invokeEcho(t, h, adaptertest.Call{
			Config: map[string]any{"method": "GET", "url": srv.URL + "/search", "query": map[string]string{"q": "search", "page[size]": "limit", "f": "filter"}},
			Args:   map[string]any{"search": "café", "limit": 5, "filter": map[string]any{"a": 1}},
		})
		want := "/search?f=%7B%22a%22%3A1%7D&page%5Bsize%5D=5&q=caf%C3%A9"
		if e.URI != want {
			t.Errorf("uri = %q\nwant  %q", e.URI, want)
		}
	})
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	cfg := map[string]any{
		"method":      "POST",
		"url":         srv.URL + "/h",
		"headers":     map[string]any{"X-Api-Key": "k1", "x-lower": "low", "X-Number": 7, "X-Tag": "default-tag"},
		"header_args": map[string]string{"X-Request-Tag": "tag", "X-Multi": "multi", "X-Tag": "tag2"},
	}
	e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"tag": "t-1", "multi": []string{"a", "b"}, "rest": 1}})
	check := func(name string, want ...string) {
		t.Helper()
		if got := e.Header[name]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	check("X-Api-Key", "k1")
	check("X-Lower", "low")
	check("X-Number", "7")
	check("X-Request-Tag", "t-1")
	check("X-Multi", "a", "b")
	check("X-Tag", "default-tag") // argument absent: the static header stays
	check("Accept", "application/json")
	check("Content-Type", "application/json")
	if ua := e.Header["User-Agent"]; len(ua) != 1 || !strings.HasPrefix(ua[0], "crank-rest/") {
		t.Errorf("user agent = %q", ua)
	}
	if e.Body == nil || *e.Body != `{"rest":1}` {
		t.Errorf("body = %v, want the arguments not used by header_args", e.Body)
	}

	e = invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"tag2": "override"}})
	check("X-Tag", "override")

	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"tag": "a\r\nX-Evil: 1"}})
	wantKind(t, ue, sdk.KindInvalidArgument)
	wantContains(t, "message", ue.Message, `"tag"`, "X-Request-Tag")
}

func TestHostAndOverrides(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	e := invokeEcho(t, h, adaptertest.Call{Config: map[string]any{
		"method":  "PATCH",
		"url":     srv.URL + "/x",
		"headers": map[string]string{"Host": "virtual.example", "Accept": "application/vnd.x+json", "Content-Type": "application/merge-patch+json"},
	}, Args: map[string]any{"a": 1}})
	if e.Host != "virtual.example" {
		t.Errorf("host = %q", e.Host)
	}
	if got := e.Header["Accept"]; len(got) != 1 || got[0] != "application/vnd.x+json" {
		t.Errorf("accept = %q", got)
	}
	if got := e.Header["Content-Type"]; len(got) != 1 || got[0] != "application/merge-patch+json" {
		t.Errorf("content type = %q", got)
	}
}

func TestTraceContext(t *testing.T) {
	// Not parallel: the spans an in-process adapter finishes leave with
	// whichever of its answers comes next, so another test's call running
	// meanwhile could take this test's spans.
	srv := newServer(t, echoHandler)
	h := adaptertest.New(t, rest.New())
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	call := adaptertest.Call{Config: json.RawMessage(`{"method":"GET","url":"` + srv.URL + `/"}`),
		Context: sdk.RequestContext{TraceParent: parent, TraceState: "k=v"}}
	echo := func() echoed {
		t.Helper()
		res, ue, err := h.Invoke(ctxT(t), call)
		if err != nil || ue != nil {
			t.Fatal(err, ue)
		}
		var e echoed
		if err := json.Unmarshal(res.Structured, &e); err != nil {
			t.Fatal(err)
		}
		if got := e.Header["Tracestate"]; len(got) != 1 || got[0] != "k=v" {
			t.Errorf("tracestate = %q", got)
		}
		return e
	}

	// Not traced by the host: the upstream gets the host's trace context.
	if got := echo().Header["Traceparent"]; len(got) != 1 || got[0] != parent {
		t.Errorf("traceparent = %q, want the host's %s", got, parent)
	}
	if s := h.Spans(); len(s) != 0 {
		t.Errorf("spans recorded for an untraced call: %+v", s)
	}

	// Traced: the upstream gets the upstream request's span, a child of
	// the adapter's span of the call, a child of the host's span.
	call.Context.RecordSpans = true
	got := echo().Header["Traceparent"]
	spans := h.Spans()
	if len(spans) != 2 {
		t.Fatalf("spans = %+v", spans)
	}
	server, upstream := spans[1], spans[0]
	if server.Kind != sdk.SpanServer || server.Name != "adapter invoke test_operation" ||
		fmt.Sprintf("%x", server.ParentSpanID) != "b7ad6b7169203331" || fmt.Sprintf("%x", server.TraceID) != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("adapter span = %+v", server)
	}
	if upstream.Kind != sdk.SpanClient || upstream.ParentSpanID != server.SpanID || upstream.TraceID != server.TraceID ||
		!strings.HasPrefix(upstream.Name, "GET 127.0.0.1") {
		t.Errorf("upstream span = %+v", upstream)
	}
	if want := fmt.Sprintf("00-%x-%x-01", upstream.TraceID, upstream.SpanID); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent = %q, want the upstream span's %s", got, want)
	}
	attrs := map[string]any{}
	for _, a := range upstream.Attributes {
		attrs[a.Key] = a.Value
	}
	if attrs["http.request.method"] != "GET" || attrs["http.response.status_code"] != int64(200) || attrs["server.address"] != "127.0.0.1" {
		t.Errorf("upstream span attributes = %v", attrs)
	}
}

func TestBodyModes(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	url := srv.URL + "/items/{id}"
	args := map[string]any{"id": 7, "q": "x", "name": "n", "payload": []int{1, 2}}
	for _, tc := range []struct {
		name   string
		method string
		body   any
		args   any
		want   string // "" means no body
	}{
		{"post auto sends remaining", "POST", nil, args, `{"name":"n","payload":[1,2]}`},
		{"put auto", "PUT", "auto", args, `{"name":"n","payload":[1,2]}`},
		{"patch auto", "patch", nil, args, `{"name":"n","payload":[1,2]}`},
		{"get auto no body", "GET", nil, args, ""},
		{"delete auto no body", "DELETE", nil, args, ""},
		{"post none", "POST", "none", args, ""},
		{"delete arguments", "DELETE", "arguments", args, `{"name":"n","payload":[1,2]}`},
		{"post named", "POST", "payload", args, `[1,2]`},
		{"post named absent", "POST", "payload", map[string]any{"id": 1}, ""},
		{"post named null", "POST", "payload", map[string]any{"id": 1, "payload": nil}, ""},
		{"post named object", "POST", "payload", map[string]any{"id": 1, "payload": map[string]int{"a": 1}}, `{"a":1}`},
		{"post auto nothing left", "POST", nil, map[string]any{"id": 1, "q": "y"}, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := map[string]any{"method": tc.method, "url": url, "query": []string{"q"}}
			if tc.body != nil {
				cfg["body"] = tc.body
			}
			e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: tc.args})
			got := ""
			if e.Body != nil {
				got = *e.Body
			}
			if got != tc.want {
				t.Errorf("body = %q, want %q", got, tc.want)
			}
			if ct := e.Header["Content-Type"]; (got != "") != (len(ct) == 1 && ct[0] == "application/json") {
				t.Errorf("content type %q with body %q", ct, got)
			}
		})
	}

	// Nothing consumed: the arguments are forwarded verbatim.
	raw := `{"z":1,"a":{"nested":[true,null]}}`
	e := invokeEcho(t, h, adaptertest.Call{Config: map[string]any{"method": "POST", "url": srv.URL + "/raw"}, Args: json.RawMessage(raw)})
	if e.Body == nil || *e.Body != raw {
		t.Errorf("body = %v, want %s", e.Body, raw)
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/object":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, `{"id":1,"name":"Ann"}`+"\n")
		case "/array":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[1,2,3]`)
		case "/problem":
			w.Header().Set("Content-Type", "application/problem+json")
			io.WriteString(w, `"just a string"`)
		case "/untyped":
			w.Header()["Content-Type"] = nil // no sniffing
			io.WriteString(w, `{"ok":true}`)
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "hello, world")
		case "/binary":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte{0x89, 'P', 'N', 'G', 0xff, 0xfe, 0})
		case "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF") // valid UTF-8, still bytes
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/empty":
			w.Header().Set("Content-Type", "application/json")
		case "/broken":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":1,`)
		case "/created":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"created":true}`)
		}
	})
	h := newHarness(t)
	call := func(path string) adaptertest.Call {
		return adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + path}}
	}
	for _, tc := range []struct {
		path, structured, text, contentType string
	}{
		{"/object", `{"id":1,"name":"Ann"}`, "", "application/json; charset=utf-8"},
		{"/array", `[1,2,3]`, "", "application/json"},
		{"/problem", `"just a string"`, "", "application/problem+json"},
		{"/untyped", `{"ok":true}`, "", ""},
		{"/text", "", "hello, world", "text/plain; charset=utf-8"},
		{"/binary", "", "[binary answer: 7 bytes of image/png]", "image/png"},
		{"/pdf", "", "[binary answer: 4 bytes of application/pdf]", "application/pdf"},
		{"/nocontent", `{}`, "", ""},
		{"/empty", `{}`, "", "application/json"},
		{"/created", `{"created":true}`, "", "application/json"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res := invokeOK(t, h, call(tc.path))
			if string(res.Structured) != tc.structured || res.Text != tc.text || res.ContentType != tc.contentType {
				t.Errorf("result = structured %q text %q type %q, want %q %q %q",
					res.Structured, res.Text, res.ContentType, tc.structured, tc.text, tc.contentType)
			}
		})
	}
	t.Run("binary content", func(t *testing.T) {
		// Binary answers are MCP content blocks with their media type:
		// an image block, else an embedded resource named by its URL.
		res := invokeOK(t, h, call("/binary"))
		if want := `[{"data":"iVBOR//+AA==","mimeType":"image/png","type":"image"}]`; string(res.Content) != want {
			t.Errorf("image content = %s, want %s", res.Content, want)
		}
		res = invokeOK(t, h, call("/pdf?token=secret"))
		if want := `[{"resource":{"blob":"JVBERg==","mimeType":"application/pdf","uri":"` + srv.URL + `/pdf"},"type":"resource"}]`; string(res.Content) != want {
			t.Errorf("pdf content = %s, want %s", res.Content, want)
		}
	})
	t.Run("head", func(t *testing.T) {
		res := invokeOK(t, h, adaptertest.Call{Config: map[string]any{"method": "HEAD", "url": srv.URL + "/object"}})
		if string(res.Structured) != `{}` {
			t.Errorf("structured = %q", res.Structured)
		}
	})
	t.Run("broken json", func(t *testing.T) {
		ue := invokeErr(t, h, call("/broken"))
		wantKind(t, ue, sdk.KindBadResponse)
		wantContains(t, "message", ue.Message, "not valid JSON")
		wantContains(t, "body", ue.Body, `{"id":1,`)
	})
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 3000) // 6000 bytes, 2-byte runes
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/users/404":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no such user"}`)
		case "/users/long":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "x"+long)
		case "/users/busy":
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/users/limited":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/users/bad":
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	h := newHarness(t)
	cfg := map[string]any{"method": "GET", "url": srv.URL + "/users/{id}?api_version=2", "query": []string{"q"}}

	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "404", "q": "x"}})
	wantKind(t, ue, sdk.KindUpstreamStatus)
	// The path called, with its arguments; never the query, which may
	// carry a credential.
	if want := "GET " + srv.URL + "/users/404"; ue.Upstream != want {
		t.Errorf("upstream = %q, want %q", ue.Upstream, want)
	}
	if ue.Status != "404" || ue.Message != "upstream answered 404 Not Found" || ue.Retryable || !ue.Rejected {
		t.Errorf("error = %+v", ue)
	}
	if ue.Body != `{"error":"no such user"}` {
		t.Errorf("body = %q", ue.Body)
	}
	var detail map[string]any
	if err := json.Unmarshal(ue.Detail, &detail); err != nil || detail["status_code"] != float64(404) || detail["content_type"] != "application/json" {
		t.Errorf("detail = %s (%v)", ue.Detail, err)
	}

	ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "long"}})
	wantKind(t, ue, sdk.KindUpstreamStatus)
	body := ue.Body
	wantContains(t, "body", body, "truncated", "2048")
	if excerpt, _, _ := strings.Cut(body, "\n[truncated"); len(excerpt) > 2048 || len(excerpt) < 2040 || !strings.HasPrefix(excerpt, "xé") {
		t.Errorf("excerpt has %d bytes: %.40q", len(excerpt), excerpt)
	}
	if ue.Retryable || ue.Rejected {
		t.Error("500 must be neither retryable nor rejected")
	}

	ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "busy"}})
	if ue.Status != "503" || !ue.Retryable || !strings.Contains(string(ue.Detail), `"retry_after":"7"`) {
		t.Errorf("503: %+v", ue)
	}
	ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "limited"}})
	if ue.Status != "429" || !ue.Retryable || ue.Rejected {
		t.Errorf("429: %+v", ue)
	}
	ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"id": "bad"}})
	if ue.Status != "400" || ue.Retryable || !ue.Rejected {
		t.Errorf("400: %+v", ue)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	addr := closedPort(t)
	ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "POST", "url": "http://" + addr + "/orders/{id}"}, Args: map[string]any{"id": 1}})
	wantKind(t, ue, sdk.KindTransport)
	if want := "POST http://" + addr; ue.Upstream != want {
		t.Errorf("upstream = %q, want %q", ue.Upstream, want)
	}
	wantContains(t, "message", ue.Message, addr, "connection refused")
	if !ue.Retryable {
		t.Error("a refused connection never reached the upstream: retryable")
	}
}

func TestDNSFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": "http://no-such-host.invalid/x"}})
	wantKind(t, ue, sdk.KindTransport)
	wantContains(t, "message", ue.Message, "no-such-host.invalid")
}

func TestTLSToPlainServer(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": strings.Replace(srv.URL, "http://", "https://", 1) + "/x"}})
	wantKind(t, ue, sdk.KindTransport)
	wantContains(t, "message", ue.Message, "TLS")
}

// slowServer answers only when the client goes away (or after a minute),
// and reports each request's end on done.
func slowServer(t *testing.T) (*httptest.Server, chan struct{}) {
	done := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body so the server notices the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		done <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv, done
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	srv, _ := slowServer(t)
	h := newHarness(t)

	t.Run("host timeout", func(t *testing.T) {
		start := time.Now()
		ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + "/slow", "timeout": "1m"}, Timeout: 150 * time.Millisecond})
		wantKind(t, ue, sdk.KindTimeout)
		wantContains(t, "message", ue.Message, "150ms")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("timeout took %v", d)
		}
	})
	t.Run("config timeout", func(t *testing.T) {
		ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + "/slow", "timeout": "120ms"}})
		wantKind(t, ue, sdk.KindTimeout)
		wantContains(t, "message", ue.Message, "120ms")
		if ue.Upstream != "GET "+srv.URL {
			t.Errorf("upstream = %q", ue.Upstream)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		bodySrv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[1`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": bodySrv.URL}, Timeout: 150 * time.Millisecond})
		wantKind(t, ue, sdk.KindTimeout)
		wantContains(t, "message", ue.Message, "150ms")
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	srv, done := slowServer(t)

	t.Run("through grpc", func(t *testing.T) {
		h := newHarness(t)
		ctx, cancel := context.WithCancel(ctxT(t))
		time.AfterFunc(100*time.Millisecond, cancel)
		_, _, err := h.Invoke(ctx, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + "/slow"}})
		if client.CodeOf(err) != client.Cancelled {
			t.Fatalf("err = %v, want Cancelled", err)
		}
		// The adapter must have stopped the upstream request.
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream request was not cancelled")
		}
	})
	t.Run("direct", func(t *testing.T) {
		a := rest.New()
		ctx, cancel := context.WithCancel(ctxT(t))
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := a.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Config: json.RawMessage(`{"method":"GET","url":"` + srv.URL + `/slow"}`)}})
		ue, ok := err.(*sdk.UpstreamError)
		if !ok || ue.Kind != sdk.KindCancelled {
			t.Fatalf("err = %#v, want KindCancelled", err)
		}
	})
	t.Run("host deadline", func(t *testing.T) {
		a := rest.New()
		ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
		defer cancel()
		_, err := a.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Config: json.RawMessage(`{"method":"GET","url":"` + srv.URL + `/slow"}`)}})
		ue, ok := err.(*sdk.UpstreamError)
		if !ok || ue.Kind != sdk.KindTimeout {
			t.Fatalf("err = %#v, want KindTimeout", err)
		}
	})
}

func TestOversizedResponse(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := `["` + strings.Repeat("a", 2000) + `"]`
		if r.URL.Path == "/chunked" {
			// No Content-Length: the limit is found while reading.
			io.WriteString(w, body[:1000])
			w.(http.Flusher).Flush()
			io.WriteString(w, body[1000:])
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body)
	})
	h := newHarness(t)
	for _, path := range []string{"/sized", "/chunked"} {
		ue := invokeErr(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + path, "max_response_bytes": 1000}})
		wantKind(t, ue, sdk.KindBadResponse)
		wantContains(t, "message", ue.Message, "max_response_bytes", "1000")
	}
	// HEAD has no body, whatever Content-Length says.
	res := invokeOK(t, h, adaptertest.Call{Config: map[string]any{"method": "HEAD", "url": srv.URL + "/sized", "max_response_bytes": 1000}})
	if string(res.Structured) != "{}" {
		t.Errorf("HEAD: %q", res.Structured)
	}
	// Exactly at the limit is fine.
	res = invokeOK(t, h, adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + "/sized", "max_response_bytes": 2004}})
	if len(res.Structured) != 2004 {
		t.Errorf("got %d bytes", len(res.Structured))
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	other := newServer(t, echoHandler)
	var srv *httptest.Server
	srv = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
		default:
			echoHandler(w, r)
		}
	})
	h := newHarness(t)
	cfg := func(path string) adaptertest.Call {
		return adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + path, "headers": map[string]string{"X-Api-Key": "secret"}}}
	}
	e := invokeEcho(t, h, cfg("/same"))
	if e.URI != "/final" || len(e.Header["X-Api-Key"]) != 1 {
		t.Errorf("same-origin redirect: %+v", e)
	}
	ue := invokeErr(t, h, cfg("/elsewhere"))
	wantKind(t, ue, sdk.KindUpstreamStatus)
	if ue.Status != "302" {
		t.Errorf("status = %q", ue.Status)
	}
	// The target the caller may want (a download URL) is reported.
	wantContains(t, "message", ue.Message, "Location: "+other.URL+"/stolen")
	wantContains(t, "detail", string(ue.Detail), `"location":"`+other.URL+`/stolen"`)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	good := map[string]any{
		"method": "post", "url": "https://api.example.com/v1/users/{id}/x-{part}?fixed=1",
		"query": []string{"q"}, "headers": map[string]any{"Authorization": "Bearer x", "X-N": 1},
		"header_args": map[string]string{"X-Tag": "tag"}, "body": "payload", "timeout": "2s",
		"max_response_bytes": 1024,
	}
	diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: good})
	if err != nil || diags != nil {
		t.Fatalf("good config: diags %v, err %v", diags, err)
	}

	with := func(k string, v any) map[string]any {
		c := map[string]any{"method": "GET", "url": "http://127.0.0.1:8081/users/{id}"}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		config any
		field  string
		msg    string
	}{
		{"not an object", `[1]`, "", "JSON object"},
		{"missing method", with("method", nil), "method", "required"},
		{"unknown method", with("method", "FETCH"), "method", "unknown method"},
		{"method not a string", with("method", 1), "method", "string"},
		{"missing url", with("url", nil), "url", "required"},
		{"relative url", with("url", "/users/{id}"), "url", "absolute"},
		{"ftp url", with("url", "ftp://host/x"), "url", "http or https"},
		{"no host", with("url", "http:///x"), "url", "host"},
		{"bad port", with("url", "http://host:port/x"), "url", "port"},
		{"unclosed brace", with("url", "http://h/users/{id"), "url", "unclosed"},
		{"stray brace", with("url", "http://h/users/id}"), "url", "'}'"},
		{"empty param", with("url", "http://h/users/{}"), "url", "empty"},
		{"bad param name", with("url", "http://h/users/{a b}"), "url", "not a valid argument name"},
		{"nested brace", with("url", "http://h/users/{a{b}}"), "url", "nested"},
		{"param in host", with("url", "http://{tenant}.h/x"), "url", "host"},
		{"param in query", with("url", "http://h/x?id={id}"), "url", "query"},
		{"bad escape", with("url", "http://h/x%zz"), "url", "percent-encoding"},
		{"query wrong type", with("query", 5), "query", "list"},
		{"query bad name", with("query", []string{"ok", ""}), "query[1]", "valid argument name"},
		{"query duplicate", with("query", []string{"a", "a"}), "query[1]", "twice"},
		{"query object bad arg", with("query", map[string]string{"q": "a b"}), "query.q", "valid argument name"},
		{"headers wrong type", with("headers", []string{"x"}), "headers", "object"},
		{"header bad name", with("headers", map[string]string{"Bad Name": "v"}), "headers.Bad Name", "header name"},
		{"header managed", with("headers", map[string]string{"content-length": "1"}), "headers.content-length", "set by the adapter"},
		{"header object value", with("headers", map[string]any{"X-A": map[string]int{}}), "headers.X-A", "string"},
		{"header duplicate", with("headers", map[string]string{"X-A": "1", "x-a": "2"}), "headers.x-a", "twice"},
		{"header_args bad arg", with("header_args", map[string]string{"X-A": ""}), "header_args.X-A", "argument name"},
		{"header_args wrong type", with("header_args", "x"), "header_args", "object"},
		{"body empty", with("body", ""), "body", "empty"},
		{"body wrong type", with("body", true), "body", "string"},
		{"body bad arg", with("body", "a b"), "body", "not valid"},
		{"bad timeout", with("timeout", "10 parsecs"), "timeout", "duration"},
		{"numeric timeout", with("timeout", 10), "timeout", "duration"},
		{"negative timeout", with("timeout", "-1s"), "timeout", "positive"},
		{"negative limit", with("max_response_bytes", -1), "max_response_bytes", "must be at least 0"},
		{"fractional limit", with("max_response_bytes", 1.5), "max_response_bytes", "integer"},
		{"unknown field", with("hedaers", map[string]string{}), "hedaers", `did you mean "headers"`},
		{"unknown field far", with("retries", 3), "retries", "unknown field"},
		{"case matters", with("Timeout", "1s"), "Timeout", `"timeout"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, d := range diags {
				if d.Field == tc.field && d.Severity == sdk.SeverityError && strings.Contains(d.Message, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("want an error diagnostic on %q containing %q, got %v", tc.field, tc.msg, diags)
			}
			// Invoke refuses the same config.
			ue := invokeErr(t, h, adaptertest.Call{Config: tc.config})
			wantKind(t, ue, sdk.KindInvalidArgument)
			wantContains(t, "message", ue.Message, tc.msg)
		})
	}

	t.Run("several problems at once", func(t *testing.T) {
		diags, _ := h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"url": "x", "timeout": "soon", "a": 1, "b": 2}})
		fields := map[string]bool{}
		for _, d := range diags {
			fields[d.Field] = true
		}
		for _, f := range []string{"method", "url", "timeout", "a", "b"} {
			if !fields[f] {
				t.Errorf("no diagnostic for %q in %v", f, diags)
			}
		}
	})
	t.Run("warnings only", func(t *testing.T) {
		diags, _ := h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"method": "GET", "url": "http://h/x#frag", "body": "arguments"}})
		if len(diags) != 2 {
			t.Fatalf("diags = %v", diags)
		}
		for _, d := range diags {
			if d.Severity != sdk.SeverityWarning {
				t.Errorf("want a warning: %v", d)
			}
		}
	})
}

// TestSecretsNeverLeak checks that configured secrets (header values,
// userinfo, a static query string) appear in no error or diagnostic.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-T0KEN"
	notFound := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != secret || r.URL.Query().Get("token") != secret {
			t.Errorf("the secret did not reach the upstream")
		}
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != secret {
			t.Errorf("basic auth = %q %q %v", u, p, ok)
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "not here")
	})
	slow, _ := slowServer(t)
	h := newHarness(t)
	cfg := func(base string, extra map[string]any) map[string]any {
		c := map[string]any{
			"method":  "POST",
			"url":     strings.Replace(base, "http://", "http://user:"+secret+"@", 1) + "/items/{id}?token=" + secret,
			"headers": map[string]string{"X-Api-Key": secret, "X-Auth": "Bearer " + secret},
			"query":   []string{"q"},
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	check := func(name string, ue *sdk.UpstreamError) {
		t.Helper()
		if ue == nil {
			t.Errorf("%s: no error", name)
			return
		}
		if s := dump(ue); strings.Contains(s, secret) || strings.Contains(s, "user:") {
			t.Errorf("%s: secret leaked: %s", name, s)
		}
	}
	args := map[string]any{"id": 1, "q": "x"}
	check("404", invokeErr(t, h, adaptertest.Call{Config: cfg(notFound.URL, nil), Args: args}))
	check("refused", invokeErr(t, h, adaptertest.Call{Config: cfg("http://"+closedPort(t), nil), Args: args}))
	check("timeout", invokeErr(t, h, adaptertest.Call{Config: cfg(slow.URL, map[string]any{"timeout": "100ms"}), Args: args}))
	check("missing path arg", invokeErr(t, h, adaptertest.Call{Config: cfg(notFound.URL, nil), Args: map[string]any{}}))
	check("invalid config", invokeErr(t, h, adaptertest.Call{Config: cfg(notFound.URL, map[string]any{"method": "NOPE", "extra": secret}), Args: args}))
	check("invalid url", invokeErr(t, h, adaptertest.Call{Config: cfg("http://bad host:"+secret, nil), Args: args}))
	check("injected header", invokeErr(t, h, adaptertest.Call{Config: cfg(notFound.URL, map[string]any{"headers": map[string]string{"X-Api-Key": secret + "\n"}}), Args: args}))

	diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: cfg("http://bad host:"+secret, map[string]any{
		"headers": map[string]string{"X-Api-Key": secret + "\r\n", "Bad Name": secret},
	})})
	if err != nil || len(diags) == 0 {
		t.Fatalf("diags %v err %v", diags, err)
	}
	for _, d := range diags {
		if strings.Contains(dump(d), secret) {
			t.Errorf("diagnostic leaks the secret: %v", d)
		}
	}
}

// TestConcurrentConfigs exercises the config cache and the shared client
// from many goroutines (run with -race).
func TestConcurrentConfigs(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				cfg := map[string]any{"method": "GET", "url": fmt.Sprintf("%s/c%d/{id}", srv.URL, (i+j)%7)}
				res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"id": j}})
				if err != nil || ue != nil {
					t.Errorf("invoke: %v %v", err, ue)
					return
				}
				var e echoed
				_ = json.Unmarshal(res.Structured, &e)
				if want := fmt.Sprintf("/c%d/%d", (i+j)%7, j); e.URI != want {
					t.Errorf("uri = %q, want %q", e.URI, want)
				}
			}
		}()
	}
	wg.Wait()
}

// A path argument that is or holds a dot segment once decoded ("..",
// "%2e%2e", "a/../b", also decoded twice, after a backslash or before a
// matrix parameter) is refused: an upstream or a proxy that decodes or
// normalises the path would walk out of the configured one.
func TestPathDotSegments(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	plain := map[string]any{"method": "GET", "url": srv.URL + "/files/{name}"}
	styled := map[string]any{"method": "GET", "url": srv.URL + "/files/{name}", "param_styles": map[string]any{"name": map[string]any{"style": "label"}}}
	for _, bad := range []string{".", "..", "%2e", "%2E%2e", "%252e%252e", "a/../b", "../x", "x/..", "..%2fx", `..\x`, `a\.\b`, "..;jsessionid=1", "%2e%2e%3bx"} {
		ue := invokeErr(t, h, adaptertest.Call{Config: plain, Args: map[string]any{"name": bad}})
		wantKind(t, ue, sdk.KindInvalidArgument)
		wantContains(t, fmt.Sprintf("%q", bad), ue.Message, `argument "name"`, "dot segment")
	}
	// label style: ".", "./" and "%2e" would be "..", "../" and ".." once
	// decoded.
	for _, bad := range []string{".", "./", "%2e"} {
		ue := invokeErr(t, h, adaptertest.Call{Config: styled, Args: map[string]any{"name": bad}})
		wantContains(t, "label "+bad, ue.Message, `argument "name"`, "dot segment")
	}
	for _, good := range []string{"...", "a..b", "v1.0", ".hidden", "a.", "%2e%2e%2e", "..."} {
		e := invokeEcho(t, h, adaptertest.Call{Config: plain, Args: map[string]any{"name": good}})
		if want := "/files/" + url.PathEscape(good); e.URI != want {
			t.Errorf("%q: uri = %q, want %q", good, e.URI, want)
		}
	}
	e := invokeEcho(t, h, adaptertest.Call{Config: styled, Args: map[string]any{"name": []any{"a", "b"}}})
	if e.URI != "/files/.a,b" {
		t.Errorf("label uri = %q", e.URI)
	}
}

// allow_reserved leaves reserved characters of a query value unescaped,
// but never those that would end the value, add a parameter or start a
// fragment (&, =, #) or read as a space (+).
func TestAllowReservedQuery(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	cfg := map[string]any{"method": "GET", "url": srv.URL + "/search", "query": []string{"q", "list", "obj"},
		"param_styles": map[string]any{
			"q":    map[string]any{"style": "form", "allow_reserved": true},
			"list": map[string]any{"style": "form", "explode": false, "allow_reserved": true},
			"obj":  map[string]any{"style": "form", "allow_reserved": true},
		}}
	e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{
		"q":    "a/b?c:d@e&admin=true#frag+x",
		"list": []any{"x&y=z", "w#"},
		"obj":  map[string]any{"k": "v=1&role=admin", "p": "/x"},
	}})
	want := "/search?q=a/b?c:d@e%26admin%3Dtrue%23frag%2Bx&list=x%26y%3Dz,w%23&k=v%3D1%26role%3Dadmin&p=/x"
	if e.URI != want {
		t.Errorf("uri = %q\nwant  %q", e.URI, want)
	}
	u, err := url.ParseRequestURI(e.URI)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if len(q) != 4 || q.Get("q") != "a/b?c:d@e&admin=true#frag+x" || q.Get("k") != "v=1&role=admin" || q.Has("admin") || q.Has("role") {
		t.Errorf("the upstream read %v", q)
	}
}

// An operation held to egress rules (a catalog's entry) connects only
// where they allow, checked on the address dialled: a loopback upstream
// under * is refused, clearly and for good; one the rules name is
// reached; a Host header naming another host is refused before anything
// is sent; a same-origin redirect is followed under the rules.
func TestEgress(t *testing.T) {
	t.Parallel()
	var hits sync.Map
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.URL.Path, true)
		if r.URL.Path == "/same" {
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		}
		echoHandler(w, r)
	})
	h := newHarness(t)
	call := func(path string, rules []string, headers map[string]string) adaptertest.Call {
		return adaptertest.Call{Config: map[string]any{"method": "GET", "url": srv.URL + path, "headers": headers}, Egress: rules}
	}
	ue := invokeErr(t, h, call("/refused", []string{"*"}, nil))
	wantKind(t, ue, sdk.KindTransport)
	wantContains(t, "message", ue.Message, "egress refused", "is a loopback address", "(*)")
	if ue.Retryable {
		t.Error("an egress refusal is retryable")
	}
	if _, ok := hits.Load("/refused"); ok {
		t.Error("the refused request reached the upstream")
	}
	if e := invokeEcho(t, h, call("/same", []string{srv.URL + "/"}, nil)); e.URI != "/final" {
		t.Errorf("a named upstream: %+v", e)
	}
	ue = invokeErr(t, h, call("/admin", []string{srv.URL + "/"}, map[string]string{"Host": "localhost:2019"}))
	wantContains(t, "message", ue.Message, "egress refused", `Host header "localhost:2019"`)
	if _, ok := hits.Load("/admin"); ok {
		t.Error("the request with another Host reached the upstream")
	}
	// The same config without rules (an operations file's entry) is
	// another client, and reaches anything.
	if e := invokeEcho(t, h, call("/free", nil, map[string]string{"Host": "virtual.example"})); e.Host != "virtual.example" {
		t.Errorf("no rules: %+v", e)
	}
}
