package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Defaults and bounds of the stream source.
const (
	defaultMaxEventBytes = 1 << 20
	minMaxEventBytes     = 1 << 10
	maxMaxEventBytes     = 32 << 20
	defaultMaxReconnects = 5
	maxMaxReconnects     = 100
	defaultEndData       = "[DONE]"
)

// streamConfig is how Stream reads an upstream stream.
type streamConfig struct {
	// reconnect: a dropped stream is reopened (with Last-Event-ID).
	reconnect     bool
	maxEventBytes int
	// events are the SSE event types kept; empty keeps all ("message" is
	// an event without a type).
	events        []string
	endData       string
	maxReconnects int
}

var streamFields = []string{"reconnect", "max_event_bytes", "events", "end_data", "max_reconnects"}

// parseStreamFields reads the fields used by windows: cursor_param,
// body_fields and the stream block.
func parseStreamFields(fields map[string]json.RawMessage, op *operation, d *diags) {
	op.stream = streamConfig{
		reconnect:     op.method == http.MethodGet,
		maxEventBytes: defaultMaxEventBytes,
		endData:       defaultEndData,
		maxReconnects: defaultMaxReconnects,
	}
	if v, ok := fields["cursor_param"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) != nil || strings.TrimSpace(s) == "" {
			d.Errorf("cursor_param", "must be a non-empty query parameter name")
		} else {
			op.cursorParam = strings.TrimSpace(s)
			for _, q := range op.query {
				if q.name == op.cursorParam {
					d.Errorf("cursor_param", "query parameter %q is already filled from an argument by query", op.cursorParam)
				}
			}
		}
	}
	if v, ok := fields["body_fields"]; ok && !isNull(v) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			d.Errorf("body_fields", "must be an object {field: JSON value}")
		} else {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				op.bodyFields = append(op.bodyFields, bodyField{name: k, value: bytes.TrimSpace(obj[k])})
			}
			if op.method != "" && !op.sendsBody() {
				d.Errorf("body_fields", "this operation sends no body (method %s, body %q)", op.method, op.bodyMode())
			}
		}
	}
	v, ok := fields["stream"]
	if !ok || isNull(v) {
		return
	}
	var sf map[string]json.RawMessage
	if json.Unmarshal(v, &sf) != nil {
		d.Errorf("stream", "must be an object")
		return
	}
	d.UnknownFields(sf, streamFields, "stream.")
	sc := &op.stream
	if v, ok := sf["reconnect"]; ok && !isNull(v) {
		if json.Unmarshal(v, &sc.reconnect) != nil {
			d.Errorf("stream.reconnect", "must be true or false")
		}
	}
	if v, ok := sf["max_event_bytes"]; ok && !isNull(v) {
		var n int
		if json.Unmarshal(v, &n) != nil || n < minMaxEventBytes || n > maxMaxEventBytes {
			d.Errorf("stream.max_event_bytes", "must be an integer between %d and %d", minMaxEventBytes, maxMaxEventBytes)
		} else {
			sc.maxEventBytes = n
		}
	}
	if v, ok := sf["events"]; ok && !isNull(v) {
		if json.Unmarshal(v, &sc.events) != nil {
			d.Errorf("stream.events", "must be a list of SSE event types")
		}
		for i, e := range sc.events {
			if e == "" || strings.ContainsAny(e, "\r\n") {
				d.Errorf(fmt.Sprintf("stream.events[%d]", i), "must be a non-empty event type on one line")
			}
		}
	}
	if v, ok := sf["end_data"]; ok && !isNull(v) {
		if json.Unmarshal(v, &sc.endData) != nil {
			d.Errorf("stream.end_data", `must be a string ("" never ends the stream on data)`)
		}
	}
	if v, ok := sf["max_reconnects"]; ok && !isNull(v) {
		var n int
		if json.Unmarshal(v, &n) != nil || n < 0 || n > maxMaxReconnects {
			d.Errorf("stream.max_reconnects", "must be an integer between 0 and %d", maxMaxReconnects)
		} else {
			sc.maxReconnects = n
		}
	}
}

func (op *operation) bodyMode() string {
	if op.bodyArg != "" {
		return op.bodyArg
	}
	return op.body
}

// bodyField is a field body_fields sets in every request body.
type bodyField struct {
	name  string
	value json.RawMessage
}

// buildBody returns the JSON body, nil for none, with body_fields set.
func (op *operation) buildBody(a *callArgs) ([]byte, *sdk.UpstreamError) {
	body, ue := op.buildBaseBody(a)
	if ue != nil || body == nil || len(op.bodyFields) == 0 {
		return body, ue
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, op.invalidArg("body_fields need a JSON object body")
	}
	for _, f := range op.bodyFields {
		obj[f.name] = f.value
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, op.invalidArg("the body cannot be encoded as JSON")
	}
	return out, nil
}
