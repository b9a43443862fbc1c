package host_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/crankmcp/crank/host"
)

// recordingUpstream answers {"ok":true} to every request and returns the
// requests it received ("METHOD /uri body").
func recordingUpstream(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// An argument the input schema does not declare is refused by the host,
// for every adapter, before any request is built: the REST adapter's
// auto body would forward it to the upstream. An operation opts in with
// additionalProperties (true or a schema).
func TestUndeclaredArguments(t *testing.T) {
	up, bodies := recordingUpstream(t)
	f, err := newFixture(t, `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: create_user
    description: create_user.
    adapter: rest
    input_schema:
      type: object
      properties:
        name: {type: string}
        email: {type: string}
      required: [name]
    config: {method: POST, url: "`+up.URL+`/users"}
  - name: create_open
    description: create_open.
    adapter: rest
    input_schema: {type: object, properties: {name: {type: string}}, additionalProperties: true}
    config: {method: POST, url: "`+up.URL+`/open"}
  - name: create_typed
    description: create_typed.
    adapter: rest
    input_schema: {type: object, properties: {name: {type: string}}, additionalProperties: {type: integer}}
    config: {method: POST, url: "`+up.URL+`/typed"}
  - name: get_user
    description: get_user.
    adapter: rest
    input_schema: {type: object, required: [id]}
    config: {method: GET, url: "`+up.URL+`/users/{id}"}
  - name: ping
    description: ping.
    adapter: rest
    config: {method: POST, url: "`+up.URL+`/ping"}
  - name: composed
    description: composed.
    adapter: rest
    input_schema:
      type: object
      allOf:
        - properties: {a: {type: string}}
        - properties: {b: {type: string}}
      patternProperties: {"^x-": {type: string}}
    config: {method: POST, url: "`+up.URL+`/composed"}
`)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct{ tool, args, want string }{
		{"create_user", `{"name":"x","role":"admin"}`, `unknown argument "role": the tool takes email, name`},
		{"create_user", `{"name":"x","role":"admin","admin":true}`, `unknown arguments "admin", "role"`},
		{"create_user", `{"role":"admin"}`, `unknown argument "role"`},
		{"create_typed", `{"name":"x","role":"admin"}`, `role: must be an integer, got a string`},
		{"get_user", `{"id":1,"x":2}`, `unknown argument "x": the tool takes id`},
		{"ping", `{"x":1}`, `unknown argument "x": the tool takes no arguments`},
		{"composed", `{"a":"1","c":"2"}`, `unknown argument "c": the tool takes a, b`},
	}
	for _, c := range refused {
		res := call(t, f.h, c.tool, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: want isError containing %q, got %+v", c.tool, c.args, c.want, res)
		}
	}
	if got := bodies(); len(got) > 0 {
		t.Errorf("refused calls reached the upstream: %q", got)
	}

	for _, c := range []struct{ tool, args string }{
		{"create_user", `{"name":"x","email":"e"}`},
		{"create_open", `{"name":"x","role":"admin"}`},
		{"create_typed", `{"name":"x","level":3}`},
		{"get_user", `{"id":7}`},
		{"ping", `{}`},
		{"composed", `{"a":"1","b":"2","x-trace":"t"}`},
	} {
		if res := call(t, f.h, c.tool, c.args); res.IsError {
			t.Errorf("%s %s: %s", c.tool, c.args, res.Text)
		}
	}
	got := strings.Join(bodies(), "\n")
	for _, want := range []string{`POST /users {"name":"x","email":"e"}`, `POST /open {"name":"x","role":"admin"}`, `GET /users/7 `} {
		if !strings.Contains(got, want) {
			t.Errorf("the upstream got\n%s\nwant %s", got, want)
		}
	}

	// The published schemas say so.
	for _, op := range f.h.Operations() {
		want := `"additionalProperties":false`
		switch op.Name {
		case "create_open", "create_typed":
			want = `"additionalProperties":{`
			if op.Name == "create_open" {
				want = `"additionalProperties":true`
			}
		case "composed":
			want = `"unevaluatedProperties":false`
		}
		if !strings.Contains(string(op.InputSchema), want) {
			t.Errorf("%s input schema %s lacks %s", op.Name, op.InputSchema, want)
		}
	}
	if _, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("ping")}); err != nil {
		t.Error(err)
	}
}

// A member name given twice in one object of the arguments, at any depth,
// is refused before any request is built: the schema and the policy see
// one of the two values (encoding/json keeps the last), an upstream may
// act on the other.
func TestDuplicateArgumentMembers(t *testing.T) {
	up, bodies := recordingUpstream(t)
	f, err := newFixture(t, `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: create_user
    description: create_user.
    adapter: rest
    input_schema:
      type: object
      properties:
        name: {type: string, maxLength: 5}
        filter: {type: object}
        tags: {type: array}
      required: [name]
    config: {method: POST, url: "`+up.URL+`/users"}
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, want string }{
		{`{"name":"toolongname","name":"ok"}`, `name: appears twice in its object`},
		{`{"name":"ok","n\u0061me":"toolongname"}`, `name: appears twice in its object`},
		{`{"name":"ok","filter":{"role":"user","role":"admin"}}`, `filter.role: appears twice`},
		{`{"name":"ok","tags":[{"a":1},{"a":1,"b":{"c":1,"c":2}}]}`, `tags[1].b.c: appears twice`},
		{`{"name":"ok","tags":[[{"x":1,"x":1}]]}`, `tags[0][0].x: appears twice`},
	} {
		res := call(t, f.h, "create_user", c.args)
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: want isError containing %q, got %+v", c.args, c.want, res)
		}
	}
	if got := bodies(); len(got) > 0 {
		t.Errorf("arguments with a duplicate member reached the upstream: %q", got)
	}

	// The same name in different objects is no duplicate.
	for _, args := range []string{
		`{"name":"ok","filter":{"name":"a","x":{"name":"b"}},"tags":[{"name":1},{"name":2}]}`,
		`{"name":"a:b","filter":{"\"name\"":1,"name":2}}`,
		`{"name":"a:b","filter":{"a\\":"x:\\\"y:","a":1,"\u0061\\b":[]}}`,
	} {
		if res := call(t, f.h, "create_user", args); res.IsError {
			t.Errorf("%s: %s", args, res.Text)
		}
	}
}
