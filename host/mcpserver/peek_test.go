package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzPeekMessage: the bounded peek hands the body on unchanged, and
// whatever it reads of a message agrees with what the SDK's decoder reads
// of it: the same method and id, so that no request reaches the SDK as
// something the endpoint did not check. A tunnelled tasks/* request becomes
// a ping with the same id.
func FuzzPeekMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":1},"_meta":{"progressToken":7}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"job_x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"initialize","params":{"Task":{},"task":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"met\u0068od":"initialize"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping","params":{"_meta":{"progressToken":null}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"} trailing`,
		`{"jsonrpc":`, ``, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		p := peek(r)
		if rest, _ := io.ReadAll(r.Body); !bytes.Equal(rest, body) {
			t.Fatalf("body handed on as %q, want %q", rest, body)
		}
		if !bytes.Equal(p.body, body) && len(body) <= maxPeekBytes {
			t.Fatalf("peeked %q of %q", p.body, body)
		}
		m := p.message()
		if m.task != nil && (!m.ok || !json.Valid(m.task) || string(m.task) == "null") {
			t.Fatalf("params.task %q of %q", m.task, body)
		}
		msg, err := jsonrpc.DecodeMessage(body)
		req, isReq := msg.(*jsonrpc.Request)
		if err != nil || !isReq || !utf8.Valid(body) {
			return // the SDK refuses it, or decodes invalid UTF-8 its own way
		}
		if !m.ok || m.method != req.Method {
			t.Fatalf("peek reads method %q (ok %v), the SDK %q, of %q", m.method, m.ok, req.Method, body)
		}
		var raw any
		if len(m.id) > 0 {
			_ = json.Unmarshal(m.id, &raw)
		}
		if id, err := jsonrpc.MakeID(raw); err != nil || id != req.ID {
			t.Fatalf("peek reads id %s, the SDK %v, of %q", m.id, req.ID.Raw(), body)
		}
		if !req.ID.IsValid() {
			return
		}
		ping, err := jsonrpc.DecodeMessage(pingWithID(m.id))
		if pr, ok := ping.(*jsonrpc.Request); err != nil || !ok || pr.Method != "ping" || pr.ID != req.ID {
			t.Fatalf("tunnel ping of id %s = %+v, %v", m.id, ping, err)
		}
	})
}
