package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store/storetest"
)

// addAskTool adds "ask" to the upstream: during the call it asks its
// client for a form (with defaults and an enum), for a URL-mode
// elicitation, for a sampled message and for its roots, and answers what
// each gave, or the error each got.
func addAskTool(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "ask", Description: "Elicits, samples and lists roots during the call.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out := map[string]any{}
			record := func(key string, v any, err error) {
				if err != nil {
					out[key] = "error: " + err.Error()
					return
				}
				out[key] = v
			}
			form, err := req.Session.Elicit(ctx, askForm())
			record("form", form, err)
			url, err := req.Session.Elicit(ctx, askURL())
			record("url", url, err)
			//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
			msg, err := req.Session.CreateMessage(ctx, askSample())
			record("sample", msg, err)
			//nolint:staticcheck // roots are deprecated as of 2026-07-28, and still served before them
			roots, err := req.Session.ListRoots(ctx, nil)
			record("roots", roots, err)
			return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil
		})
	// ask_input asks the same with an input-required result (SEP-2322),
	// which go-sdk turns into requests for a client of 2025-11-25, and
	// answers the input responses of the retry that echoes its state.
	s.AddTool(&mcp.Tool{Name: "ask_input", Description: "Asks for input with an input-required result.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) == 0 {
				return &mcp.CallToolResult{RequestState: "state-1", InputRequests: mcp.InputRequestMap{
					"form": askForm(), "url": askURL(), "sample": askSample(), "roots": &mcp.ListRootsParams{}}}, nil
			}
			if req.Params.RequestState != "state-1" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "request state " + req.Params.RequestState}}}, nil
			}
			out := map[string]any{}
			for k, v := range req.Params.InputResponses {
				out[k] = v
			}
			return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil
		})
	// ask_prompt and ask://input ask who the client is with an
	// input-required result, and greet the name of the retry's answer.
	s.AddPrompt(&mcp.Prompt{Name: "ask_prompt", Description: "Asks who you are before it renders (input-required)."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			greeting, ir := askedName(req.Params.InputResponses, req.Params.RequestState)
			if ir != nil {
				return &mcp.GetPromptResult{InputRequests: ir, RequestState: "read-state"}, nil
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: greeting}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "ask://input", Name: "ask_input_resource", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			greeting, ir := askedName(req.Params.InputResponses, req.Params.RequestState)
			if ir != nil {
				return &mcp.ReadResourceResult{InputRequests: ir, RequestState: "read-state"}, nil
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "ask://input", MIMEType: "text/plain", Text: greeting}}}, nil
		})
}

// askedName is the greeting of a read retried with the answer to its
// form and its state, or the input requests to answer first.
func askedName(responses mcp.InputResponseMap, state string) (string, mcp.InputRequestMap) {
	var form mcp.ElicitResult
	b, _ := json.Marshal(responses["who"])
	if len(responses) == 0 || json.Unmarshal(b, &form) != nil {
		return "", mcp.InputRequestMap{"who": askForm()}
	}
	if state != "read-state" {
		return "request state " + state, nil
	}
	return fmt.Sprintf("Hello %v", form.Content["name"]), nil
}

// askForm is a form-mode elicitation with defaults and an enum.
func askForm() *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: "Who are you?", RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":  map[string]any{"type": "string", "default": "Ada"},
			"color": map[string]any{"type": "string", "enum": []string{"red", "green"}, "default": "green"},
			"age":   map[string]any{"type": "integer", "default": 36},
		},
		"required": []string{"name"},
	}}
}

func askURL() *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://auth.example/login?x=1", ElicitationID: "el-1"}
}

//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
func askSample() *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: 16, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}}
}

// askStdioOps is an operations file federating this binary's go-sdk
// server over stdio (which negotiates 2026-07-28) for its ask tools.
func askStdioOps(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
operations:
  - name: stdio
    description: The go-sdk server over stdio (2026-07-28).
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      env: {%s: stdio}
      prefix: stdio_
      include: [ask, ask_input]
`, self, mcpUpstreamEnv)
}

// askHTTPOps is the operations-file entry of a go-sdk server over
// Streamable HTTP (2025-11-25) for the tools of include, served for the
// test.
func askHTTPOps(t *testing.T, include string) string {
	t.Helper()
	up := mcpUpstreamServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	return fmt.Sprintf(`
  - name: http
    description: The go-sdk server over Streamable HTTP (2025-11-25).
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      prefix: http_
      include: [%s]
`, srv.URL, include)
}

// askReplicas starts two gateways serving ops on one etcd, and a
// balancer pointing at the first.
func askReplicas(t *testing.T, ops string) (a, b *gateway, lb *balancer) {
	t.Helper()
	etcd := storetest.NewServer(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: ops, Crank: fmt.Sprintf(`etcd {
			%s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b = startGateway(t, opts("a")), startGateway(t, opts("b"))
	lb = &balancer{}
	lb.to(a)
	return a, b, lb
}

// askingClient is a go-sdk client that answers elicitation, sampling and
// roots requests, recording what it was asked.
type askingClient struct {
	asked collected[string]
}

func (a *askingClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a.asked.add(fmt.Sprintf("elicit %s %s %s", req.Params.Mode, req.Params.Message, req.Params.URL))
			if req.Params.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
		},
		//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := ""
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			a.asked.add("sample " + text)
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "4, to " + text}}, nil
		},
	}
}

// TestMCPUpstreamClientRequests: a federated upstream (go-sdk, over
// Streamable HTTP and over stdio) that elicits (form mode with defaults
// and an enum, URL mode), samples and lists roots during a call reaches
// the go-sdk client of the call through the gateway, on the client's MCP
// session, and gets its answers; for a client without those capabilities
// the upstream's session declares none of them, and its requests fail as
// they would talking to that client directly (go-sdk refuses to send
// them, or the gateway answers "method not found").
func TestMCPUpstreamClientRequests(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gatewayOptions{Operations: askStdioOps(t) + askHTTPOps(t, "ask, ask_input")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var a askingClient
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, a.options())
	//nolint:staticcheck // roots are deprecated as of 2026-07-28, and still served before them
	client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	plain := g.connectWith(ctx, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}) // no sampling, elicitation or roots

	// The upstream asks with requests of its own (ask), or with an
	// input-required result that go-sdk turns into requests for these
	// clients (ask_input): the stdio server, which speaks 2026-07-28, is
	// asked for a session of 2025-11-25 for them, as they would open.
	for _, tool := range []string{"http_ask", "http_ask_input", "stdio_ask", "stdio_ask_input"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v %s\n%s", tool, err, res, textOf(res), g.log.String())
		}
		b, _ := json.Marshal(res.StructuredContent)
		var got struct {
			Form   mcp.ElicitResult             `json:"form"`
			URL    mcp.ElicitResult             `json:"url"`
			Sample struct{ Model, Role string } `json:"sample"`
			Roots  mcp.ListRootsResult          `json:"roots"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %s: %v", tool, b, err)
		}
		form, _ := json.Marshal(got.Form.Content)
		if got.Form.Action != "accept" || string(form) != `{"age":36,"color":"green","name":"Grace"}` {
			t.Errorf("%s: form elicitation: %s", tool, b)
		}
		if got.URL.Action != "accept" {
			t.Errorf("%s: url elicitation: %s", tool, b)
		}
		if got.Sample.Model != "test-model" || !strings.Contains(string(b), "4, to 2+2?") {
			t.Errorf("%s: sampling: %s", tool, b)
		}
		if len(got.Roots.Roots) != 1 || got.Roots.Roots[0].URI != "file:///work/project" || got.Roots.Roots[0].Name != "project" {
			t.Errorf("%s: roots: %s", tool, b)
		}
		asked := a.asked.wait(3, 10*time.Second)
		slices.Sort(asked) // the input requests of one result are asked in any order
		want := "elicit form Who are you? |elicit url Sign in https://auth.example/login?x=1|sample 2+2?"
		if strings.Join(asked, "|") != want {
			t.Errorf("%s: the client was asked %q, want %q", tool, asked, want)
		}

		// A client that declared none of the capabilities: the upstream
		// learns it cannot ask.
		res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: tool})
		if !strings.HasSuffix(tool, "_ask") {
			// The adapter fulfils the input-required result itself and
			// fails the call (a tool error); a go-sdk server of 2025-11-25
			// turns it into requests of its own, and answers the refusal
			// with a JSON-RPC error, which reaches the client as it is.
			refused := func(s string) bool {
				return strings.Contains(s, "does not support") || strings.Contains(s, "method not found")
			}
			if err != nil && !refused(err.Error()) || err == nil && (!res.IsError || !refused(textOf(res))) {
				t.Errorf("%s without capabilities: want a tool error or the upstream's JSON-RPC error, got %v %+v", tool, err, res)
			}
			continue
		}
		if err != nil || res.IsError {
			t.Fatalf("%s without capabilities: %v %+v", tool, err, res)
		}
		b, _ = json.Marshal(res.StructuredContent)
		var refused map[string]string
		if err := json.Unmarshal(b, &refused); err != nil {
			t.Fatalf("%s without capabilities: %s", tool, b)
		}
		for _, k := range []string{"form", "url", "sample", "roots"} {
			// The upstream's session declares what the client declared:
			// go-sdk refuses to send a request the client lacks ("client
			// does not support ..."), or the gateway answers one it sends
			// anyway "method not found".
			if !strings.Contains(refused[k], "method not found") && !strings.Contains(refused[k], "does not support") {
				t.Errorf("%s without capabilities: %s: %q", tool, k, refused[k])
			}
		}
	}
}

// TestMCPUpstreamInputRequiredAcrossReplicas: a client of 2026-07-28
// (sessionless: it cannot be asked during a call) calls a federated
// upstream that answers with an input-required result: it gets the
// upstream's input requests with a request state sealed by the gateway,
// and its retry with the input responses succeeds on another replica
// (sharing etcd), which hands the upstream its own state back. A state
// the client changed is refused with invalid params naming requestState.
func TestMCPUpstreamInputRequiredAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b, lb := askReplicas(t, askStdioOps(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, // the test answers and retries itself
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{},
			//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stdio_ask_input"})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first call: %v %+v %s\n%s", err, res, textOf(res), a.log.String())
	}
	if len(res.InputRequests) != 4 || !strings.HasPrefix(res.RequestState, "crank2:") || strings.Contains(res.RequestState, "state-1") {
		t.Fatalf("input requests %v, state %q", res.InputRequests, res.RequestState)
	}
	form, ok := res.InputRequests["form"].(*mcp.ElicitParams)
	if !ok || form.Message != "Who are you?" || !strings.Contains(fmt.Sprint(form.RequestedSchema), "green") {
		t.Fatalf("form: %#v", res.InputRequests["form"])
	}
	if u, ok := res.InputRequests["url"].(*mcp.ElicitParams); !ok || u.Mode != "url" || u.URL != "https://auth.example/login?x=1" {
		t.Fatalf("url: %#v", res.InputRequests["url"])
	}
	responses := mcp.InputResponseMap{
		"form": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace", "color": "red", "age": 40}},
		"url":  &mcp.ElicitResult{Action: "accept"},
		//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
		"sample": &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "4"}},
		"roots":  &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///work/project", Name: "project"}}},
	}
	// The retry reaches the other replica.
	lb.to(b)
	bad, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stdio_ask_input", InputResponses: responses, RequestState: res.RequestState + "A"})
	if err == nil || !strings.Contains(err.Error(), "requestState") {
		t.Fatalf("a changed state: want an invalid-params error naming requestState, got %v %+v", err, bad)
	}
	done, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stdio_ask_input", InputResponses: responses, RequestState: res.RequestState})
	if err != nil || done.IsError || done.NeedsInput() {
		t.Fatalf("retry on b: %v %+v %s\n%s", err, done, textOf(done), b.log.String())
	}
	out, _ := json.Marshal(done.StructuredContent)
	for _, want := range []string{`"name":"Grace"`, `"file:///work/project"`, `"model":"test-model"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the upstream got %s, want %s in it", out, want)
		}
	}
}

// TestMCPUpstreamReadInputRequired: a federated upstream (go-sdk over
// stdio, 2026-07-28) that answers a prompts/get or resources/read with an
// input-required result: a client on an MCP session (2025-11-25) is asked
// the upstream's elicitation by the gateway, and gets the rendering of
// its answer; a client of 2026-07-28 gets the input requests with a state
// sealed by the gateway, and its retry succeeds on another replica; a
// changed state, or one of another publication, is refused naming
// requestState.
func TestMCPUpstreamReadInputRequired(t *testing.T) {
	t.Parallel()
	ops := strings.Replace(askStdioOps(t), "include: [ask, ask_input]", "include: [ask, ask_input]\n      resources: true\n      prompts: true", 1)
	_, b, lb := askReplicas(t, ops)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	text := func(res any) string {
		switch r := res.(type) {
		case *mcp.GetPromptResult:
			if r != nil && len(r.Messages) == 1 {
				if tc, ok := r.Messages[0].Content.(*mcp.TextContent); ok {
					return tc.Text
				}
			}
		case *mcp.ReadResourceResult:
			if r != nil && len(r.Contents) == 1 {
				return r.Contents[0].Text
			}
		}
		b, _ := json.Marshal(res)
		return string(b)
	}

	var a askingClient
	sc, err := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, a.options()).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb}}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Close() })
	pr, err := sc.GetPrompt(ctx, &mcp.GetPromptParams{Name: "stdio_ask_prompt"})
	if err != nil || text(pr) != "Hello Grace" {
		t.Fatalf("prompts/get on a session: %v %s\n%s", err, text(pr), b.log.String())
	}
	rr, err := sc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ask://input"})
	if err != nil || text(rr) != "Hello Grace" {
		t.Fatalf("resources/read on a session: %v %s", err, text(rr))
	}
	if asked := a.asked.wait(2, 10*time.Second); strings.Join(asked, "|") != "elicit form Who are you? |elicit form Who are you? " {
		t.Errorf("the session's client was asked %q", asked)
	}

	nc, err := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, // the test answers and retries itself
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}}).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	answer := mcp.InputResponseMap{"who": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}}
	first, err := nc.GetPrompt(ctx, &mcp.GetPromptParams{Name: "stdio_ask_prompt"})
	if err != nil || !first.NeedsInput() || !strings.HasPrefix(first.RequestState, "crank2:") || strings.Contains(first.RequestState, "read-state") {
		t.Fatalf("prompts/get of 2026-07-28: %v %s", err, text(first))
	}
	if f, ok := first.InputRequests["who"].(*mcp.ElicitParams); !ok || f.Message != "Who are you?" {
		t.Fatalf("prompts/get of 2026-07-28: input requests %s", text(first))
	}
	lb.to(b) // the retries reach the other replica
	if _, err := nc.GetPrompt(ctx, &mcp.GetPromptParams{Name: "stdio_ask_prompt", InputResponses: answer, RequestState: first.RequestState + "A"}); err == nil || !strings.Contains(err.Error(), "requestState") {
		t.Errorf("a changed state: want an error naming requestState, got %v", err)
	}
	if _, err := nc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ask://input", InputResponses: answer, RequestState: first.RequestState}); err == nil || !strings.Contains(err.Error(), "requestState") {
		t.Errorf("the prompt's state on a read: want an error naming requestState, got %v", err)
	}
	pr, err = nc.GetPrompt(ctx, &mcp.GetPromptParams{Name: "stdio_ask_prompt", InputResponses: answer, RequestState: first.RequestState})
	if err != nil || pr.NeedsInput() || text(pr) != "Hello Ada" {
		t.Fatalf("the retry on b: %v %s\n%s", err, text(pr), b.log.String())
	}
	rfirst, err := nc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ask://input"})
	if err != nil || !rfirst.NeedsInput() || !strings.HasPrefix(rfirst.RequestState, "crank2:") {
		t.Fatalf("resources/read of 2026-07-28: %v %s", err, text(rfirst))
	}
	rr, err = nc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ask://input", InputResponses: answer, RequestState: rfirst.RequestState})
	if err != nil || rr.NeedsInput() || text(rr) != "Hello Ada" {
		t.Fatalf("the read's retry: %v %s", err, text(rr))
	}
}

// TestMCPUpstreamClientRequestsTypeScript: the official TypeScript SDK
// client, on an MCP session (2025-11-25), answers the elicitation (form
// and URL mode), sampling and roots requests a federated go-sdk upstream
// makes during a call, through the gateway.
func TestMCPUpstreamClientRequestsTypeScript(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	g := startGateway(t, gatewayOptions{Operations: askStdioOps(t) + askHTTPOps(t, "ask")})
	out := runTSClient(t, g.MCPURL, `[
		{"op":"callTool","name":"http_ask"},
		{"op":"callTool","name":"stdio_ask_input"}
	]`, "CRANK_E2E_ANSWER=1")
	doc := tsAnswered[struct{ StructuredContent map[string]any }](t, out, 2) // mcp_upstream_everything_ask_test.go
	for i, st := range doc.Steps {
		b, _ := json.Marshal(st.Result.StructuredContent)
		for _, want := range []string{`"name":"Grace"`, `"color":"green"`, `"age":36`, `4, to 2+2?`, `"model":"ts-model"`, `file:///work/project`} {
			if !st.OK || !strings.Contains(string(b), want) {
				t.Errorf("step %d: want %s in %s", i, want, b)
			}
		}
	}
	slices.Sort(doc.Asked)
	want := "elicit form Who are you?|elicit form Who are you?|elicit url Sign in|elicit url Sign in|roots|roots|sample 2+2?|sample 2+2?"
	if strings.Join(doc.Asked, "|") != want {
		t.Errorf("the client was asked %q, want %q", doc.Asked, want)
	}
}

// TestMCPUpstreamClientRequestsAcrossReplicas: a client's MCP session
// (2025-11-25) moves to another replica between calls (sharing etcd), and
// the upstream's requests during a call on either replica reach it with
// its capabilities as it declared them at initialize.
func TestMCPUpstreamClientRequestsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a, b, lb := askReplicas(t, "\noperations:"+askHTTPOps(t, "ask"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var asking askingClient
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, asking.options())
	//nolint:staticcheck // roots are deprecated as of 2026-07-28, and still served before them
	client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb}}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for _, g := range []*gateway{a, b} {
		lb.to(g)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_ask"})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v\n%s", g.MCPURL, err, res, g.log.String())
		}
		b, _ := json.Marshal(res.StructuredContent)
		for _, want := range []string{`"name":"Grace"`, `"age":36`, `4, to 2+2?`, `file:///work/project`, `"url":{"action":"accept"}`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: want %s in %s", g.MCPURL, want, b)
			}
		}
	}
}
