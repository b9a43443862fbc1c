package host_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
)

// encodings are the forms of a secret the redactor covers, computed with
// the standard library (and two hand-written escapes) rather than by the
// redactor's own code.
func encodings(s string) map[string]string {
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

// base64Run returns the characters of enc(prefix+s+suffix) that encode
// bytes of s alone.
func base64Run(enc *base64.Encoding, prefix, s, suffix string) string {
	full := enc.EncodeToString([]byte(prefix + s + suffix))
	from := (8*len(prefix) + 5) / 6
	to := 8 * (len(prefix) + len(s)) / 6
	return full[from:to]
}

func TestRedactEncodedForms(t *testing.T) {
	secrets := []string{`p@ss"w<rd>&x+y/z= ~'é`, "sk-live-0123456789abcdef", "alice", "hunter2-pw"}
	rd := host.NewRedactor(secrets)
	for _, s := range secrets {
		for name, e := range encodings(s) {
			text := "before " + e + " after"
			if got := rd.String(text); strings.Contains(got, e) || got != "before "+host.Redacted+" after" &&
				!strings.HasPrefix(name, "base64") {
				t.Errorf("%q as %s: %q", s, name, got)
			}
		}
	}
	// Python's json.dumps and PHP's "\/" escapes.
	for _, e := range []string{`p@ss\"w<rd>&x+y/z= ~'\u00e9`, `p@ss\"w<rd>&x+y\/z= ~'é`} {
		if got := rd.String(e); got != host.Redacted {
			t.Errorf("%q: %q", e, got)
		}
	}
	// Inside a longer base64 text, at every alignment: a Basic
	// authorization, a cursor, a token.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for _, prefix := range []string{"", "a", "ab", "abc", "user:"} {
			for _, s := range secrets {
				run := base64Run(enc, prefix, s, `","skip":3}`)
				text := enc.EncodeToString([]byte(prefix + s + `","skip":3}`))
				if got := rd.String(text); strings.Contains(got, run) || !strings.Contains(got, host.Redacted) {
					t.Errorf("base64 of %q+%q: %s → %s", prefix, s, text, got)
				}
			}
		}
	}
	// A pair the catalog records from username and password is one secret:
	// its Basic authorization is replaced whole.
	pair := host.NewRedactor([]string{"alice:hunter2-pw"})
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alice:hunter2-pw"))
	if got := strings.TrimRight(pair.String(basic), "="); got != "Authorization: Basic "+host.Redacted {
		t.Errorf("basic: %q", got)
	}
}

func TestRedactLeavesOtherTextAlone(t *testing.T) {
	rd := host.NewRedactor([]string{"s3cr3t-value", "abc", ""})
	text := []byte(`{"user":"abc","note":"nothing secret here","n":[1,2,3]}`)
	if got := rd.Bytes(text); &got[0] != &text[0] {
		t.Error("Bytes copied a text without secrets")
	}
	if got := rd.String(string(text)); got != string(text) {
		t.Errorf("short values are not secrets: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { rd.Bytes(text) }); n != 0 {
		t.Errorf("%v allocations for a text without secrets", n)
	}
	var none *host.Redactor
	if none.String("x") != "x" || host.NewRedactor(nil).String("[REDACTED]") != "[REDACTED]" {
		t.Error("a redactor without secrets changed a text")
	}
	// The mark's own text is never a secret: redacting stays idempotent.
	mark := host.NewRedactor([]string{"REDACTED", "EDAC"})
	if got := mark.String("[REDACTED]"); got != "[REDACTED]" {
		t.Errorf("mark: %q", got)
	}
}

// A form that matches across a JSON escape must not leave invalid JSON.
func TestRedactJSONStaysValid(t *testing.T) {
	rd := host.NewRedactor([]string{`abc\`, "tok3n-value"})
	for _, doc := range []string{
		`{"a":"xabc\"d","b":1}`,
		`{"a":"xabc\\","b":"tok3n-value"}`,
		`["abc\\"]`,
		`{"tok3n-value":"k"}`,
	} {
		got := rd.JSON(json.RawMessage(doc))
		if !json.Valid(got) || strings.Contains(string(got), "tok3n-value") || strings.Contains(string(got), `abc\`) {
			t.Errorf("%s → %s", doc, got)
		}
	}
	if got := rd.JSON(json.RawMessage(`{"a":"abc"}`)); string(got) != `{"a":"abc"}` {
		t.Errorf("unchanged: %s", got)
	}
}

// FuzzRedact checks the redactor's promises on any secrets and text: the
// output holds no covered form of a secret, redacting again changes
// nothing, a text without secret forms is returned unchanged, and valid
// JSON stays valid.
func FuzzRedact(f *testing.F) {
	f.Add("s3cr3t-token", "alice:hunter2", `{"error":"bad token s3cr3t-token"}`, 0)
	f.Add(`p@ss"w<rd>&+/`, "key=AIza0123", `Basic YWxpY2U6aHVudGVyMg==`, 1)
	f.Add("ünïcødé-pw", "tab\there", `<fault>ünïcødé-pw</fault>`, 2)
	f.Add("abcd", "bcde", "abcdebcdabcd", 1)
	f.Add("REDACTED", "[x]", "[REDACTED] [x]", 0)
	f.Fuzz(func(t *testing.T, s1, s2, text string, align int) {
		if len(s1) > 64 || len(s2) > 64 || len(text) > 512 {
			return
		}
		rd := host.NewRedactor([]string{s1, s2})
		var secrets []string
		brackets := false
		for _, s := range []string{s1, s2} {
			if len(s) >= host.MinSecretLength && !strings.Contains(host.Redacted, s) {
				secrets = append(secrets, s)
				brackets = brackets || strings.ContainsAny(s, "[]")
			}
		}
		out := rd.String(text)
		if b := rd.Bytes([]byte(text)); string(b) != out {
			t.Fatalf("Bytes and String differ: %q, %q", b, out)
		}
		present := false
		for _, s := range secrets {
			for _, f := range host.SecretForms(s) {
				present = present || len(f) >= host.MinSecretLength && !strings.Contains(host.Redacted, f) && strings.Contains(text, f)
			}
		}
		if !present && out != text {
			t.Fatalf("a text without secrets changed: %q → %q", text, out)
		}
		if json.Valid([]byte(text)) && !json.Valid(rd.JSON(json.RawMessage(text))) {
			t.Fatalf("JSON %q became invalid: %s", text, rd.JSON(json.RawMessage(text)))
		}
		// A secret next to the mark may form a new secret with it: the
		// remaining properties hold for secrets without brackets.
		if brackets {
			return
		}
		if again := rd.String(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", text, out, again)
		}
		for _, s := range secrets {
			for name, e := range encodings(s) {
				if strings.Contains(host.Redacted, e) {
					continue
				}
				if got := rd.String(text + e + text); strings.Contains(got, e) {
					t.Fatalf("%q as %s %q survives in %q", s, name, e, got)
				}
			}
			if len(s) >= 5 {
				prefix := text[:min(len(text), align&3)]
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
					run := base64Run(enc, prefix, s, text)
					if got := rd.String(enc.EncodeToString([]byte(prefix + s + text))); strings.Contains(got, run) {
						t.Fatalf("%q inside base64 after %q: %q survives in %q", s, prefix, run, got)
					}
				}
			}
		}
	})
}
