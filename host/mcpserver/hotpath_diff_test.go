package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// The differential test, continued (TestHotPathMatchesSDK has the
// answers of single calls): what the two paths share while calls are in
// flight. Each case runs twice on the same endpoint, go-sdk serving every
// request (hot path off) and then the hot path on, and the two runs must
// give the same bytes (SSE event ids aside, whose stream part is random).

// differentialGoSDK is the go-sdk version the differential tests last ran
// against (TestDifferentialGoSDKVersion).
const differentialGoSDK = "v1.8.0"

// TestDifferentialGoSDKVersion: the hot path mirrors behaviours of go-sdk
// (docs/architecture.md, "The fast lane"), some of them unexported; a
// go-sdk upgrade must re-run the differential tests before it lands.
func TestDifferentialGoSDKVersion(t *testing.T) {
	t.Parallel()
	version := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == goSDKModule {
				if m.Replace != nil {
					m = m.Replace
				}
				version = m.Version
			}
		}
	}
	if version == "" { // a test binary may carry no dependencies: go.mod says
		mod, err := os.ReadFile("../../go.mod")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(mod)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == goSDKModule {
				version = f[1]
			}
		}
	}
	if version == "" {
		t.Fatal("go-sdk is not a dependency of this module")
	}
	if version != differentialGoSDK {
		t.Fatalf("go-sdk is %s, but the hot path's differential tests last ran against %s: run "+
			"go test ./host/mcpserver -run 'TestHotPath|TestDifferential' -count=1, check every go-sdk behaviour "+
			"docs/architecture.md (\"The fast lane\") lists against the new release, then set differentialGoSDK "+
			"(host/mcpserver/hotpath_diff_test.go) to %s", version, differentialGoSDK, version)
	}
}

// goSDKModule is go-sdk's module path.
const goSDKModule = "github.com/modelcontextprotocol/go-sdk"

// diffEndpoint is an endpoint of the slow Reports upstream (report n
// answers once released) with a 2025-11-25 session open on it.
type diffEndpoint struct {
	ep      *Endpoint
	url     string
	session string
	up      *mcptest.Reports
	st      *store.Etcd
	next    int // the next report n, each released once
}

// newDiffEndpoint is a diffEndpoint; holdPrime holds every priming
// event's flush until the answer follows, however slow the machine.
func newDiffEndpoint(t *testing.T, jsonResponse, holdPrime bool) *diffEndpoint {
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	opts := testOptions("default")
	opts.JSONResponse = jsonResponse
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if holdPrime {
		ep.transport.primeDelay = time.Hour
	}
	ep.Attach(newTestHost(t, fmt.Sprintf(slowOps, up.URL), nil, nil), st)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	url := srv.URL + "/mcp"
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize("2025-11-25")
	return &diffEndpoint{ep: ep, url: url, session: c.Session, up: up, st: st, next: 1}
}

// n is a fresh report number for a call that waits to be released.
func (d *diffEndpoint) n() int { d.next++; return d.next }

// call is the body of a tools/call of report n with id; progress adds a
// progress token, which go-sdk's path serves (the hot path declines it).
func call(id any, n int, progress bool) []byte {
	meta := ""
	if progress {
		meta = `,"_meta":{"progressToken":"p"}`
	}
	idJSON := fmt.Sprint(id)
	if s, ok := id.(string); ok {
		idJSON = fmt.Sprintf("%q", s)
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"report","arguments":{"n":%d}%s}}`, idJSON, n, meta)
}

// post posts body in the session, headers edited by hdr ("" removes one),
// and returns the response (its body unread).
func (d *diffEndpoint) post(t *testing.T, ctx context.Context, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, d.session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// reply reads a response whole, as the differential test compares it.
func reply(resp *http.Response) hotReply {
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return hotReply{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// reportN is a report's n in an answer, which differs between the runs.
var reportN = regexp.MustCompile(`n(\\?"):\d+`)

// both runs f with the hot path off and then on, and fails unless they
// give the same text; it returns the hot path's and the calls it served.
func (d *diffEndpoint) both(t *testing.T, what string, f func() string) (string, int64) {
	t.Helper()
	d.ep.noHotPath.Store(true)
	sdk := reportN.ReplaceAllString(f(), "n${1}:N")
	d.ep.noHotPath.Store(false)
	before := d.ep.hotCalls.Load()
	hot := reportN.ReplaceAllString(f(), "n${1}:N")
	if sdk != hot {
		t.Errorf("%s: go-sdk and the hot path differ\ngo-sdk:\n%s\nhot path:\n%s", what, sdk, hot)
	}
	return hot, d.ep.hotCalls.Load() - before
}

// TestHotPathSharesInFlight: an id in flight on one path is refused on
// the other, as go-sdk refuses it on its own (400, -32600), and the call
// in flight still gets its answer; on an SSE and a json_response
// endpoint.
func TestHotPathSharesInFlight(t *testing.T) {
	t.Parallel()
	for _, jsonResponse := range []bool{false, true} {
		d := newDiffEndpoint(t, jsonResponse, false)
		for _, first := range []string{"go-sdk", "hot path"} {
			what := fmt.Sprintf("json_response %v, in flight on %s", jsonResponse, first)
			got, served := d.both(t, what, func() string {
				n := d.n()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				answer := make(chan hotReply, 1)
				go func() { answer <- reply(d.post(t, ctx, call(50, n, first == "go-sdk"), nil)) }()
				d.up.Await(t, "arrived", fmt.Sprint(n))
				dup := reply(d.post(t, ctx, call(50, 1000, first != "go-sdk"), nil))
				d.up.Release(fmt.Sprint(n))
				return "duplicate: " + dup.String() + "\nfirst: " + (<-answer).String()
			})
			if !strings.Contains(got, "HTTP 400") || !strings.Contains(got, "duplicate in-flight request ID 50") ||
				!strings.Contains(got, `\"rows\":3`) {
				t.Errorf("%s:\n%s", what, got)
			}
			if served != 1 && first == "hot path" || served != 0 && first == "go-sdk" {
				t.Errorf("%s: the hot path served %d calls", what, served)
			}
		}
	}
}

// TestHotPathCancelMatchesSDK: notifications/cancelled ends a session's
// call on either path alike: the upstream request is dropped and the POST
// gets the same answer.
func TestHotPathCancelMatchesSDK(t *testing.T) {
	t.Parallel()
	d := newDiffEndpoint(t, false, false)
	_, served := d.both(t, "cancel", func() string {
		n := d.n()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		answer := make(chan hotReply, 1)
		go func() { answer <- reply(d.post(t, ctx, call("c-1", n, false), nil)) }()
		d.up.Await(t, "arrived", fmt.Sprint(n))
		note := reply(d.post(t, ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"test"}}`), nil))
		d.up.Await(t, "cancelled", fmt.Sprint(n))
		return "notification: " + note.String() + "\ncall: " + (<-answer).String()
	})
	if served != 1 {
		t.Errorf("the hot path served %d calls, want 1", served)
	}
}

// TestHotPathResumeMatchesSDK: a client that drops a call's stream after
// its priming event resumes it with Last-Event-ID and gets the same
// replay; and the event log holds the same events.
func TestHotPathResumeMatchesSDK(t *testing.T) {
	t.Parallel()
	d := newDiffEndpoint(t, false, false)
	ctx := t.Context()
	_, served := d.both(t, "resume", func() string {
		n := d.n()
		resp := d.post(t, ctx, call(61, n, false), nil)
		d.up.Await(t, "arrived", fmt.Sprint(n))
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		for err == nil && !strings.HasPrefix(line, "id: ") {
			line, err = br.ReadString('\n')
		}
		if err != nil {
			t.Fatalf("no priming event: %v", err)
		}
		resp.Body.Close() // the client loses the stream
		d.up.Release(fmt.Sprint(n))
		eid := strings.TrimSpace(strings.TrimPrefix(line, "id: "))
		for { // 409 until the endpoint has seen the POST's connection go
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
			req.Header.Set(sessionIDHeader, d.session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Last-Event-ID", eid)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode == http.StatusConflict {
				res.Body.Close()
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return "resumed: " + reply(res).String() + "\nlog: " + d.eventLog(t, ctx, eid)
		}
	})
	if served != 1 {
		t.Errorf("the hot path served %d calls, want 1", served)
	}
}

// TestHotPathEventLogMatchesSDK: a call's stream leaves the same events in
// the session's event log on either path: none for a call answered in the
// stream's first write (primeflush.go; the priming event held until the
// answer follows), the priming event and the answer for one answered
// after the client had the priming event.
func TestHotPathEventLogMatchesSDK(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fast := newDiffEndpoint(t, false, true)
	got, served := fast.both(t, "event log, fast", func() string {
		r := reply(fast.post(t, ctx, call(62, 1000, false), nil))
		fast.ep.eventStore.(*eventStore).awaitStored(fast.session, time.Minute)
		events, err := fast.st.EventsAfter(ctx, fast.session, strings.Split(lastEventID(r.body), "_")[0], -1)
		return fmt.Sprintf("%s\nlog: %q %v", r, events, err)
	})
	if served != 1 || !strings.Contains(got, "log: [] <nil>") {
		t.Errorf("fast: the hot path served %d calls; %s", served, got)
	}
	slow := newDiffEndpoint(t, false, false)
	got, served = slow.both(t, "event log, slow", func() string {
		n := slow.n()
		resp := slow.post(t, ctx, call(63, n, false), nil)
		slow.up.Await(t, "arrived", fmt.Sprint(n))
		br := bufio.NewReader(resp.Body)
		var head strings.Builder
		for { // up to the priming event's data line
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("no priming event: %v", err)
			}
			head.WriteString(line)
			if strings.HasPrefix(line, "data:") {
				break
			}
		}
		slow.up.Release(fmt.Sprint(n))
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		r := hotReply{status: resp.StatusCode, header: resp.Header, body: head.String() + string(rest)}
		return r.String() + "\nlog: " + slow.eventLog(t, ctx, lastEventID(r.body))
	})
	if served != 1 || !strings.Contains(got, "log: [] | {") {
		t.Errorf("slow: the hot path served %d calls; %s", served, got)
	}
}

// lastEventID is the id of the last SSE event of body.
func lastEventID(body string) string {
	last := ""
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "id: ") {
			last = strings.TrimSpace(strings.TrimPrefix(line, "id: "))
		}
	}
	return last
}

// eventLog is the events of the stream of event id eid in the store, once
// it holds the stream's answer.
func (d *diffEndpoint) eventLog(t *testing.T, ctx context.Context, eid string) string {
	t.Helper()
	stream, _, _ := strings.Cut(eid, "_")
	var events [][]byte
	mcptest.WaitUntil(t, "the answer in the event log", func() bool {
		var err error
		events, err = d.st.EventsAfter(ctx, d.session, stream, -1)
		return err == nil && len(events) > 0 && len(events[len(events)-1]) > 0
	})
	var b strings.Builder
	for i, e := range events {
		if i > 0 {
			b.WriteString(" | ")
		}
		if len(e) == 0 {
			b.WriteString("[]")
		}
		b.Write(e)
	}
	return b.String()
}

// TestHotPathConcurrentMatchesSDK: calls in flight at once, each with an
// id of its own, get the same answers on either path.
func TestHotPathConcurrentMatchesSDK(t *testing.T) {
	t.Parallel()
	d := newDiffEndpoint(t, false, false)
	ctx := t.Context()
	_, served := d.both(t, "concurrent", func() string {
		replies := make([]string, 16)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() { replies[i] = reply(d.post(t, ctx, call(100+i, 1000+i, false), nil)).String() })
		}
		wg.Wait()
		return strings.Join(replies, "\n")
	})
	if served != 16 {
		t.Errorf("the hot path served %d calls, want 16", served)
	}
}

// TestHotPathHeadersMatchSDK: header and protocol version variants of a
// session's call, served or refused alike.
func TestHotPathHeadersMatchSDK(t *testing.T) {
	t.Parallel()
	d := newDiffEndpoint(t, false, false)
	ctx := t.Context()
	for _, c := range []struct {
		what string
		hdr  map[string]string
		hot  int64
	}{
		{"no protocol version header", map[string]string{"MCP-Protocol-Version": ""}, 1},
		{"another protocol version", map[string]string{"MCP-Protocol-Version": "2025-06-18"}, 0},
		{"an unknown protocol version", map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 0},
		{"2026-07-28 in a session", map[string]string{"MCP-Protocol-Version": sessionlessProtocolVersion}, 0},
		{"Accept */*", map[string]string{"Accept": "*/*"}, 1},
		{"Accept JSON only", map[string]string{"Accept": "application/json"}, 0},
		{"Accept with parameters", map[string]string{"Accept": "application/json;q=0.9, text/event-stream;q=0.5"}, 1},
		{"Content-Type with a charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}, 1},
		{"Content-Type text/plain", map[string]string{"Content-Type": "text/plain"}, 0},
		{"another agent", map[string]string{"X-Agent": "someone-else"}, 0},
		{"an unknown session", map[string]string{sessionIDHeader: "NOSUCHSESSION"}, 0},
		{"Last-Event-ID on a POST", map[string]string{"Last-Event-ID": "x_1"}, 0},
	} {
		_, served := d.both(t, c.what, func() string { return reply(d.post(t, ctx, call(70, 1000, false), c.hdr)).String() })
		if served != c.hot {
			t.Errorf("%s: the hot path served %d calls, want %d", c.what, served, c.hot)
		}
	}
}

// TestHotPathOffOption: Options.HotPathOff (hot_path off) sends every
// call through go-sdk's handler, with the answers of the hot path.
func TestHotPathOffOption(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	hst := newTestHost(t, fmt.Sprintf(slowOps, up.URL), nil, nil)
	var answers []string
	for _, off := range []bool{false, true} {
		opts := testOptions("default")
		opts.HotPathOff = off
		ep, url := serveEndpoint(t, hst, st, opts)
		c := &mcptest.Client{T: t, URL: url}
		c.Initialize("2025-11-25")
		d := &diffEndpoint{ep: ep, url: url, session: c.Session}
		answers = append(answers, reply(d.post(t, context.Background(), call(5, 1000, false), nil)).String())
		if got, want := ep.hotCalls.Load(), map[bool]int64{false: 1, true: 0}[off]; got != want {
			t.Errorf("HotPathOff %v: the hot path served %d calls, want %d", off, got, want)
		}
	}
	if answers[0] != answers[1] {
		t.Errorf("hot_path on and off differ\non:\n%s\noff:\n%s", answers[0], answers[1])
	}
}

// TestHotPathDeclinedPlansOnce: a call the hot path resolves and then
// declines (call_tool, a discovery meta-tool) is planned once, its
// policy evaluated once, on go-sdk's path.
func TestHotPathDeclinedPlansOnce(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	policy, err := auth.CompilePolicy([]auth.Rule{{Name: "small", Expression: `tool.name != "report" || int(args.n) < 5000`}})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions("default")
	opts.Policy = policy
	opts.View = &ViewConfig{Discovery: DiscoveryBeside}
	ep, url := serveEndpoint(t, newTestHost(t, fmt.Sprintf(slowOps, up.URL), nil, nil), st, opts)
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize("2025-11-25")
	d := &diffEndpoint{ep: ep, url: url, session: c.Session}
	// go-sdk handles notifications/initialized after Initialize returns,
	// planning it too (initialize's is the first plan): wait for its plan.
	mcptest.WaitUntil(t, "go-sdk's plan of notifications/initialized", func() bool { return ep.resolves.Load() >= 2 })
	before, hot := ep.resolves.Load(), ep.hotCalls.Load()
	r := reply(d.post(t, context.Background(), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"report","arguments":{"n":1000}}}}`), nil))
	if !strings.Contains(r.body, `\"rows\":3`) {
		t.Fatalf("call_tool: %s", r)
	}
	if got := ep.resolves.Load() - before; got != 1 || ep.hotCalls.Load() != hot {
		t.Errorf("call_tool resolved %d plans (want 1), the hot path served %d calls (want 0)", got, ep.hotCalls.Load()-hot)
	}
	// A plain call is planned once too, on the hot path.
	before = ep.resolves.Load()
	reply(d.post(t, context.Background(), call(10, 1000, false), nil))
	if got := ep.resolves.Load() - before; got != 1 {
		t.Errorf("a hot call resolved %d plans, want 1", got)
	}
}

// TestHotPathRunsEveryMiddleware: the hot path's chain is the endpoint's
// declared middleware list (but the plan's): a middleware added to the
// list runs around hot calls too.
func TestHotPathRunsEveryMiddleware(t *testing.T) {
	t.Parallel()
	ep, err := New(testOptions("default"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ep.stages {
		names = append(names, s.name)
	}
	if want := []string{"session", "published capabilities", "tasks", "rate limits", "policy", "view", "telemetry",
		stagePlan, "in flight", "generation"}; !slices.Equal(names, want) {
		t.Errorf("middlewares %q, want %q", names, want)
	}
	var seen []string
	for i, s := range ep.stages {
		name, m := s.name, s.m
		ep.stages[i].m = func(next mcp.MethodHandler) mcp.MethodHandler {
			h := m(next)
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				seen = append(seen, name)
				return h(ctx, method, req)
			}
		}
	}
	h := ep.hotHandler()
	_, _ = h(&planContext{Context: context.Background()}, "tools/call",
		&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x"}, Extra: &mcp.RequestExtra{Header: http.Header{}}})
	slices.Reverse(seen)
	if want := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == stagePlan }); !slices.Equal(seen, want) {
		t.Errorf("the hot path ran %q, want %q", seen, want)
	}
}

// TestHotPathSessionlessHeadersMatchSDK: header variants of a sessionless
// (2026-07-28) call, served or refused alike.
func TestHotPathSessionlessHeadersMatchSDK(t *testing.T) {
	t.Parallel()
	d := newDiffEndpoint(t, false, false)
	for _, c := range []struct {
		what string
		hdr  map[string]string
		hot  int64
	}{
		{"as sent", nil, 1},
		{"no Mcp-Name", map[string]string{"Mcp-Name": ""}, 0},
		{"another Mcp-Name", map[string]string{"Mcp-Name": "other"}, 0},
		{"no Mcp-Method", map[string]string{"Mcp-Method": ""}, 0},
		{"no protocol version header", map[string]string{"MCP-Protocol-Version": ""}, 0},
		{"an older protocol version header", map[string]string{"MCP-Protocol-Version": "2025-11-25"}, 0},
		{"a session id", map[string]string{sessionIDHeader: d.session}, 0},
		{"Accept */*", map[string]string{"Accept": "*/*"}, 1},
		{"Accept SSE only", map[string]string{"Accept": "text/event-stream"}, 0},
	} {
		_, served := d.both(t, "sessionless/"+c.what, func() string {
			hdr := map[string]string{"X-Agent": "agent-1", "MCP-Protocol-Version": sessionlessProtocolVersion,
				"Mcp-Method": "tools/call", "Mcp-Name": "report"}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			params := newParams(sessionlessProtocolVersion, "name", "report", "arguments", map[string]any{"n": 1000})
			delete(params["_meta"].(map[string]any)[mcp.MetaKeyClientCapabilities].(map[string]any), "extensions")
			return hotPost(t, d.url, hdr, params, nil).String()
		})
		if served != c.hot {
			t.Errorf("sessionless/%s: the hot path served %d calls, want %d", c.what, served, c.hot)
		}
	}
}
