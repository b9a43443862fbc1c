package redact

import (
	"strings"
	"testing"
)

// FuzzRedactedStream splits a text into pieces at arbitrary places: what
// the stream lets out, joined, is the text redacted whole, and no piece
// it lets out holds a part of a secret that the pieces around it would
// complete (every piece is the redaction of whole text).
func FuzzRedactedStream(f *testing.F) {
	f.Add("...SK9Q7XW2MZ4PLR8TVN3KHB6JC5DF0GY...", 5, 3, 17)
	f.Add("abcdabcdefabc", 1, 2, 3)
	f.Add("xxabcd", 2, 2, 2)
	f.Add("tok%22en tok\"en", 4, 9, 1)
	secrets := []string{"SK9Q7XW2MZ4PLR8TVN3KHB6JC5DF0GY", "abcd", "abcdef", `tok"en`}
	rs := Chain{New(secrets[:2]), New(secrets[2:])}
	f.Fuzz(func(t *testing.T, text string, a, b, c int) {
		if len(text) > 1<<12 {
			return
		}
		s := rs.Stream()
		var outs []string
		rest := text
		for _, n := range []int{a, b, c, len(text)} {
			n = min(max(n, 0), len(rest))
			if out := s.Add(rest[:n]); out != "" {
				outs = append(outs, out)
			}
			rest = rest[n:]
		}
		if out := s.Flush(); out != "" {
			outs = append(outs, out)
		}
		joined := strings.Join(outs, "")
		if want := rs.String(text); joined != want {
			t.Fatalf("pieces %q join to %q, want %q", outs, joined, want)
		}
		for _, out := range outs {
			if rs.String(out) != out {
				t.Fatalf("piece %q holds a secret", out)
			}
		}
	})
}
