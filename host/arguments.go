package host

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

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
