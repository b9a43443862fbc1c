package rest_test

import (
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestFormBody: a form body writes scalars plainly, objects and lists in
// brackets (a[b][c]=v, a[]=v, a[0][k]=v), and follows each property's
// encoding.
func TestFormBody(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	cfg := map[string]any{"method": "POST", "url": srv.URL + "/v1/customers", "body": "arguments",
		"body_format": map[string]any{"media_type": "application/x-www-form-urlencoded", "encoding": map[string]any{
			"expand": map[string]any{"style": "deepObject", "explode": true},
			"tags":   map[string]any{"style": "form", "explode": false},
			"pipe":   map[string]any{"style": "pipeDelimited", "explode": false},
			"meta":   map[string]any{"content_type": "application/json"},
		}}}
	e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{
		"email":    "a@b.c",
		"metadata": map[string]any{"order": "6735", "nested": map[string]any{"k": "v w"}},
		"expand":   []string{"data.customer", "data.invoice"},
		"items":    []any{map[string]any{"price": "p_1", "quantity": 2}},
		"repeat":   []int{1, 2},
		"tags":     []string{"a", "b"},
		"pipe":     []string{"a", "b"},
		"meta":     map[string]any{"x": 1},
		"gone":     nil,
		"flag":     true,
	}})
	if ct := e.Header["Content-Type"]; len(ct) != 1 || ct[0] != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q", ct)
	}
	if e.Body == nil {
		t.Fatal("no body")
	}
	got, err := url.QueryUnescape(*e.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "email=a@b.c&expand[]=data.customer&expand[]=data.invoice&flag=true&items[0][price]=p_1&items[0][quantity]=2" +
		`&meta={"x":1}&metadata[nested][k]=v w&metadata[order]=6735&pipe=a|b&repeat=1&repeat=2&tags=a,b`
	if got != want {
		t.Errorf("form body\n got %s\nwant %s", got, want)
	}
	if strings.Contains(*e.Body, "[") || strings.Contains(*e.Body, " ") {
		t.Errorf("form body not escaped: %s", *e.Body)
	}

	// A value a style cannot carry is refused, naming the field.
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"pipe": map[string]any{"a": 1}}})
	wantKind(t, ue, sdk.KindInvalidArgument)
	wantContains(t, "message", ue.Message, `body field "pipe"`, "pipeDelimited")
}

// TestMultipartBody: fields, a JSON part, a deepObject-styled field and a
// file from base64; a URI for a file is refused with a clear error.
func TestMultipartBody(t *testing.T) {
	t.Parallel()
	type part struct{ name, filename, ct, body string }
	got := make(chan []part, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			http.Error(w, "not multipart: "+r.Header.Get("Content-Type"), http.StatusBadRequest)
			return
		}
		var parts []part
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			parts = append(parts, part{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), string(b)})
		}
		got <- parts
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"file_1"}`)
	})
	h := newHarness(t)
	cfg := map[string]any{"method": "POST", "url": srv.URL + "/v1/files", "body": "arguments",
		"body_format": map[string]any{"media_type": "multipart/form-data", "encoding": map[string]any{
			"file":           map[string]any{"file": true, "content_type": "image/png"},
			"file_link_data": map[string]any{"style": "deepObject", "explode": true},
		}}}
	invokeOK(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{
		"purpose":        "dispute_evidence",
		"file":           "iVBORw0KGgo=",
		"file_link_data": map[string]any{"create": true},
		"options":        map[string]any{"a": 1},
		"tags":           []string{"x", "y"},
	}})
	parts := <-got
	want := []part{
		{"file", "file", "image/png", "\x89PNG\r\n\x1a\n"},
		{"file_link_data[create]", "", "", "true"},
		{"options", "", "application/json", `{"a":1}`},
		{"purpose", "", "", "dispute_evidence"},
		{"tags", "", "", "x"},
		{"tags", "", "", "y"},
	}
	if len(parts) != len(want) {
		t.Fatalf("parts = %q, want %q", parts, want)
	}
	for i := range want {
		if parts[i] != want[i] {
			t.Errorf("part %d = %q, want %q", i, parts[i], want[i])
		}
	}
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{"file": "file:///etc/passwd"}})
	wantKind(t, ue, sdk.KindInvalidArgument)
	wantContains(t, "message", ue.Message, `body field "file"`, "base64", "a URI is not read")
}

// TestRawBody: a raw body is one string argument, text as it is or
// bytes from base64.
func TestRawBody(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	text := map[string]any{"method": "PUT", "url": srv.URL + "/notes", "body": "content",
		"body_format": map[string]any{"media_type": "text/plain; charset=utf-8"}}
	e := invokeEcho(t, h, adaptertest.Call{Config: text, Args: map[string]any{"content": "hello\nworld"}})
	if e.Body == nil || *e.Body != "hello\nworld" || e.Header["Content-Type"][0] != "text/plain; charset=utf-8" {
		t.Errorf("text body: %+v", e)
	}
	bin := map[string]any{"method": "PUT", "url": srv.URL + "/blob", "body": "data",
		"body_format": map[string]any{"media_type": "application/octet-stream", "base64": true}}
	e = invokeEcho(t, h, adaptertest.Call{Config: bin, Args: map[string]any{"data": "aGk="}})
	if e.Body == nil || *e.Body != "hi" || e.Header["Content-Type"][0] != "application/octet-stream" {
		t.Errorf("binary body: %+v", e)
	}
	ue := invokeErr(t, h, adaptertest.Call{Config: bin, Args: map[string]any{"data": "not base64!"}})
	wantContains(t, "message", ue.Message, `argument "data"`, "base64")
	ue = invokeErr(t, h, adaptertest.Call{Config: text, Args: map[string]any{"content": map[string]any{}}})
	wantContains(t, "message", ue.Message, `argument "content"`, "must be a string")
}

// TestBodyFormatConfig: body_format is checked at load.
func TestBodyFormatConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		cfg         map[string]any
		field, want string
	}{
		{map[string]any{"body": "arguments", "body_format": map[string]any{"media_type": "nope"}}, "body_format.media_type", "media type"},
		{map[string]any{"body": "arguments", "body_format": map[string]any{"media_type": "application/pdf"}}, "body", "set body to its name"},
		{map[string]any{"body": "arguments", "body_format": map[string]any{"media_type": "application/x-www-form-urlencoded", "base64": true}}, "body_format.base64", "only applies to raw"},
		{map[string]any{"body": "arguments", "body_format": map[string]any{"media_type": "application/x-www-form-urlencoded",
			"encoding": map[string]any{"f": map[string]any{"file": true}}}}, "body_format.encoding.f.file", "only multipart"},
		{map[string]any{"body": "arguments", "body_format": map[string]any{"media_type": "multipart/form-data",
			"encoding": map[string]any{"f": map[string]any{"style": "matrix"}}}}, "body_format.encoding.f.style", "one of form"},
		{map[string]any{"body": "x", "body_format": map[string]any{"media_type": "text/plain", "encoding": map[string]any{"f": map[string]any{}}}}, "body_format.encoding", "only applies to form"},
		{map[string]any{"body": "arguments", "body_fields": map[string]any{"a": 1}, "body_format": map[string]any{"media_type": "multipart/form-data"}}, "body_fields", "only apply to JSON"},
	} {
		cfg := map[string]any{"method": "POST", "url": "http://h/x"}
		for k, v := range c.cfg {
			cfg[k] = v
		}
		wantDiagnostic(t, h, cfg, c.field, c.want)
	}
}

// wantDiagnostic checks that validating cfg reports field with a message
// holding want.
func wantDiagnostic(t *testing.T, h *adaptertest.Harness, cfg map[string]any, field, want string) {
	t.Helper()
	diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diags {
		if d.Field == field && strings.Contains(d.Message, want) {
			return
		}
	}
	t.Errorf("%v: no diagnostic %s ~ %q in %v", cfg, field, want, diags)
}

// TestDeepObjectQuery: a deepObject query parameter takes a list
// (expand[]=a&expand[]=b, as Stripe reads it) and a scalar, not only an
// object.
func TestDeepObjectQuery(t *testing.T) {
	t.Parallel()
	srv := newServer(t, echoHandler)
	h := newHarness(t)
	cfg := map[string]any{"method": "GET", "url": srv.URL + "/v1/charges", "query": []string{"expand", "created", "limit"},
		"param_styles": map[string]any{
			"expand":  map[string]any{"style": "deepObject"},
			"created": map[string]any{"style": "deepObject"},
			"limit":   map[string]any{"style": "deepObject"},
		}}
	e := invokeEcho(t, h, adaptertest.Call{Config: cfg, Args: map[string]any{
		"expand": []string{"data.customer", "data.invoice"}, "created": map[string]any{"gte": 5}, "limit": 3,
	}})
	if want := "/v1/charges?expand[]=data.customer&expand[]=data.invoice&created[gte]=5&limit=3"; e.URI != want {
		t.Errorf("URI\n got %s\nwant %s", e.URI, want)
	}
}
