package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TypeScript servers that ask their client during a call, federated
// through two replicas: the v1 McpServer fixture (e2e/ts/conformance-server.mjs,
// extra.sendRequest on the call's stream) and the v2 one
// (e2e/ts/ask-server-v2.mjs: input-required results, which the v2 SDK
// turns into requests of its own on a 2025 session), each over stdio and
// Streamable HTTP.

// tsAsk is one tool of the TypeScript fixtures that asks, and what its
// answer starts with once the client answered (the clients fill in the
// form's defaults).
type tsAsk struct {
	tool string
	args map[string]any
	want string
}

// tsAsks are the asking tools of each fixture: a form and a URL mode
// elicitation and a sampling request.
var tsAsks = map[string][]tsAsk{
	"v1": {
		{"test_elicitation_sep1034_defaults", nil, `Elicitation completed: action=accept, content={"age":30,"name":"Grace",`},
		{"test_elicitation_url", map[string]any{"url": "https://auth.example/login"}, "Elicitation completed: action=accept, content={}"},
		{"test_sampling", map[string]any{"prompt": "2+2?"}, "LLM response: 4, to 2+2?"},
	},
	"v2": {
		{"ask_form", nil, "form: Grace"},
		{"ask_url", map[string]any{"url": "https://auth.example/login"}, "url: accept"},
		{"ask_sample", map[string]any{"prompt": "2+2?"}, "sample: 4, to 2+2?"},
	},
}

// tsAskOps federates the v1 and v2 fixtures over stdio (prefixes v1s_,
// v2s_) and Streamable HTTP (v1h_, v2h_).
func tsAskOps(t *testing.T) string {
	t.Helper()
	requireTSClient(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repoRoot, "e2e", "ts")
	scripts := map[string]string{"v1": filepath.Join(dir, "conformance-server.mjs"), "v2": filepath.Join(dir, "ask-server-v2.mjs")}
	var ops strings.Builder
	ops.WriteString("operations:\n")
	for _, v := range []string{"v1", "v2"} {
		var tools []string
		for _, a := range tsAsks[v] {
			tools = append(tools, a.tool)
		}
		port := freePort(t)
		u, _ := serveHTTPProcess(t, "the TypeScript "+v+" fixture", exec.Command(node, scripts[v], "http", strconv.Itoa(port)), port)
		fmt.Fprintf(&ops, `  - name: %[1]s-stdio
    description: The TypeScript SDK %[1]s fixture over stdio.
    adapter: mcp
    timeout: 30s
    config: {command: %[2]q, args: [%[3]q], prefix: %[1]ss_, include: [%[4]s]}
  - name: %[1]s-http
    description: The TypeScript SDK %[1]s fixture over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config: {url: %[5]q, prefix: %[1]sh_, include: [%[4]s]}
`, v, node, scripts[v], strings.Join(tools, ", "), u)
	}
	return ops.String()
}

// alternating sends each request to the next of its gateways in turn: a
// load balancer without affinity.
type alternating struct {
	gateways []*gateway
	n        atomic.Int64
}

func (a *alternating) RoundTrip(req *http.Request) (*http.Response, error) {
	g := a.gateways[int(a.n.Add(1))%len(a.gateways)]
	u, _ := url.Parse(g.MCPURL)
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = u.Host, u.Host
	return http.DefaultTransport.RoundTrip(req)
}

// proxyThrough serves an HTTP front whose requests go through rt (a
// balancer or alternating), for clients in other processes; it returns
// the front's MCP endpoint.
func proxyThrough(t *testing.T, rt http.RoundTripper) string {
	p := &httputil.ReverseProxy{Transport: rt, FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host = "http", "balancer"
	}}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s.URL + "/mcp"
}

// runTSv2Client runs e2e/ts/client-v2.mjs (the TypeScript SDK v2 client)
// in generation legacy or modern, calling each of calls.
func runTSv2Client(t *testing.T, endpoint, generation string, calls []map[string]any) (out struct {
	ProtocolVersion string
	Asked           []string
	Steps           []struct {
		OK     bool
		Error  string
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
	}
}) {
	t.Helper()
	b, _ := json.Marshal(calls)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "client-v2.mjs"), endpoint, generation, string(b))
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil || len(out.Steps) != len(calls) {
		t.Fatalf("client-v2.mjs %s: %v\n%s", generation, err, raw)
	}
	return out
}

// TestMCPUpstreamTSClientRequests: TypeScript SDK servers (v1's McpServer
// asking on the call's stream, v2's asking with input-required results)
// federated over stdio and Streamable HTTP elicit (form and URL mode) and
// sample during a call, and the clients answer through two replicas:
//
//   - go-sdk and the TypeScript SDK v1 and v2 clients on an MCP session
//     (2025-11-25) are asked during the call, on either replica: the
//     go-sdk client's session moves from the first to the second;
//   - go-sdk and TypeScript SDK v2 clients of 2026-07-28, through a load
//     balancer that sends each request to the other replica, get the v2
//     server's input-required results and their retries succeed; the v1
//     server, which speaks 2025-11-25 only and asks during the call, gets a
//     session that declares no way to ask such a client, and its tools
//     answer that the client does not support it, as the server says.
func TestMCPUpstreamTSClientRequests(t *testing.T) {
	t.Parallel()
	a, b, lb := askReplicas(t, tsAskOps(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	text := func(res *mcp.CallToolResult) string {
		if res == nil {
			return ""
		}
		return textOf(res)
	}
	type target struct{ prefix, version string }
	var targets []target
	for _, p := range []string{"s_", "h_"} {
		for _, v := range []string{"v1", "v2"} {
			targets = append(targets, target{v + p, v})
		}
	}

	// A go-sdk client on a session, on replica a, then on b.
	var asker askingClient
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, asker.options()).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb}}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for _, on := range []*gateway{a, b} {
		lb.to(on)
		for _, tg := range targets {
			for _, ask := range tsAsks[tg.version] {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tg.prefix + ask.tool, Arguments: ask.args})
				if err != nil || res.IsError || !strings.HasPrefix(text(res), ask.want) {
					t.Errorf("go-sdk session, %s%s: %v %q, want %q\n%s", tg.prefix, ask.tool, err, text(res), ask.want, on.log.String())
				}
			}
		}
		if asked := asker.asked.wait(12, 10*time.Second); len(asked) != 12 {
			t.Errorf("the go-sdk client was asked %q", asked)
		}
	}

	// A go-sdk client of 2026-07-28 through a balancer without affinity:
	// each retry with its answers reaches the other replica.
	spread := &alternating{gateways: []*gateway{a, b}}
	opts := asker.options()
	//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
	opts.Capabilities.Sampling = &mcp.SamplingCapabilities{}
	nc, err := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, opts).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: spread}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if v := nc.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	for _, tg := range targets {
		for _, ask := range tsAsks[tg.version] {
			res, err := nc.CallTool(ctx, &mcp.CallToolParams{Name: tg.prefix + ask.tool, Arguments: ask.args})
			switch {
			case tg.version == "v2" && (err != nil || res.IsError || !strings.HasPrefix(text(res), ask.want)):
				t.Errorf("go-sdk 2026-07-28, %s%s: %v %q, want %q", tg.prefix, ask.tool, err, text(res), ask.want)
			case tg.version == "v1" && (err != nil || !res.IsError || !strings.Contains(text(res), "not supported")):
				t.Errorf("go-sdk 2026-07-28, %s%s: %v %q, want the tool's own 'not supported'", tg.prefix, ask.tool, err, text(res))
			}
		}
	}

	// The TypeScript SDK clients, v1 and v2 on a session (on b now), v2
	// of 2026-07-28 through the balancer without affinity.
	var calls []map[string]any
	var wants []tsAsk
	for _, tg := range targets {
		for _, ask := range tsAsks[tg.version] {
			calls = append(calls, map[string]any{"op": "callTool", "name": tg.prefix + ask.tool, "arguments": ask.args})
			wants = append(wants, tsAsk{tg.prefix + ask.tool, nil, ask.want})
		}
	}
	script, _ := json.Marshal(calls)
	v1 := tsAnswered[struct {
		Content []struct{ Text string }
		IsError bool
	}](t, runTSClient(t, proxyThrough(t, lb), string(script), "CRANK_E2E_ANSWER=1"), len(calls))
	for i, st := range v1.Steps {
		if !st.OK || st.Result.IsError || len(st.Result.Content) != 1 || !strings.HasPrefix(st.Result.Content[0].Text, wants[i].want) {
			t.Errorf("TypeScript v1 client, %s: %+v, want %q", wants[i].tool, st, wants[i].want)
		}
	}
	if len(v1.Asked) != len(calls) {
		t.Errorf("the TypeScript v1 client was asked %q", v1.Asked)
	}
	for _, generation := range []string{"legacy", "modern"} {
		front := proxyThrough(t, lb)
		if generation == "modern" {
			front = proxyThrough(t, spread)
		}
		out := runTSv2Client(t, front, generation, calls)
		for i, st := range out.Steps {
			got := ""
			if st.OK && len(st.Result.Content) == 1 {
				got = st.Result.Content[0].Text
			}
			v1Tool := strings.HasPrefix(wants[i].tool, "v1")
			switch {
			case generation == "modern" && v1Tool:
				if !st.OK || !st.Result.IsError || !strings.Contains(got, "not supported") {
					t.Errorf("TypeScript v2 client of 2026-07-28, %s: %+v, want the tool's own 'not supported'", wants[i].tool, st)
				}
			case !st.OK || st.Result.IsError || !strings.HasPrefix(got, wants[i].want):
				t.Errorf("TypeScript v2 client (%s, %s), %s: %+v, want %q", generation, out.ProtocolVersion, wants[i].tool, st, wants[i].want)
			}
		}
		want := len(calls)
		if generation == "modern" {
			want /= 2
		}
		if len(out.Asked) != want {
			t.Errorf("the TypeScript v2 client (%s) was asked %q", generation, out.Asked)
		}
	}
}
