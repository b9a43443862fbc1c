// Package redact replaces known secret values — the values placeholders
// expanded to — in text bound for results, errors, stored records and
// logs (docs/security.md): each secret as written and in the forms an
// upstream or an adapter may echo it in, with one scan whatever their
// number ([Redactor]); the redactors of one call applied in turn
// ([Chain]); and a text that arrives in pieces, redacted as it grows
// without showing a secret split between two of them ([Stream]). It
// reads no files and calls nothing: the runtime builds a Redactor from
// the secrets a load found and runs every path out of the host through
// it.
package redact

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/crankmcp/crank/host/jsonpath"
)

// Mark replaces a secret wherever one would surface.
const Mark = "[REDACTED]"

// MinSecretLength is the length, in bytes, below which a value is not
// treated as a secret: redacting every occurrence of a shorter string
// would garble ordinary text.
const MinSecretLength = 4

// minBase64Run is the shortest run of base64 characters matched for a
// secret encoded inside a longer base64 text: shorter runs occur by chance.
const minBase64Run = 6

// Redactor replaces known secret values (the values placeholders expanded
// to) in text bound for results, errors, stored records and logs: each
// secret as written and in the forms an upstream or an adapter may echo
// it in — JSON-escaped, URL-encoded (query and path escaping, either hex
// case), XML- and HTML-escaped, and base64 (standard and URL alphabets,
// alone or anywhere inside a longer base64 text, such as a Basic
// authorization built from a user and a password). It scans a text once
// whatever the number of secrets and forms, and costs nothing without
// secrets. A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	// pats are the forms of every secret, longest first; minLen is the
	// length of the shortest.
	pats   []string
	minLen int
	// shift is how far a scan may move on when the two bytes at the end
	// of the window it looks at are a given pair: the distance from the
	// last place they take in the first minLen bytes of any pattern (a
	// Wu-Manber scan, which skips most of a text without secrets).
	shift *[1 << 16]uint8
	// filter has a bit set for the hash of each pattern's first four
	// bytes; first maps those bytes to the patterns starting with them.
	filter *[1 << 10]uint64
	first  map[uint32][]int32
}

// New returns a redactor for the given secret values. Values shorter
// than MinSecretLength and values found inside Mark itself are not
// secrets.
func New(secrets []string) *Redactor {
	seen := map[string]bool{}
	var pats []string
	for _, s := range secrets {
		if len(s) < MinSecretLength {
			continue
		}
		for _, f := range Forms(s) {
			if !seen[f] && len(f) >= MinSecretLength && !strings.Contains(Mark, f) {
				seen[f] = true
				pats = append(pats, f)
			}
		}
	}
	rd := &Redactor{}
	if len(pats) == 0 {
		return rd
	}
	// Longest first, so that the longest form starting at a position wins
	// (a secret containing another is replaced whole); then by text, so
	// that the order does not depend on the order of the secrets.
	slices.SortFunc(pats, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	rd.pats, rd.minLen = pats, len(pats[len(pats)-1])
	rd.shift = new([1 << 16]uint8)
	for i := range rd.shift {
		rd.shift[i] = uint8(min(rd.minLen-1, 255))
	}
	rd.filter = new([1 << 10]uint64)
	rd.first = map[uint32][]int32{}
	for i, p := range pats {
		for j := 1; j < rd.minLen; j++ {
			if s := uint8(min(rd.minLen-1-j, 255)); s < rd.shift[pair(p[j-1], p[j])] {
				rd.shift[pair(p[j-1], p[j])] = s
			}
		}
		k := binary.LittleEndian.Uint32([]byte(p[:4]))
		h := filterHash(k)
		rd.filter[h>>6] |= 1 << (h & 63)
		rd.first[k] = append(rd.first[k], int32(i))
	}
	return rd
}

func pair(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

func filterHash(k uint32) uint32 { return (k * 0x9E3779B1) >> 16 }

// find returns the position and length of the first secret form in b at
// or after from (the longest one starting there), or -1.
func (rd *Redactor) find(b []byte, from int) (int, int) {
	m := rd.minLen
	for end := from + m - 1; end < len(b); {
		if s := rd.shift[pair(b[end-1], b[end])]; s != 0 {
			end += int(s)
			continue
		}
		// The window b[i:end+1] may start a pattern.
		i := end + 1 - m
		end++
		k := binary.LittleEndian.Uint32(b[i : i+4])
		if h := filterHash(k); rd.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, p := range rd.first[k] {
			if pat := rd.pats[p]; len(b)-i >= len(pat) && string(b[i:i+len(pat)]) == pat {
				return i, len(pat)
			}
		}
	}
	return -1, 0
}

// redact returns b with every secret form replaced, and whether there was
// one; b itself when there was none.
func (rd *Redactor) redact(b []byte) ([]byte, bool) {
	if rd == nil || rd.filter == nil {
		return b, false
	}
	at, n := rd.find(b, 0)
	if at < 0 {
		return b, false
	}
	out := make([]byte, 0, len(b)+len(Mark))
	last := 0
	for at >= 0 {
		out = append(append(out, b[last:at]...), Mark...)
		last = at + n
		at, n = rd.find(b, last)
	}
	return append(out, b[last:]...), true
}

// String redacts s, returning s itself when it holds no secret.
func (rd *Redactor) String(s string) string {
	if rd == nil || rd.filter == nil || len(s) < MinSecretLength {
		return s
	}
	// A read-only view of s: redact never writes to its input.
	out, changed := rd.redact(unsafe.Slice(unsafe.StringData(s), len(s)))
	if !changed {
		return s
	}
	return string(out)
}

// Bytes redacts b, returning b itself when it holds no secret.
func (rd *Redactor) Bytes(b []byte) []byte {
	out, _ := rd.redact(b)
	return out
}

// JSON redacts a JSON text, returning raw itself when it holds no secret.
// Secret forms are replaced as text, which keeps the text as it was
// around them. Should that leave the text invalid (a form that matched
// across a JSON escape), the document is redacted value by value instead:
// every string, member names included, is decoded and redacted, and
// replaced whole when its encoding would still show a secret form; a
// document that cannot be saved even so becomes the string Mark.
func (rd *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	out, _ := rd.JSONFound(raw)
	return out
}

// JSONFound is JSON, reporting whether there was a secret.
func (rd *Redactor) JSONFound(raw json.RawMessage) (json.RawMessage, bool) {
	out, changed := rd.redact(raw)
	if !changed || json.Valid(out) {
		return out, changed
	}
	v, err := jsonpath.Decode(raw)
	if err != nil {
		return out, true // it was not valid JSON before either
	}
	if out, _ = rd.redact(jsonpath.Encode(rd.redactValue(v))); json.Valid(out) {
		return out, true
	}
	return json.RawMessage(`"` + Mark + `"`), true
}

// redactValue redacts every string of a decoded JSON value in place.
func (rd *Redactor) redactValue(v any) any {
	switch t := v.(type) {
	case string:
		return rd.redactString(t)
	case []any:
		for i, e := range t {
			t[i] = rd.redactValue(e)
		}
	case map[string]any:
		for k, e := range t {
			if rk := rd.redactString(k); rk != k {
				delete(t, k)
				k = rk
			}
			t[k] = rd.redactValue(e)
		}
	}
	return v
}

// redactString redacts a decoded JSON string: Mark when its encoding
// would still show a secret form.
func (rd *Redactor) redactString(s string) string {
	s = rd.String(s)
	if _, hit := rd.redact(jsonpath.Encode(s)); hit {
		return Mark
	}
	return s
}

// Chain is the redactors of one call, applied in turn: the host's (the
// secrets its operations files expanded) and, for an operation with
// upstream_auth, the call's upstream credential's. A nil entry redacts
// nothing.
type Chain []*Redactor

// String redacts s with every redactor.
func (rs Chain) String(s string) string {
	for _, rd := range rs {
		s = rd.String(s)
	}
	return s
}

// JSON redacts a JSON text with every redactor.
func (rs Chain) JSON(raw json.RawMessage) json.RawMessage {
	for _, rd := range rs {
		raw = rd.JSON(raw)
	}
	return raw
}

// Decoded redacts a decoded JSON string with every redactor (Mark when
// its encoding would still show a secret form).
func (rs Chain) Decoded(s string) string {
	for _, rd := range rs {
		if rd != nil && rd.filter != nil && len(s) >= MinSecretLength {
			s = rd.redactString(s)
		}
	}
	return s
}

// openTail returns the length of the longest end of b that begins one of
// the secret forms without completing it: a secret that text still to
// come may complete. 0 when there is none.
func (rd *Redactor) openTail(b []byte) int {
	if rd == nil || rd.filter == nil {
		return 0
	}
	for i := max(0, len(b)-len(rd.pats[0])+1); i < len(b); i++ {
		tail := b[i:]
		cands := rd.pats
		if len(tail) >= 4 {
			cands = nil
			for _, p := range rd.first[binary.LittleEndian.Uint32(tail[:4])] {
				cands = append(cands, rd.pats[p])
			}
		}
		for _, pat := range cands {
			if len(pat) > len(tail) && pat[:len(tail)] == string(tail) {
				return len(tail)
			}
		}
	}
	return 0
}

// Stream redacts a text that arrives in pieces and is shown as it
// grows (a text window's progress messages), which redacting each piece
// alone cannot do: a secret the upstream split between two pieces would
// show, half in each. It holds back the end of the text that may begin a
// secret form (or a longer one) until the rest has arrived, and lets out
// only text that no form can still straddle. Used by one goroutine.
type Stream struct {
	rs      Chain
	pending []byte
}

// Stream is a Stream redacted by the chain.
func (rs Chain) Stream() *Stream { return &Stream{rs: rs} }

// Add takes the next piece and returns the text it lets out, redacted
// ("" when it holds everything back).
func (s *Stream) Add(piece string) string {
	s.pending = append(s.pending, piece...)
	safe := s.safe()
	out := s.rs.String(string(s.pending[:safe]))
	s.pending = append(s.pending[:0], s.pending[safe:]...)
	return out
}

// Flush returns the rest of the text, redacted: the text has ended.
func (s *Stream) Flush() string {
	out := s.rs.String(string(s.pending))
	s.pending = s.pending[:0]
	return out
}

// safe is how much of the pending text may go: up to where a form may
// still begin, and never through a form it holds (whose redaction must
// see it whole).
func (s *Stream) safe() int {
	b := s.pending
	safe := len(b)
	for _, rd := range s.rs {
		safe = min(safe, len(b)-rd.openTail(b))
	}
	for moved := true; moved; {
		moved = false
		for _, rd := range s.rs {
			if rd == nil || rd.filter == nil {
				continue
			}
			for at, n := rd.find(b, 0); at >= 0 && at < safe; at, n = rd.find(b, at+n) {
				if at+n > safe {
					safe, moved = at, true
					break
				}
			}
		}
	}
	return safe
}

// Forms returns the forms in which the redactor looks for secret s:
// s itself, its escapes and encodings, and the base64 runs that stand for
// it inside a longer base64 text.
func Forms(s string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	// Plain text forms: s, its URL encodings — query (space as "+") and
	// path escaping, RFC 3986 unreserved characters only, JavaScript's
	// encodeURIComponent, with upper and lower case hex — and its XML and
	// HTML escapes.
	add(s)
	for _, f := range []string{url.QueryEscape(s), url.PathEscape(s), percentEncode(s, isUnreserved), percentEncode(s, isURIComponent)} {
		add(f)
		add(lowerHex(f))
	}
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	add(b.String())
	add(html.EscapeString(s))
	add(entityEscape(s, map[rune]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&quot;", '\'': "&apos;"}))
	add(entityEscape(s, map[rune]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&quot;", '\'': "&#x27;"}))
	add(entityEscape(s, map[rune]string{'&': "&amp;", '<': "&lt;", '>': "&gt;"}))
	add(entityEscape(s, map[rune]string{'&': "&amp;", '<': "&lt;", '"': "&quot;", '\t': "&#x9;", '\n': "&#xA;", '\r': "&#xD;"}))
	// Each plain form inside a JSON string, and inside a JSON string
	// inside a JSON string (an error body quoted in an upstream's JSON
	// answer, which the adapter encodes again), up to maxJSONDepth.
	for _, p := range slices.Clone(out) {
		for _, j := range jsonForms(p) {
			for range maxJSONDepth {
				add(j)
				j = jsonNest.Replace(j)
			}
		}
	}
	// base64 of s and of s in a JSON string (an opaque cursor).
	for _, t := range append([]string{s}, jsonForms(s)...) {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for _, f := range base64Forms(enc, t) {
				add(f)
			}
		}
	}
	return out
}

// maxJSONDepth is how many JSON strings deep a secret form is looked for.
const maxJSONDepth = 3

// jsonNest escapes a JSON string's contents once more, as every JSON
// encoder escapes them: what one escape level leaves special is a
// backslash or a quote.
var jsonNest = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// jsonForms returns s as the contents of a JSON string by the common
// encoders: Go's (with and without HTML escaping), with "\/" for "/",
// and ASCII-only with \uXXXX (Python's and others' default).
func jsonForms(s string) []string {
	forms := []string{jsonEscape(s, true), jsonEscape(s, false), strings.ReplaceAll(jsonEscape(s, false), "/", `\/`), jsonASCII(s)}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// base64Forms returns t's base64 encoding (unpadded) and, for each of the
// three alignments t may have inside a longer encoded text, the run of
// characters that encode t's bytes alone (when it is long enough not to
// occur by chance).
func base64Forms(enc *base64.Encoding, t string) []string {
	forms := []string{enc.EncodeToString([]byte(t))}
	for k := range 3 {
		// k bytes precede t: character i covers bits [6i, 6i+6) of the
		// text, t's bits are [8k, 8k+8n).
		from, to := (8*k+5)/6, (8*k+8*len(t))/6
		if to-from < minBase64Run {
			continue
		}
		buf := make([]byte, k+len(t))
		copy(buf[k:], t)
		forms = append(forms, enc.EncodeToString(buf)[from:to])
	}
	return forms
}

// jsonEscape is s as the contents of a JSON string by encoding/json.
func jsonEscape(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// jsonASCII is s as the contents of an ASCII-only JSON string: non-ASCII
// characters as \uXXXX (lower-case hex, surrogate pairs).
func jsonASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7f && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isURIComponent(c byte) bool {
	return isUnreserved(c) || strings.IndexByte("!*'()", c) >= 0
}

// percentEncode escapes every byte that keep refuses as %XX.
func percentEncode(s string, keep func(byte) bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; keep(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// lowerHex lower-cases the hex digits of the %XX escapes in s.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerByte(b[i+1]), lowerByte(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// entityEscape replaces the characters of s that m names; invalid UTF-8
// is kept as is.
func entityEscape(s string, m map[rune]string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if e, ok := m[r]; ok && w == 1 {
			b.WriteString(e)
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// Longest is the length of the longest secret form the chain redacts, 0
// when it redacts none: how much longer than its bound a text must be
// for Excerpt to see whole every secret that starts within the bound
// (sdk.Operation.ExcerptMargin).
func (rs Chain) Longest() int {
	n := 0
	for _, rd := range rs {
		if rd != nil && len(rd.pats) > 0 {
			n = max(n, len(rd.pats[0]))
		}
	}
	return n
}

// Excerpt is s redacted and cut to its first bound bytes as written, and
// whether it cut: every secret form that starts within the bound is
// replaced whole, and the text from the bound on is dropped, partial
// secrets and all. Forms are found in s itself, before the cut, so no cut
// leaves part of a secret behind when s runs on past the bound by at
// least Longest bytes (or ends). The cut falls on a UTF-8 boundary.
func (rs Chain) Excerpt(s string, bound int) (string, bool) {
	type span struct{ at, end int }
	var spans []span
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for _, rd := range rs {
		if rd == nil || rd.filter == nil {
			continue
		}
		for at, n := rd.find(b, 0); at >= 0 && at < bound; at, n = rd.find(b, at+n) {
			spans = append(spans, span{at, at + n})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Or(a.at-b.at, b.end-a.end) })
	var out strings.Builder
	last := 0
	for _, sp := range spans {
		if sp.at < last {
			last = max(last, sp.end) // overlaps the one replaced already
			continue
		}
		out.WriteString(s[last:sp.at])
		out.WriteString(Mark)
		last = sp.end
	}
	cut := len(s) > max(bound, last)
	if last < bound {
		end := min(bound, len(s))
		for end > last && end < len(s) && !utf8.RuneStart(s[end]) {
			end--
		}
		out.WriteString(s[last:end])
	}
	return out.String(), cut
}
