package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// badServerEnv, set in a child's environment, makes the test binary a
// stdio server that answers the handshake as its value says (badAnswer).
const badServerEnv = "CRANK_MCP_TEST_BAD_SERVER"

// badAnswer is the answer of a broken server to a request of method with
// id: a wrong protocol version, a JSON-RPC error, JSON that is not
// JSON-RPC, or an answer to another request. Nil means no answer.
func badAnswer(kind, method string, id json.RawMessage) any {
	if method != "initialize" && method != "server/discover" {
		return nil
	}
	switch kind {
	case "version":
		if method == "server/discover" {
			return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32601, "message": "method not found"}}
		}
		return map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"protocolVersion": "1999-01-01",
			"capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "old", "version": "1"}}}
	case "refused":
		return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32602, "message": "Unsupported protocol version",
			"data": map[string]any{"supported": []string{"1999-01-01"}}}}
	case "notrpc":
		return map[string]any{"hello": "world"}
	case "otherid":
		return map[string]any{"jsonrpc": "2.0", "id": 987654, "result": map[string]any{}}
	}
	return nil
}

// serveBadStdio is the stdio server of badServerEnv: it answers as told and
// never exits by itself.
func serveBadStdio(kind string) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req struct {
			Method string
			ID     json.RawMessage
		}
		_ = json.Unmarshal(in.Bytes(), &req)
		if a := badAnswer(kind, req.Method, req.ID); a != nil {
			b, _ := json.Marshal(a)
			fmt.Printf("%s\n", b)
		}
	}
	select {}
}

func badHTTP(t *testing.T, kind string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Method string
			ID     json.RawMessage
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		a := badAnswer(kind, req.Method, req.ID)
		if a == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An upstream that answers the handshake with a protocol version the
// adapter does not speak, refuses the adapter's, answers JSON that is not
// JSON-RPC, or answers a request the adapter never sent fails at once, at
// load and on a call, with an error naming the upstream and, where the
// version is the matter, the version; not when the (long) timeout passes.
func TestBadHandshake(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	for _, c := range []struct {
		kind string
		has  string
	}{
		{"version", `it answered initialize with protocol version "1999-01-01", which the adapter does not speak (it asked for 2025-11-25`},
		{"refused", "it refused the protocol version the adapter asked for (2025-11-25): Unsupported protocol version; it supports 1999-01-01"},
		{"notrpc", "it answered the handshake with something that is not a JSON-RPC 2.0 message"},
		{"otherid", "it answered the handshake with a response to request 987654, which the adapter never sent"},
	} {
		url := badHTTP(t, c.kind)
		for name, cfg := range map[string]map[string]any{
			"http":  {"url": url},
			"stdio": {"command": self, "env": map[string]string{badServerEnv: c.kind}},
		} {
			label, field := "mcp "+strings.TrimPrefix(url, "http://"), "url"
			if name == "stdio" {
				label, field = "mcp stdio "+filepath.Base(self), "command"
			}
			_, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg, Timeout: time.Minute})
			if err != nil || len(diags) != 1 || diags[0].Field != field || !strings.Contains(diags[0].Message, label+" is not an MCP server") ||
				!strings.Contains(diags[0].Message, c.has) {
				t.Errorf("%s over %s: expand: %+v %v", c.kind, name, diags, err)
			}
			cfg["tool"] = "echo"
			_, ue := call(t, h, cfg, "echo", `{}`, time.Minute)
			if ue == nil || ue.Kind != sdk.KindBadResponse || ue.Upstream != label || !strings.Contains(ue.Message, c.has) {
				t.Errorf("%s over %s: call: %+v", c.kind, name, ue)
			}
		}
	}
}
