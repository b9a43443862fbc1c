package sdk

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Helpers that every adapter needs for its config handling.

// Suggest returns the name in known closest to name (edit distance at most
// 2, name compared in lower case), or "" when none is close: for "did you
// mean" hints on unknown config fields.
func Suggest(name string, known []string) string {
	best, bestD := "", 3
	ln := strings.ToLower(name)
	for _, k := range known {
		if d := EditDistance(ln, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b, in bytes.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ValidHeaderValue reports whether s can be sent as an HTTP header value:
// no control characters other than tab (no header injection).
func ValidHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// ValidHeaderName reports whether s is an HTTP header name (an RFC 9110
// token).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// HopByHopHeader reports the headers the HTTP client manages itself
// (framing and connection headers), which a config must not set.
func HopByHopHeader(canon string) bool {
	switch canon {
	case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer", "Proxy-Connection":
		return true
	}
	return false
}

// StaticHeaders parses a config's "headers" object {Header-Name: value}.
// Values may be strings, numbers or booleans; names are canonicalised;
// hop-by-hop headers and the extra managed ones (canonical names) are
// refused, as are invalid names, control characters in values and a name
// set twice. "Host" is returned apart, as host. Diagnostics name the field
// ("headers.<Name>") and never quote a value: it is likely a secret.
func StaticHeaders(raw json.RawMessage, managed ...string) (h http.Header, host string, diags []Diagnostic) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, "", []Diagnostic{Errorf("headers", "must be an object {Header-Name: value}")}
	}
	h = make(http.Header, len(obj))
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		field := "headers." + name
		if !ValidHeaderName(name) {
			diags = append(diags, Errorf(field, "not a valid HTTP header name"))
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if HopByHopHeader(canon) || slices.Contains(managed, canon) {
			diags = append(diags, Errorf(field, "%s is set by the adapter and cannot be configured", canon))
			continue
		}
		value, ok := ScalarText(obj[name])
		if !ok {
			diags = append(diags, Errorf(field, "value must be a string, number or boolean"))
			continue
		}
		if !ValidHeaderValue(value) {
			diags = append(diags, Errorf(field, "value contains a control character such as a line break"))
			continue
		}
		if _, dup := h[canon]; dup || (canon == "Host" && host != "") {
			diags = append(diags, Errorf(field, "header %s is set twice (header names are case-insensitive)", canon))
			continue
		}
		if canon == "Host" {
			host = value
			continue
		}
		h[canon] = []string{value}
	}
	return h, host, diags
}

// ScalarText renders a JSON string, number or boolean as plain text (a
// string without its quotes); other values are refused.
func ScalarText(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] == '{' || v[0] == '[' || bytes.Equal(v, []byte("null")) {
		return "", false
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(v), true
}
