package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conformanceEnv, set in a child's environment, makes this test binary the
// conformance fixture (TestMain calls serveConformanceFixture first):
// "stdio" serves it over stdio, "http:ADDR" (stateful) or
// "stateless:ADDR" (the 2026-07-28 wire) over Streamable HTTP at ADDR.
const conformanceEnv = "CRANK_E2E_CONFORMANCE_FIXTURE"

// serveConformanceFixture serves conformanceFixture and exits, when this
// process was started as the fixture.
func serveConformanceFixture() {
	mode := os.Getenv(conformanceEnv)
	if mode == "" {
		return
	}
	var err error
	switch kind, addr, _ := strings.Cut(mode, ":"); kind {
	case "stdio":
		err = conformanceFixture().Run(context.Background(), &mcp.StdioTransport{})
	case "http", "stateless":
		err = http.ListenAndServe(addr, conformanceHandler(kind == "stateless"))
	default:
		err = fmt.Errorf("%s: want stdio, http:ADDR or stateless:ADDR, not %q", conformanceEnv, mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// conformanceHandler serves the fixture over Streamable HTTP: stateful
// (sessions, server-to-client requests: the 2025-11-25 wire) or stateless
// (the 2026-07-28 wire, where a server asks its client with an
// input-required result). go-sdk rejects a non-localhost Host on a
// loopback connection (dns-rebinding-protection).
func conformanceHandler(stateless bool) http.Handler {
	s := conformanceFixture()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless})
}

// conformanceFixture is an MCP server with everything the server scenarios
// of the conformance suite's requirement sets 2025-11-25 and 2026-07-28
// exercise, as their descriptions ask for it (`conformance list`, and each
// scenario's "Server Implementation Requirements"): the test_* tools, the
// test:// resources and template, the test_* prompts, completion,
// subscriptions, sampling, elicitation and roots as server-to-client
// requests and as input-required results (SEP-2322) with an
// integrity-protected requestState. TestConformanceThroughCrank runs the
// suite against it directly and through Crank.
func conformanceFixture() *mcp.Server {
	var s *mcp.Server
	s = mcp.NewServer(&mcp.Implementation{Name: "crank-conformance-fixture", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler: fixtureComplete,
		// A subscription gets a notifications/resources/updated soon
		// after (go-sdk sends it to the subscribed sessions only).
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			uri := req.Params.URI
			time.AfterFunc(50*time.Millisecond, func() {
				_ = s.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
			})
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// SEP-2549 caching hints on the list results and resources/read
		// (go-sdk sends them on the 2026-07-28 wire only).
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs, c.CacheScope = 60000, "public"
		},
	})
	fixtureTools(s)
	fixtureInputTools(s)
	fixtureResources(s)
	fixturePrompts(s)
	return s
}

// The suite's payloads: a 1x1 PNG and a silent WAV.
var (
	fixturePNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	fixtureWAV, _ = base64.StdEncoding.DecodeString("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

func fixtureText(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// fixtureTool adds a tool with the given input schema (an empty object
// schema when nil).
func fixtureTool(s *mcp.Server, name, desc string, schema any, h mcp.ToolHandler) {
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema}, h)
}

// fixtureArgs decodes a call's arguments.
func fixtureArgs(req *mcp.CallToolRequest) map[string]any {
	var args map[string]any
	_ = json.Unmarshal(req.Params.Arguments, &args)
	return args
}

func stringArg(name, desc string) map[string]any {
	return map[string]any{"type": "object", "required": []string{name},
		"properties": map[string]any{name: map[string]any{"type": "string", "description": desc}}}
}

func fixtureTools(s *mcp.Server) {
	fixtureTool(s, "test_simple_text", "Answers simple text.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return fixtureText("This is a simple text response for testing."), nil
	})
	fixtureTool(s, "test_image_content", "Answers an image.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: fixturePNG, MIMEType: "image/png"}}}, nil
	})
	fixtureTool(s, "test_audio_content", "Answers audio.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: fixtureWAV, MIMEType: "audio/wav"}}}, nil
	})
	fixtureTool(s, "test_embedded_resource", "Answers an embedded resource.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}, nil
	})
	fixtureTool(s, "test_multiple_content_types", "Answers text, an image and a resource.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: fixturePNG, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource",
				MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
		}}, nil
	})
	fixtureTool(s, "test_tool_with_logging", "Logs three messages while it runs.", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
		}
		return fixtureText("Tool with logging executed successfully"), nil
	})
	fixtureTool(s, "test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100})
			}
		}
		return fixtureText("Progress tool completed"), nil
	})
	fixtureTool(s, "test_error_handling", "Always fails as a tool.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil
	})
	fixtureTool(s, "test_sampling", "Asks the client's LLM (sampling/createMessage).", stringArg("prompt", "The prompt to send to the LLM"),
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			prompt, _ := fixtureArgs(req)["prompt"].(string)
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			text := "(not text)"
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
			return fixtureText("LLM response: %s", text), nil
		})
	fixtureElicitTool(s, "test_elicitation", "Asks the user for a username and email (elicitation/create).", stringArg("message", "The message to show the user"),
		func(req *mcp.CallToolRequest) *mcp.ElicitParams {
			msg, _ := fixtureArgs(req)["message"].(string)
			return &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{"type": "object", "required": []string{"username", "email"},
				"properties": map[string]any{
					"username": map[string]any{"type": "string", "description": "User's response"},
					"email":    map[string]any{"type": "string", "description": "User's email address"},
				}}}
		})
	fixtureElicitTool(s, "test_elicitation_sep1034_defaults", "Elicits with a default for every primitive type (SEP-1034).", nil,
		func(*mcp.CallToolRequest) *mcp.ElicitParams {
			return &mcp.ElicitParams{Message: "Please review your details", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{
					"name":     map[string]any{"type": "string", "default": "John Doe"},
					"age":      map[string]any{"type": "integer", "default": 30},
					"score":    map[string]any{"type": "number", "default": 95.5},
					"status":   map[string]any{"type": "string", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
					"verified": map[string]any{"type": "boolean", "default": true},
				}}}
		})
	fixtureElicitTool(s, "test_elicitation_sep1330_enums", "Elicits with the five enum forms (SEP-1330).", nil,
		func(*mcp.CallToolRequest) *mcp.ElicitParams {
			titled := func(title string) []map[string]any {
				var out []map[string]any
				for i, n := range []string{"First", "Second", "Third"} {
					out = append(out, map[string]any{"const": fmt.Sprintf("value%d", i+1), "title": n + " " + title})
				}
				return out
			}
			options := []string{"option1", "option2", "option3"}
			return &mcp.ElicitParams{Message: "Please choose", RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{
					"untitledSingle": map[string]any{"type": "string", "enum": options},
					"titledSingle":   map[string]any{"type": "string", "oneOf": titled("Option")},
					"legacyEnum": map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
						"enumNames": []string{"Option One", "Option Two", "Option Three"}},
					"untitledMulti": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": options}},
					"titledMulti":   map[string]any{"type": "array", "items": map[string]any{"anyOf": titled("Choice")}},
				}}}
		})
	fixtureTool(s, "json_schema_2020_12_tool", "Has a JSON Schema 2020-12 input schema (SEP-1613, SEP-2106).", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"$anchor": "addressDef", "type": "object",
			"properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
			"contactMethod": {"type": "string", "enum": ["phone", "email"]}, "phone": {"type": "string"}, "email": {"type": "string"}},
		"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
		"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
		"then": {"required": ["phone"]},
		"else": {"required": ["email"]},
		"additionalProperties": false
	}`), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return fixtureText("called with %s", req.Params.Arguments), nil
	})
	fixtureTool(s, "test_reconnection", "Closes its SSE stream mid-call (SEP-1699).", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
		}
		time.Sleep(100 * time.Millisecond)
		return fixtureText("Reconnection test completed successfully."), nil
	})
	// The server-stateless scenario's tools (SEP-2575).
	fixtureTool(s, "test_missing_capability", "Needs the sampling client capability (-32021 without it).", nil, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
			return fixtureText("The client declared sampling."), nil
		}
		data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "the sampling capability is required", Data: data}
	})
	fixtureTool(s, "test_streaming_elicitation", "Answers without asking the client anything.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return fixtureText("result frames only"), nil
	})
	fixtureTool(s, "test_logging_tool", "Logs a message (dropped unless the client asked for a log level).", nil, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "test_logging_tool executed"})
		return fixtureText("Log attempted."), nil
	})
	fixtureTool(s, "test_trigger_tool_change", "Changes the tool list (notifications/tools/list_changed).", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fixtureTool(s, "transient_tool", "Added by test_trigger_tool_change.", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return fixtureText("transient"), nil
		})
		return fixtureText("tools list changed"), nil
	})
	fixtureTool(s, "test_trigger_prompt_change", "Changes the prompt list (notifications/prompts/list_changed).", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.AddPrompt(&mcp.Prompt{Name: "transient_prompt", Description: "Added by test_trigger_prompt_change."},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{}, nil
			})
		return fixtureText("prompts list changed"), nil
	})
}

// fixtureElicitTool adds a tool that elicits with the params ask builds:
// as a server-to-client request on a stateful session, as an
// input-required result on the 2026-07-28 wire (where a server cannot
// send a request), answering the outcome either way.
func fixtureElicitTool(s *mcp.Server, name, desc string, schema any, ask func(*mcp.CallToolRequest) *mcp.ElicitParams) {
	fixtureTool(s, name, desc, schema, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["elicitation"].(*mcp.ElicitResult); ok && r != nil {
			return fixtureText("Elicitation completed: action=%s, content=%v", r.Action, r.Content), nil
		}
		res, err := req.Session.Elicit(ctx, ask(req))
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		return fixtureText("Elicitation completed: action=%s, content=%v", res.Action, res.Content), nil
	})
}

func fixtureComplete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var values []string
	for _, v := range []string{"paris", "park", "party", "hello", "world"} {
		if strings.HasPrefix(v, req.Params.Argument.Value) {
			values = append(values, v)
		}
	}
	if values == nil {
		values = []string{}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

// fixtureState mints and checks requestState values: the payload and its
// HMAC under a key of this process, so that a tampered or foreign state
// fails (input-required-result-tampered-state).
var fixtureStateKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func fixtureStateMint(payload string) string {
	m := hmac.New(sha256.New, fixtureStateKey)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// fixtureStateOpen returns the payload of a state fixtureStateMint made,
// or an invalid-params error naming requestState.
func fixtureStateOpen(state string) (string, error) {
	p, sig, ok := strings.Cut(state, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	m := hmac.New(sha256.New, fixtureStateKey)
	m.Write(payload)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(got, m.Sum(nil)) {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState failed its integrity check"}
	}
	return string(payload), nil
}

// acceptedInput is the content of an accepted elicitation among a retry's
// input responses, or nil.
func acceptedInput(req mcp.InputResponseMap, key string) map[string]any {
	if r, ok := req[key].(*mcp.ElicitResult); ok && r != nil && r.Action == "accept" {
		return r.Content
	}
	return nil
}

// sampledText is the text of a sampling answer among a retry's input
// responses.
func sampledText(req mcp.InputResponseMap, key string) (string, bool) {
	switch r := req[key].(type) {
	case *mcp.CreateMessageWithToolsResult:
		if r == nil {
			return "", false
		}
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				return tc.Text, true
			}
		}
		return "(not text)", true
	case *mcp.CreateMessageResult:
		if r == nil {
			return "", false
		}
		if tc, ok := r.Content.(*mcp.TextContent); ok {
			return tc.Text, true
		}
		return "(not text)", true
	}
	return "", false
}

func elicitOne(message, field, typ string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: map[string]any{"type": "object", "required": []string{field},
		"properties": map[string]any{field: map[string]any{"type": typ}}}}
}

func sampleOne(text string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: maxTokens, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}
}

func inputRequired(reqs mcp.InputRequestMap, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}
}

// fixtureInputTools adds the tools of the input-required-result scenarios
// (SEP-2322): each answers an InputRequiredResult until the retry carries
// the input it asked for (and a valid requestState where it sent one).
func fixtureInputTools(s *mcp.Server) {
	fixtureTool(s, "test_input_required_result_elicitation", "Asks for the caller's name (input-required elicitation).", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if name, _ := acceptedInput(req.Params.InputResponses, "user_name")["name"].(string); name != "" {
				return fixtureText("Hello, %s!", name), nil
			}
			return inputRequired(mcp.InputRequestMap{"user_name": elicitOne("What is your name?", "name", "string")}, ""), nil
		})
	fixtureTool(s, "test_input_required_result_sampling", "Asks the client's LLM (input-required sampling).", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if text, ok := sampledText(req.Params.InputResponses, "capital_question"); ok {
				return fixtureText("Sampling response: %s", text), nil
			}
			return inputRequired(mcp.InputRequestMap{"capital_question": sampleOne("What is the capital of France?", 100)}, ""), nil
		})
	fixtureTool(s, "test_input_required_result_list_roots", "Asks for the client's roots (input-required roots/list).", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
				var uris []string
				for _, root := range r.Roots {
					uris = append(uris, root.URI)
				}
				return fixtureText("Client roots (%d): %s", len(uris), strings.Join(uris, ", ")), nil
			}
			return inputRequired(mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, ""), nil
		})
	confirm := func(tool string) mcp.ToolHandler {
		return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState != "" {
				if _, err := fixtureStateOpen(req.Params.RequestState); err != nil {
					return nil, err
				}
				if acceptedInput(req.Params.InputResponses, "confirm") != nil {
					return fixtureText("state-ok: the requestState was valid and the confirmation accepted"), nil
				}
			}
			return inputRequired(mcp.InputRequestMap{"confirm": elicitOne("Please confirm", "ok", "boolean")}, fixtureStateMint(tool)), nil
		}
	}
	fixtureTool(s, "test_input_required_result_request_state", "Round-trips a signed requestState.", nil, confirm("request_state"))
	fixtureTool(s, "test_input_required_result_tampered_state", "Rejects a tampered requestState.", nil, confirm("tampered_state"))
	fixtureTool(s, "test_input_required_result_multiple_inputs", "Asks for elicitation, sampling and roots at once.", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			in := req.Params.InputResponses
			if req.Params.RequestState != "" {
				if _, err := fixtureStateOpen(req.Params.RequestState); err != nil {
					return nil, err
				}
				name, _ := acceptedInput(in, "user_name")["name"].(string)
				greeting, sampled := sampledText(in, "greeting")
				roots, listed := in["client_roots"].(*mcp.ListRootsResult)
				if name != "" && sampled && listed && roots != nil {
					return fixtureText("%s %s, with %d root(s)", greeting, name, len(roots.Roots)), nil
				}
			}
			return inputRequired(mcp.InputRequestMap{
				"user_name":    elicitOne("What is your name?", "name", "string"),
				"greeting":     sampleOne("Generate a greeting", 50),
				"client_roots": &mcp.ListRootsParams{},
			}, fixtureStateMint("multiple_inputs")), nil
		})
	fixtureTool(s, "test_input_required_result_multi_round", "Asks twice, carrying the first answer in requestState.", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			round1 := func() *mcp.CallToolResult {
				return inputRequired(mcp.InputRequestMap{"step1": elicitOne("Step 1: What is your name?", "name", "string")}, fixtureStateMint("round=1"))
			}
			if req.Params.RequestState == "" {
				return round1(), nil
			}
			state, err := fixtureStateOpen(req.Params.RequestState)
			if err != nil {
				return nil, err
			}
			in := req.Params.InputResponses
			if state == "round=1" {
				name, _ := acceptedInput(in, "step1")["name"].(string)
				if name == "" {
					return round1(), nil
				}
				return inputRequired(mcp.InputRequestMap{"step2": elicitOne("Step 2: What is your favorite color?", "color", "string")},
					fixtureStateMint("round=2;name="+name)), nil
			}
			name := strings.TrimPrefix(state, "round=2;name=")
			color, _ := acceptedInput(in, "step2")["color"].(string)
			if color == "" {
				return inputRequired(mcp.InputRequestMap{"step2": elicitOne("Step 2: What is your favorite color?", "color", "string")},
					req.Params.RequestState), nil
			}
			return fixtureText("Multi-round complete: %s likes %s", name, color), nil
		})
	fixtureTool(s, "test_input_required_result_capabilities", "Asks only for the input kinds the client declared.", nil,
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) > 0 {
				return fixtureText("Capability-aware input requests fulfilled"), nil
			}
			caps, reqs := req.ClientCapabilities(), mcp.InputRequestMap{}
			if caps != nil && caps.Elicitation != nil {
				reqs["user_name"] = elicitOne("What is your name?", "name", "string")
			}
			if caps != nil && caps.Sampling != nil {
				reqs["greeting"] = sampleOne("Generate a short greeting", 50)
			}
			if caps != nil && caps.RootsV2 != nil {
				reqs["client_roots"] = &mcp.ListRootsParams{}
			}
			if len(reqs) == 0 {
				return fixtureText("The client declared no capability to ask with"), nil
			}
			return inputRequired(reqs, ""), nil
		})
}

// fixtureTemplate matches the fixture's resource template.
var fixtureTemplate = regexp.MustCompile(`^test://template/([^/]+)/data$`)

func fixtureResources(s *mcp.Server) {
	text := func(uri, mime, body string) *mcp.ReadResourceResult {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: body}}}
	}
	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text("test://static-text", "text/plain", "This is the content of the static text resource."), nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static binary resource (a PNG).", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: fixturePNG}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource to subscribe to.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text("test://watched-resource", "text/plain", "Watched resource content"), nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template",
		Description: "Data for an id.", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			m := fixtureTemplate.FindStringSubmatch(req.Params.URI)
			if m == nil {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			body, _ := json.Marshal(map[string]any{"id": m[1], "templateTest": true, "data": "Data for ID: " + m[1]})
			return text(req.Params.URI, "application/json", string(body)), nil
		})
}

func fixturePrompts(s *mcp.Server) {
	msgs := func(content ...mcp.Content) *mcp.GetPromptResult {
		res := &mcp.GetPromptResult{}
		for _, c := range content {
			res.Messages = append(res.Messages, &mcp.PromptMessage{Role: "user", Content: c})
		}
		return res
	}
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return msgs(&mcp.TextContent{Text: "This is a simple prompt for testing."}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two arguments.", Arguments: []*mcp.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true},
		{Name: "arg2", Description: "Second test argument", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return msgs(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}), nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource.", Arguments: []*mcp.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return msgs(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain",
			Text: "Embedded resource content for testing."}}, &mcp.TextContent{Text: "Please process the embedded resource above."}), nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return msgs(&mcp.ImageContent{Data: fixturePNG, MIMEType: "image/png"}, &mcp.TextContent{Text: "Please analyze the image above."}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks for context before it renders (input-required)."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if c, _ := acceptedInput(req.Params.InputResponses, "user_context")["context"].(string); c != "" {
				return msgs(&mcp.TextContent{Text: "Context: " + c}), nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
				"user_context": elicitOne("What context should the prompt use?", "context", "string")}}, nil
		})
}

// TestConformanceFixtureSubscription: a subscription to a fixture resource
// gets notifications/resources/updated (the suite checks only that
// resources/subscribe answers, the relaying of updates needs them sent).
func TestConformanceFixtureSubscription(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	updated := make(chan string, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default:
			}
		},
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := conformanceFixture().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != "test://watched-resource" {
			t.Errorf("updated %q", uri)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/resources/updated after resources/subscribe")
	}
}
