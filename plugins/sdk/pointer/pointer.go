// Package pointer is Crank's one JSON Pointer (RFC 6901) helper: a
// member name escaped into a pointer segment and back, segments joined
// and split, and the dotted paths of older diagnostics turned into
// pointers. The gateway's packages and the adapters share it.
package pointer

import "strings"

// Key escapes a member name (or an index) as one pointer segment: "~" as
// "~0", "/" as "~1".
func Key(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// Unkey is the member name a pointer segment escapes.
func Unkey(seg string) string {
	if !strings.Contains(seg, "~") {
		return seg
	}
	return strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
}

// Join is the pointer of the member names keys below base, each escaped.
func Join(base string, keys ...string) string {
	var b strings.Builder
	b.WriteString(base)
	for _, k := range keys {
		b.WriteString("/")
		b.WriteString(Key(k))
	}
	return b.String()
}

// Split is the member names of a pointer's segments, unescaped; nil for
// the whole document ("").
func Split(ptr string) []string {
	if ptr == "" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, s := range segs {
		segs[i] = Unkey(s)
	}
	return segs
}

// FromDotted turns a dotted path as diagnostics of older adapters name a
// field ("headers[0]", "paths./users", "stream.max_event_bytes") into a
// pointer ("/headers/0", "/paths/~1users", ...). A member name holding a
// dot is ambiguous in such a path: it splits there.
func FromDotted(field string) string {
	var b strings.Builder
	for seg := range strings.SplitSeq(field, ".") {
		for seg != "" {
			key, rest, _ := strings.Cut(seg, "[")
			if key != "" {
				b.WriteString("/" + Key(key))
			}
			if rest == "" {
				break
			}
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				b.WriteString("/" + Key("["+rest))
				break
			}
			b.WriteString("/" + Key(idx))
			seg = after
		}
	}
	return b.String()
}
