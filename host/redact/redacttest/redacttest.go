// Package redacttest computes, for tests, the forms of a secret the
// redactor (package redact) covers, with the standard library rather than
// the redactor's own code: the redactor's tests hold it to them, and the
// host's tests check that no form of a secret leaves the host. Tests only.
package redacttest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"html"
	"net/url"
	"strings"
)

// Encodings are the forms of a secret the redactor covers, computed with
// the standard library (and two hand-written escapes) rather than by the
// redactor's own code.
func Encodings(s string) map[string]string {
	jsonOf := func(s string, escapeHTML bool) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(escapeHTML)
		_ = enc.Encode(s)
		out := strings.TrimSpace(b.String())
		return out[1 : len(out)-1]
	}
	var x strings.Builder
	_ = xml.EscapeText(&x, []byte(s))
	m := map[string]string{
		"raw":          s,
		"json":         jsonOf(s, true),
		"json-nohtml":  jsonOf(s, false),
		"json-json":    jsonOf(jsonOf(s, true), true), // a JSON text quoted in a JSON string
		"json-3":       jsonOf(jsonOf(jsonOf(s, false), false), false),
		"xml-json":     jsonOf(x.String(), true),
		"query":        url.QueryEscape(s),
		"path":         url.PathEscape(s),
		"query-lower":  lowerPercent(url.QueryEscape(s)),
		"xml":          x.String(),
		"html":         html.EscapeString(s),
		"xml-named":    strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s),
		"base64":       base64.StdEncoding.EncodeToString([]byte(s)),
		"base64-url":   base64.URLEncoding.EncodeToString([]byte(s)),
		"base64-raw":   base64.RawStdEncoding.EncodeToString([]byte(s)),
		"base64-rawur": base64.RawURLEncoding.EncodeToString([]byte(s)),
	}
	return m
}

func lowerPercent(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			copy(b[i+1:i+3], strings.ToLower(string(b[i+1:i+3])))
		}
	}
	return string(b)
}

// Base64Run returns the characters of enc(prefix+s+suffix) that encode
// bytes of s alone.
func Base64Run(enc *base64.Encoding, prefix, s, suffix string) string {
	full := enc.EncodeToString([]byte(prefix + s + suffix))
	from := (8*len(prefix) + 5) / 6
	to := 8 * (len(prefix) + len(s)) / 6
	return full[from:to]
}
