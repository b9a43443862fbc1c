package soap

import (
	"fmt"
	"strings"

	"github.com/beevik/etree"
)

// operation is one callable operation of the chosen port.
type operation struct {
	Name        string
	Doc         string
	Endpoint    string
	Version     string // "1.1" or "1.2"
	Action      string
	Style       string    // document or rpc
	In, Out     *xsdField // the body's (wrapper) element
	OutOptional bool      // one-way operations have no answer body
}

// portInfo is the port a config selects.
type portInfo struct {
	name, address, version string
	binding                *etree.Element
}

func (s *wsdlSet) choosePort(service, port string) (*portInfo, error) {
	var found []string
	for _, svc := range s.services {
		if service != "" && svc.SelectAttrValue("name", "") != service {
			continue
		}
		for _, p := range svc.ChildElements() {
			if p.NamespaceURI() != nsWSDL || p.Tag != "port" {
				continue
			}
			name := p.SelectAttrValue("name", "")
			found = append(found, name)
			if port != "" && name != port {
				continue
			}
			bq, _, err := attrQName(p, "binding")
			if err != nil {
				return nil, err
			}
			b := s.bindings[bq]
			if b == nil {
				return nil, errAt(p, "binding %s is not defined", bq)
			}
			pi := &portInfo{name: name, binding: b}
			for _, a := range p.ChildElements() {
				if a.Tag == "address" && (a.NamespaceURI() == nsSOAP11 || a.NamespaceURI() == nsSOAP12) {
					pi.address = a.SelectAttrValue("location", "")
				}
			}
			for _, c := range b.ChildElements() {
				if c.Tag == "binding" {
					switch c.NamespaceURI() {
					case nsSOAP11:
						pi.version = "1.1"
					case nsSOAP12:
						pi.version = "1.2"
					}
				}
			}
			if pi.version == "" {
				if port != "" {
					return nil, errAt(b, "is not a SOAP binding (soap:binding or soap12:binding)")
				}
				continue
			}
			return pi, nil
		}
	}
	switch {
	case port != "":
		return nil, &loadError{msg: fmt.Sprintf("no port %q (ports: %s)", port, strings.Join(found, ", "))}
	case service != "" && len(found) == 0:
		return nil, &loadError{msg: fmt.Sprintf("no service %q with ports", service)}
	}
	return nil, &loadError{msg: "the WSDL has no SOAP port (<wsdl:service>/<wsdl:port> bound to soap or soap12)"}
}

// operations lists the operations of a port; unusable ones come back as
// errors naming the WSDL element.
func (s *wsdlSet) operations(pi *portInfo) ([]*operation, []error, error) {
	soapNS := nsSOAP11
	if pi.version == "1.2" {
		soapNS = nsSOAP12
	}
	defStyle := "document"
	for _, c := range pi.binding.ChildElements() {
		if c.NamespaceURI() == soapNS && c.Tag == "binding" {
			if v := c.SelectAttrValue("style", ""); v != "" {
				defStyle = v
			}
		}
	}
	ptq, _, err := attrQName(pi.binding, "type")
	if err != nil {
		return nil, nil, err
	}
	pt := s.portTypes[ptq]
	if pt == nil {
		return nil, nil, errAt(pi.binding, "portType %s is not defined", ptq)
	}
	var ops []*operation
	var skipped []error
	for _, bop := range pi.binding.ChildElements() {
		if bop.NamespaceURI() != nsWSDL || bop.Tag != "operation" {
			continue
		}
		op, err := s.operation(pi, pt, bop, soapNS, defStyle)
		if err != nil {
			if le, ok := err.(*loadError); !ok || le.where != describe(bop) {
				err = fmt.Errorf("%s: %w", describe(bop), err)
			}
			skipped = append(skipped, err)
			continue
		}
		ops = append(ops, op)
	}
	seen := map[string]bool{}
	for _, n := range s.notes {
		if !seen[n.Error()] {
			seen[n.Error()] = true
			skipped = append(skipped, n)
		}
	}
	return ops, skipped, nil
}

func (s *wsdlSet) operation(pi *portInfo, pt, bop *etree.Element, soapNS, defStyle string) (*operation, error) {
	name := bop.SelectAttrValue("name", "")
	op := &operation{Name: name, Endpoint: pi.address, Version: pi.version, Style: defStyle}
	var ptop *etree.Element
	for _, c := range pt.ChildElements() {
		if c.NamespaceURI() == nsWSDL && c.Tag == "operation" && c.SelectAttrValue("name", "") == name {
			ptop = c
		}
	}
	if ptop == nil {
		return nil, errAt(bop, "has no operation in portType %s", pt.SelectAttrValue("name", ""))
	}
	if d := ptop.SelectElement("documentation"); d != nil {
		op.Doc = strings.Join(strings.Fields(d.Text()), " ")
	}
	var inBody, outBody *etree.Element
	for _, c := range bop.ChildElements() {
		switch {
		case c.NamespaceURI() == soapNS && c.Tag == "operation":
			op.Action = c.SelectAttrValue("soapAction", "")
			if v := c.SelectAttrValue("style", ""); v != "" {
				op.Style = v
			}
		case c.NamespaceURI() == nsWSDL && (c.Tag == "input" || c.Tag == "output"):
			for _, b := range c.ChildElements() {
				if b.NamespaceURI() == soapNS && b.Tag == "body" {
					if c.Tag == "input" {
						inBody = b
					} else {
						outBody = b
					}
				}
			}
		}
	}
	if op.Style != "document" && op.Style != "rpc" {
		return nil, errAt(bop, "style %q is not supported (document or rpc)", op.Style)
	}
	for _, b := range []*etree.Element{inBody, outBody} {
		if b != nil && b.SelectAttrValue("use", "literal") != "literal" {
			return nil, errAt(b, "use %q is not supported (literal only)", b.SelectAttrValue("use", ""))
		}
	}
	in, out := ptop.SelectElement("input"), ptop.SelectElement("output")
	if in == nil {
		return nil, errAt(ptop, "has no input (notification operations are not supported)")
	}
	var err error
	if op.In, err = s.body(op, in, inBody, name); err != nil {
		return nil, err
	}
	if out == nil {
		op.OutOptional = true
		return op, nil
	}
	if op.Out, err = s.body(op, out, outBody, name+"Response"); err != nil {
		return nil, err
	}
	return op, nil
}

// body resolves the body element of one message direction.
func (s *wsdlSet) body(op *operation, msgRef, soapBody *etree.Element, rpcName string) (*xsdField, error) {
	mq, _, err := attrQName(msgRef, "message")
	if err != nil {
		return nil, err
	}
	msg := s.messages[mq]
	if msg == nil {
		return nil, errAt(msgRef, "message %s is not defined", mq)
	}
	var parts []*etree.Element
	var only map[string]bool
	if soapBody != nil {
		if v := soapBody.SelectAttrValue("parts", ""); v != "" {
			only = map[string]bool{}
			for _, p := range strings.Fields(v) {
				only[p] = true
			}
		}
	}
	for _, p := range msg.ChildElements() {
		if p.NamespaceURI() == nsWSDL && p.Tag == "part" && (only == nil || only[p.SelectAttrValue("name", "")]) {
			parts = append(parts, p)
		}
	}
	r := &resolver{s: s}
	if op.Style == "document" {
		if len(parts) != 1 {
			return nil, errAt(msg, "has %d body parts; document/literal needs exactly one", len(parts))
		}
		eq, ok, err := attrQName(parts[0], "element")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errAt(parts[0], "document/literal part has no element")
		}
		g := s.elements[eq]
		if g == nil {
			return nil, errAt(parts[0], "element %s is not defined", eq)
		}
		f, err := r.element(g, true)
		if err != nil {
			return nil, err
		}
		if f.Type.Kind != kindComplex {
			return nil, errAt(g, "has a simple type; only wrapped (complex) body elements are supported")
		}
		return f, nil
	}
	// rpc/literal: a wrapper named after the operation, one child per part.
	ns := ""
	if soapBody != nil {
		ns = soapBody.SelectAttrValue("namespace", "")
	}
	w := &xsdField{Name: rpcName, NS: ns, Min: 1, Max: 1, Type: &xsdType{Kind: kindComplex}}
	for _, p := range parts {
		pname := p.SelectAttrValue("name", "")
		if q, ok, err := attrQName(p, "type"); err != nil {
			return nil, err
		} else if ok {
			t, err := r.typeByName(p, q)
			if err != nil {
				return nil, err
			}
			w.Type.Fields = append(w.Type.Fields, &xsdField{Name: pname, Type: t, Min: 1, Max: 1})
			continue
		}
		if q, ok, err := attrQName(p, "element"); err != nil {
			return nil, err
		} else if ok {
			g := s.elements[q]
			if g == nil {
				return nil, errAt(p, "element %s is not defined", q)
			}
			f, err := r.element(g, true)
			if err != nil {
				return nil, err
			}
			w.Type.Fields = append(w.Type.Fields, f)
			continue
		}
		return nil, errAt(p, "part has neither type nor element")
	}
	return w, nil
}
