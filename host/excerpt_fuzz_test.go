package host

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
)

// FuzzExcerpt puts a secret at every offset of an upstream's answer
// around the excerpt's bound and cuts the answer as the SDK does
// (sdk.Excerpt: sdk.ExcerptBytes and the host's margin, then the note):
// what the host shows of it (excerpt) never holds 4 characters of the
// secret in a row, and keeps the answer's text up to the secret.
func FuzzExcerpt(f *testing.F) {
	f.Add("qjkzvxgpqjkzvxgpqjkzvxgpqjkzvxg", "abc", 0)
	f.Add("zz9$", "", 7)
	f.Add("v\u00e9x\u00e9q\u00e9j", "\u00e9", 300)
	f.Fuzz(func(t *testing.T, secret, filler string, tail int) {
		// The secret's characters are none of the filler's, the mark's or
		// the note's, so that 4 of them in a row are a leak.
		secret = strings.Map(func(r rune) rune {
			if strings.ContainsRune(redact.Mark+sdk.TruncatedNote+". ", r) || r < ' ' {
				return -1
			}
			return r
		}, secret)
		filler = strings.Map(func(r rune) rune {
			if strings.ContainsRune(secret, r) {
				return '.'
			}
			return r
		}, filler)
		if len(secret) < redact.MinSecretLength || len(secret) > 256 || filler == "" {
			return
		}
		rs := redact.Chain{redact.New([]string{secret})}
		margin := rs.Longest()
		pad := strings.Repeat(filler, (sdk.ExcerptBytes+margin)/len(filler)+1)
		for at := sdk.ExcerptBytes - len(secret) - 4; at <= sdk.ExcerptBytes+margin; at++ {
			if at < 0 {
				continue
			}
			answer := pad[:at] + secret + strings.Repeat(".", max(0, tail%4096))
			got := excerpt(rs, sdkCut(answer, margin))
			for i := 0; i+redact.MinSecretLength <= len(secret); i++ {
				if run := secret[i : i+redact.MinSecretLength]; strings.Contains(got, run) {
					t.Fatalf("secret at %d: %q shows in the excerpt's end %q", at, run, got[max(0, len(got)-120):])
				}
			}
			if kept := backToRune(answer, min(at, sdk.ExcerptBytes)); !strings.HasPrefix(got, answer[:kept]) {
				t.Fatalf("secret at %d: the text before it is not kept", at)
			}
		}
	})
}

// sdkCut is sdk.Excerpt of answer for a call whose margin is margin.
func sdkCut(answer string, margin int) string {
	limit := sdk.ExcerptBytes + margin
	if len(answer) <= limit {
		return answer
	}
	return answer[:backToRune(answer, limit)] + sdk.TruncatedNote
}

// backToRune is n, or less, at the start of a UTF-8 sequence of s.
func backToRune(s string, n int) int {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return n
}
