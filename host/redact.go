package host

import (
	"bytes"
	"slices"
	"strings"
)

// Redacted replaces a secret wherever one would surface.
const Redacted = "[REDACTED]"

// Redactor replaces known secret values (the values placeholders expanded
// to) in text bound for results, errors and logs.
type Redactor struct {
	secrets [][]byte
	r       *strings.Replacer
}

// NewRedactor returns a redactor for the given secret values.
func NewRedactor(secrets []string) *Redactor {
	// Longest first, so a secret containing another is replaced whole.
	s := slices.Clone(secrets)
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	rd := &Redactor{}
	var pairs []string
	for _, v := range s {
		if v == "" {
			continue
		}
		rd.secrets = append(rd.secrets, []byte(v))
		pairs = append(pairs, v, Redacted)
	}
	if len(pairs) > 0 {
		rd.r = strings.NewReplacer(pairs...)
	}
	return rd
}

// String redacts s.
func (rd *Redactor) String(s string) string {
	if rd == nil || rd.r == nil {
		return s
	}
	return rd.r.Replace(s)
}

// Bytes redacts b, returning b itself when it holds no secret.
func (rd *Redactor) Bytes(b []byte) []byte {
	if rd == nil || rd.r == nil {
		return b
	}
	for _, s := range rd.secrets {
		if bytes.Contains(b, s) {
			return []byte(rd.r.Replace(string(b)))
		}
	}
	return b
}
