package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// viewOps: users (read-only get, destructive delete), a window over a log
// stream and an async_job family, all on the upstream of viewUpstream.
const viewOps = `version: 1
operations:
  - name: get_user
    title: Get a user
    description: Fetch one user by numeric id.
    adapter: rest
    annotations: {read_only: true}
    input_schema: {type: object, properties: {id: {type: integer, description: The user's id.}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: delete_user
    title: Delete a user
    description: Delete one user for good.
    adapter: rest
    annotations: {destructive: true}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: DELETE, url: "%[1]s/users/{id}"}
  - name: recent_logs
    title: Recent logs
    description: Watch the services' live log stream for a moment and summarise it, counts per level.
    adapter: rest
    mode: window
    transport_behavior: server_stream
    annotations: {read_only: true}
    input_schema: {type: object, properties: {service: {type: string}}}
    limits: {window_duration_ms: 20000, max_items: 3, max_bytes: 65536}
    config: {method: GET, url: "%[1]s/logs"}
  - name: report
    title: Build a report
    description: Build a traffic report in the background.
    adapter: rest
    mode: async_job
    scope: workspace
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
`

// viewUpstream serves users and an SSE log stream of three lines.
func viewUpstream(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/users/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s,"name":"Ada","method":%q}`, r.PathValue("id"), r.Method)
	})
	mux.HandleFunc("GET /logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"level\":\"error\",\"msg\":\"line %d\"}\n\n", i)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// viewHost is a host of viewOps, its jobs in an embedded etcd.
func viewHost(t *testing.T) *host.Host {
	_, st := storetest.Embedded(t)
	up := viewUpstream(t)
	return newTestHost(t, fmt.Sprintf(viewOps, up.URL), st, nil)
}

// viewEndpoint serves hst with a view and a policy (nil for none).
func viewEndpoint(t *testing.T, hst *host.Host, cfg *ViewConfig, rules []auth.Rule) string {
	t.Helper()
	opts := testOptions("default")
	opts.View = cfg
	if rules != nil {
		p, err := auth.CompilePolicy(rules)
		if err != nil {
			t.Fatal(err)
		}
		opts.Policy = p
	}
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.CheckView(hst); err != nil {
		t.Fatal(err)
	}
	ep.Attach(hst, nil)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	return srv.URL + "/mcp"
}

type progressRecorder struct {
	mu  sync.Mutex
	got []string
}

func (p *progressRecorder) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, req.Params.Message)
}

func (p *progressRecorder) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// connectAgent is a go-sdk client of url as agent (the X-Agent header).
func connectAgent(t *testing.T, ctx context.Context, url, agent string, progress *progressRecorder) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = progress.handler
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "view-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: agentTransport(agent)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type agentTransport string

func (a agentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Agent", string(a))
	return http.DefaultTransport.RoundTrip(r)
}

func listed(t *testing.T, ctx context.Context, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func names(m map[string]*mcp.Tool) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func callText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Two endpoints over one host publish different views: filtered,
// renamed and overridden tools, families as a unit; a renamed tool calls
// its operation, and the names a view hides are unknown.
func TestViewCuration(t *testing.T) {
	t.Parallel()
	hst := viewHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	curated := viewEndpoint(t, hst, &ViewConfig{
		Toolsets: map[string][]string{"users": {"*_user"}, "jobs": {"mode:async_job"}},
		Include:  []string{"toolset:users", "toolset:jobs"},
		Exclude:  []string{"delete_*"},
		Tools: map[string]ToolOverride{
			"get_user": {Name: "lookup_user", Title: "Look up a user", Description: "Find a user by id.",
				Annotations: &opsfile.Annotations{Idempotent: new(true)}},
			"report":        {Name: "audit", Description: "Audit a user.", Annotations: &opsfile.Annotations{Destructive: new(false)}},
			"report_cancel": {Title: "Stop the audit"},
		},
	}, nil)
	full := viewEndpoint(t, hst, nil, nil)
	readOnly := viewEndpoint(t, hst, &ViewConfig{Include: []string{"annotation:read_only"}}, nil)

	a := connectAgent(t, ctx, curated, "ann", nil)
	tools := listed(t, ctx, a)
	if got := names(tools); got != "audit_cancel,audit_result,audit_start,audit_status,lookup_user" {
		t.Fatalf("curated tools/list: %s", got)
	}
	lu := tools["lookup_user"]
	if lu.Title != "Look up a user" || lu.Description != "Find a user by id." || lu.Annotations == nil ||
		!lu.Annotations.IdempotentHint || !lu.Annotations.ReadOnlyHint {
		t.Errorf("lookup_user: %+v %+v", lu, lu.Annotations)
	}
	// The family's tools name each other by their published names.
	start, status := tools["audit_start"], tools["audit_status"]
	if !strings.HasPrefix(start.Description, "Audit a user.\n\nRuns") || !strings.Contains(start.Description, "audit_status") ||
		strings.Contains(start.Description, "report_") || !strings.Contains(status.Description, "audit_start") ||
		!strings.HasSuffix(status.Description, "Job of: Audit a user.") {
		t.Errorf("family descriptions: start %q, status %q", start.Description, status.Description)
	}
	if a := start.Annotations; a == nil || a.DestructiveHint == nil || *a.DestructiveHint || status.Annotations == nil ||
		!status.Annotations.ReadOnlyHint || tools["audit_cancel"].Title != "Stop the audit" {
		t.Errorf("family annotations and titles: start %+v, status %+v, cancel %q", start.Annotations, status.Annotations, tools["audit_cancel"].Title)
	}
	if in, _ := json.Marshal(status.InputSchema); !strings.Contains(string(in), "the audit_start tool returned") {
		t.Errorf("audit_status's input schema: %s", in)
	}
	ex, _ := tools["audit_start"].Meta["io.crank/execution"].(map[string]any)
	if fam, _ := ex["tools"].(map[string]any); fam["status"] != "audit_status" || fam["result"] != "audit_result" {
		t.Errorf("audit_start's family in _meta: %v", ex)
	}
	if res := callText(t, ctx, a, "lookup_user", map[string]any{"id": 7}); res.IsError || !strings.Contains(resultText(res), `"id":7`) {
		t.Errorf("lookup_user: %s", resultText(res))
	}
	for _, hidden := range []string{"get_user", "delete_user", "recent_logs", "report_start"} {
		if _, err := a.CallTool(ctx, &mcp.CallToolParams{Name: hidden, Arguments: map[string]any{"id": 1}}); err == nil ||
			!strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s through the curated view: %v", hidden, err)
		}
	}
	// The renamed family works as a unit.
	res := callText(t, ctx, a, "audit_start", map[string]any{"id": 3})
	var started struct {
		JobID      string `json:"job_id"`
		ResultTool string `json:"result_tool"`
	}
	if err := json.Unmarshal([]byte(resultText(res)), &started); err != nil || started.JobID == "" || started.ResultTool != "audit_result" {
		t.Fatalf("audit_start: %s", resultText(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"status_tool":"audit_status"`) {
		t.Errorf("audit_start's structured content: %s", sc)
	}
	mcptest.WaitUntil(t, "the audit job's result", func() bool {
		r := callText(t, ctx, a, "audit_result", map[string]any{"job_id": started.JobID})
		return !r.IsError && strings.Contains(resultText(r), `"id":3`)
	})

	// The same host through an endpoint without a view.
	f := connectAgent(t, ctx, full, "ann", nil)
	if got := names(listed(t, ctx, f)); got != "delete_user,get_user,recent_logs,report_cancel,report_result,report_start,report_status" {
		t.Errorf("full tools/list: %s", got)
	}
	if got := names(listed(t, ctx, connectAgent(t, ctx, readOnly, "ann", nil))); got != "get_user,recent_logs" {
		t.Errorf("read-only tools/list: %s", got)
	}
}

// Discovery mode: the meta-tools alone in tools/list; search, describe
// and call obey the policy exactly as direct calls do; a window called
// through call_tool relays its progress.
func TestViewDiscovery(t *testing.T) {
	t.Parallel()
	hst := viewHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := viewEndpoint(t, hst, &ViewConfig{Discovery: DiscoveryOnly,
		Toolsets: map[string][]string{"logs": {"*logs*"}},
		Tools:    map[string]ToolOverride{"get_user": {Name: "lookup_user"}}},
		[]auth.Rule{{Name: "admins-delete", Expression: `tool.name != "delete_user" || caller.id == "header:admin"`}})

	var progress progressRecorder
	intern := connectAgent(t, ctx, url, "intern", &progress)
	if got := names(listed(t, ctx, intern)); got != "call_tool,describe_tool,search_tools" {
		t.Fatalf("discovery tools/list: %s", got)
	}
	search := func(cs *mcp.ClientSession, args map[string]any) []searchHit {
		t.Helper()
		res := callText(t, ctx, cs, searchToolName, args)
		var out struct {
			Tools []searchHit `json:"tools"`
			Total int         `json:"total"`
		}
		if res.IsError || json.Unmarshal([]byte(resultText(res)), &out) != nil {
			t.Fatalf("search %v: %s", args, resultText(res))
		}
		return out.Tools
	}
	hits := search(intern, map[string]any{"query": "recent errors in the logs"})
	if len(hits) == 0 || hits[0].Name != "recent_logs" || hits[0].Mode != "window" || !slices.Equal(hits[0].Toolsets, []string{"logs"}) {
		t.Fatalf("search for recent errors in the logs: %+v", hits)
	}
	if hits := search(intern, map[string]any{"query": "user"}); slices.ContainsFunc(hits, func(h searchHit) bool { return h.Name == "delete_user" }) ||
		!slices.ContainsFunc(hits, func(h searchHit) bool { return h.Name == "lookup_user" }) {
		t.Errorf("intern's search for user: %+v", hits)
	}
	if hits := search(intern, map[string]any{"query": "", "toolsets": []string{"logs"}}); len(hits) != 1 {
		t.Errorf("the logs toolset: %+v", hits)
	}
	admin := connectAgent(t, ctx, url, "admin", nil)
	if hits := search(admin, map[string]any{"query": "delete a user"}); len(hits) == 0 || hits[0].Name != "delete_user" {
		t.Errorf("admin's search for delete a user: %+v", hits)
	}

	// describe_tool: the full definition, the family by role.
	res := callText(t, ctx, intern, describeToolName, map[string]any{"name": "recent_logs"})
	var desc map[string]any
	if res.IsError || json.Unmarshal([]byte(resultText(res)), &desc) != nil || desc["mode"] != "window" ||
		desc["input_schema"] == nil || desc["output_schema"] == nil || desc["execution"] == nil {
		t.Errorf("describe recent_logs: %s", resultText(res))
	}
	res = callText(t, ctx, intern, describeToolName, map[string]any{"name": "report_start"})
	if !strings.Contains(resultText(res), `"family":{"cancel":"report_cancel","result":"report_result","start":"report_start","status":"report_status"}`) ||
		!strings.Contains(resultText(res), `"role":"start"`) {
		t.Errorf("describe report_start: %s", resultText(res))
	}

	// Hidden by the policy: not described, not called, as a tool that
	// does not exist; the admin calls it.
	for _, meta := range []string{describeToolName, callToolName} {
		res := callText(t, ctx, intern, meta, map[string]any{"name": "delete_user", "arguments": map[string]any{"id": 1}})
		want := callText(t, ctx, intern, meta, map[string]any{"name": "no_such_tool", "arguments": map[string]any{"id": 1}})
		if !res.IsError || resultText(res) != strings.ReplaceAll(resultText(want), "no_such_tool", "delete_user") {
			t.Errorf("%s delete_user as intern: %s", meta, resultText(res))
		}
	}
	if _, err := intern.CallTool(ctx, &mcp.CallToolParams{Name: "delete_user", Arguments: map[string]any{"id": 1}}); err == nil {
		t.Error("intern called delete_user directly")
	}
	if res := callText(t, ctx, admin, callToolName, map[string]any{"name": "delete_user", "arguments": map[string]any{"id": 4}}); res.IsError ||
		!strings.Contains(resultText(res), `"method":"DELETE"`) {
		t.Errorf("admin's call_tool delete_user: %s", resultText(res))
	}
	// A renamed tool through call_tool; bad arguments named.
	if res := callText(t, ctx, intern, callToolName, map[string]any{"name": "lookup_user", "arguments": map[string]any{"id": 5}}); res.IsError ||
		!strings.Contains(resultText(res), `"id":5`) {
		t.Errorf("call_tool lookup_user: %s", resultText(res))
	}
	if res := callText(t, ctx, intern, callToolName, map[string]any{"name": "lookup_user", "arguments": "x"}); !res.IsError ||
		!strings.Contains(resultText(res), "arguments") {
		t.Errorf("call_tool with string arguments: %s", resultText(res))
	}
	if res := callText(t, ctx, intern, searchToolName, map[string]any{"query": "x", "limit": 500}); !res.IsError ||
		!strings.Contains(resultText(res), "limit") {
		t.Errorf("search with limit 500: %s", resultText(res))
	}

	// A window through call_tool: its items arrive as progress.
	res, err := intern.CallTool(ctx, &mcp.CallToolParams{Name: callToolName, Arguments: map[string]any{"name": "recent_logs"},
		Meta: mcp.Meta{"progressToken": "logs-1"}})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "max_items") {
		t.Fatalf("call_tool recent_logs: %v %s", err, resultText(res))
	}
	mcptest.WaitUntil(t, "three progress notifications", func() bool { return progress.count() >= 3 })

	// A family through call_tool.
	res = callText(t, ctx, intern, callToolName, map[string]any{"name": "report_start", "arguments": map[string]any{"id": 9}})
	var started struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(resultText(res)), &started); err != nil || started.JobID == "" {
		t.Fatalf("report_start via call_tool: %s", resultText(res))
	}
	mcptest.WaitUntil(t, "the report's result", func() bool {
		r := callText(t, ctx, intern, callToolName, map[string]any{"name": "report_result", "arguments": map[string]any{"job_id": started.JobID}})
		return !r.IsError && strings.Contains(resultText(r), `"id":9`)
	})
}

// Config errors name the field: at New for the view itself, at CheckView
// for what does not fit the host.
func TestViewConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  ViewConfig
		want string
	}{
		{ViewConfig{Include: []string{"toolset:nope"}}, `view.include[0]: unknown toolset "nope"`},
		{ViewConfig{Exclude: []string{"annotation:readonly"}}, `view.exclude[0]: unknown annotation "readonly"`},
		{ViewConfig{Include: []string{"[x"}}, `view.include[0]: bad name glob "[x"`},
		{ViewConfig{Include: []string{"kind:x"}}, `view.include[0]: unknown selector "kind:x"`},
		{ViewConfig{Toolsets: map[string][]string{"a": {"mode:batch"}}}, `view.toolsets.a[0]: unknown mode "batch"`},
		{ViewConfig{Tools: map[string]ToolOverride{"a": {Name: "x"}, "b": {Name: "x"}}}, `view.tools.b.name: "x" is also the new name of tool "a"`},
		{ViewConfig{Tools: map[string]ToolOverride{"a": {Name: "bad name"}}}, `view.tools.a.name: must be 1-128 characters`},
		{ViewConfig{Tools: map[string]ToolOverride{"a": {Name: "call_tool"}}, Discovery: "beside"}, `view.tools.a.name: "call_tool" is the name of a discovery meta-tool`},
		{ViewConfig{Discovery: "lazy"}, `view.discovery: unknown mode "lazy"`},
	} {
		opts := testOptions("default")
		opts.View = &c.cfg
		if _, err := New(opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s", c.cfg, err, c.want)
		}
	}

	hst := viewHost(t)
	for _, c := range []struct {
		cfg  ViewConfig
		want string
	}{
		{ViewConfig{Tools: map[string]ToolOverride{"get_usr": {Name: "x"}}}, `view.tools.get_usr: the endpoint has no tool or operation of this name`},
		{ViewConfig{Tools: map[string]ToolOverride{"get_user": {Name: "delete_user"}}}, `view: tools "get_user" and "delete_user" are both published as "delete_user"`},
		{ViewConfig{Tools: map[string]ToolOverride{"report": {Name: "get"}, "get_user": {Name: "get_start"}}}, `are both published as "get_start"`},
	} {
		opts := testOptions("default")
		opts.View = &c.cfg
		ep, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.CheckView(hst); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s", c.cfg, err, c.want)
		}
		_ = ep.Close()
	}
}

// Search ranks names over titles over descriptions, and stems words.
func TestSearchRanking(t *testing.T) {
	t.Parallel()
	mk := func(name, title, desc string) *searchDoc {
		return newSearchDoc(&viewTool{name: name, tool: &mcp.Tool{Name: name, Title: title, Description: desc,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"service":{"type":"string","description":"Only this service."}}}`)}})
	}
	docs := []*searchDoc{
		mk("recent_logs", "Recent logs", "Watch the live log stream and summarise it: counts per level."),
		mk("tail_logs", "Tail logs", "The raw log lines of a few seconds."),
		mk("get_user", "Get a user", "Fetch one user; errors if missing."),
		mk("latency_stats", "Latency", "Percentiles of request latency."),
	}
	hits := rank(docs, terms("recent errors in the logs"))
	if len(hits) < 2 || hits[0].doc.vt.name != "recent_logs" {
		t.Fatalf("ranking: %+v", hits)
	}
	if got := terms("listUsers getHTTPStatus running"); !slices.Equal(got, []string{"list", "user", "get", "httpstatu", "runn"}) {
		t.Logf("terms: %v", got)
	}
	if hits := rank(docs, terms("zzz")); len(hits) != 0 {
		t.Errorf("no match: %+v", hits)
	}

	// Equal scores: a read-only tool before one that destroys nothing,
	// before a destructive one (MCP's default), then by name.
	yes, no := true, false
	annotated := func(name string, a *mcp.ToolAnnotations) *searchDoc {
		d := mk(name, "", "A user by id.")
		d.vt.tool.Annotations = a
		return d
	}
	ties := []*searchDoc{
		annotated("api_delete_user", &mcp.ToolAnnotations{DestructiveHint: &yes}),
		annotated("api_create_user", &mcp.ToolAnnotations{DestructiveHint: &no}),
		annotated("api_get_user", &mcp.ToolAnnotations{ReadOnlyHint: true}),
		annotated("api_ban_user", nil),
	}
	var order []string
	for _, h := range rank(ties, terms("user by id")) {
		order = append(order, h.doc.vt.name)
	}
	if got := strings.Join(order, ","); got != "api_get_user,api_create_user,api_ban_user,api_delete_user" {
		t.Errorf("ties ranked %s", got)
	}
}

// A search hit's description is the tool's title and description as
// sentences.
func TestSearchSentences(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ title, desc, want string }{
		{"Get a user", "Fetch one user by id", "Get a user. Fetch one user by id."},
		{"Get user (Directory)", "GetUser returns one user.\nServer-streaming: each User", "Get user (Directory). GetUser returns one user. Server-streaming: each User."},
		{"Recent logs", "Recent logs of the demo: counts per level.", "Recent logs of the demo: counts per level."},
		{"", "Ends with a question?", "Ends with a question?"},
	} {
		if got := sentences(c.title, c.desc); got != c.want {
			t.Errorf("sentences(%q, %q) = %q, want %q", c.title, c.desc, got, c.want)
		}
	}
}

// BenchmarkViewCall compares one get_user call (the REST adapter, a
// loopback upstream) through an endpoint without a view, through one
// whose view renames it, through that view with a policy rule that
// reads the arguments, and through call_tool in discovery mode, all
// over one host: view/plain, policy/plain and call_tool/plain are what
// the view, the policy and the meta-tool cost per call.
func BenchmarkViewCall(b *testing.B) {
	up := mcptest.NewUsers(b)
	hst := newTestHost(b, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil)
	ctx := context.Background()
	policy, err := auth.CompilePolicy([]auth.Rule{{Name: "small-ids", Expression: `tool.name != "get_user" || int(args.id) < 100`}})
	if err != nil {
		b.Fatal(err)
	}
	connect := func(cfg *ViewConfig, p *auth.Policy) *mcp.ClientSession {
		opts := testOptions("default")
		opts.View, opts.Policy = cfg, p
		ep, err := New(opts)
		if err != nil {
			b.Fatal(err)
		}
		ep.Attach(hst, nil)
		srv := httptest.NewServer(ep)
		b.Cleanup(func() { srv.Close(); _ = ep.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	plain := connect(nil, nil)
	rename := &ViewConfig{Tools: map[string]ToolOverride{"get_user": {Name: "lookup_user"}}}
	viewed := connect(rename, nil)
	governed := connect(rename, policy)
	meta := connect(&ViewConfig{Discovery: DiscoveryOnly}, nil)
	calls := []struct {
		cs     *mcp.ClientSession
		params *mcp.CallToolParams
	}{
		{plain, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}}},
		{viewed, &mcp.CallToolParams{Name: "lookup_user", Arguments: map[string]any{"id": 7}}},
		{governed, &mcp.CallToolParams{Name: "lookup_user", Arguments: map[string]any{"id": 7}}},
		{meta, &mcp.CallToolParams{Name: callToolName, Arguments: map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}}},
	}
	call := func(i int) {
		res, err := calls[i].cs.CallTool(ctx, calls[i].params)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", calls[i].params.Name, err, res)
		}
	}
	for i := range calls { // warm: the adapter process, connections
		call(i)
	}
	// Interleaved, so that the machine's drift weighs on each alike.
	// Allocations are the process's (client, endpoint and upstream),
	// counted around each call, outside its time.
	took := make([]time.Duration, len(calls))
	allocs := make([]uint64, len(calls))
	var before, after runtime.MemStats
	b.ResetTimer()
	for range b.N {
		for i := range calls {
			runtime.ReadMemStats(&before)
			start := time.Now()
			call(i)
			took[i] += time.Since(start)
			runtime.ReadMemStats(&after)
			allocs[i] += after.Mallocs - before.Mallocs
		}
	}
	for i := range took {
		took[i] /= time.Duration(b.N)
	}
	b.ReportMetric(float64(took[0].Microseconds()), "plain-us/op")
	for i, name := range []string{"plain", "view", "policy", "call_tool"} {
		if i > 0 {
			b.ReportMetric(float64(took[i])/float64(took[0]), name+"/plain")
		}
		b.ReportMetric(float64(allocs[i])/float64(b.N), name+"-allocs/op")
	}
}
