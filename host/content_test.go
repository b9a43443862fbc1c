package host

import (
	"encoding/json"
	"testing"

	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
)

// An adapter's MCP content blocks reach the result as they came, with the
// configured secrets redacted like the rest of the result; anything but a
// JSON array is not content.
func TestResultContentBlocks(t *testing.T) {
	h := &Host{redact: redact.New([]string{"s3cr3t-value"})}
	blocks := `[{"type":"image","data":"UE5H","mimeType":"image/png"},{"type":"text","text":"key s3cr3t-value"}]`
	res := h.successResult(&sdk.Result{Text: "key s3cr3t-value", Content: json.RawMessage(blocks)})
	want := `[{"type":"image","data":"UE5H","mimeType":"image/png"},{"type":"text","text":"key ` + redact.Mark + `"}]`
	if string(res.Content) != want || res.Text != "key "+redact.Mark || res.Structured != nil {
		t.Fatalf("result: %s %q %s", res.Content, res.Text, res.Structured)
	}
	if res := h.successResult(&sdk.Result{Text: "t", Content: json.RawMessage(`{"type":"text"}`)}); res.Content != nil {
		t.Errorf("an object is not content: %s", res.Content)
	}
	other := redact.New([]string{"UE5H"})
	r := redactResult(other, &Result{Text: "t", Content: json.RawMessage(blocks)})
	if string(r.Content) != `[{"type":"image","data":"`+redact.Mark+`","mimeType":"image/png"},{"type":"text","text":"key s3cr3t-value"}]` {
		t.Errorf("credential redaction: %s", r.Content)
	}
}
