package websocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// cursorVar is the template variable holding the stream's resume cursor:
// the id of the last item delivered (id_path), or the cursor the window
// was called with. It is never a tool argument (the host reserves the
// window's "cursor" argument for itself).
const cursorVar = "cursor"

// part is a piece of a string template: a literal or a variable.
type part struct {
	lit string
	arg string
}

// strTemplate is a string with {{name}} variables.
type strTemplate struct {
	parts []part
}

// whole reports the variable name when the template is exactly one
// variable ("{{channel}}"): it is then replaced by the argument's JSON
// value, whatever its type.
func (t *strTemplate) whole() (string, bool) {
	if len(t.parts) == 1 && t.parts[0].arg != "" {
		return t.parts[0].arg, true
	}
	return "", false
}

// parseStrTemplate splits s at its {{name}} variables. Names are letters,
// digits, '_', '-' and '.', starting with a letter or '_'; spaces inside
// the braces are ignored. A "{{" without its "}}" is an error.
func parseStrTemplate(s string) (*strTemplate, error) {
	t := &strTemplate{}
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			if s != "" {
				t.parts = append(t.parts, part{lit: s})
			}
			return t, nil
		}
		j := strings.Index(s[i+2:], "}}")
		if j < 0 {
			return nil, errors.New(`"{{" without its closing "}}"`)
		}
		name := strings.TrimSpace(s[i+2 : i+2+j])
		if !validVarName(name) {
			return nil, fmt.Errorf("{{%s}} is not a variable: names are letters, digits, '_', '-' and '.', starting with a letter or '_'", s[i+2:i+2+j])
		}
		if i > 0 {
			t.parts = append(t.parts, part{lit: s[:i]})
		}
		t.parts = append(t.parts, part{arg: name})
		s = s[i+2+j+2:]
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// vars are the values templates are filled from: the tool arguments and
// the resume cursor.
type vars struct {
	args   map[string]json.RawMessage
	cursor string
	// itemCursor: cursor is an item's id (id_path), not the host's.
	itemCursor bool
}

// decodeArgs reads a call's arguments object.
func decodeArgs(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("the arguments must be a JSON object")
	}
	return m, nil
}

// value is the JSON value of a variable, nil when it is absent or null.
func (v *vars) value(name string) json.RawMessage {
	if name == cursorVar {
		if v.cursor == "" {
			return nil
		}
		b, _ := json.Marshal(v.cursor)
		return b
	}
	raw := bytes.TrimSpace(v.args[name])
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	return raw
}

// text is a variable's value as text: strings without quotes, other
// scalars as written, objects and lists as compact JSON, "" when absent.
func (v *vars) text(name string) string {
	raw := v.value(name)
	if raw == nil {
		return ""
	}
	if s, ok := sdk.ScalarText(raw); ok {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// render fills the template in as text.
func (t *strTemplate) render(v *vars) string {
	if len(t.parts) == 1 && t.parts[0].arg == "" {
		return t.parts[0].lit
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.arg == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(v.text(p.arg))
		}
	}
	return b.String()
}

// msgTemplate is a message sent to the upstream (subscribe, unsubscribe,
// heartbeat) or a value compared with one (ack.equals). A JSON object,
// list, number or boolean is sent as its JSON text with every string in
// it filled in; a string is sent as plain text, filled in.
type msgTemplate struct {
	// text is set for a plain-text message.
	text *strTemplate
	// tree is the JSON value, whose strings holding variables are
	// *strTemplate nodes.
	tree any
	// field is the config field the message is, for errors
	// ("subscribe", "subscribe[1]", "heartbeat.message").
	field string
}

// textUnsafe returns the first character of s that a value must not bring
// into a plain-text message, and whether there is one: a C0 control (line
// feed, carriage return, NUL, tab and the rest), DEL, a C1 control, or
// the Unicode line and paragraph separators. Text protocols end a line, a
// header or a frame with them (STOMP ends a header with a line feed and a
// frame with NUL), so a value holding one could end the operator's message
// and send one of its own. A JSON message escapes them instead.
func textUnsafe(s string) (rune, bool) {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r == '\u2028' || r == '\u2029' {
			return r, true
		}
	}
	return 0, false
}

// unsafeVar returns the first variable of a plain-text message whose value
// holds a character textUnsafe refuses, and that character. A JSON
// message needs no such check: its values are JSON-escaped.
func (m *msgTemplate) unsafeVar(v *vars) (string, rune, bool) {
	if m == nil || m.text == nil {
		return "", 0, false
	}
	for _, p := range m.text.parts {
		if p.arg == "" {
			continue
		}
		if r, bad := textUnsafe(v.text(p.arg)); bad {
			return p.arg, r, true
		}
	}
	return "", 0, false
}

// parseMsgTemplate reads one message template from its config value.
func parseMsgTemplate(raw json.RawMessage) (*msgTemplate, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, errors.New("must be a JSON value (an object is sent as JSON, a string as plain text)")
	}
	if v == nil {
		return nil, errors.New("must not be null")
	}
	if s, ok := v.(string); ok {
		t, err := parseStrTemplate(s)
		if err != nil {
			return nil, err
		}
		return &msgTemplate{text: t}, nil
	}
	tree, err := compileTree(v)
	if err != nil {
		return nil, err
	}
	return &msgTemplate{tree: tree}, nil
}

// compileTree replaces the strings holding variables by *strTemplate.
func compileTree(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		return parseStrTemplate(x)
	case map[string]any:
		for k, e := range x {
			c, err := compileTree(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			x[k] = c
		}
	case []any:
		for i, e := range x {
			c, err := compileTree(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			x[i] = c
		}
	}
	return v, nil
}

// render fills the message in: its text, and whether it is a JSON value
// (else plain text).
func (m *msgTemplate) render(v *vars) ([]byte, bool) {
	if m.text != nil {
		return []byte(m.text.render(v)), false
	}
	return mustMarshal(fillTree(m.tree, v)), true
}

// value fills the template in as a JSON value (for comparisons).
func (m *msgTemplate) value(v *vars) any {
	if m.text != nil {
		if name, ok := m.text.whole(); ok {
			return rawValue(v.value(name))
		}
		return m.text.render(v)
	}
	out, _ := decodeJSON(mustMarshal(fillTree(m.tree, v)))
	return out
}

// mustMarshal encodes v as compact JSON without HTML escaping (a message
// is sent as written); "null" if it cannot be encoded.
func mustMarshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func rawValue(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	v, _ := decodeJSON(raw)
	return v
}

// fillTree returns a copy of tree with its templates filled in: a string
// that is exactly one variable becomes the variable's JSON value (null
// when absent), any other becomes a string.
func fillTree(tree any, v *vars) any {
	switch x := tree.(type) {
	case *strTemplate:
		if name, ok := x.whole(); ok {
			if raw := v.value(name); raw != nil {
				return raw
			}
			return nil
		}
		return x.render(v)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fillTree(e, v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fillTree(e, v)
		}
		return out
	}
	return tree
}

// varUses collects the variables templates use: for the input schema, a
// variable used only as a whole JSON value takes any JSON value, one used
// inside text (or the url) takes a scalar.
type varUses map[string]bool // name → used inside text

func (u varUses) addStr(t *strTemplate) {
	_, whole := t.whole()
	for _, p := range t.parts {
		if p.arg != "" && p.arg != cursorVar {
			u[p.arg] = u[p.arg] || !whole
		}
	}
}

func (u varUses) addMsg(m *msgTemplate) {
	if m == nil {
		return
	}
	if m.text != nil {
		u.addStr(m.text)
		if name, ok := m.text.whole(); ok && name != cursorVar {
			u[name] = true // sent as text
		}
		return
	}
	walkTree(m.tree, func(t *strTemplate) { u.addStr(t) })
}

func walkTree(tree any, fn func(*strTemplate)) {
	switch x := tree.(type) {
	case *strTemplate:
		fn(x)
	case map[string]any:
		for _, e := range x {
			walkTree(e, fn)
		}
	case []any:
		for _, e := range x {
			walkTree(e, fn)
		}
	}
}

// inputSchema is the derived input schema: every variable is a required
// argument; text variables take a string, number or boolean.
func (u varUses) inputSchema() json.RawMessage {
	names := make([]string, 0, len(u))
	for n := range u {
		names = append(names, n)
	}
	sort.Strings(names)
	props := make(map[string]any, len(names))
	for _, n := range names {
		p := map[string]any{"description": "Filled into the WebSocket subscription as {{" + n + "}}."}
		if u[n] {
			p["type"] = []string{"string", "number", "boolean"}
		}
		props[n] = p
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(names) > 0 {
		schema["required"] = names
	}
	return mustMarshal(schema)
}

// urlTemplate is the upstream URL with variables in its path and query.
// The scheme and authority are literal: an argument can never choose the
// host the adapter connects to.
type urlTemplate struct {
	prefix string // scheme://authority, literal
	path   *strTemplate
	query  *strTemplate // nil without a query
}

// parseURLTemplate checks the url field: ws or wss, a literal host, and
// variables only in the path and query.
func parseURLTemplate(s string) (*urlTemplate, string, error) {
	s = strings.TrimSpace(s)
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, "", errors.New("must be an absolute ws:// or wss:// URL")
	}
	switch strings.ToLower(scheme) {
	case "ws", "wss":
	case "http", "https":
		return nil, "", fmt.Errorf("must use the ws:// or wss:// scheme, not %s:// (write %s://...)", strings.ToLower(scheme), map[string]string{"http": "ws", "https": "wss"}[strings.ToLower(scheme)])
	default:
		return nil, "", errors.New("must use the ws:// or wss:// scheme")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	if strings.Contains(authority, "{{") {
		return nil, "", errors.New("the host cannot hold a {{variable}}: an argument must never choose where the adapter connects")
	}
	if strings.Contains(rest, "#") {
		return nil, "", errors.New("must not have a #fragment")
	}
	pathQuery := rest[end:]
	pathStr, queryStr, hasQuery := strings.Cut(pathQuery, "?")
	if pathStr == "" {
		pathStr = "/"
	}
	// Check the URL with every variable replaced by a plain value.
	probe := strings.ToLower(scheme) + "://" + authority + fillProbe(pathStr)
	if hasQuery {
		probe += "?" + fillProbe(queryStr)
	}
	u, err := url.Parse(probe)
	if err != nil || u.Host == "" {
		return nil, "", errors.New("is not a valid URL with a host")
	}
	t := &urlTemplate{prefix: strings.ToLower(scheme) + "://" + authority}
	if t.path, err = parseStrTemplate(pathStr); err != nil {
		return nil, "", fmt.Errorf("path: %w", err)
	}
	if hasQuery {
		if t.query, err = parseStrTemplate(queryStr); err != nil {
			return nil, "", fmt.Errorf("query: %w", err)
		}
	}
	// The upstream's name in errors: no userinfo, path or query (they may
	// hold credentials).
	name := strings.ToLower(scheme) + "://" + u.Host
	return t, name, nil
}

func fillProbe(s string) string {
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return s
		}
		s = s[:i] + "x" + s[i+j+2:]
	}
}

// render builds the URL: path variables escaped as one path segment,
// query variables as a query value. An absent or empty path variable is an
// error naming the argument.
func (t *urlTemplate) render(v *vars) (string, error) {
	var b strings.Builder
	b.WriteString(t.prefix)
	for _, p := range t.path.parts {
		if p.arg == "" {
			b.WriteString(p.lit)
			continue
		}
		s := v.text(p.arg)
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("argument %q fills the url's path: it must be a non-empty string, number or boolean", p.arg)
		}
		b.WriteString(url.PathEscape(s))
	}
	if t.query != nil {
		b.WriteByte('?')
		for _, p := range t.query.parts {
			if p.arg == "" {
				b.WriteString(p.lit)
			} else {
				b.WriteString(url.QueryEscape(v.text(p.arg)))
			}
		}
	}
	return b.String(), nil
}

func (t *urlTemplate) uses(u varUses) {
	for _, s := range []*strTemplate{t.path, t.query} {
		if s == nil {
			continue
		}
		for _, p := range s.parts {
			if p.arg != "" && p.arg != cursorVar {
				u[p.arg] = true
			}
		}
	}
}

// decodeJSON decodes one JSON value, numbers kept as json.Number.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// usesCursor reports whether the url or the messages send {{cursor}}:
// with id_path, a stream that resumes after its items' ids.
func usesCursor(u *urlTemplate, msgs []*msgTemplate) bool {
	found := false
	check := func(t *strTemplate) {
		if t == nil {
			return
		}
		for _, p := range t.parts {
			found = found || p.arg == cursorVar
		}
	}
	if u != nil {
		check(u.path)
		check(u.query)
	}
	for _, m := range msgs {
		switch {
		case m == nil:
		case m.text != nil:
			check(m.text)
		default:
			walkTree(m.tree, check)
		}
	}
	return found
}
