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
		op := &sdk.Operation{Name: e.Name, Config: cfg, BaseDir: dir}
		if diags := a.(sdk.OperationValidator).ValidateOperation(ctx, op); len(diags) > 0 {
			t.Fatalf("%s: %v", e.Name, diags)
		}
		derived, diags := a.(sdk.OperationExpander).ExpandOperation(ctx, op)
		if len(diags) > 0 {
			t.Fatalf("%s: %v", e.Name, diags)
		}
		for _, tool := range derived {
			tools[tool.Name] = tool
		}
	}
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "add_book,delete_book,find_books,get_book,list_authors" {
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
}
