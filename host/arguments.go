package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Undeclared arguments. A tool's arguments are the properties its input
// schema declares: the host refuses any other one before a request is
// built, for every adapter (the REST adapter's auto body would forward
// it to the upstream). The operations file closes an input schema that
// says nothing about further properties as it compiles it
// (Operation.SetInputSchema), so that undeclaredArguments can
// name what it does not declare.

// undeclaredArguments names the arguments a closed input schema does not
// declare ("" when there are none, or when the schema takes more): an
// error message that names them and the declared ones.
func undeclaredArguments(s *jsonschema.Schema, args map[string]any) string {
	if s == nil || len(args) == 0 {
		return ""
	}
	d := &declared{root: s, names: map[string]bool{}, seen: map[*jsonschema.Schema]bool{}}
	switch {
	case isFalse(s.AdditionalProperties):
		// additionalProperties sees its siblings only.
		d.add(s, false, 0)
	case isFalse(s.UnevaluatedProperties) && s.AdditionalProperties == nil:
		d.add(s, true, 0)
	default:
		return ""
	}
	var unknown []string
	for k := range args {
		if !d.has(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	sort.Strings(unknown)
	list := make([]string, 0, min(len(unknown), 5))
	for i, k := range unknown {
		if i == 5 {
			list = append(list, fmt.Sprintf("… (%d more)", len(unknown)-5))
			break
		}
		if len(k) > 64 {
			k = strings.ToValidUTF8(k[:64], "") + "…"
		}
		list = append(list, strconv.Quote(k))
	}
	what := "unknown argument "
	if len(unknown) > 1 {
		what = "unknown arguments "
	}
	takes := "the tool takes no arguments"
	if names := d.list(); names != "" {
		takes = "the tool takes " + names
	}
	return what + strings.Join(list, ", ") + ": " + takes
}

// isFalse tells whether a subschema is the schema false, which
// jsonschema-go reads as {"not": {}}.
func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// declared collects the property names and patterns a schema declares.
type declared struct {
	root     *jsonschema.Schema
	names    map[string]bool
	patterns []*regexp.Regexp
	seen     map[*jsonschema.Schema]bool
}

func (d *declared) add(s *jsonschema.Schema, deep bool, depth int) {
	if s == nil || d.seen[s] || depth > 16 {
		return
	}
	d.seen[s] = true
	for name := range s.Properties {
		d.names[name] = true
	}
	for p := range s.PatternProperties {
		if re, err := regexp.Compile(p); err == nil {
			d.patterns = append(d.patterns, re)
		}
	}
	if !deep {
		return
	}
	subs := append(append(append([]*jsonschema.Schema{s.If, s.Then, s.Else}, s.AllOf...), s.AnyOf...), s.OneOf...)
	for _, ds := range s.DependentSchemas {
		subs = append(subs, ds)
	}
	if ref, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
		subs = append(subs, d.root.Defs[ref])
	} else if ref, ok := strings.CutPrefix(s.Ref, "#/definitions/"); ok {
		subs = append(subs, d.root.Definitions[ref])
	}
	for _, sub := range subs {
		d.add(sub, true, depth+1)
	}
}

func (d *declared) has(name string) bool {
	if d.names[name] {
		return true
	}
	for _, re := range d.patterns {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// list names the declared properties, at most 20.
func (d *declared) list() string {
	names := make([]string, 0, len(d.names))
	for n := range d.names {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 20 {
		names = append(names[:20], fmt.Sprintf("… (%d more)", len(names)-20))
	}
	return strings.Join(names, ", ")
}

// Duplicate members. The schema validator, the policy and most decoders
// keep one of two members of the same name in an object (encoding/json
// the last); an upstream's parser may keep the other. Arguments in which
// a member name appears twice in one object, at any depth, are refused
// before anything else looks at them, so what was checked is what is
// sent.

// DuplicateMember is the error message naming the first member that
// appears twice in one object of the JSON text args, or "" when there is
// none (or args is not JSON: decoding reports that).
func DuplicateMember(args json.RawMessage) string {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return ""
	}
	return duplicateMember(args, v)
}

// duplicateMember is DuplicateMember of args, valid JSON whose decoded
// value is v. The member is named by its path ("filter.role",
// "items[1].name"). Counting is cheap and done first: in valid JSON every
// member has one colon outside strings, and a duplicate adds a colon but
// no key to its decoded object.
func duplicateMember(args []byte, v any) string {
	if rawMembers(args) == decodedMembers(v) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if path, ok := duplicateIn(dec, ""); ok {
		return path + ": appears twice in its object; send each member once"
	}
	return ""
}

// rawMembers counts the members of the objects of a valid JSON text.
func rawMembers(b []byte) int {
	n := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case ':':
			n++
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		}
	}
	return n
}

// decodedMembers counts the members of the objects of a decoded value.
func decodedMembers(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n = len(v)
		for _, e := range v {
			n += decodedMembers(e)
		}
	case []any:
		for _, e := range v {
			n += decodedMembers(e)
		}
	}
	return n
}

// duplicateIn reads one value from dec, at path, and returns the path of
// its first duplicate member.
func duplicateIn(dec *json.Decoder, path string) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			key, _ := k.(string)
			if err != nil {
				return "", false
			}
			name := key
			if len(name) > 64 {
				name = strings.ToValidUTF8(name[:64], "") + "…"
			}
			if path != "" {
				name = path + "." + name
			}
			if seen[key] {
				return name, true
			}
			seen[key] = true
			if p, ok := duplicateIn(dec, name); ok {
				return p, true
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if p, ok := duplicateIn(dec, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	default:
		return "", false
	}
	_, _ = dec.Token() // the closing delimiter
	return "", false
}
