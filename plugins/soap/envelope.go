package soap

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/beevik/etree"

	"github.com/crankmcp/crank/plugins/soap/wsse"
)

// argError is a tool argument that cannot be sent; path names it.
type argError struct{ path, msg string }

func (e *argError) Error() string { return "argument " + e.path + ": " + e.msg }

// envelope builds the request document.
type envelope struct {
	doc      *etree.Document
	root     *etree.Element
	prefixes map[string]string
}

func (e *envelope) prefix(ns string) string {
	if p, ok := e.prefixes[ns]; ok {
		return p
	}
	p := "ns" + strconv.Itoa(len(e.prefixes))
	e.prefixes[ns] = p
	e.root.CreateAttr("xmlns:"+p, ns)
	return p
}

func (e *envelope) create(parent *etree.Element, name, ns string) *etree.Element {
	if ns == "" {
		return parent.CreateElement(name)
	}
	return parent.CreateElement(e.prefix(ns) + ":" + name)
}

// buildEnvelope renders the SOAP envelope for the arguments, with the
// WS-Security header sec asks for (nil: none), created now.
func buildEnvelope(op *operation, args json.RawMessage, sec *wsse.Token, now time.Time) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if len(bytes.TrimSpace(args)) == 0 {
		v = map[string]any{}
	} else if err := dec.Decode(&v); err != nil {
		return nil, &argError{path: "(arguments)", msg: "are not valid JSON"}
	}
	if v == nil {
		v = map[string]any{}
	}
	envNS := envSOAP11
	if op.Version == "1.2" {
		envNS = envSOAP12
	}
	doc := etree.NewDocument()
	doc.CreateProcInst("xml", `version="1.0" encoding="UTF-8"`)
	root := doc.CreateElement("soap:Envelope")
	root.CreateAttr("xmlns:soap", envNS)
	e := &envelope{doc: doc, root: root, prefixes: map[string]string{envNS: "soap"}}
	if sec != nil {
		h := root.CreateElement("soap:Header")
		if err := sec.Append(h, "soap", map[bool]string{true: "true", false: "1"}[op.Version == "1.2"], now, nil); err != nil {
			return nil, fmt.Errorf("cannot make a nonce: %w", err)
		}
	}
	body := root.CreateElement("soap:Body")
	w := e.create(body, op.In.Name, op.In.NS)
	if _, ok := v.(map[string]any); !ok {
		return nil, &argError{path: "(arguments)", msg: "must be an object"}
	}
	if err := e.fill(w, op.In.Type, v, ""); err != nil {
		return nil, err
	}
	doc.Indent(etree.NoIndent)
	if sec != nil {
		// Signing, when configured, covers the finished Body.
		if err := sec.Finish(root); err != nil {
			return nil, err
		}
	}
	// Character references for carriage returns (and tabs and line
	// breaks in attributes), which a parser would otherwise normalise.
	doc.WriteSettings.CanonicalText = true
	doc.WriteSettings.CanonicalAttrVal = true
	return doc.WriteToBytes()
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fill writes value v of type t into el.
func (e *envelope) fill(el *etree.Element, t *xsdType, v any, path string) error {
	switch t.Kind {
	case kindSimple:
		s, err := text(t, v, path)
		if err != nil {
			return err
		}
		el.SetText(s)
		return nil
	case kindAny:
		return e.fillAny(el, v, path)
	}
	m, ok := v.(map[string]any)
	if !ok {
		if t.Value != nil && len(t.Attrs) == 0 {
			return e.fill(el, t.Value, v, path)
		}
		return &argError{path: orArgs(path), msg: "must be an object"}
	}
	known := map[string]bool{}
	for _, a := range t.Attrs {
		key := attrPrefix + a.Name
		known[key] = true
		av, ok := m[key]
		if !ok || av == nil {
			if a.Required {
				return &argError{path: join(path, key), msg: "is required"}
			}
			continue
		}
		s, err := text(a.Type, av, join(path, key))
		if err != nil {
			return err
		}
		name := a.Name
		if a.NS != "" {
			name = e.prefix(a.NS) + ":" + a.Name
		}
		el.CreateAttr(name, s)
	}
	if t.Value != nil {
		known[valueKey] = true
		if tv, ok := m[valueKey]; ok && tv != nil {
			s, err := text(t.Value, tv, join(path, valueKey))
			if err != nil {
				return err
			}
			el.SetText(s)
		}
	}
	var open *xsdField
	for _, f := range t.Fields {
		if f.Name == "*" {
			open = f
			continue
		}
		known[f.Name] = true
		fv, ok := m[f.Name]
		p := join(path, f.Name)
		if !ok {
			if f.Min > 0 {
				return &argError{path: p, msg: "is required"}
			}
			continue
		}
		items := []any{fv}
		if f.repeated() {
			arr, ok := fv.([]any)
			if !ok {
				if fv == nil {
					continue
				}
				return &argError{path: p, msg: "must be an array (the element repeats)"}
			}
			items = arr
			if len(arr) < f.Min || (f.Max > 0 && len(arr) > f.Max) {
				return &argError{path: p, msg: fmt.Sprintf("must have between %d and %s items", f.Min, maxString(f.Max))}
			}
		}
		for i, item := range items {
			ip := p
			if f.repeated() {
				ip = p + "[" + strconv.Itoa(i) + "]"
			}
			c := e.create(el, f.Name, f.NS)
			if item == nil {
				if !f.Nillable {
					return &argError{path: ip, msg: "must not be null (the element is not nillable)"}
				}
				c.CreateAttr(e.prefix(nsXSI)+":nil", "true")
				continue
			}
			if err := e.fill(c, f.Type, item, ip); err != nil {
				return err
			}
		}
	}
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		if open == nil {
			return &argError{path: join(path, unknown[0]), msg: "is not a field of this element"}
		}
		for _, k := range unknown {
			if err := e.anyMember(el, k, m[k], path); err != nil {
				return err
			}
		}
	}
	return nil
}

func maxString(n int) string {
	if n < 0 {
		return "unbounded"
	}
	return strconv.Itoa(n)
}

func orArgs(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}

// fillAny writes an untyped JSON value: objects as unqualified child
// elements ("@name" members as attributes, "_value" as text), arrays as
// repeated elements, scalars as text.
func (e *envelope) fillAny(el *etree.Element, v any, path string) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := e.anyMember(el, k, x[k], path); err != nil {
				return err
			}
		}
		return nil
	case nil:
		el.CreateAttr(e.prefix(nsXSI)+":nil", "true")
		return nil
	case []any:
		return &argError{path: orArgs(path), msg: "an array must be the value of a named element"}
	}
	s, err := anyText(v, orArgs(path))
	if err != nil {
		return err
	}
	el.SetText(s)
	return nil
}

// anyMember writes member k of an untyped object (or the open content of
// a typed one) into el. Names come from the arguments here, so only XML
// names may become element or attribute names: anything else could add
// markup to the envelope.
func (e *envelope) anyMember(el *etree.Element, k string, v any, path string) error {
	p := join(path, k)
	switch {
	case strings.HasPrefix(k, attrPrefix):
		if !validName(k[len(attrPrefix):]) {
			return &argError{path: join(path, clipKey(k)), msg: "is not a valid XML attribute name (an unprefixed name such as @lang)"}
		}
		if v == nil {
			return nil
		}
		s, err := anyText(v, p)
		if err != nil {
			return err
		}
		el.CreateAttr(k[len(attrPrefix):], s)
		return nil
	case k == valueKey:
		if v == nil {
			return nil
		}
		s, err := anyText(v, p)
		if err != nil {
			return err
		}
		el.SetText(s)
		return nil
	case !validName(k):
		return &argError{path: join(path, clipKey(k)), msg: "is not a valid XML element name (an unprefixed name such as item)"}
	}
	if arr, ok := v.([]any); ok {
		for i, item := range arr {
			if err := e.fillAny(el.CreateElement(k), item, p+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		return nil
	}
	return e.fillAny(el.CreateElement(k), v, p)
}

// clipKey shortens a key that is not a name for an error message.
func clipKey(k string) string {
	if len(k) <= 64 {
		return k
	}
	n := 64
	for n > 0 && !utf8.RuneStart(k[n]) {
		n--
	}
	return k[:n] + "…"
}

// anyText renders an untyped scalar as XML text.
func anyText(v any, path string) (string, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	case bool:
		s = strconv.FormatBool(x)
	default:
		return "", &argError{path: path, msg: "must be a string, number or boolean"}
	}
	if hasControl(s) {
		return "", &argError{path: path, msg: "contains a control character (or U+FFFE, U+FFFF) XML cannot carry"}
	}
	return s, nil
}

// hasControl tells whether s holds a character that XML 1.0 cannot carry
// at all: a control character other than tab, line feed and carriage
// return, or U+FFFE, U+FFFF.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF
	})
}

// validName tells whether k may be the name of an element or attribute
// that open content writes: an XML NCName (a name without a prefix: a
// prefix would refer to the envelope's namespace declarations), not one
// of the names reserved for XML itself (xml..., xmlns), and one that the
// stricter name rules of XML 1.0 before its fifth edition accept too, so
// that every XML parser reads the envelope.
func validName(k string) bool {
	if k == "" || len(k) > 1024 || strings.HasPrefix(strings.ToLower(k), "xml") {
		return false
	}
	ascii := true
	for i, c := range k {
		if c >= utf8.RuneSelf {
			ascii = false
		}
		if !ncNameRune(c, i == 0) {
			return false
		}
	}
	if ascii {
		return true
	}
	// encoding/xml holds the older, stricter tables.
	d := xml.NewDecoder(strings.NewReader("<" + k + "/>"))
	tok, err := d.RawToken()
	se, ok := tok.(xml.StartElement)
	return err == nil && ok && se.Name.Space == "" && se.Name.Local == k
}

// ncNameRune is the NameStartChar (first) or NameChar production of XML
// 1.0 (fifth edition) without the colon.
func ncNameRune(c rune, first bool) bool {
	switch {
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z',
		c >= 0xC0 && c <= 0xD6, c >= 0xD8 && c <= 0xF6, c >= 0xF8 && c <= 0x2FF,
		c >= 0x370 && c <= 0x37D, c >= 0x37F && c <= 0x1FFF, c >= 0x200C && c <= 0x200D,
		c >= 0x2070 && c <= 0x218F, c >= 0x2C00 && c <= 0x2FEF, c >= 0x3001 && c <= 0xD7FF,
		c >= 0xF900 && c <= 0xFDCF, c >= 0xFDF0 && c <= 0xFFFD, c >= 0x10000 && c <= 0xEFFFF:
		return true
	case first:
		return false
	}
	return c == '-' || c == '.' || c >= '0' && c <= '9' || c == 0xB7 ||
		c >= 0x300 && c <= 0x36F || c >= 0x203F && c <= 0x2040
}

// text renders a scalar for a simple type, checking its JSON type.
func text(t *xsdType, v any, path string) (string, error) {
	kind := jsonKind(t.Base)
	if t.List {
		kind = "string"
	}
	var s string
	switch x := v.(type) {
	case string:
		if kind != "string" {
			return "", &argError{path: path, msg: "must be a " + kind}
		}
		s = x
	case json.Number:
		if kind != "integer" && kind != "number" {
			return "", &argError{path: path, msg: "must be a " + kind}
		}
		s = x.String()
		if kind == "integer" && !isDigits(s) {
			return "", &argError{path: path, msg: "must be an integer"}
		}
	case bool:
		if kind != "boolean" {
			return "", &argError{path: path, msg: "must be a " + kind}
		}
		s = strconv.FormatBool(x)
	default:
		return "", &argError{path: path, msg: "must be a " + kind}
	}
	if len(t.Enum) > 0 {
		found := false
		for _, e := range t.Enum {
			if e == s {
				found = true
			}
		}
		if !found {
			return "", &argError{path: path, msg: "must be one of " + strings.Join(t.Enum, ", ")}
		}
	}
	if hasControl(s) {
		return "", &argError{path: path, msg: "contains a control character (or U+FFFE, U+FFFF) XML cannot carry"}
	}
	return s, nil
}
