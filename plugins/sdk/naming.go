package sdk

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names of upstream operations as people and clients read them. An
// upstream that says what an operation does (an HTTP method, a gRPC
// idempotency_level, a GraphQL query or mutation) is taken at its word;
// for one that does not (a SOAP operation, a gRPC method without the
// option) NameAnnotations reads the operation's name by the rule below,
// which an operations-file entry's annotations override.

// Words splits an operation or service name into its words: at
// underscores, hyphens, dots, spaces and camelCase boundaries, an
// acronym kept whole ("GetHTTPStatus": Get, HTTP, Status).
func Words(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || unicode.IsSpace(r):
			flush()
			continue
		case unicode.IsUpper(r) && len(cur) > 0:
			prev := cur[len(cur)-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// Humanize is a title made of an operation's name: its words, the first
// capitalised, the others in lower case but for acronyms ("GetOrder":
// "Get order", "list_users": "List users", "GetHTTPStatus": "Get HTTP
// status").
func Humanize(name string) string {
	words := Words(name)
	for i, w := range words {
		rs := []rune(w)
		if len(rs) > 1 && strings.ToUpper(w) == w {
			continue // an acronym
		}
		w = strings.ToLower(w)
		if i == 0 {
			rs = []rune(w)
			rs[0] = unicode.ToUpper(rs[0])
			w = string(rs)
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// The verbs NameAnnotations reads, by what they say an operation does.
var (
	readVerbs = map[string]bool{"get": true, "list": true, "lookup": true, "look": true, "search": true, "find": true,
		"check": true, "describe": true, "read": true, "fetch": true, "query": true, "count": true, "watch": true,
		"show": true, "view": true, "retrieve": true, "inspect": true, "browse": true}
	destroyVerbs = map[string]bool{"delete": true, "remove": true, "destroy": true, "purge": true, "drop": true,
		"erase": true, "revoke": true, "clear": true, "reset": true, "cancel": true}
	writeVerbs = map[string]bool{"create": true, "add": true, "insert": true, "update": true, "set": true, "put": true,
		"post": true, "patch": true, "submit": true, "send": true, "upload": true, "register": true, "start": true,
		"stop": true, "write": true, "save": true, "edit": true, "modify": true, "rename": true, "move": true, "copy": true}
)

// Verb is what the first verb among a name's words says the operation
// does: "read" (Get, List, Lookup, Search, Find, Check, Describe, Read,
// Fetch, Query, Count, Watch, Show, View, Retrieve, Inspect, Browse),
// "destroy" (Delete, Remove, Destroy, Purge, Drop, Erase, Revoke, Clear,
// Reset, Cancel), "write" (Create, Add, Insert, Update, Set, Put, Post,
// Patch, Submit, Send, Upload, Register, Start, Stop, Write, Save, Edit,
// Modify, Rename, Move, Copy), or "" when no word is one of them. Words
// before the first verb (a prefix such as "order_") are skipped.
func Verb(name string) string {
	for _, w := range Words(name) {
		switch w = strings.ToLower(w); {
		case readVerbs[w]:
			return "read"
		case destroyVerbs[w]:
			return "destroy"
		case writeVerbs[w]:
			return "write"
		}
	}
	return ""
}

// NameAnnotations are the hints an operation's name gives by Verb: a
// read is read-only and idempotent, a destroy destructive, a write
// neither read-only nor destructive; no hints for a name without a verb.
func NameAnnotations(name string) Annotations {
	switch Verb(name) {
	case "read":
		return Annotations{ReadOnly: Bool(true), Destructive: Bool(false), Idempotent: Bool(true)}
	case "destroy":
		return Annotations{ReadOnly: Bool(false), Destructive: Bool(true)}
	case "write":
		return Annotations{ReadOnly: Bool(false), Destructive: Bool(false)}
	}
	return Annotations{}
}

// MaxPortableName is the longest name PortableName gives.
const MaxPortableName = 64

// PortableName maps a tool name to one that every client's function
// calling takes (OpenAI's and Anthropic's tools: ^[a-zA-Z0-9_-]{1,64}$):
// dots and every other character outside the rule become "_", and a name
// longer than max (at most MaxPortableName; 0 for that) is cut, with a
// short hash of the whole name at its end so that names cut alike stay
// apart.
func PortableName(name string, max int) string {
	if max <= 0 || max > MaxPortableName {
		max = MaxPortableName
	}
	var b strings.Builder
	for _, r := range name {
		if r < 0x80 && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "_"
	}
	if len(out) <= max {
		return out
	}
	sum := sha256.Sum256([]byte(name))
	h := "_" + hex.EncodeToString(sum[:4])
	if max < len(h) {
		return h[1 : max+1]
	}
	return out[:max-len(h)] + h
}

// CapDescription bounds a description taken from an upstream's document
// to max characters (runes): the whole paragraphs that fit, else the first
// cut at a word, then "…". A description within max is kept whole; max
// 0 keeps every description whole.
func CapDescription(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	const more = "…"
	paras := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n\n")
	kept, n := 0, 0
	for i, p := range paras {
		add := utf8.RuneCountInString(p)
		if i > 0 {
			add += 2
		}
		if n+add+3 > max { // and "\n\n…"
			break
		}
		n += add
		kept++
	}
	if kept > 0 {
		return strings.TrimRight(strings.Join(paras[:kept], "\n\n"), " \n") + "\n\n" + more
	}
	rs := []rune(paras[0])[:max-1]
	cut := string(rs)
	if i := strings.LastIndexAny(cut, " \n\t"); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " \n\t,.;:") + more
}
