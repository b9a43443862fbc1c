package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"strings"
)

// toolMeta is a derived tool's _meta (sdk.Tool.Meta) without the keys of
// the gateway ("io.crank/..."), nil when it has none; an error when it is
// no JSON object.
func toolMeta(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
		return nil, errors.New("not a JSON object")
	}
	maps.DeleteFunc(meta, func(k string, _ any) bool { return strings.HasPrefix(k, "io.crank/") })
	if len(meta) == 0 {
		return nil, nil
	}
	return meta, nil
}

// ExtensionUI is the MCP Apps extension (SEP-1865): its identifier in
// capabilities' extensions. A tool whose _meta names a ui resource
// (MCP Apps' "ui" with its resourceUri, or the flat "ui/resourceUri")
// has an App that renders its results.
const ExtensionUI = "io.modelcontextprotocol/ui"

// Apps reports whether a tool of h has an MCP App: the endpoint then
// declares the MCP Apps extension in its capabilities.
func (h *Host) Apps() bool {
	for _, op := range h.Operations() {
		if ui, _ := op.Meta["ui"].(map[string]any); ui["resourceUri"] != nil || op.Meta["ui/resourceUri"] != nil {
			return true
		}
	}
	return false
}
