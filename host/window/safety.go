package window

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"unicode/utf8"

	"github.com/crankmcp/crank/host/redact"
)

// The safety layer of a window: every item passes through it right where
// it leaves the adapter, before it is counted, aggregated, sent as
// progress or written anywhere. Order: redaction (redacted_paths, and the
// secret values in every string max_field_length cuts, so that a cut
// through a secret cannot leave a part of it that redaction no longer
// recognises), field truncation (max_field_length), duplicate dropping,
// then sampling. Strings that are not cut keep their secrets whole, and
// the redaction of everything the item reaches (a result, a progress
// message, a stored session item) replaces them there.

// truncatedMark ends a string cut by max_field_length.
func truncatedMark(cut int) string {
	return "…[truncated " + strconv.Itoa(cut) + " bytes]"
}

// truncateStrings cuts every string in v longer than limit bytes (at a
// rune boundary) and marks it, after redacting it with rs. It returns the
// new value and how many strings it cut; objects and arrays are changed
// in place.
func truncateStrings(v any, limit int, rs redact.Chain) (any, int) {
	switch t := v.(type) {
	case string:
		if len(t) <= limit {
			return t, 0
		}
		if t = rs.Decoded(t); len(t) <= limit {
			return t, 0
		}
		cut := limit
		for cut > 0 && !utf8.RuneStart(t[cut]) {
			cut--
		}
		return t[:cut] + truncatedMark(len(t)-cut), 1
	case map[string]any:
		n := 0
		for k, e := range t {
			if s, ok := e.(string); ok && len(s) <= limit {
				continue
			}
			nv, c := truncateStrings(e, limit, rs)
			t[k] = nv
			n += c
		}
		return t, n
	case []any:
		n := 0
		for i, e := range t {
			if s, ok := e.(string); ok && len(s) <= limit {
				continue
			}
			nv, c := truncateStrings(e, limit, rs)
			t[i] = nv
			n += c
		}
		return t, n
	}
	return v, 0
}

// dedupe remembers the items of one window by a 64-bit hash of their
// final JSON (after redaction and truncation, so equal-looking items are
// equal). It holds at most one entry per counted item.
type dedupe struct {
	seed maphash.Seed
	seen map[uint64]struct{}
}

func newDedupe() *dedupe {
	return &dedupe{seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

// firstTime records an item and reports whether it is new.
func (d *dedupe) firstTime(item []byte) bool {
	h := maphash.Bytes(d.seed, item)
	if _, ok := d.seen[h]; ok {
		return false
	}
	d.seen[h] = struct{}{}
	return true
}

// sampler keeps items at a rate, deterministically and evenly spaced: of
// n items it keeps floor(n*rate), the k-th kept being the first whose
// running count reaches k/rate.
type sampler struct {
	rate float64
	seen int
}

func (s *sampler) keep() bool {
	if s.rate >= 1 {
		return true
	}
	s.seen++
	return int(float64(s.seen)*s.rate) > int(float64(s.seen-1)*s.rate)
}

// mayNeedTruncation reports whether raw JSON can hold a string longer than
// limit bytes: a value no longer than limit cannot.
func mayNeedTruncation(raw []byte, limit int) bool {
	return limit > 0 && len(raw) > limit
}

// isJSONArray reports whether raw is a JSON array.
func isJSONArray(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '['
}
