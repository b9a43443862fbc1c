package grpcadapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/crankmcp/crank/plugins/sdk"
)

// wrapKey is the argument holding the request when the request message's
// JSON form is not an object (e.g. google.protobuf.StringValue), and the
// result key of such a response (the host wraps non-objects the same way).
const (
	argWrapKey    = "value"
	resultWrapKey = "result"
)

// newRequest converts tool arguments to a request message; a window's
// cursor goes into the config's cursor_field. A conversion error names the
// argument path, e.g. "items[2].price".
func (m *methodInfo) newRequest(c *config, args []byte, cursor string) (*dynamicpb.Message, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if cursor != "" && c.cursorField != "" && !m.wrappedIn {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			return nil, fmt.Errorf("arguments: must be a JSON object")
		}
		obj[c.cursorField], _ = json.Marshal(cursor)
		args, _ = json.Marshal(obj)
	}
	if m.wrappedIn {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			return nil, fmt.Errorf("arguments must be a JSON object {%q: ...}", argWrapKey)
		}
		v, ok := obj[argWrapKey]
		if !ok {
			return nil, fmt.Errorf("argument %s: required", argWrapKey)
		}
		return m.convert(v, argWrapKey)
	}
	return m.convert(args, "")
}

// convert converts one request message's JSON form; path names it in
// errors ("" for the arguments themselves).
func (m *methodInfo) convert(raw []byte, path string) (*dynamicpb.Message, error) {
	msg := dynamicpb.NewMessage(m.in)
	if err := m.unmarshal.Unmarshal(raw, msg); err != nil {
		reason := ""
		if !m.wrappedIn {
			path, reason = locate(m.in, raw, path, m.unmarshal, 0)
		}
		if reason == "" {
			reason = reasonFor(err, raw)
		}
		if path == "" {
			return nil, fmt.Errorf("arguments: %s", reason)
		}
		return nil, fmt.Errorf("argument %s: %s", path, reason)
	}
	return msg, nil
}

// requestsKey is the argument of a client-streaming or bidirectional
// call: the list of request messages it sends.
const requestsKey = "requests"

// newRequests converts the arguments of a client-streaming or
// bidirectional call, {"requests": [message, ...]}, to its request
// messages. More than requests.max_items messages, or more than
// requests.max_bytes bytes of them encoded, are refused here, before the
// call starts, so nothing reaches the server.
func (m *methodInfo) newRequests(args []byte) ([]*dynamicpb.Message, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, fmt.Errorf("arguments must be a JSON object {%q: [...]}", requestsKey)
	}
	for k := range obj {
		if k != requestsKey {
			return nil, fmt.Errorf("argument %s: unknown: a streaming call's only argument is %s, the list of %s messages", k, requestsKey, m.in.FullName())
		}
	}
	raw := bytes.TrimSpace(obj[requestsKey])
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, fmt.Errorf("argument %s: required: the list of %s messages to send", requestsKey, m.in.FullName())
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("argument %s: must be a list of %s messages", requestsKey, m.in.FullName())
	}
	if len(list) > m.maxReqItems {
		return nil, fmt.Errorf("argument %s: %d messages, more than the %d a call may send (requests.max_items); nothing was sent", requestsKey, len(list), m.maxReqItems)
	}
	msgs := make([]*dynamicpb.Message, len(list))
	total := 0
	for i, r := range list {
		msg, err := m.convert(r, fmt.Sprintf("%s[%d]", requestsKey, i))
		if err != nil {
			return nil, err
		}
		if total += proto.Size(msg); total > m.maxReqBytes {
			return nil, fmt.Errorf("argument %s: the messages up to %s[%d] take %d bytes encoded, more than the %d a call may send (requests.max_bytes); nothing was sent",
				requestsKey, requestsKey, i, total, m.maxReqBytes)
		}
		msgs[i] = msg
	}
	return msgs, nil
}

var (
	protoErrPrefix = regexp.MustCompile(`^proto:[\s\x{00a0}]*(\(line \d+:\d+\):[\s\x{00a0}]*)?`)
	protoErrField  = regexp.MustCompile(`^(invalid value for [a-z0-9]+) field [A-Za-z0-9_]+:`)
)

// cleanProtoError drops protojson's "proto: (line 1:7): " prefix, whose
// position means nothing to the caller, and its field name (a JSON name:
// the caller sees the path instead).
func cleanProtoError(err error) string {
	s := protoErrPrefix.ReplaceAllString(err.Error(), "")
	s = protoErrField.ReplaceAllString(s, "$1:")
	if strings.HasPrefix(s, "invalid value for bytes:") {
		s += " " + bytesHint
	}
	return s
}

// bytesHint says what a bytes field takes (the proto3 JSON mapping).
const bytesHint = "(bytes are base64: the standard or URL-safe alphabet, padding optional)"

// maxLocateDepth is how many messages deep locate descends: each level
// converts its subtree again, so past it the error names the field at
// that depth ("… tree.children[0]…: reason").
const maxLocateDepth = 16

// locate finds the argument that makes protojson fail by converting the
// fields of raw one at a time, descending into messages, lists and maps,
// at most maxLocateDepth messages deep. It runs only after a failed
// conversion.
func locate(md protoreflect.MessageDescriptor, raw []byte, path string, uo protojson.UnmarshalOptions, depth int) (string, string) {
	if isWellKnown(md) {
		return "", ""
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return path, "must be a JSON object"
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fpath := k
		if path != "" {
			fpath = path + "." + k
		}
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		if fd == nil {
			if uo.DiscardUnknown {
				continue
			}
			return fpath, "unknown field of " + string(md.FullName())
		}
		one, _ := json.Marshal(map[string]json.RawMessage{k: obj[k]})
		err := uo.Unmarshal(one, dynamicpb.NewMessage(md))
		if err == nil {
			continue
		}
		v := obj[k]
		if depth+1 >= maxLocateDepth {
			return fpath + "…", reasonFor(err, v)
		}
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			var m map[string]json.RawMessage
			if json.Unmarshal(v, &m) == nil {
				mkeys := make([]string, 0, len(m))
				for mk := range m {
					mkeys = append(mkeys, mk)
				}
				sort.Strings(mkeys)
				for _, mk := range mkeys {
					if p, r := locate(fd.MapValue().Message(), m[mk], fpath+"["+strconv.Quote(mk)+"]", uo, depth+1); r != "" {
						return p, r
					}
				}
			}
		case fd.IsList() && fd.Message() != nil:
			var list []json.RawMessage
			if json.Unmarshal(v, &list) == nil {
				for i, e := range list {
					if p, r := locate(fd.Message(), e, fmt.Sprintf("%s[%d]", fpath, i), uo, depth+1); r != "" {
						return p, r
					}
				}
			}
		case fd.IsList():
			var list []json.RawMessage
			if json.Unmarshal(v, &list) == nil {
				for i, e := range list {
					elem, _ := json.Marshal(map[string][]json.RawMessage{k: {e}})
					if err := uo.Unmarshal(elem, dynamicpb.NewMessage(md)); err != nil {
						return fmt.Sprintf("%s[%d]", fpath, i), reasonFor(err, e)
					}
				}
			}
		case !fd.IsMap() && fd.Message() != nil && !bytes.Equal(bytes.TrimSpace(v), []byte("null")):
			if p, r := locate(fd.Message(), v, fpath, uo, depth+1); r != "" {
				return p, r
			}
		}
		return fpath, reasonFor(err, v)
	}
	return "", ""
}

// reasonFor says why protojson refused raw: its own words, except for an
// unpaired UTF-16 surrogate escape, valid JSON that is no Unicode text,
// which protojson calls an unexpected end.
func reasonFor(err error, raw []byte) string {
	if hasLoneSurrogate(raw) {
		return `a string holds an unpaired UTF-16 surrogate escape (\ud800 to \udfff), which is no Unicode character`
	}
	return cleanProtoError(err)
}

// hasLoneSurrogate tells whether JSON text holds a \u escape of a UTF-16
// surrogate that is not a high one followed by a low one.
func hasLoneSurrogate(b []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // another escape: skip its character
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// marshalResult renders a response message as compact JSON.
func (m *methodInfo) marshalResult(msg proto.Message) ([]byte, error) {
	b, err := m.marshal.Marshal(msg)
	if err != nil {
		return nil, err
	}
	// protojson varies its whitespace on purpose; results stay stable.
	return compactJSON(b), nil
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// checkCursorField checks that cursor_field names a singular string or
// integer field of the method's request.
func checkCursorField(c *config, md protoreflect.MethodDescriptor) *sdk.Diagnostic {
	if c.cursorField == "" {
		return nil
	}
	in := md.Input()
	fd := in.Fields().ByName(protoreflect.Name(c.cursorField))
	if fd == nil {
		fd = in.Fields().ByJSONName(c.cursorField)
	}
	var problem string
	switch {
	case md.IsStreamingClient():
		problem = "a client-streaming or bidirectional method's requests come from the caller's requests argument: cursor_field applies to unary and server-streaming methods"
	case messageJSONKind(in) != jsonObject:
		problem = fmt.Sprintf("the request %s is not a message with fields", in.FullName())
	case fd == nil:
		problem = fmt.Sprintf("the request %s has no field %s", in.FullName(), c.cursorField)
	case fd.IsList() || fd.IsMap():
		problem = fmt.Sprintf("%s is a list or map; the cursor needs a string or integer field", c.cursorField)
	default:
		switch fd.Kind() {
		case protoreflect.StringKind, protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind,
			protoreflect.Uint64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Fixed32Kind,
			protoreflect.Fixed64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
			return nil
		}
		problem = fmt.Sprintf("%s is a %s field; the cursor needs a string or integer field", c.cursorField, fd.Kind())
	}
	d := sdk.Errorf("cursor_field", "%s", problem)
	return &d
}
