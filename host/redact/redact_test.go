package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/host/redact/redacttest"
)

func TestRedactEncodedForms(t *testing.T) {
	secrets := []string{`p@ss"w<rd>&x+y/z= ~'é`, "sk-live-0123456789abcdef", "alice", "hunter2-pw"}
	rd := redact.New(secrets)
	for _, s := range secrets {
		for name, e := range redacttest.Encodings(s) {
			text := "before " + e + " after"
			if got := rd.String(text); strings.Contains(got, e) || got != "before "+redact.Mark+" after" &&
				!strings.HasPrefix(name, "base64") {
				t.Errorf("%q as %s: %q", s, name, got)
			}
		}
	}
	// Python's json.dumps and PHP's "\/" escapes.
	for _, e := range []string{`p@ss\"w<rd>&x+y/z= ~'\u00e9`, `p@ss\"w<rd>&x+y\/z= ~'é`} {
		if got := rd.String(e); got != redact.Mark {
			t.Errorf("%q: %q", e, got)
		}
	}
	// Inside a longer base64 text, at every alignment: a Basic
	// authorization, a cursor, a token.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for _, prefix := range []string{"", "a", "ab", "abc", "user:"} {
			for _, s := range secrets {
				run := redacttest.Base64Run(enc, prefix, s, `","skip":3}`)
				text := enc.EncodeToString([]byte(prefix + s + `","skip":3}`))
				if got := rd.String(text); strings.Contains(got, run) || !strings.Contains(got, redact.Mark) {
					t.Errorf("base64 of %q+%q: %s → %s", prefix, s, text, got)
				}
			}
		}
	}
	// A pair the catalog records from username and password is one secret:
	// its Basic authorization is replaced whole.
	pair := redact.New([]string{"alice:hunter2-pw"})
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("alice:hunter2-pw"))
	if got := strings.TrimRight(pair.String(basic), "="); got != "Authorization: Basic "+redact.Mark {
		t.Errorf("basic: %q", got)
	}
}

func TestRedactLeavesOtherTextAlone(t *testing.T) {
	rd := redact.New([]string{"s3cr3t-value", "abc", ""})
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
	var none *redact.Redactor
	if none.String("x") != "x" || redact.New(nil).String("[REDACTED]") != "[REDACTED]" {
		t.Error("a redactor without secrets changed a text")
	}
	// The mark's own text is never a secret: redacting stays idempotent.
	mark := redact.New([]string{"REDACTED", "EDAC"})
	if got := mark.String("[REDACTED]"); got != "[REDACTED]" {
		t.Errorf("mark: %q", got)
	}
}

// A form that matches across a JSON escape must not leave invalid JSON.
func TestRedactJSONStaysValid(t *testing.T) {
	rd := redact.New([]string{`abc\`, "tok3n-value"})
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
		rd := redact.New([]string{s1, s2})
		var secrets []string
		brackets := false
		for _, s := range []string{s1, s2} {
			if len(s) >= redact.MinSecretLength && !strings.Contains(redact.Mark, s) {
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
			for _, f := range redact.Forms(s) {
				present = present || len(f) >= redact.MinSecretLength && !strings.Contains(redact.Mark, f) && strings.Contains(text, f)
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
			for name, e := range redacttest.Encodings(s) {
				if strings.Contains(redact.Mark, e) {
					continue
				}
				if got := rd.String(text + e + text); strings.Contains(got, e) {
					t.Fatalf("%q as %s %q survives in %q", s, name, e, got)
				}
			}
			if len(s) >= 5 {
				prefix := text[:min(len(text), align&3)]
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
					run := redacttest.Base64Run(enc, prefix, s, text)
					if got := rd.String(enc.EncodeToString([]byte(prefix + s + text))); strings.Contains(got, run) {
						t.Fatalf("%q inside base64 after %q: %q survives in %q", s, prefix, run, got)
					}
				}
			}
		}
	})
}
