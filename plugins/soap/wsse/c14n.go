package wsse

import (
	"bytes"
	"sort"
	"strings"

	"github.com/beevik/etree"
)

// Exclusive XML Canonicalization 1.0 (http://www.w3.org/2001/10/xml-exc-c14n#,
// without comments and without an InclusiveNamespaces prefix list) of an
// element and its subtree, as XML-DSig digests and signs it. No maintained
// Go module for it is in reach, so this is the part of the
// recommendation an envelope needs: elements, attributes, namespace
// declarations rendered where a prefix is visibly utilized and not yet
// rendered by an output ancestor, text; comments and processing
// instructions inside the subtree are left out (the envelopes signed here
// have none). Namespaces are resolved against the whole document, so a
// subtree canonicalizes the same in place and after a parse of its
// serialization.

// nsXML is the namespace of the xml prefix, never declared.
const nsXML = "http://www.w3.org/XML/1998/namespace"

// Canonical returns el's subtree in exclusive canonical form.
func Canonical(el *etree.Element) []byte {
	var b bytes.Buffer
	c14nElement(&b, el, map[string]string{})
	return b.Bytes()
}

func isNSDecl(a etree.Attr) bool { return a.Space == "xmlns" || a.Space == "" && a.Key == "xmlns" }

// lookupNS is the namespace prefix names at el ("" for the default
// namespace; "" when not declared).
func lookupNS(el *etree.Element, prefix string) string {
	if prefix == "xml" {
		return nsXML
	}
	for e := el; e != nil; e = e.Parent() {
		for _, a := range e.Attr {
			if prefix == "" && a.Space == "" && a.Key == "xmlns" || prefix != "" && a.Space == "xmlns" && a.Key == prefix {
				return a.Value
			}
		}
	}
	return ""
}

func qname(space, key string) string {
	if space == "" {
		return key
	}
	return space + ":" + key
}

func c14nElement(b *bytes.Buffer, el *etree.Element, rendered map[string]string) {
	used := map[string]bool{el.Space: true}
	var attrs []etree.Attr
	for _, a := range el.Attr {
		if isNSDecl(a) {
			continue
		}
		attrs = append(attrs, a)
		if a.Space != "" && a.Space != "xml" {
			used[a.Space] = true
		}
	}
	next := rendered
	var decls []string
	for p := range used {
		uri := lookupNS(el, p)
		r, ok := rendered[p]
		if ok && r == uri || !ok && p == "" && uri == "" {
			continue
		}
		if len(decls) == 0 {
			next = make(map[string]string, len(rendered)+len(used))
			for k, v := range rendered {
				next[k] = v
			}
		}
		next[p] = uri
		decls = append(decls, p)
	}
	sort.Strings(decls) // "" (the default namespace) first
	b.WriteByte('<')
	b.WriteString(qname(el.Space, el.Tag))
	for _, p := range decls {
		if p == "" {
			b.WriteString(` xmlns="`)
		} else {
			b.WriteString(` xmlns:` + p + `="`)
		}
		escapeAttr(b, next[p])
		b.WriteByte('"')
	}
	sort.SliceStable(attrs, func(i, j int) bool {
		ni, nj := attrNS(el, attrs[i]), attrNS(el, attrs[j])
		if ni != nj {
			return ni < nj
		}
		return attrs[i].Key < attrs[j].Key
	})
	for _, a := range attrs {
		b.WriteByte(' ')
		b.WriteString(qname(a.Space, a.Key))
		b.WriteString(`="`)
		escapeAttr(b, a.Value)
		b.WriteByte('"')
	}
	b.WriteByte('>')
	for _, t := range el.Child {
		switch t := t.(type) {
		case *etree.Element:
			c14nElement(b, t, next)
		case *etree.CharData:
			escapeText(b, t.Data)
		}
	}
	b.WriteString("</" + qname(el.Space, el.Tag) + ">")
}

// attrNS is an attribute's namespace URI ("" for an unprefixed one).
func attrNS(el *etree.Element, a etree.Attr) string {
	if a.Space == "" {
		return ""
	}
	return lookupNS(el, a.Space)
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\r", "&#xD;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", `"`, "&quot;", "\t", "&#x9;", "\n", "&#xA;", "\r", "&#xD;")
)

func escapeText(b *bytes.Buffer, s string) { _, _ = textEscaper.WriteString(b, s) }
func escapeAttr(b *bytes.Buffer, s string) { _, _ = attrEscaper.WriteString(b, s) }
