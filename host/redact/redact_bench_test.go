package redact_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/redact"
)

// BenchmarkRedact measures the redaction every result, error and stored
// record goes through, on a JSON answer of 4 KiB and of 1 MiB: without
// secrets, with three secrets none of which occurs (the common case), and
// with one occurring once. "baseline" is the redactor before encoded
// forms were covered (one strings.Replacer of the exact secrets, entered
// when bytes.Contains finds one), in the same run.
func BenchmarkRedact(b *testing.B) {
	secrets := []string{"sk-live-4f9a8b7c6d5e4f3a2b1c", "hunter2-Pa55word!", "https://hooks.example.com/services/T0/B0/XyZ"}
	for _, size := range []int{4 << 10, 1 << 20} {
		clean := benchDocument(size)
		dirty := bytes.Replace(clean, []byte(`"note-7"`), []byte(`"token sk-live-4f9a8b7c6d5e4f3a2b1c"`), 1)
		if bytes.Equal(clean, dirty) {
			b.Fatal("no note to replace")
		}
		for _, c := range []struct {
			name string
			doc  []byte
			sec  []string
		}{
			{"none", clean, nil},
			{"clean", clean, secrets},
			{"secret", dirty, secrets},
		} {
			for _, impl := range []struct {
				name  string
				bytes func([]byte) []byte
			}{
				{"baseline", newBaselineRedactor(c.sec).Bytes},
				{"redactor", redact.New(c.sec).Bytes},
			} {
				b.Run(fmt.Sprintf("%dKiB/%s/%s", size>>10, c.name, impl.name), func(b *testing.B) {
					b.SetBytes(int64(len(c.doc)))
					b.ReportAllocs()
					for b.Loop() {
						impl.bytes(c.doc)
					}
				})
			}
		}
	}
}

// benchDocument is a JSON array of records, about size bytes.
func benchDocument(size int) []byte {
	b := []byte{'['}
	for n := 0; len(b) < size; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		item, _ := json.Marshal(map[string]any{"id": n, "name": fmt.Sprintf("user %d", n), "email": fmt.Sprintf("user%d@example.com", n),
			"note": fmt.Sprintf("note-%d", n), "tags": []string{"alpha", "beta"}, "score": float64(n) * 1.5})
		b = append(b, item...)
	}
	return append(b, ']')
}

// baselineRedactor is the redactor as it was before encoded forms were
// covered: the exact secrets only.
type baselineRedactor struct {
	secrets [][]byte
	r       *strings.Replacer
}

func newBaselineRedactor(secrets []string) *baselineRedactor {
	s := slices.Clone(secrets)
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	rd := &baselineRedactor{}
	var pairs []string
	for _, v := range s {
		rd.secrets = append(rd.secrets, []byte(v))
		pairs = append(pairs, v, redact.Mark)
	}
	if len(pairs) > 0 {
		rd.r = strings.NewReplacer(pairs...)
	}
	return rd
}

func (rd *baselineRedactor) Bytes(b []byte) []byte {
	if rd.r == nil {
		return b
	}
	for _, s := range rd.secrets {
		if bytes.Contains(b, s) {
			return []byte(rd.r.Replace(string(b)))
		}
	}
	return b
}
