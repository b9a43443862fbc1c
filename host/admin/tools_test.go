package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/catalog"
)

// GET /crank/tools lists what the handler serves: its file's tool and
// its catalog's, a session family as its three tools grouped under the
// operation, each with its source.
func TestTools(t *testing.T) {
	f := newFixture(t)
	var empty struct{ Tools []admin.ToolInfo }
	if err := json.Unmarshal(f.want(http.StatusOK, "GET", "/crank/tools", "").body, &empty); err != nil || len(empty.Tools) != 0 {
		t.Fatalf("before the handler serves: %v %+v", err, empty)
	}
	doc, ps := catalog.ParseDocument([]byte(fmt.Sprintf(`operations:
  - name: tail
    description: Tail the log.
    adapter: rest
    mode: session
    transport_behavior: request_response
    family: {poll_tool_name: tail_next}
    config: {method: GET, url: "%s/log"}
`, f.up.URL)))
	if ps != nil {
		t.Fatal(ps)
	}
	h, err := f.ep.Build(context.Background(), doc, true)
	if err != nil {
		t.Fatal(err)
	}
	f.ep.serving = h

	var got struct{ Tools []admin.ToolInfo }
	if err := json.Unmarshal(f.want(http.StatusOK, "GET", "/crank/tools", "").body, &got); err != nil {
		t.Fatal(err)
	}
	by := map[string]admin.ToolInfo{}
	for _, tl := range got.Tools {
		by[tl.Name] = tl
	}
	if len(got.Tools) != 4 {
		t.Fatalf("tools: %+v", got.Tools)
	}
	if ft := by["file_tool"]; ft.Mode != "unary" || ft.Adapter != "rest" || ft.Source != (admin.ToolSource{Kind: "file", File: "ops.yaml"}) || ft.Family != "" {
		t.Errorf("file_tool: %+v", ft)
	}
	for role, name := range map[string]string{"start": "tail_start", "poll": "tail_next", "stop": "tail_stop"} {
		tl := by[name]
		if tl.Mode != "session" || tl.Family != "tail" || tl.Role != role || tl.FamilyTools["poll"] != "tail_next" ||
			tl.Source.Kind != "catalog" || tl.Source.Catalog != "served" || tl.Endpoint != "0" || tl.Workspace != "default" {
			t.Errorf("%s: %+v", name, tl)
		}
	}
}
