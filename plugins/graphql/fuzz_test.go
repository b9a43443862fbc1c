package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
)

// fuzzTool has a variable of every kind: scalars, an enum, nested lists,
// a recursive input object, a @oneOf input and a custom scalar.
func fuzzTool(t testing.TB) *tool {
	return compile(t, toolSpec{
		Operation: "Find", Kind: "query", Document: "query Find { x }",
		Variables: []inSpec{
			{Name: "id", Type: "ID!"}, {Name: "n", Type: "Int!", HasDefault: true}, {Name: "f", Type: "Float"},
			{Name: "s", Type: "String"}, {Name: "b", Type: "Boolean"}, {Name: "color", Type: "Color"},
			{Name: "grid", Type: "[[Int!]]"}, {Name: "filter", Type: "Filter"}, {Name: "by", Type: "By"},
			{Name: "at", Type: "Time"},
		},
		Types: map[string]typeSpec{
			"Color":  {Kind: "enum", Values: []string{"RED", "GREEN"}},
			"Filter": {Kind: "input", Fields: []inSpec{{Name: "name", Type: "String!"}, {Name: "and", Type: "[Filter!]"}, {Name: "min", Type: "Int"}}},
			"By":     {Kind: "input", OneOf: true, Fields: []inSpec{{Name: "id", Type: "ID"}, {Name: "email", Type: "String"}}},
			"Time":   {Kind: "scalar"},
		},
	})
}

// FuzzVariables coerces arbitrary arguments: either an argument error, or
// a JSON object of declared variables only, every required one present,
// each of its declared type, and coercing that object again gives it back
// unchanged (coercion is a projection).
func FuzzVariables(f *testing.F) {
	for _, s := range []string{
		`{"id":7}`, `{"id":"a","n":1e2,"f":1.5,"s":"x","b":true,"color":"RED","grid":[[1,2],[3]],"at":{"any":[1]}}`,
		`{"id":1,"grid":5,"filter":{"name":"a","and":{"name":"b","and":[{"name":"c"}]}}}`,
		`{"id":1,"by":{"email":"a@b"}}`, `{"id":1,"by":{"id":null,"email":"x"}}`, `{"id":1,"n":null}`,
		`{"id":1,"n":2147483648}`, `{"id":9007199254740993,"f":1e400}`, `{"id":1,"role":"admin"}`,
		`{"id":1,"filter":{"name":"a","extra":1}}`, `[]`, `null`, ``, `{"id":1,"color":"BLUE"}`,
	} {
		f.Add([]byte(s))
	}
	tl := fuzzTool(f)
	f.Fuzz(func(t *testing.T, args []byte) {
		out, err := tl.variables(args)
		if err != nil {
			var ae *argError
			if !errors.As(err, &ae) || !utf8.ValidString(err.Error()) {
				t.Fatalf("%s: error %T %q", args, err, err)
			}
			return
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			t.Fatalf("%s: variables %s are not a JSON object", args, out)
		}
		for k, v := range m {
			fld := tl.byName[k]
			if fld == nil {
				t.Fatalf("%s: undeclared variable %q in %s", args, k, out)
			}
			if err := checkType(tl, v, fld.typ); err != nil {
				t.Fatalf("%s: $%s = %s: %v", args, k, out, err)
			}
		}
		for _, v := range tl.vars {
			if _, ok := m[v.name]; v.required && !ok {
				t.Fatalf("%s: required $%s missing from %s", args, v.name, out)
			}
		}
		again, err := tl.variables(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("%s: coerced %s, again %s (%v)", args, out, again, err)
		}
	})
}

// checkType checks a coerced value against a GraphQL type.
func checkType(tl *tool, v any, r *typeRef) error {
	if v == nil {
		if r.nonNull {
			return errors.New("null for a non-null type")
		}
		return nil
	}
	if r.elem != nil {
		list, ok := v.([]any)
		if !ok {
			return errors.New("not a list")
		}
		for _, e := range list {
			if err := checkType(tl, e, r.elem); err != nil {
				return err
			}
		}
		return nil
	}
	switch r.named {
	case "Int":
		n, ok := v.(json.Number)
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if !ok || err != nil || i < math.MinInt32 || i > math.MaxInt32 {
			return errors.New("not an Int")
		}
		return nil
	case "Float":
		if _, ok := v.(json.Number); !ok {
			return errors.New("not a Float")
		}
		return nil
	case "String", "ID":
		if _, ok := v.(string); !ok {
			return errors.New("not a string")
		}
		return nil
	case "Boolean":
		if _, ok := v.(bool); !ok {
			return errors.New("not a Boolean")
		}
		return nil
	}
	it := tl.types[r.named]
	switch it.kind {
	case "scalar":
		return nil
	case "enum":
		if s, ok := v.(string); !ok || !it.values[s] {
			return errors.New("not a value of the enum")
		}
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return errors.New("not an input object")
	}
	set := 0
	for k, fv := range obj {
		fld := it.byName[k]
		if fld == nil {
			return errors.New("undeclared field " + strconv.Quote(k))
		}
		if err := checkType(tl, fv, fld.typ); err != nil {
			return err
		}
		if fv != nil {
			set++
		}
	}
	for _, fld := range it.fields {
		if _, ok := obj[fld.name]; fld.required && !ok {
			return errors.New("required field " + fld.name + " missing")
		}
	}
	if it.oneOf && (set != 1 || len(obj) != 1) {
		return errors.New("a @oneOf input without exactly one field")
	}
	return nil
}

// FuzzResponse reads arbitrary answers as GraphQL responses: a body that
// is a response becomes exactly one of a result (a JSON object whose data
// is the answer's data, marked partial when errors come along) or an
// upstream error (a JSON detail, a valid status); any other body is not a
// response.
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		`{"data":{"book":{"id":"1"}}}`, `{"data":null,"errors":[{"message":"boom","path":["a",0],"extensions":{"code":"NOT_FOUND"}}]}`,
		`{"errors":[{"message":"bad"}]}`, `{"data":{"a":1},"errors":[{"message":"partial"}],"extensions":{"cost":3}}`,
		`{"errors":"flat"}`, `{"errors":[]}`, `{"data":1}`, `{"other":1}`, `[1]`, `not json`, ` {"data" : { } } `,
		`{"errors":[{"message":"x","extensions":{"code":"a b\n"}}]}`, `{"data":null}`, `{"errors":null}`,
	} {
		f.Add([]byte(s))
	}
	tl := fuzzTool(f)
	c := &config{upstream: "http://127.0.0.1/graphql", includeExtensions: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		gr, ok := parseResponse(body)
		if !ok {
			var probe map[string]json.RawMessage
			if json.Unmarshal(bytes.TrimSpace(body), &probe) == nil && probe != nil && (probe["data"] != nil || probe["errors"] != nil) {
				t.Fatalf("%s: a GraphQL response read as none", body)
			}
			return
		}
		for _, status := range []int{200, 400} {
			res, ue := c.result(tl, gr, status)
			if (res == nil) == (ue == nil) {
				t.Fatalf("%s: result %v and error %v", body, res, ue)
			}
			if ue != nil {
				if ue.Detail != nil && !json.Valid(ue.Detail) || !validStatus(ue.Status) || !utf8.ValidString(ue.Message) {
					t.Fatalf("%s: error %+v", body, ue)
				}
				continue
			}
			var got struct {
				Data    json.RawMessage `json:"data"`
				Partial bool            `json:"partial"`
			}
			if err := json.Unmarshal(res.Structured, &got); err != nil {
				t.Fatalf("%s: structured %s: %v", body, res.Structured, err)
			}
			want := []byte("null")
			if gr.data != nil {
				want = gr.data
			}
			if compact(got.Data) != compact(want) {
				t.Fatalf("%s: data %s, want %s", body, got.Data, want)
			}
			if got.Partial != (len(gr.errors) > 0) || got.Partial != strings.HasPrefix(res.Text, "PARTIAL RESULT") {
				t.Fatalf("%s: partial %v, text %q", body, got.Partial, res.Text)
			}
		}
	})
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return "(invalid) " + string(b)
	}
	return buf.String()
}

// recorder is a StreamSender that keeps what it is sent.
type recorder struct {
	items []json.RawMessage
	gaps  []string
}

func (r *recorder) Item(it sdk.Item) error { r.items = append(r.items, it.Data); return nil }
func (r *recorder) Gap(reason string) error {
	r.gaps = append(r.gaps, reason)
	return nil
}

func fuzzSubStream(rec *recorder) *subStream {
	c := &config{upstream: "ws://h"}
	c.sub.maxMessage = 256
	c.sub.dialect = dialects[protocolTransportWS]
	return &subStream{c: c, t: &tool{label: "subscription S"}, send: rec, upstream: "subscription S at ws://h"}
}

// checkEvents: every item is one JSON value that is not null, every gap
// says why, and an error is an upstream error naming the subscription.
func checkEvents(t *testing.T, rec *recorder, err error) {
	for _, it := range rec.items {
		if !json.Valid(it) || isNull(it) {
			t.Fatalf("item %q", it)
		}
	}
	for _, g := range rec.gaps {
		if g == "" || !utf8.ValidString(g) {
			t.Fatalf("gap %q", g)
		}
	}
	var ue *sdk.UpstreamError
	if err != nil && (!errors.As(err, &ue) || ue.Upstream != "subscription S at ws://h" || ue.Message == "") {
		t.Fatalf("error %v", err)
	}
}

// FuzzWSMessage reads arbitrary messages of both WebSocket protocols
// (graphql-transport-ws, subscriptions-transport-ws): a message is
// refused (a protocol error) or has a type of its protocol, and the id
// those that need one; handling it never panics and sends only JSON
// items.
func FuzzWSMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"connection_ack"}`, `{"type":"ping","payload":{"a":1}}`, `{"type":"pong"}`,
		`{"id":"1","type":"next","payload":{"data":{"bookAdded":{"id":"1"}}}}`,
		`{"id":"1","type":"next","payload":{"data":null,"errors":[{"message":"x","path":["a",0]}]}}`,
		`{"id":"1","type":"error","payload":[{"message":"no","extensions":{"code":"BAD"}}]}`,
		`{"id":"1","type":"complete"}`, `{"id":"2","type":"next","payload":{}}`, `{"type":"next"}`,
		`{"type":"data","id":"1","payload":{"data":{"a":1}}}`, `{"type":"ka"}`, `{"type":"connection_error","payload":{"message":"no"}}`,
		`{"id":"1","type":"error","payload":{"message":"bad"}}`, `[]`, `"x"`, ``, `{"type":1}`, `{"id":"1","type":"error","payload":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range dialects {
			m, err := parseWSMessage(data, d)
			if err == nil && (!d.types[m.Type] || m.ID == "" && (m.Type == d.next || m.Type == "error" || m.Type == "complete")) {
				t.Fatalf("%s: message %+v accepted", d.name, m)
			}
			rec := &recorder{}
			s := fuzzSubStream(rec)
			s.c.sub.dialect = d
			r := &wsReader{s: s, acked: make(chan struct{}), write: func([]byte) error { return nil }}
			err = r.handle(data)
			if errors.Is(err, errCompleted) {
				err = nil
			}
			checkEvents(t, rec, err)
		}
	})
}

// FuzzSSEEvents reads arbitrary GraphQL over SSE streams: never a panic,
// at most max_message_bytes held, items JSON, and the stream ends with
// nil (complete) or an upstream error.
func FuzzSSEEvents(f *testing.F) {
	for _, s := range []string{
		"event: next\ndata: {\"data\":{\"a\":1}}\n\nevent: complete\ndata:\n\n",
		"event: next\ndata: {\"data\":null,\"errors\":[{\"message\":\"x\"}]}\n\n",
		": ping\n\nevent: next\r\ndata: {\"data\":\r\ndata: {\"a\":[1,2]}}\r\n\r\n",
		"event: next\ndata: " + strings.Repeat("x", 300) + "\n\n", "event: next\ndata: [1]\n\n", "data: {}\n\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := &recorder{}
		_, err := fuzzSubStream(rec).readEvents(bytes.NewReader(data))
		checkEvents(t, rec, err)
	})
}
