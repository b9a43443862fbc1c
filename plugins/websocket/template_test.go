package websocket

import (
	"encoding/json"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

func TestMessageTemplates(t *testing.T) {
	t.Parallel()
	args := map[string]json.RawMessage{
		"ch":    json.RawMessage(`"alerts/eu"`),
		"n":     json.RawMessage(`5`),
		"list":  json.RawMessage(`["a", "b"]`),
		"quote": json.RawMessage(`"say \"hi\" <b>"`),
	}
	v := &vars{args: args, cursor: "42"}
	for _, tc := range []struct{ tmpl, want string }{
		{`{"op":"sub","ch":"{{ch}}"}`, `{"ch":"alerts/eu","op":"sub"}`},
		{`{"n":"{{n}}","s":"n={{n}}","l":"{{list}}","t":"{{ list }}!"}`, `{"l":["a","b"],"n":5,"s":"n=5","t":"[\"a\",\"b\"]!"}`},
		{`{"q":"{{quote}}","q2":"<{{quote}}>"}`, `{"q":"say \"hi\" <b>","q2":"<say \"hi\" <b>>"}`},
		{`{"missing":"{{nope}}","text":"[{{nope}}]"}`, `{"missing":null,"text":"[]"}`},
		{`{"from":"{{cursor}}"}`, `{"from":"42"}`},
		{`"SUBSCRIBE {{ch}} {{n}}"`, `SUBSCRIBE alerts/eu 5`},
		{`[["{{n}}", 1]]`, `[[5,1]]`},
		{`"no variables"`, `no variables`},
		{`7`, `7`},
	} {
		m, err := parseMsgTemplate(json.RawMessage(tc.tmpl))
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		got, _ := m.render(v)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.tmpl, got, tc.want)
		}
	}
}

func TestURLTemplate(t *testing.T) {
	t.Parallel()
	u, name, err := parseURLTemplate("wss://user:pw@feed.example:8443/v1/{{region}}/x?sym={{sym}}&fixed=1")
	if err != nil {
		t.Fatal(err)
	}
	if name != "wss://feed.example:8443" {
		t.Errorf("upstream name %q", name)
	}
	got, err := u.render(&vars{args: map[string]json.RawMessage{"region": json.RawMessage(`"eu west/1"`), "sym": json.RawMessage(`"a&b=c"`)}})
	if err != nil || got != "wss://user:pw@feed.example:8443/v1/eu%20west%2F1/x?sym=a%26b%3Dc&fixed=1" {
		t.Errorf("render: %q %v", got, err)
	}
	for _, bad := range []string{`".."`, `""`, `null`} {
		if _, err := u.render(&vars{args: map[string]json.RawMessage{"region": json.RawMessage(bad)}}); err == nil {
			t.Errorf("region %s: want an error", bad)
		}
	}
}

// FuzzTemplates checks that any string parses or fails cleanly, and that
// a parsed template renders to valid JSON whatever the arguments.
func FuzzTemplates(f *testing.F) {
	for _, s := range []string{"{{a}}", "x{{ a }}y{{b}}", "{{", "}}{{a}", "{{a}}{{", "{{cursor}}", "{{a.b-c}}"} {
		f.Add(s, `"v"`)
	}
	f.Add("{{a}}", `{"k":[1,2,{"x":null}]}`)
	f.Fuzz(func(t *testing.T, s, arg string) {
		st, err := parseStrTemplate(s)
		if err != nil {
			return
		}
		if !json.Valid([]byte(arg)) {
			arg = `null`
		}
		v := &vars{args: map[string]json.RawMessage{"a": json.RawMessage(arg), "b": json.RawMessage(`1`)}, cursor: s}
		_ = st.render(v)
		obj, _ := json.Marshal(map[string]string{"k": s})
		m, err := parseMsgTemplate(obj)
		if err != nil {
			t.Fatalf("%q parsed as a string but not inside a message: %v", s, err)
		}
		out, isJSON := m.render(v)
		if !isJSON || !json.Valid(out) {
			t.Fatalf("%q with %s rendered invalid JSON: %s", s, arg, out)
		}
		// As a plain-text message: what unsafeVar lets through brings no
		// control character the template's own text does not have.
		str, _ := json.Marshal(s)
		if m, err = parseMsgTemplate(str); err != nil {
			t.Fatalf("%q parsed as a string but not as a message: %v", s, err)
		}
		if _, _, bad := m.unsafeVar(v); !bad {
			text, _ := m.render(v)
			literal, _ := m.render(&vars{})
			if unsafeCount(string(text)) != unsafeCount(string(literal)) {
				t.Fatalf("%q with %s and cursor %q: a control character came in from a value: %q", s, arg, s, text)
			}
		}
	})
}

// unsafeCount counts the characters textUnsafe refuses in s.
func unsafeCount(s string) int {
	n := 0
	for _, r := range s {
		if _, bad := textUnsafe(string(r)); bad {
			n++
		}
	}
	return n
}

// FuzzMatchers feeds arbitrary messages to the filter, ack and id
// matchers: none may panic, whatever the message.
func FuzzMatchers(f *testing.F) {
	for _, s := range []string{`{"type":"alert","seq":1}`, `[1,2]`, `"text"`, `{"seq":{"a":[1]}}`, `null`, `1e400`, `{"type":["alert"]}`} {
		f.Add(s)
	}
	p := newConfigs().Get(&sdk.Operation{Config: []byte(`{"url":"ws://h/x","subscribe":"s","ack":{"path":"$.type","equals":"{{t}}"},
		"filter":"@.type == 'alert' && (@.seq > 0 || length(@.type) > 2)","id_path":"$.seq"}`)})
	if p.Err() != nil {
		f.Fatal(p.Err())
	}
	c := p.Value
	want := c.ack.equals.value(&vars{args: map[string]json.RawMessage{"t": json.RawMessage(`"alert"`)}})
	f.Fuzz(func(t *testing.T, msg string) {
		doc, err := decodeJSON([]byte(msg))
		if err != nil {
			return
		}
		_ = matchFilter(c.filter, doc)
		_ = c.ack.matches(doc, want)
		_ = idOf(c.idPath, doc)
	})
}
