package mcpserver

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/internal/mcptest"
)

// hintsEndpoint serves publishAdapter's publications (resources whose
// reads carry the upstream's caching hints or none, a prompt with a
// required argument) and a tool, with a policy or without.
func hintsEndpoint(t *testing.T, policy bool) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pub.json")
	if err := os.WriteFile(file, []byte(`{"resources": [{"uri": "file:///hinted-private", "name": "a"},
	        {"uri": "file:///hinted-public", "name": "b"}, {"uri": "file:///plain", "name": "c"}],
	    "templates": [{"uriTemplate": "file:///logs/{day}", "name": "logs"}],
	    "prompts": [{"name": "haiku", "arguments": [{"name": "topic", "required": true}, {"name": "mood"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newTestHostOf(t, "publish", `version: 1
operations:
  - name: docs
    adapter: publish
    config: {file: "`+file+`"}
`, nil, nil)
	opts := testOptions("default")
	if policy {
		p, err := auth.CompilePolicy([]auth.Rule{{Name: "agents", Expression: `caller.id != "blocked"`}})
		if err != nil {
			t.Fatal(err)
		}
		opts.Policy = p
	}
	_, url := serveEndpoint(t, h, nil, opts)
	return url
}

// hintsRequests are the requests whose results 2026-07-28 gives caching
// hints or a resultType: method, Mcp-Name, params.
var hintsRequests = []struct {
	method, name string
	params       []any
}{
	{"tools/list", "", nil},
	{"prompts/list", "", nil},
	{"resources/list", "", nil},
	{"resources/templates/list", "", nil},
	{"resources/read", "file:///hinted-public", []any{"uri", "file:///hinted-public"}},
	{"resources/read", "file:///plain", []any{"uri", "file:///plain"}},
	{"prompts/get", "haiku", []any{"name", "haiku", "arguments", map[string]string{"topic": "rain"}}},
}

// A session of 2024-11-05 or 2025-11-25 gets no field of 2026-07-28
// (ttlMs, cacheScope, resultType) in any result; a 2026-07-28 request
// gets resultType on each and the caching hints on the lists and reads.
func TestResultsCarryTheirGenerationsFields(t *testing.T) {
	t.Parallel()
	url := hintsEndpoint(t, false)
	for _, version := range []string{"2024-11-05", "2025-11-25"} {
		c := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Agent": {"agent-1"}}}
		c.Initialize(version)
		for _, r := range hintsRequests {
			params := map[string]any{}
			for i := 0; i+1 < len(r.params); i += 2 {
				params[r.params[i].(string)] = r.params[i+1]
			}
			var res map[string]json.RawMessage
			c.OK(r.method, params, &res)
			for _, k := range []string{"ttlMs", "cacheScope", "resultType"} {
				if _, ok := res[k]; ok {
					t.Errorf("%s %s %v: the result has %s, a field of 2026-07-28: %s", version, r.method, r.params, k, res[k])
				}
			}
		}
	}
	for _, r := range hintsRequests {
		res := sessionlessOK(t, url, r.method, r.name, r.params...)
		if string(res["resultType"]) != `"complete"` {
			t.Errorf("2026-07-28 %s %v: resultType %s", r.method, r.params, res["resultType"])
		}
		if _, ok := res["cacheScope"]; r.method != "prompts/get" && !ok {
			t.Errorf("2026-07-28 %s %v: no cacheScope", r.method, r.params)
		}
	}
}

// sessionlessOK sends one 2026-07-28 request that must succeed and
// returns its result's members.
func sessionlessOK(t *testing.T, url, method, name string, kv ...any) map[string]json.RawMessage {
	t.Helper()
	r := sessionlessPost(t, url, method, name, kv...)
	var res map[string]json.RawMessage
	if r.status != http.StatusOK || r.err != nil || json.Unmarshal(r.result, &res) != nil {
		t.Fatalf("%s %v: HTTP %d %s", method, kv, r.status, r.body)
	}
	return res
}

func sessionlessPost(t *testing.T, url, method, name string, kv ...any) rawReply {
	t.Helper()
	hdr := map[string]string{"MCP-Protocol-Version": sessionlessProtocolVersion, "Mcp-Method": method, "X-Agent": "agent-1"}
	if name != "" {
		hdr["Mcp-Name"] = name
	}
	return rawPost(t, url, hdr, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method,
		"params": newParams(sessionlessProtocolVersion, kv...)})
}

// Caching hints are honest: a read passes on the upstream's ttlMs and
// cacheScope, one without hints gets ttlMs 0 and private rather than the
// SDK's public, and with a policy (which shapes what each caller may
// see) the lists and reads are private, never public.
func TestCachingHints(t *testing.T) {
	t.Parallel()
	hints := func(res map[string]json.RawMessage) string {
		return string(res["ttlMs"]) + " " + string(res["cacheScope"])
	}
	for _, c := range []struct {
		policy                      bool
		list, private, public, none string
	}{
		{false, `0 "public"`, `60000 "private"`, `60000 "public"`, `0 "private"`},
		{true, `0 "private"`, `60000 "private"`, `60000 "private"`, `0 "private"`},
	} {
		url := hintsEndpoint(t, c.policy)
		for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
			if got := hints(sessionlessOK(t, url, m, "")); got != c.list {
				t.Errorf("policy %v: %s: %s, want %s", c.policy, m, got, c.list)
			}
		}
		for uri, want := range map[string]string{"file:///hinted-private": c.private, "file:///hinted-public": c.public,
			"file:///plain": c.none, "file:///logs/monday": c.none} {
			if got := hints(sessionlessOK(t, url, "resources/read", uri, "uri", uri)); got != want {
				t.Errorf("policy %v: resources/read %s: %s, want %s", c.policy, uri, got, want)
			}
		}
	}
}

// A prompts/get without a required argument is -32602 naming it, in
// either generation; the prompt is not rendered.
func TestPromptRequiredArgument(t *testing.T) {
	t.Parallel()
	url := hintsEndpoint(t, false)
	c := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Agent": {"agent-1"}}}
	c.Initialize("2025-11-25")
	c.Fails("prompts/get", map[string]any{"name": "haiku", "arguments": map[string]string{"mood": "calm"}},
		jsonrpc.CodeInvalidParams, `prompt "haiku": missing required argument "topic"`)
	c.Fails("prompts/get", map[string]any{"name": "haiku"}, jsonrpc.CodeInvalidParams, `missing required argument "topic"`)
	r := sessionlessPost(t, url, "prompts/get", "haiku", "name", "haiku")
	if r.err == nil || r.err.Code != jsonrpc.CodeInvalidParams || !strings.Contains(r.err.Message, `missing required argument "topic"`) {
		t.Errorf("2026-07-28 prompts/get without topic: HTTP %d %s", r.status, r.body)
	}
	var res mcp.GetPromptResult
	c.OK("prompts/get", map[string]any{"name": "haiku", "arguments": map[string]string{"topic": "rain"}}, &res)
	if len(res.Messages) != 1 || res.Messages[0].Content.(*mcp.TextContent).Text != "haiku " {
		t.Errorf("prompts/get with topic: %+v", res.Messages)
	}
}
