package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/opsfile"
)

// An endpoint serving the tools of a host: one REST operation over a
// small upstream, called with one in-process tools/call request.
func ExampleNew() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s,"name":"Ada Lovelace"}`, strings.TrimPrefix(r.URL.Path, "/users/"))
	}))
	defer upstream.Close()
	cat, err := opsfile.Parse("ops.yaml", []byte(`version: 1
operations:
  - name: get_user
    description: Fetch one user by numeric id.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "`+upstream.URL+`/users/{id}"}
`), opsfile.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The REST adapter's process: here this test binary, which serves
	// it (TestMain); a gateway runs "crank crank-adapter rest".
	exe, _ := os.Executable()
	rest := host.NewSupervisor(host.AdapterSpec{Name: "rest", Command: exe, Env: []string{"CRANK_MCPSERVER_TEST_ADAPTER=rest"}}, host.SupervisorOptions{})
	defer rest.Close()
	h, err := host.New(context.Background(), host.Options{File: cat,
		Adapter: func(string) (*host.Supervisor, error) { return rest, nil }})
	if err != nil {
		fmt.Println(err)
		return
	}

	ep, err := mcpserver.New(mcpserver.Options{Version: "example", Workspace: "default", Stateless: true, JSONResponse: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	ep.Attach(h, nil) // no store: no sessions or event logs to keep

	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_user","arguments":{"id":7}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	rec := httptest.NewRecorder()
	ep.ServeHTTP(rec, req)
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"id\":7,\"name\":\"Ada Lovelace\"}"}],"structuredContent":{"id":7,"name":"Ada Lovelace"}}}
}
