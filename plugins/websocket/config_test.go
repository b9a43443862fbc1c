package websocket_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

func TestValidateOperation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name, config, want string
	}{
		{"good", `{"url":"wss://feed.example/{{ch}}","subscribe":{"op":"sub","ch":"{{ch}}"},"ack":{"path":"$.ok"}}`, ""},
		{"not an object", `[]`, "config must be a JSON object"},
		{"missing url", `{}`, "url: is required"},
		{"typo", `{"url":"ws://h/x","subscibe":{}}`, `subscibe: unknown field (did you mean "subscribe"?)`},
		{"http scheme", `{"url":"https://h/x"}`, "url: must use the ws:// or wss:// scheme, not https:// (write wss://...)"},
		{"templated host", `{"url":"ws://{{host}}/x"}`, "url: the host cannot hold a {{variable}}"},
		{"unclosed", `{"url":"ws://h/{{x"}`, `url: path: "{{" without its closing "}}"`},
		{"bad name", `{"url":"ws://h/x","subscribe":"{{1a}}"}`, "subscribe: {{1a}} is not a variable"},
		{"nested", `{"url":"ws://h/x","subscribe":[{"a":{"b":"{{}}"}}]}`, "subscribe[0]: a: b: {{}} is not a variable"},
		{"ack without subscribe", `{"url":"ws://h/x","ack":{"path":"$.t"}}`, "ack: needs subscribe"},
		{"ack path", `{"url":"ws://h/x","subscribe":"s","ack":{"equals":1}}`, "ack.path: is required"},
		{"bad path", `{"url":"ws://h/x","id_path":"$.a["}`, "id_path: not a valid RFC 9535 JSONPath"},
		{"filter as query", `{"url":"ws://h/x","filter":"$.a"}`, "filter: must be a filter expression on the message as @"},
		{"bad filter", `{"url":"ws://h/x","filter":"@.a =="}`, "filter: not a valid RFC 9535 filter expression"},
		{"binary", `{"url":"ws://h/x","binary":"hex"}`, "binary: must be one of refuse, base64, text, skip"},
		{"compression", `{"url":"ws://h/x","compression":"gzip"}`, "compression: must be one of disabled"},
		{"max message", `{"url":"ws://h/x","max_message_bytes":1}`, "max_message_bytes: must be from 64 to 33554432, got 1"},
		{"managed header", `{"url":"ws://h/x","headers":{"Sec-WebSocket-Key":"k"}}`, "headers.Sec-WebSocket-Key: Sec-Websocket-Key is set by the adapter"},
		{"header value", `{"url":"ws://h/x","headers":{"X-Token":"a\nb"}}`, "headers.X-Token: value contains a control character"},
		{"tls on ws", `{"url":"ws://h/x","tls":{"server_name":"h"}}`, "tls: is only used with a wss:// url"},
		{"tls file", `{"url":"wss://h/x","tls":{"ca_file":"nope.pem"}}`, "tls.ca_file: cannot read nope.pem"},
		{"tls typo", `{"url":"wss://h/x","tls":{"ca":"x"}}`, "tls.ca: unknown field"},
		{"heartbeat message", `{"url":"ws://h/x","heartbeat":{"ping_interval_ms":0,"message":"ping"}}`, "heartbeat.ping_interval_ms: must be above 0"},
		{"reconnect delays", `{"url":"ws://h/x","reconnect":{"initial_delay_ms":100,"max_delay_ms":10}}`, "reconnect.max_delay_ms: must not be below"},
		{"reconnect attempts", `{"url":"ws://h/x","reconnect":{"max_attempts":-1}}`, "reconnect.max_attempts: must be from 0 to 100, got -1"},
		{"subprotocol", `{"url":"ws://h/x","subprotocols":["a b"]}`, "subprotocols[0]: must be a token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diags {
				got = append(got, d.Field+": "+d.Message)
			}
			all := strings.Join(got, "\n")
			if tc.want == "" {
				if len(got) > 0 {
					t.Fatalf("unexpected diagnostics:\n%s", all)
				}
				return
			}
			if !strings.Contains(all, tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant one containing %q", all, tc.want)
			}
			if strings.Contains(all, "a\nb") {
				t.Errorf("a header value was echoed")
			}
		})
	}
}

func TestExpandDerivesInputSchema(t *testing.T) {
	t.Parallel()
	tools, diags, err := newHarness(t).Expand(ctxT(t), adaptertest.Call{Config: `{"url":"ws://h/feed/{{region}}?depth={{depth}}",
		"subscribe":{"op":"sub","channels":"{{channels}}","from":"{{cursor}}","note":"for {{who}}"}}`})
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) > 0 || len(tools) != 1 || tools[0].Name != "" {
		t.Fatalf("expand: %v %v", tools, diags)
	}
	var schema map[string]any
	if err := json.Unmarshal(tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["properties"].(map[string]any)
	if len(props) != 4 || props["cursor"] != nil {
		t.Fatalf("properties: %v", props)
	}
	if props["channels"].(map[string]any)["type"] != nil {
		t.Errorf("a whole-value variable takes any JSON value: %v", props["channels"])
	}
	for _, n := range []string{"region", "depth", "who"} {
		if props[n].(map[string]any)["type"] == nil {
			t.Errorf("%s is used in text: it takes a scalar: %v", n, props[n])
		}
	}
	if got, _ := json.Marshal(schema["required"]); string(got) != `["channels","depth","region","who"]` || schema["additionalProperties"] != false {
		t.Errorf("schema: %v", schema)
	}
}

func TestInvokeIsRefused(t *testing.T) {
	t.Parallel()
	_, ue, err := newHarness(t).Invoke(ctxT(t), adaptertest.Call{Config: `{"url":"ws://h/x"}`})
	if err != nil {
		t.Fatal(err)
	}
	if ue == nil || !strings.Contains(ue.Message, "give it mode window, session or async_job") {
		t.Fatalf("invoke: %v", ue)
	}
}
