package sdk

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Patterns for every client.
//
// A JSON Schema "pattern" is an ECMA-262 regular expression, and the
// clients that check a tool's arguments compile it as JavaScript does —
// with the u flag (ajv, and so every TypeScript client). The gateway
// checks the same arguments with Go's regexp. API descriptions carry
// patterns of other dialects: OpenAPI documents written for PCRE or Go
// (`\-` outside a class, `[\w-.]`, `\_`, `\Z`, `(?P<n>…)`), XSD facets
// (anchored, with \i, \c, `^` and `$` as plain characters), .proto rules in
// RE2. PortablePattern turns such a pattern into one that both engines
// compile and that means the same, or says why it cannot (the schema then
// leaves the pattern out, with a warning): a pattern no engine of both
// can check (lookaround, backreferences, inline flags, Unicode scripts and
// blocks, class subtraction) is dropped, never published broken.

// PatternFlavor is the regular-expression dialect a pattern is written
// in.
type PatternFlavor int

const (
	// PatternECMA is JSON Schema's and OpenAPI's dialect (ECMA-262), as
	// documents write it: escapes other engines accept are taken as they
	// mean there.
	PatternECMA PatternFlavor = iota
	// PatternRE2 is Go's regexp (RE2): protobuf rules, Go-written
	// documents.
	PatternRE2
	// PatternXSD is XML Schema's pattern facet: the pattern matches the
	// whole value, and \i, \c and multi-character escapes are XML's.
	PatternXSD
)

// PortablePattern returns pattern, written in flavor, as a pattern that
// compiles both as ECMA-262 with the u flag and with Go's regexp, with the
// same meaning (an XSD pattern anchored, as XSD matches it). The error
// says why it cannot: the caller leaves the pattern out and warns.
func PortablePattern(pattern string, flavor PatternFlavor) (string, error) {
	if !utf8.ValidString(pattern) {
		return "", fmt.Errorf("pattern %q is not UTF-8 text", pattern)
	}
	t := &patternTranslator{src: []rune(pattern), flavor: flavor}
	if err := t.translate(); err != nil {
		return "", fmt.Errorf("pattern %q is left out: %v", pattern, err)
	}
	out := t.out.String()
	if flavor == PatternXSD {
		out = "^(?:" + out + ")$"
	}
	if _, err := regexp.Compile(out); err != nil {
		return "", fmt.Errorf("pattern %q is left out: Go's regexp cannot compile it: %v", pattern, err)
	}
	return out, nil
}

type patternTranslator struct {
	src    []rune
	i      int
	flavor PatternFlavor
	out    strings.Builder
	depth  int
	// atom: what was written last can take a quantifier; atomAt is where
	// in out it starts, groups where the open groups start.
	atom   bool
	atomAt int
	groups []int
}

// begin notes that an atom starts at the end of out.
func (t *patternTranslator) begin() { t.atomAt = t.out.Len() }

// peek is the rune at i+k, or -1 past the end.
func (t *patternTranslator) peek(k int) rune {
	if t.i+k < len(t.src) {
		return t.src[t.i+k]
	}
	return -1
}

func (t *patternTranslator) translate() error {
	for t.i < len(t.src) {
		r := t.src[t.i]
		t.i++
		switch r {
		case '\\':
			if err := t.escape(); err != nil {
				return err
			}
		case '[':
			t.begin()
			if err := t.class(); err != nil {
				return err
			}
			t.atom = true
		case '(':
			t.groups = append(t.groups, t.out.Len())
			if err := t.group(); err != nil {
				return err
			}
		case ')':
			if t.depth == 0 {
				return fmt.Errorf("an unmatched )")
			}
			t.depth--
			t.out.WriteByte(')')
			t.atomAt, t.groups = t.groups[len(t.groups)-1], t.groups[:len(t.groups)-1]
			t.atom = true
		case '|':
			t.out.WriteByte('|')
			t.atom = false
		case '*', '+', '?':
			if err := t.quantifier(string(r)); err != nil {
				return err
			}
		case '{':
			q, ok, err := t.braces()
			switch {
			case err != nil:
				return err
			case ok:
				if err := t.quantifier(q); err != nil {
					return err
				}
			default:
				t.literal('{')
			}
		case '^', '$':
			if t.flavor == PatternXSD { // no anchors in XSD: plain characters
				t.literal(r)
				continue
			}
			t.out.WriteRune(r)
			t.atom = false
		case '.':
			t.begin()
			if t.flavor == PatternXSD {
				t.out.WriteString(`[^\n\r]`)
			} else {
				t.out.WriteByte('.')
			}
			t.atom = true
		default:
			t.literal(r)
		}
	}
	if t.depth > 0 {
		return fmt.Errorf("an unclosed (")
	}
	return nil
}

// quantifier writes q (*, +, ?, {n,m}) after an atom, and a lazy ? after
// it (not in XSD).
func (t *patternTranslator) quantifier(q string) error {
	if !t.atom {
		return fmt.Errorf("%s repeats nothing", q)
	}
	t.out.WriteString(q)
	t.atom = false
	switch t.peek(0) {
	case '?':
		if t.flavor != PatternXSD {
			t.out.WriteByte('?')
			t.i++
		}
	case '+':
		if t.flavor != PatternXSD {
			return fmt.Errorf("possessive quantifiers (%s+) exist in neither JavaScript nor Go", q)
		}
	}
	return nil
}

// braces reads a {n}, {n,}, {n,m} or {,m} quantifier after the {, as the
// quantifier to write ({,m} as {0,m}); ok is false for a { that starts
// none (a plain character).
func (t *patternTranslator) braces() (q string, ok bool, err error) {
	j := t.i
	num := func() (string, bool) {
		k := j
		for j < len(t.src) && t.src[j] >= '0' && t.src[j] <= '9' {
			j++
		}
		return string(t.src[k:j]), j > k
	}
	lo, hasLo := num()
	hi, hasHi, comma := "", false, false
	if j < len(t.src) && t.src[j] == ',' {
		comma = true
		j++
		hi, hasHi = num()
	}
	if j >= len(t.src) || t.src[j] != '}' || !hasLo && !hasHi || !hasLo && t.flavor == PatternXSD {
		return "", false, nil
	}
	if !hasLo {
		lo = "0"
	}
	n, err1 := strconv.Atoi(lo)
	m, err2 := strconv.Atoi(hi)
	if err1 != nil || hasHi && err2 != nil {
		return "", false, fmt.Errorf("{%s} repeats too often", string(t.src[t.i:j]))
	}
	if hasHi && m < n {
		return "", false, fmt.Errorf("{%s} repeats at least more than at most", string(t.src[t.i:j]))
	}
	t.i = j + 1
	if !comma {
		m, hasHi = n, true
	}
	return t.repeat(n, m, hasHi)
}

// maxRepeat is the most a repeat of Go's regexp may count.
const maxRepeat = 1000

// repeat is the quantifier {n,m} ({n,} without hasHi), written as Go
// takes it: a count over maxRepeat repeats the atom in pieces of at most
// maxRepeat (a{1,2500} as a{1,1000}a{0,1000}a{0,500}), which JavaScript
// reads alike; the last piece is the quantifier returned.
func (t *patternTranslator) repeat(n, m int, hasHi bool) (string, bool, error) {
	q := func(lo, hi int, bounded bool) string {
		switch {
		case !bounded:
			return "{" + strconv.Itoa(lo) + ",}"
		case lo == hi:
			return "{" + strconv.Itoa(lo) + "}"
		}
		return "{" + strconv.Itoa(lo) + "," + strconv.Itoa(hi) + "}"
	}
	if n <= maxRepeat && (!hasHi || m <= maxRepeat) {
		return q(n, m, hasHi), true, nil
	}
	if !t.atom {
		return "", false, fmt.Errorf("a repeat of nothing")
	}
	if n > 20*maxRepeat || hasHi && m > 20*maxRepeat {
		return "", false, fmt.Errorf("{%d,%d} repeats more than Go's regexp can (a repeat counts at most %d)", n, m, maxRepeat)
	}
	atom := t.out.String()[t.atomAt:]
	for n > maxRepeat || hasHi && m > maxRepeat {
		lo, hi := min(n, maxRepeat), maxRepeat
		t.out.WriteString(q(lo, hi, true) + atom)
		n -= lo
		m -= hi
	}
	return q(n, m, hasHi), true, nil
}

// group writes a group after its (: a capture or not, its name dropped
// (a pattern only matches); lookaround and inline flags refused.
func (t *patternTranslator) group() error {
	t.depth++
	t.atom = false
	if t.peek(0) != '?' || t.flavor == PatternXSD {
		t.out.WriteByte('(')
		return nil
	}
	switch {
	case t.peek(1) == ':':
		t.i += 2
		t.out.WriteString("(?:")
		return nil
	case t.peek(1) == '=' || t.peek(1) == '!' || t.peek(1) == '<' && (t.peek(2) == '=' || t.peek(2) == '!'):
		return fmt.Errorf("lookaround: Go's regexp has none")
	case t.peek(1) == '<' || t.peek(1) == 'P' && t.peek(2) == '<' || t.peek(1) == '\'':
		end := '>'
		if t.peek(1) == '\'' {
			end = '\''
		}
		for j := t.i + 2; j < len(t.src); j++ {
			if t.src[j] == end {
				t.i = j + 1
				t.out.WriteByte('(')
				return nil
			}
		}
		return fmt.Errorf("a group name without its end")
	case t.peek(1) == '>':
		return fmt.Errorf("atomic groups exist in neither JavaScript nor Go")
	}
	return fmt.Errorf("inline flags or modifiers ((?%c…): JavaScript has none that Go shares", t.peek(1))
}

// literal writes r as a character that matches itself outside a class.
func (t *patternTranslator) literal(r rune) {
	t.begin()
	if strings.ContainsRune(syntaxChars, r) {
		t.out.WriteByte('\\')
		t.out.WriteRune(r)
	} else {
		t.out.WriteString(charText(r))
	}
	t.atom = true
}

// charText is r as both dialects read it as itself (controls escaped).
func charText(r rune) string {
	switch r {
	case '\t':
		return `\t`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\f':
		return `\f`
	case '\v':
		return `\v`
	}
	if r < 0x20 || r == 0x7f {
		return fmt.Sprintf(`\x%02X`, r)
	}
	return string(r)
}

// XSD's escapes of character sets, as sets both dialects read alike
// (without their brackets): \w is every character but punctuation,
// separators and others; \i and \c XML's name start and name characters.
var xsdSets = map[rune]string{
	'd': `\p{Nd}`, 'w': `\p{L}\p{M}\p{N}\p{S}`, 'W': `\p{P}\p{Z}\p{C}`, 's': ` \t\n\r`,
	'i': `_:\p{L}`, 'c': `\-._:\p{L}\p{M}\p{Nd}·`,
}

// xsdNegated are the escapes whose sets are the complements of xsdSets'.
var xsdNegated = map[rune]rune{'D': 'd', 'S': 's', 'I': 'i', 'C': 'c'}

// escape writes the escape after a \ outside a class.
func (t *patternTranslator) escape() error {
	c := t.peek(0)
	if c < 0 {
		return fmt.Errorf("a \\ at the end")
	}
	t.i++
	t.begin()
	if t.flavor == PatternXSD {
		if set, ok := xsdSets[c]; ok {
			if c == 'd' {
				t.out.WriteString(set)
			} else {
				t.out.WriteString("[" + set + "]")
			}
			t.atom = true
			return nil
		}
		if pos, ok := xsdNegated[c]; ok {
			t.out.WriteString("[^" + xsdSets[pos] + "]")
			t.atom = true
			return nil
		}
	}
	switch c {
	case 'd', 'D', 'w', 'W', 's', 'S':
		t.out.WriteRune('\\')
		t.out.WriteRune(c)
		t.atom = true
		return nil
	case 'b', 'B':
		if t.flavor == PatternXSD {
			return fmt.Errorf("\\%c is no XSD escape", c)
		}
		t.out.WriteRune('\\')
		t.out.WriteRune(c)
		t.atom = false
		return nil
	case 'A':
		t.out.WriteByte('^')
		t.atom = false
		return nil
	case 'z', 'Z':
		t.out.WriteByte('$')
		t.atom = false
		return nil
	case 'p', 'P':
		p, err := t.property(c)
		if err != nil {
			return err
		}
		t.out.WriteString(p)
		t.atom = true
		return nil
	case 'Q':
		if t.flavor == PatternRE2 {
			for t.i < len(t.src) && !(t.src[t.i] == '\\' && t.peek(1) == 'E') {
				t.literal(t.src[t.i])
				t.i++
			}
			if t.i < len(t.src) {
				t.i += 2
			}
			return nil
		}
	case '1', '2', '3', '4', '5', '6', '7', '8', '9', 'k':
		return fmt.Errorf("backreferences: Go's regexp has none")
	}
	if strings.ContainsRune(syntaxChars+"/", c) { // an escape both read alike
		t.out.WriteRune('\\')
		t.out.WriteRune(c)
		t.atom = true
		return nil
	}
	r, err := t.charEscape(c)
	if err != nil {
		return err
	}
	t.literal(r)
	return nil
}

// syntaxChars are ECMA-262's SyntaxCharacters: the characters the u flag
// lets a \ escape (with /), and the ones outside a class that must be.
const syntaxChars = `^$\.*+?()[]{}|`

// charEscape is the character an escape of one character stands for
// (after \ and c), for escapes both inside and outside a class.
func (t *patternTranslator) charEscape(c rune) (rune, error) {
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'f':
		return '\f', nil
	case 'v':
		return '\v', nil
	case 'a':
		return 0x07, nil
	case 'e':
		return 0x1b, nil
	case '0':
		if d := t.peek(0); d >= '0' && d <= '9' {
			return 0, fmt.Errorf("octal escapes")
		}
		return 0, nil
	case 'x':
		return t.hexEscape()
	case 'u':
		if t.flavor != PatternXSD {
			return t.unicodeEscape()
		}
	case 'c':
		if l := t.peek(0); t.flavor == PatternECMA && (l >= 'a' && l <= 'z' || l >= 'A' && l <= 'Z') {
			t.i++
			return l % 32, nil
		}
	}
	switch {
	case c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'):
		return 0, fmt.Errorf("\\%c is no escape JavaScript (u) and Go share", c)
	}
	return c, nil // an escaped punctuation or other character: itself
}

// closing is where the } of the { at i is, -1 without one.
func (t *patternTranslator) closing() int {
	for j := t.i + 1; j < len(t.src); j++ {
		if t.src[j] == '}' {
			return j
		}
	}
	return -1
}

// hexEscape reads \xHH or \x{H…} after the x.
func (t *patternTranslator) hexEscape() (rune, error) {
	if t.peek(0) == '{' {
		end := t.closing()
		if end < 0 {
			return 0, fmt.Errorf("\\x{ without its }")
		}
		return t.codePoint(string(t.src[t.i+1:end]), end+1)
	}
	if t.i+2 > len(t.src) {
		return 0, fmt.Errorf("\\x without two hex digits")
	}
	return t.codePoint(string(t.src[t.i:t.i+2]), t.i+2)
}

// unicodeEscape reads \uHHHH (a surrogate pair as one) or \u{H…} after the
// u.
func (t *patternTranslator) unicodeEscape() (rune, error) {
	if t.peek(0) == '{' {
		return t.hexEscape()
	}
	if t.i+4 > len(t.src) {
		return 0, fmt.Errorf("\\u without four hex digits")
	}
	r, err := t.codePoint(string(t.src[t.i:t.i+4]), t.i+4)
	if err != nil || r < 0xD800 || r > 0xDFFF {
		return r, err
	}
	if r <= 0xDBFF && t.peek(0) == '\\' && t.peek(1) == 'u' && t.i+6 <= len(t.src) {
		lo, err := strconv.ParseUint(string(t.src[t.i+2:t.i+6]), 16, 32)
		if err == nil && lo >= 0xDC00 && lo <= 0xDFFF {
			t.i += 6
			return (r-0xD800)<<10 + rune(lo) - 0xDC00 + 0x10000, nil
		}
	}
	return 0, fmt.Errorf("an unpaired surrogate \\u%04X", r)
}

// codePoint parses hex digits as a code point and moves past them to
// next.
func (t *patternTranslator) codePoint(hex string, next int) (rune, error) {
	n, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || n > utf8.MaxRune {
		return 0, fmt.Errorf("%q is no code point", hex)
	}
	t.i = next
	return rune(n), nil
}

// General categories as both dialects name them (short names; ECMA's long
// names map to these).
var categories = map[string]string{
	"L": "L", "Letter": "L", "Lu": "Lu", "Uppercase_Letter": "Lu", "Ll": "Ll", "Lowercase_Letter": "Ll",
	"Lt": "Lt", "Titlecase_Letter": "Lt", "Lm": "Lm", "Modifier_Letter": "Lm", "Lo": "Lo", "Other_Letter": "Lo",
	"M": "M", "Mark": "M", "Mn": "Mn", "Nonspacing_Mark": "Mn", "Mc": "Mc", "Spacing_Mark": "Mc", "Me": "Me", "Enclosing_Mark": "Me",
	"N": "N", "Number": "N", "Nd": "Nd", "Decimal_Number": "Nd", "Nl": "Nl", "Letter_Number": "Nl", "No": "No", "Other_Number": "No",
	"P": "P", "Punctuation": "P", "Pc": "Pc", "Connector_Punctuation": "Pc", "Pd": "Pd", "Dash_Punctuation": "Pd",
	"Ps": "Ps", "Open_Punctuation": "Ps", "Pe": "Pe", "Close_Punctuation": "Pe", "Pi": "Pi", "Initial_Punctuation": "Pi",
	"Pf": "Pf", "Final_Punctuation": "Pf", "Po": "Po", "Other_Punctuation": "Po",
	"S": "S", "Symbol": "S", "Sm": "Sm", "Math_Symbol": "Sm", "Sc": "Sc", "Currency_Symbol": "Sc", "Sk": "Sk", "Modifier_Symbol": "Sk",
	"So": "So", "Other_Symbol": "So",
	"Z": "Z", "Separator": "Z", "Zs": "Zs", "Space_Separator": "Zs", "Zl": "Zl", "Line_Separator": "Zl", "Zp": "Zp", "Paragraph_Separator": "Zp",
	"C": "C", "Other": "C", "Cc": "Cc", "Control": "Cc", "Cf": "Cf", "Format": "Cf", "Co": "Co", "Private_Use": "Co", "Cs": "Cs", "Surrogate": "Cs",
	"Any": "Any",
}

// property reads \p{…} or \pX after the p (c: p or P) as both dialects
// write it.
func (t *patternTranslator) property(c rune) (string, error) {
	var name string
	switch {
	case t.peek(0) == '{':
		end := t.closing()
		if end < 0 {
			return "", fmt.Errorf("\\%c{ without its }", c)
		}
		name = string(t.src[t.i+1 : end])
		t.i = end + 1
	case t.peek(0) >= 0 && t.flavor == PatternRE2:
		name = string(t.peek(0))
		t.i++
	default:
		return "", fmt.Errorf("\\%c without a property", c)
	}
	if strings.HasPrefix(name, "^") && t.flavor == PatternRE2 { // \p{^L}: Go's negation
		name = name[1:]
		c ^= 'p' ^ 'P'
	}
	for _, prefix := range []string{"General_Category=", "gc="} {
		name = strings.TrimPrefix(name, prefix)
	}
	if t.flavor != PatternXSD {
		name = strings.TrimPrefix(name, "Is") // Java's \p{IsLetter}
	}
	if gc, ok := categories[name]; ok {
		return `\` + string(c) + "{" + gc + "}", nil
	}
	if set, ok := posixClasses[strings.ToLower(name)]; ok && t.flavor != PatternXSD { // Java's \p{Alnum}, ECMA's \p{ASCII}
		if c == 'P' {
			return "[^" + set + "]", nil
		}
		return "[" + set + "]", nil
	}
	if t.flavor == PatternXSD && strings.HasPrefix(name, "Is") {
		return "", fmt.Errorf("Unicode blocks (\\%c{%s}): neither JavaScript nor Go names them", c, name)
	}
	return "", fmt.Errorf("the Unicode property %s: JavaScript and Go share only general categories", name)
}

// posixClasses are the ASCII classes of [[:name:]] (RE2), as class items.
var posixClasses = map[string]string{
	"alnum": `0-9A-Za-z`, "alpha": `A-Za-z`, "ascii": `\x00-\x7F`, "blank": `\t `, "cntrl": `\x00-\x1F\x7F`,
	"digit": `0-9`, "graph": `!-~`, "lower": `a-z`, "print": ` -~`, "punct": `!-/:-@\[-` + "`" + `{-~`,
	"space": `\t\n\v\f\r `, "upper": `A-Z`, "word": `0-9A-Za-z_`, "xdigit": `0-9A-Fa-f`,
}

// classSet is a set written as a class (property's form outside one) as
// the items inside a class, or an error for a negated one, which a class
// cannot hold.
func classSet(p string) (string, error) {
	switch {
	case strings.HasPrefix(p, "[^"):
		return "", fmt.Errorf("a negated set inside a class: neither JavaScript (u) nor Go can say it there")
	case strings.HasPrefix(p, "["):
		return p[1 : len(p)-1], nil
	}
	return p, nil
}

// class writes a character class after its [.
func (t *patternTranslator) class() error {
	neg := ""
	if t.peek(0) == '^' {
		neg = "^"
		t.i++
	}
	var b strings.Builder
	first := true
	// prev is the last item if it is one character (a range may start
	// there), -1 otherwise; afterSet: the last item is a set.
	prev, afterSet := rune(-1), false
	for {
		r := t.peek(0)
		if r < 0 {
			return fmt.Errorf("a [ without its ]")
		}
		t.i++
		switch {
		case r == ']' && first && t.flavor == PatternRE2:
			b.WriteString(`\]`)
			prev = ']'
		case r == ']' && first && t.flavor == PatternECMA: // [] is no character, [^] any
			if neg == "" {
				t.out.WriteString(`[^\s\S]`)
			} else {
				t.out.WriteString(`[\s\S]`)
			}
			return nil
		case r == ']':
			t.out.WriteString("[" + neg + b.String() + "]")
			return nil
		case r == '[' && t.peek(0) == ':' && t.flavor == PatternRE2:
			end := strings.Index(string(t.src[t.i:]), ":]")
			if end < 0 {
				return fmt.Errorf("[: without its :]")
			}
			name := string(t.src[t.i+1 : t.i+end])
			set, ok := posixClasses[name]
			if !ok {
				return fmt.Errorf("the class [:%s:]: neither JavaScript nor Go can say it here", name)
			}
			t.i += end + 2
			b.WriteString(set)
			prev = -1
		case r == '-' && t.peek(0) == '[' && t.flavor == PatternXSD:
			return fmt.Errorf("class subtraction (-[…]): neither JavaScript (u) nor Go has it")
		case r == '-' && prev >= 0 && t.peek(0) != ']' && t.peek(0) >= 0:
			hi, set, text, err := t.classItem()
			if err != nil {
				return err
			}
			if set != "" { // [a-\d]: the - is a character
				b.WriteString(`\-` + set)
				prev, afterSet = -1, true
				break
			}
			if hi < prev {
				return fmt.Errorf("the range %s-%s runs backwards", charText(prev), charText(hi))
			}
			b.WriteString("-" + text)
			prev, afterSet = -1, false
		case r == '-':
			// A - between a set and an item would be a range of a set,
			// which the u flag refuses: escaped there, as it is first.
			if afterSet && t.peek(0) != ']' || !first && t.peek(0) == '\\' && strings.ContainsRune("dDwWsSpPiIcC", t.peek(1)) {
				b.WriteString(`\-`)
			} else {
				b.WriteByte('-')
			}
			prev, afterSet = '-', false
		default:
			t.i--
			c, set, text, err := t.classItem()
			if err != nil {
				return err
			}
			switch {
			case set != "":
				b.WriteString(set)
				prev, afterSet = -1, true
			case first && c == '^': // [\^…]: a ^, not a negation
				b.WriteString(`\^`)
				prev, afterSet = c, false
			default:
				b.WriteString(text)
				prev, afterSet = c, false
			}
		}
		first = false
	}
}

// classItem reads one item of a class: a character c (text: as to write
// it), or a set's escape as both dialects write it inside a class.
func (t *patternTranslator) classItem() (c rune, set, text string, err error) {
	r := t.src[t.i]
	t.i++
	if r != '\\' {
		return r, "", classChar(r), nil
	}
	e := t.peek(0)
	if e < 0 {
		return 0, "", "", fmt.Errorf("a \\ at the end")
	}
	t.i++
	if t.flavor == PatternXSD {
		if s, ok := xsdSets[e]; ok {
			return 0, s, "", nil
		}
		if e == 'S' {
			return 0, `\S`, "", nil
		}
		if _, ok := xsdNegated[e]; ok {
			return 0, "", "", fmt.Errorf("\\%c inside a class: neither JavaScript (u) nor Go can say it there", e)
		}
	}
	switch e {
	case 'd', 'D', 'w', 'W', 's', 'S':
		return 0, `\` + string(e), "", nil
	case 'p', 'P':
		p, err := t.property(e)
		if err != nil {
			return 0, "", "", err
		}
		p, err = classSet(p)
		return 0, p, "", err
	case 'b':
		if t.flavor == PatternECMA {
			return 0x08, "", `\x08`, nil // backspace, in a class
		}
	}
	if strings.ContainsRune(syntaxChars+"/-", e) { // an escape both read alike
		return e, "", `\` + string(e), nil
	}
	c, err = t.charEscape(e)
	return c, "", classChar(c), err
}

// classChar is c as a character inside a class.
func classChar(c rune) string {
	if strings.ContainsRune(`\]-[`, c) {
		return `\` + string(c)
	}
	return charText(c)
}
