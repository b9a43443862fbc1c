package mcptest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// CheckOriginRefusal checks that a response is the gateway's refusal of a
// request from origin: 403 with a JSON-RPC error naming the origin and the
// allowed_origins option.
func CheckOriginRefusal(t testing.TB, code int, hdr http.Header, body []byte, origin string) {
	t.Helper()
	if code != http.StatusForbidden {
		t.Errorf("status %d, want 403; body %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var msg struct {
		JSONRPC string           `json:"jsonrpc"`
		ID      *json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	if msg.JSONRPC != "2.0" || msg.Error == nil {
		t.Fatalf("body is not a JSON-RPC error: %s", body)
	}
	if msg.ID != nil && string(*msg.ID) != "null" {
		t.Errorf("id = %s, want null", *msg.ID)
	}
	if msg.Error.Code != -32600 {
		t.Errorf("error code %d, want -32600", msg.Error.Code)
	}
	if utf8.ValidString(origin) && !strings.Contains(msg.Error.Message, origin) {
		t.Errorf("error message %q does not name the origin %q", msg.Error.Message, origin)
	}
	if !strings.Contains(msg.Error.Message, "allowed_origins") {
		t.Errorf("error message %q does not point at allowed_origins", msg.Error.Message)
	}
}
