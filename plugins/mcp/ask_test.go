package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Concurrent calls over one upstream session each get their own client's
// requests and no other's: all of them over Streamable HTTP (go-sdk sends
// them on the call's stream), and over stdio (a session of 2025-11-25 for
// these clients, callConn) those made while the call was the only
// one in flight, the others refused; the answer reaches the upstream,
// which sees its request state as it gave it.
func TestClientRequestsOfConcurrentCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, newHTTPUpstream(t, false), func(t *testing.T, h *adaptertest.Harness, info *client.Info, base map[string]any) {
		name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		if !info.Capabilities.ClientRequests {
			t.Fatalf("describe: %+v", info)
		}
		cj, _ := json.Marshal(withTool(base, "elicit"))
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := fmt.Sprintf("call-%d", i)
				req := &sdk.Request{Operation: sdk.Operation{Name: "elicit", Config: cj}, Arguments: json.RawMessage(`{"text": "` + text + `"}`)}
				for range 3 {
					res, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{
						ClientCapabilities: json.RawMessage(`{"elicitation":{"form":{}}}`),
						Ask: func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
							var p gomcp.ElicitParams
							if method != "elicitation/create" || json.Unmarshal(params, &p) != nil || p.Message != text || p.Meta[metaCallTag] != nil {
								errs <- fmt.Errorf("%s was asked %s %s", text, method, params)
							}
							return json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"who": p.Message}})
						}})
					want := `accept {"who":"` + text + `"} s-` + text
					if (err != nil || res.Text != want) && (name == "http" || err == nil) {
						errs <- fmt.Errorf("%s: %+v %v, want %s", text, res, err, want)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// A call whose client lacks the capability, or that the host does not
// relay, answers the upstream's request with an error without asking the
// client (the go-sdk upstream then fails the call: its error is not the
// gateway's to shape).
func TestClientRequestRefused(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	info, err := h.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	cj, _ := json.Marshal(withTool(map[string]any{"url": up.srv.URL}, "elicit"))
	req := &sdk.Request{Operation: sdk.Operation{Name: "elicit", Config: cj}, Arguments: json.RawMessage(`{"text": "x"}`)}
	asked := false
	ask := func(context.Context, string, json.RawMessage) (json.RawMessage, error) { asked = true; return nil, nil }
	_, err = h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{ClientCapabilities: json.RawMessage(`{"sampling":{}}`), Ask: ask})
	if err == nil || asked {
		t.Fatalf("a client without elicitation: %v (asked %v)", err, asked)
	}
	if _, err = h.Client.Invoke(ctxT(t), req); err == nil {
		t.Fatalf("not relayed: %v", err)
	}
}

// What a client may be asked follows its capabilities: the method's
// capability, an elicitation's mode, sampling's tools and context.
func TestAskRefusal(t *testing.T) {
	for _, c := range []struct {
		caps, method string
		p            gomcp.Params
		code         int64
	}{
		{`{}`, methodElicit, &gomcp.ElicitParams{}, jsonrpc.CodeMethodNotFound},
		{`{"elicitation":{}}`, methodElicit, &gomcp.ElicitParams{}, 0},
		{`{"elicitation":{}}`, methodElicit, &gomcp.ElicitParams{Mode: "url", URL: "https://x"}, jsonrpc.CodeInvalidParams},
		{`{"elicitation":{"url":{}}}`, methodElicit, &gomcp.ElicitParams{URL: "https://x"}, 0},
		{`{"elicitation":{"url":{}}}`, methodElicit, &gomcp.ElicitParams{}, jsonrpc.CodeInvalidParams},
		{`{"elicitation":{"form":{},"url":{}}}`, methodElicit, &gomcp.ElicitParams{}, 0},
		{`{"roots":{}}`, methodElicit, &gomcp.ElicitParams{}, jsonrpc.CodeMethodNotFound},
		{`{"roots":{}}`, methodListRoots, &gomcp.ListRootsParams{}, 0},
		{`{"sampling":{}}`, methodListRoots, &gomcp.ListRootsParams{}, jsonrpc.CodeMethodNotFound},
		{`{"sampling":{}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{}, 0},
		{`{"sampling":{}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{Tools: []*gomcp.Tool{{Name: "t"}}}, jsonrpc.CodeInvalidParams},
		{`{"sampling":{"tools":{}}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{Tools: []*gomcp.Tool{{Name: "t"}}}, 0},
		{`{"sampling":{}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{IncludeContext: "thisServer"}, jsonrpc.CodeInvalidParams},
		{`{"sampling":{}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{IncludeContext: "none"}, 0},
		{`{"elicitation":{}}`, methodCreateMessage, &gomcp.CreateMessageWithToolsParams{}, jsonrpc.CodeMethodNotFound},
	} {
		a := &asker{}
		if err := json.Unmarshal([]byte(c.caps), &a.caps); err != nil {
			t.Fatal(err)
		}
		var code int64
		if err := a.refusal(c.method, c.p); err != nil {
			code = err.Code
		}
		if code != c.code {
			b, _ := json.Marshal(c.p)
			t.Errorf("%s %s %s: code %d, want %d", c.caps, c.method, b, code, c.code)
		}
	}
}

// The message reader tags a client request read from a call's stream
// (roots/list without params too), and one read elsewhere for the only
// call in flight whose client may be asked, never for one of two.
func TestMsgReaderTagsClientRequests(t *testing.T) {
	var routes logRoutes
	read := func(in, tag string) map[string]any {
		t.Helper()
		out, err := io.ReadAll(newMsgReader(io.NopCloser(strings.NewReader(in)), framedByEvent, tag, &routes))
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(string(out)), "data: ")), &msg); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return msg.Params.Meta
	}
	elicit := "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"elicitation/create\",\"params\":{\"message\":\"m\"}}\n\n"
	roots := "data: {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"roots/list\"}\n\n"
	if m := read(elicit, "t1"); m[metaCallTag] != "t1" {
		t.Errorf("elicitation on a call's stream: %v", m)
	}
	if m := read(roots, "t1"); m[metaCallTag] != "t1" {
		t.Errorf("roots/list on a call's stream: %v", m)
	}
	defer routes.openAsker("sole", &asker{})()
	routes.inflight.Add(1)
	if m := read(elicit, ""); m[metaCallTag] != "sole" {
		t.Errorf("the only call in flight: %v", m)
	}
	routes.inflight.Add(1)
	if m := read(elicit, ""); m[metaCallTag] != nil {
		t.Errorf("one of two calls in flight: %v", m)
	}
}

// The upstream session of a call declares the capabilities of the call's
// client (and the extensions the gateway relays), shared by the clients
// that declare the same; a call the host cannot ask mid-call and the
// adapter's own listings use the session that declares all it relays.
func TestSessionDeclaresClientCapabilities(t *testing.T) {
	t.Parallel()
	eachTransport(t, newHTTPUpstream(t, false), func(t *testing.T, h *adaptertest.Harness, info *client.Info, base map[string]any) {
		cj, _ := json.Marshal(withTool(base, "caps"))
		req := &sdk.Request{Operation: sdk.Operation{Name: "caps", Config: cj}, Arguments: json.RawMessage(`{}`)}
		seen := func(caps string) string {
			t.Helper()
			res, err := h.Client.InvokeRelayed(ctxT(t), req, info.Capabilities, client.Relay{ClientCapabilities: json.RawMessage(caps),
				Ask: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, io.EOF }})
			if err != nil {
				t.Fatal(err)
			}
			return res.Text
		}
		ui := `"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}`
		for caps, want := range map[string]string{
			`{"elicitation":{}}`:                   `{"elicitation":{"form":{}},"extensions":null,"roots":false,"sampling":null}`,
			`{"sampling":{"tools":{}},"roots":{}}`: `{"elicitation":null,"extensions":null,"roots":true,"sampling":{"tools":{}}}`,
			`{"extensions":{` + ui + `,"com.example/other":{}},"experimental":{"x":{}}}`: `{"elicitation":null,"extensions":{` + ui + `},"roots":false,"sampling":null}`,
			// Only the settings the gateway knows pass: a client cannot
			// make connections without bound by varying them.
			`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["x/y","text/html;profile=mcp-app"],"n":1}}}`: `{"elicitation":null,"extensions":{` + ui + `},"roots":false,"sampling":null}`,
			`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["x/y"]}}}`:                                   `{"elicitation":null,"extensions":{"io.modelcontextprotocol/ui":{}},"roots":false,"sampling":null}`,
		} {
			if got := seen(caps); got != want {
				t.Errorf("client %s: the upstream saw %s, want %s", caps, got, want)
			}
		}
		res, ue := call(t, h, base, "caps", `{}`, 10*time.Second)
		if ue != nil || !strings.Contains(res.Text, `"roots":true,"sampling":{"context":{},"tools":{}}`) || !strings.Contains(res.Text, ui) {
			t.Errorf("a call the host cannot ask: the upstream saw %+v %v", res, ue)
		}
	})
}

// An input request without params (the TypeScript SDK v2's roots/list)
// gets empty ones, which go-sdk's client needs to decode the result; other
// messages pass unchanged.
func TestInputParams(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"},"e":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"s"}}`
	var res struct {
		Result gomcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(in), &res); err == nil {
		t.Fatal("go-sdk decodes an input request without params now: inputParams may go")
	}
	out := inputParams([]byte(in))
	if err := json.Unmarshal(out, &res); err != nil || len(res.Result.InputRequests) != 2 || res.Result.RequestState != "s" {
		t.Fatalf("%s: %v %+v", out, err, res.Result)
	}
	for _, same := range []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, `{"result":{"inputRequests":{"r":{"method":"roots/list","params":{}}}}}`, `not json "inputRequests"`} {
		if got := inputParams([]byte(same)); string(got) != same {
			t.Errorf("%s became %s", same, got)
		}
	}
}
