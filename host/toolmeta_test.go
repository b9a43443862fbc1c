package host

import (
	"encoding/json"
	"testing"
)

// A derived tool's _meta keeps the adapter's keys and drops the gateway's.
func TestToolMeta(t *testing.T) {
	m, err := toolMeta(json.RawMessage(`{"ui":{"resourceUri":"ui://a"},"ui/resourceUri":"ui://a","io.crank/execution":{}}`))
	if err != nil || len(m) != 2 || m["ui/resourceUri"] != "ui://a" || m["io.crank/execution"] != nil {
		t.Errorf("toolMeta: %v %v", m, err)
	}
	for _, raw := range []string{"", " ", `{"io.crank/x":1}`} {
		if m, err := toolMeta(json.RawMessage(raw)); m != nil || err != nil {
			t.Errorf("toolMeta(%q): %v %v", raw, m, err)
		}
	}
	for _, raw := range []string{`[]`, `null`, `{`} {
		if _, err := toolMeta(json.RawMessage(raw)); err == nil {
			t.Errorf("toolMeta(%q) took it", raw)
		}
	}
}
