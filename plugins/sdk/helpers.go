package sdk

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
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

// DefaultMaxCachedConfigs bounds a ConfigCache without Max.
const DefaultMaxCachedConfigs = 512

// ConfigCache memoises parsed operation configs keyed by their raw bytes,
// so the call path does not parse a config again. Reads take no lock (an
// immutable map behind an atomic pointer); a miss parses and publishes a
// copy. It is bounded: when full it starts over. Safe for concurrent use.
type ConfigCache[T any] struct {
	// Parse turns a raw config into T; called about once per distinct
	// config.
	Parse func(raw []byte) T
	// Max bounds the number of configs held; DefaultMaxCachedConfigs when 0.
	Max int

	mu sync.Mutex
	m  atomic.Pointer[map[string]T]
}

// Get returns the parsed form of raw.
func (c *ConfigCache[T]) Get(raw []byte) T {
	if m := c.m.Load(); m != nil {
		if p, ok := (*m)[string(raw)]; ok {
			return p
		}
	}
	p := c.Parse(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]T
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if q, ok := old[string(raw)]; ok {
		return q
	}
	limit := c.Max
	if limit <= 0 {
		limit = DefaultMaxCachedConfigs
	}
	var n map[string]T
	if len(old) >= limit {
		n = make(map[string]T, 1)
	} else {
		n = make(map[string]T, len(old)+1)
		for k, v := range old {
			n[k] = v
		}
	}
	n[string(raw)] = p
	c.m.Store(&n)
	return p
}

// Len is the number of configs held.
func (c *ConfigCache[T]) Len() int {
	if m := c.m.Load(); m != nil {
		return len(*m)
	}
	return 0
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
