package httpadapter

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

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
func StaticHeaders(raw json.RawMessage, managed ...string) (h http.Header, host string, diags []sdk.Diagnostic) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, "", []sdk.Diagnostic{sdk.Errorf("headers", "must be an object {Header-Name: value}")}
	}
	h = make(http.Header, len(obj))
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if !ValidHeaderName(name) {
			diags = append(diags, sdk.KeyErrorf("headers", name, "not a valid HTTP header name"))
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if HopByHopHeader(canon) || slices.Contains(managed, canon) {
			diags = append(diags, sdk.KeyErrorf("headers", name, "%s is set by the adapter and cannot be configured", canon))
			continue
		}
		value, ok := sdk.ScalarText(obj[name])
		if !ok {
			diags = append(diags, sdk.KeyErrorf("headers", name, "value must be a string, number or boolean"))
			continue
		}
		if !ValidHeaderValue(value) {
			diags = append(diags, sdk.KeyErrorf("headers", name, "value contains a control character such as a line break"))
			continue
		}
		if _, dup := h[canon]; dup || (canon == "Host" && host != "") {
			diags = append(diags, sdk.KeyErrorf("headers", name, "header %s is set twice (header names are case-insensitive)", canon))
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
