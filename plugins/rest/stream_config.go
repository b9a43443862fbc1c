package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
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

// streamFields is the stream block as written.
type streamFields struct {
	Reconnect     *bool    `json:"reconnect,omitempty" jsonschema:"Reopen a dropped stream with Last-Event-ID; default true for GET, false otherwise."`
	MaxEventBytes int      `json:"max_event_bytes,omitempty" default:"1048576" minimum:"1024" maximum:"33554432" jsonschema:"Largest SSE event read; larger ones are skipped and reported as a gap."`
	Events        []string `json:"events,omitempty" jsonschema:"SSE event types to keep (message = events without a type); default all."`
	EndData       string   `json:"end_data,omitempty" default:"[DONE]" jsonschema:"An event whose data is exactly this ends the stream; \"\" disables."`
	MaxReconnects int      `json:"max_reconnects,omitempty" default:"5" minimum:"0" maximum:"100" jsonschema:"Consecutive failed reopenings before the stream fails."`
}

// parseStreamFields reads the fields used by windows: cursor_param,
// body_fields and the stream block.
func parseStreamFields(c *config, op *operation, d *diags) {
	if c.CursorParam != nil {
		if strings.TrimSpace(*c.CursorParam) == "" {
			d.Errorf("cursor_param", "must be a non-empty query parameter name")
		} else {
			op.cursorParam = strings.TrimSpace(*c.CursorParam)
			for _, q := range op.query {
				if q.name == op.cursorParam {
					d.Errorf("cursor_param", "query parameter %q is already filled from an argument by query", op.cursorParam)
				}
			}
		}
	}
	if c.BodyFields != nil {
		for _, k := range sortedKeys(c.BodyFields) {
			op.bodyFields = append(op.bodyFields, bodyField{name: k, value: bytes.TrimSpace(c.BodyFields[k])})
		}
		if op.method != "" && !op.sendsBody() {
			d.Errorf("body_fields", "this operation sends no body (method %s, body %q)", op.method, op.bodyMode())
		}
	}
	sf := &c.Stream
	op.stream = streamConfig{
		reconnect:     op.method == http.MethodGet,
		maxEventBytes: sf.MaxEventBytes,
		events:        sf.Events,
		endData:       sf.EndData,
		maxReconnects: sf.MaxReconnects,
	}
	if sf.Reconnect != nil {
		op.stream.reconnect = *sf.Reconnect
	}
	for i, e := range sf.Events {
		if e == "" || strings.ContainsAny(e, "\r\n") {
			d.Errorf(fmt.Sprintf("stream.events[%d]", i), "must be a non-empty event type on one line")
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
