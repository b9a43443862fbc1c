package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/internal/benchproc"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// hotOps are the tools of the hot path's differential test: get_user
// (the Users upstream), secret_user (hidden by the policy) and
// internal_user (left out by the view), all unary.
var hotOps = mcptest.UsersOps + `  - name: secret_user
    description: A user the policy hides.
    adapter: rest
    timeout: 5s
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: internal_user
    description: A user the view leaves out.
    adapter: rest
    timeout: 5s
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: drifting_user
    description: A user whose answer breaks the output schema the tool publishes.
    adapter: rest
    timeout: 5s
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    output_schema: {type: object, properties: {id: {type: string}}, required: [id, nickname]}
    config: {method: GET, url: "%[1]s/users/{id}"}
`

// TestHotPathMatchesSDK: the same requests, answered by an endpoint with
// its hot path off (go-sdk serves every request) and on, get the same
// status, headers and body bytes, but for the random stream ids of SSE
// event ids: a success with structured content, an isError result (an
// upstream 404), an answer that does not match the output schema, bad
// arguments, a policy refusal, a tool the policy hides
// and one the view leaves out, an unknown tool, in a 2025-11-25 session
// and sessionless (2026-07-28), on an SSE and a json_response endpoint.
func TestHotPathMatchesSDK(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	ops := strings.Replace(hotOps, "%s", "%[1]s", 1)
	hst := newTestHost(t, fmt.Sprintf(ops, up.URL), nil, nil)
	policy, err := auth.CompilePolicy([]auth.Rule{
		{Name: "small-ids", Expression: `tool.name != "get_user" || int(args.id) != 100`},
		{Name: "no-secrets", Expression: `tool.name != "secret_user"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		what string
		name string
		args map[string]any
		hot  bool // served by the hot path when it is on
		// edit, when set, changes the body posted
		edit func([]byte) []byte
		// host, when set, is the Host header's spelling (PORT the port)
		host string
	}{
		{"success", "get_user", map[string]any{"id": 7}, true, nil, ""},
		{"isError", "get_user", map[string]any{"id": 404}, true, nil, ""},
		{"bad arguments", "get_user", map[string]any{"id": 0}, true, nil, ""},
		{"arguments the policy cannot read", "get_user", map[string]any{"id": "seven"}, true, nil, ""},
		{"undeclared argument", "get_user", map[string]any{"id": 7, "x": 1}, true, nil, ""},
		{"policy refusal", "get_user", map[string]any{"id": 100}, true, nil, ""},
		{"policy hides", "secret_user", map[string]any{"id": 7}, true, nil, ""},
		{"view leaves out", "internal_user", map[string]any{"id": 7}, false, nil, ""},
		{"unknown tool", "no_such_tool", map[string]any{}, false, nil, ""},
		{"html in arguments", "get_user", map[string]any{"id": 7, "<b>": "&"}, true, nil, ""},
		{"output mismatch", "drifting_user", map[string]any{"id": 7}, true, nil, ""},
		{"JSON-RPC 1.0", "get_user", map[string]any{"id": 7}, false,
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"2.0"`), []byte(`"1.0"`), 1) }, ""},
		{"trailing data", "get_user", map[string]any{"id": 7}, false,
			func(b []byte) []byte { return append(b, " {}"...) }, ""},
		{"string id", "get_user", map[string]any{"id": 7}, true,
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"id":3`), []byte(`"id":"<3>"`), 1) }, ""},
		{"null arguments", "get_user", nil, true, nil, ""},
		{"no arguments", "get_user", map[string]any{"id": 7}, true,
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"arguments":{"id":7},`), nil, 1) }, ""},
		{"unknown params member", "get_user", map[string]any{"id": 7}, false,
			func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"arguments":`), []byte(`"other":1,"arguments":`), 1)
			}, ""},
		// One Host decision for both paths, whatever the spelling.
		{"Host LOCALHOST", "get_user", map[string]any{"id": 7}, true, nil, "LOCALHOST:PORT"},
		{"Host localhost", "get_user", map[string]any{"id": 7}, true, nil, "localhost:PORT"},
		{"Host [::1]", "get_user", map[string]any{"id": 7}, true, nil, "[::1]:PORT"},
		{"Host 127.0.0.1 without a port", "get_user", map[string]any{"id": 7}, true, nil, "127.0.0.1"},
		{"Host localhost.", "get_user", map[string]any{"id": 7}, false, nil, "localhost.:PORT"},
		{"Host 127.0.0.1.nip.io", "get_user", map[string]any{"id": 7}, false, nil, "127.0.0.1.nip.io:PORT"},
		{"Host 2130706433", "get_user", map[string]any{"id": 7}, false, nil, "2130706433:PORT"},
	}
	for _, jsonResponse := range []bool{false, true} {
		opts := testOptions("default")
		opts.Policy = policy
		opts.View = &ViewConfig{Exclude: []string{"internal_user"}}
		opts.JSONResponse = jsonResponse
		serve := func() (*Endpoint, string) { return serveEndpoint(t, hst, st, opts) }
		// The session is opened on one replica and restored by another,
		// whose own transport serves it (SSE on a json_response endpoint
		// too).
		first, url := serve()
		replica, replicaURL := serve()
		mode := map[bool]string{false: "sse", true: "json_response"}[jsonResponse]

		c := &mcptest.Client{T: t, URL: url}
		c.Initialize("2025-11-25")
		(&mcptest.Client{T: t, URL: replicaURL, Session: c.Session, Version: c.Version}).OK("ping", map[string]any{}, &map[string]any{})
		for _, gen := range []string{"session", "sessionless", "restored"} {
			ep, url := first, url
			if gen == "restored" {
				ep, url = replica, replicaURL
			}
			for _, call := range calls {
				post := func() hotReply {
					hdr := map[string]string{"X-Agent": "agent-1"}
					params := map[string]any{"name": call.name, "arguments": call.args}
					if gen != "sessionless" {
						hdr[sessionIDHeader], hdr["MCP-Protocol-Version"] = c.Session, c.Version
						hdr["X-Agent"] = ""
					} else {
						hdr["MCP-Protocol-Version"], hdr["Mcp-Method"], hdr["Mcp-Name"] = sessionlessProtocolVersion, "tools/call", call.name
						params = newParams(sessionlessProtocolVersion, "name", call.name, "arguments", call.args)
						delete(params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities].(map[string]any), "extensions")
					}
					if call.host != "" {
						hdr["Host"] = strings.ReplaceAll(call.host, "PORT", url[strings.LastIndexByte(url, ':')+1:strings.LastIndexByte(url, '/')])
					}
					return hotPost(t, url, hdr, params, call.edit)
				}
				ep.noHotPath.Store(true)
				sdk := post()
				ep.noHotPath.Store(false)
				before := ep.hotCalls.Load()
				hot := post()
				served := ep.hotCalls.Load() - before
				name := mode + "/" + gen + "/" + call.what
				if want := map[bool]int64{true: 1, false: 0}[call.hot]; served != want {
					t.Errorf("%s: the hot path served %d calls, want %d", name, served, want)
				}
				if sdk.String() != hot.String() {
					t.Errorf("%s: go-sdk and the hot path differ\ngo-sdk:\n%s\nhot path:\n%s", name, sdk, hot)
				}
				if call.what == "output mismatch" && (!strings.Contains(hot.body, `"isError":true`) ||
					strings.Contains(hot.body, `"structuredContent":`) || !strings.Contains(hot.body, `does not match the output schema tool \"drifting_user\" publishes (at /id: must be a string, got an integer`)) {
					t.Errorf("%s: %s", name, hot.body)
				}
			}
		}
	}
}

// hotReply is an HTTP answer as the differential test compares it.
type hotReply struct {
	status int
	header http.Header
	body   string
}

// eventID is an SSE event id: a random stream id and an index.
var eventID = regexp.MustCompile(`(?m)^id: [^_\n]+_`)

func (r hotReply) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", r.status)
	for _, k := range []string{"Content-Type", "Cache-Control", "Connection", "Mcp-Session-Id", "X-Content-Type-Options", "Content-Length"} {
		fmt.Fprintf(&b, "%s: %q\n", k, r.header.Values(k))
	}
	b.WriteString(eventID.ReplaceAllString(r.body, "id: STREAM_"))
	return b.String()
}

// hotPost posts a tools/call with the given headers ("" removes one).
func hotPost(t *testing.T, url string, hdr map[string]string, params map[string]any, edit func([]byte) []byte) hotReply {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		b = edit(b)
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		switch {
		case v == "":
			req.Header.Del(k)
		case k == "Host":
			req.Host = v
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return hotReply{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// BenchmarkHotPath compares a get_user call (the REST adapter, a loopback
// upstream) answered by go-sdk and by the hot path, in a 2025-11-25
// session and sessionless, taking turns; it reports the bytes this
// process allocates per call (endpoint, host, the raw client and the
// upstream alike on both paths) and each path's time per call.
func BenchmarkHotPath(b *testing.B) {
	_, st := storetest.Embedded(b)
	up := mcptest.NewUsers(b)
	hst := newTestHost(b, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil)
	ep, url := serveEndpoint(b, hst, st, testOptions("default"))
	c := &mcptest.Client{T: b, URL: url}
	c.Initialize("2025-11-25")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	body := func(gen string) []byte {
		params := map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}
		if gen == "sessionless" {
			params = newParams(sessionlessProtocolVersion, "name", "get_user", "arguments", map[string]any{"id": 7})
			delete(params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities].(map[string]any), "extensions")
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		return b
	}
	call := func(gen string, raw []byte) {
		h := http.Header{sessionIDHeader: {c.Session}, "Mcp-Protocol-Version": {c.Version}}
		if gen != "session" {
			h = sessionlessCallHeaders("get_user", "X-Agent", "bench")
		}
		benchGetUser(b, client, url, raw, h)
	}
	type variant struct {
		name, gen string
		off       bool
		bytes     uint64
		took      time.Duration
	}
	vs := []*variant{{name: "sdk", gen: "session", off: true}, {name: "hot", gen: "session"},
		{name: "sdk-sessionless", gen: "sessionless", off: true}, {name: "hot-sessionless", gen: "sessionless"}}
	bodies := map[string][]byte{"session": body("session"), "sessionless": body("sessionless")}
	for _, v := range vs { // warm: the adapter process, connections
		ep.noHotPath.Store(v.off)
		call(v.gen, bodies[v.gen])
	}
	var before, after runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i += 50 {
		for _, v := range vs {
			ep.noHotPath.Store(v.off)
			n := min(50, b.N-i)
			runtime.ReadMemStats(&before)
			start := time.Now()
			for range n {
				call(v.gen, bodies[v.gen])
			}
			v.took += time.Since(start)
			runtime.ReadMemStats(&after)
			v.bytes += after.TotalAlloc - before.TotalAlloc
		}
	}
	for _, v := range vs {
		b.ReportMetric(float64(v.bytes)/float64(b.N), v.name+"-B/call")
		b.ReportMetric(float64(v.took.Microseconds())/float64(b.N), v.name+"-µs/call")
	}
}

// BenchmarkRateLimit is what rate limits cost a call on the hot path.
// "admit" is the limiter's step of a resolved call alone (admit: the
// tool's limits looked up, the caller's keys read, three buckets taken —
// one for every caller, one per client among 1000 clients, one per user
// across the fleet), in ns/call. "call" is a sessionless get_user call
// on the hot path through an endpoint with those limits and through one
// without, taking turns in the same run, in µs/call each.
func BenchmarkRateLimit(b *testing.B) {
	_, st := storetest.Embedded(b)
	up := mcptest.NewUsers(b)
	hst := newTestHost(b, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil)
	limited := testOptions("default")
	limited.RateLimits = []ratelimit.Limit{{Name: "all", Rate: "1000000/s", Tool: "get_user"},
		{Name: "per_client", Rate: "1000000/s", Per: ratelimit.PerClient},
		{Name: "per_user", Rate: "1000000/s", Per: ratelimit.PerUser, Fleet: true}}
	limited.AuthenticatedUser = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
	ep, urlLimited := serveEndpoint(b, hst, st, limited)
	_, urlNone := serveEndpoint(b, hst, st, testOptions("default"))

	b.Run("admit", func(b *testing.B) {
		headers := make([]http.Header, 1000)
		for i := range headers {
			headers[i] = http.Header{authUserHeader: {fmt.Sprintf("user-%d", i%100)}, clientHeader: {fmt.Sprintf("10.0.%d.%d", i/256, i%256)}}
		}
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "get_user"}, Extra: &mcp.RequestExtra{Header: headers[0]}}
		var p plan
		ep.resolve(&p, "tools/call", req)
		if len(ep.limitsOf(&p)) != 3 {
			b.Fatalf("%d limits apply", len(ep.limitsOf(&p)))
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if err := ep.admit(&p, &mcp.RequestExtra{Header: headers[i%len(headers)]}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "limiter-ns/call")
	})

	b.Run("call", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		params := newParams(sessionlessProtocolVersion, "name", "get_user", "arguments", map[string]any{"id": 7})
		delete(params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities].(map[string]any), "extensions")
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		call := func(url string) {
			benchGetUser(b, client, url, body, sessionlessCallHeaders("get_user", "X-Test-User", "alice"))
		}
		call(urlLimited)
		call(urlNone)
		hot := ep.hotCalls.Load()
		var took [2]time.Duration
		b.ResetTimer()
		urls := []string{urlLimited, urlNone}
		for i := 0; i < b.N; i += 50 {
			n := min(50, b.N-i)
			for k := range urls {
				j := (k + i/50) % 2 // each goes first in every other turn
				start := time.Now()
				for range n {
					call(urls[j])
				}
				took[j] += time.Since(start)
			}
		}
		if ep.hotCalls.Load()-hot != int64(b.N) {
			b.Fatalf("the hot path served %d of %d limited calls", ep.hotCalls.Load()-hot, b.N)
		}
		b.ReportMetric(float64(took[0].Microseconds())/float64(b.N), "limited-µs/call")
		b.ReportMetric(float64(took[1].Microseconds())/float64(b.N), "unlimited-µs/call")
	})
}

// sessionlessCallHeaders are the headers of a sessionless tools/call of
// tool, with one more header (name, value).
func sessionlessCallHeaders(tool, name, value string) http.Header {
	return http.Header{"Mcp-Protocol-Version": {sessionlessProtocolVersion}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool}, name: {value}}
}

// benchGetUser posts a get_user call (body) with the headers h, and fails
// unless it is answered with the user.
func benchGetUser(b *testing.B, client *http.Client, url string, body []byte, h http.Header) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte("Ada Lovelace")) {
		b.Fatalf("HTTP %d %s", resp.StatusCode, out)
	}
}

// BenchmarkOutputCheck measures what checking a result against its tool's
// output schema costs a unary call on the hot path: the same call (a
// user, against an output schema of three members) with the check on and
// off, taking turns in blocks of 50, in a session and sessionless. It
// reports the process's CPU time per call of each (Linux /proc: the
// endpoint, host, client and upstream of this process; the adapter runs
// in its own) and the check's share of it, output-check-cpu-%: the
// median over adjacent blocks of the ratio of their CPU, less one. The
// goal is at most 3 %.
func BenchmarkOutputCheck(b *testing.B) {
	_, st := storetest.Embedded(b)
	up := mcptest.NewUsers(b)
	ops := strings.Replace(mcptest.UsersOps, "    config:\n", "    output_schema:\n      type: object\n      required: [id, name]\n"+
		"      properties: {id: {type: integer}, name: {type: string}, email: {type: string}}\n    config:\n", 1)
	hst := newTestHost(b, fmt.Sprintf(ops, up.URL), nil, nil)
	_, url := serveEndpoint(b, hst, st, testOptions("default"))
	c := &mcptest.Client{T: b, URL: url}
	c.Initialize("2025-11-25")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	bodies := map[string][]byte{}
	for _, gen := range []string{"session", "sessionless"} {
		params := map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}
		if gen == "sessionless" {
			params = newParams(sessionlessProtocolVersion, "name", "get_user", "arguments", map[string]any{"id": 7})
			delete(params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities].(map[string]any), "extensions")
		}
		bodies[gen], _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	}
	call := func(gen string) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(bodies[gen]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if gen == "session" {
			req.Header.Set(sessionIDHeader, c.Session)
			req.Header.Set("MCP-Protocol-Version", c.Version)
		} else {
			req.Header.Set("MCP-Protocol-Version", sessionlessProtocolVersion)
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "get_user")
			req.Header.Set("X-Agent", "bench")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"structuredContent":{"id":7`)) {
			b.Fatalf("%s: HTTP %d %s", gen, resp.StatusCode, out)
		}
	}
	type variant struct {
		gen   string
		check bool
		cpu   time.Duration
		last  time.Duration // of its latest block
	}
	vs := []*variant{{gen: "session", check: true}, {gen: "session"}, {gen: "sessionless", check: true}, {gen: "sessionless"}}
	for _, v := range vs { // warm: the adapter process, connections, the compiled schema
		hst.SetOutputCheck(v.check)
		call(v.gen)
	}
	// ratios are each generation's on/off CPU of adjacent blocks: their
	// median is robust against the load other processes put on the
	// machine during some blocks.
	ratios := map[string][]float64{}
	pid := os.Getpid()
	b.ResetTimer()
	for i := 0; i < b.N; i += 50 {
		for _, v := range vs {
			hst.SetOutputCheck(v.check)
			n := min(50, b.N-i)
			start := benchproc.CPU(pid)
			for range n {
				call(v.gen)
			}
			v.last = benchproc.CPU(pid) - start
			v.cpu += v.last
		}
		for j := 0; j < len(vs); j += 2 {
			if vs[j+1].last > 0 {
				ratios[vs[j].gen] = append(ratios[vs[j].gen], float64(vs[j].last)/float64(vs[j+1].last))
			}
		}
	}
	hst.SetOutputCheck(true)
	per := func(v *variant) float64 { return float64(v.cpu.Nanoseconds()) / 1e3 / float64(b.N) }
	for i := 0; i < len(vs); i += 2 {
		on, off := vs[i], vs[i+1]
		sfx := map[string]string{"session": "", "sessionless": "-sessionless"}[on.gen]
		b.ReportMetric(per(on), "check-cpu-µs/call"+sfx)
		b.ReportMetric(per(off), "nocheck-cpu-µs/call"+sfx)
		r := ratios[on.gen]
		slices.Sort(r)
		if len(r) > 0 {
			b.ReportMetric(100*(r[len(r)/2]-1), "output-check-cpu-%"+sfx)
		}
	}
}
