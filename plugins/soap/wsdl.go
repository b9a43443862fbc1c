package soap

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// Namespaces the loader understands.
const (
	nsWSDL    = "http://schemas.xmlsoap.org/wsdl/"
	nsSOAP11  = "http://schemas.xmlsoap.org/wsdl/soap/"
	nsSOAP12  = "http://schemas.xmlsoap.org/wsdl/soap12/"
	nsXSD     = "http://www.w3.org/2001/XMLSchema"
	nsXSI     = "http://www.w3.org/2001/XMLSchema-instance"
	envSOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
	envSOAP12 = "http://www.w3.org/2003/05/soap-envelope"
)

// Limits of the loader.
const (
	maxWSDLFiles = 64
	maxWSDLBytes = 16 << 20
	maxTypeDepth = 12
)

type qname struct{ ns, local string }

func (q qname) String() string {
	if q.ns == "" {
		return q.local
	}
	return "{" + q.ns + "}" + q.local
}

// schemaDoc is one xsd:schema element.
type schemaDoc struct {
	el            *etree.Element
	tns           string
	qualified     bool // elementFormDefault="qualified"
	attrQualified bool
}

// wsdlSet is everything loaded from a WSDL file and its imports.
type wsdlSet struct {
	elements     map[qname]*etree.Element
	complexTypes map[qname]*etree.Element
	simpleTypes  map[qname]*etree.Element
	groups       map[qname]*etree.Element
	attrGroups   map[qname]*etree.Element
	schemaOf     map[*etree.Element]*schemaDoc // global declaration → its schema
	messages     map[qname]*etree.Element
	portTypes    map[qname]*etree.Element
	bindings     map[qname]*etree.Element
	services     []*etree.Element
	loaded       map[string]bool
	stamps       []fileStamp // every file read, to notice changes
	// notes are what the types' resolution left out (a pattern neither
	// JavaScript nor Go can check), reported with the skipped operations.
	notes []error
}

// loadError names the WSDL element at fault.
type loadError struct {
	where string
	msg   string
}

func (e *loadError) Error() string {
	if e.where == "" {
		return e.msg
	}
	return e.where + ": " + e.msg
}

func errAt(el *etree.Element, format string, args ...any) error {
	return &loadError{where: describe(el), msg: fmt.Sprintf(format, args...)}
}

// describe renders an element as <wsdl:operation name="Add"> for messages.
func describe(el *etree.Element) string {
	if el == nil {
		return ""
	}
	s := "<" + el.FullTag()
	if n := el.SelectAttrValue("name", ""); n != "" {
		s += ` name="` + n + `"`
	} else if r := el.SelectAttrValue("ref", ""); r != "" {
		s += ` ref="` + r + `"`
	}
	return s + ">"
}

func loadWSDL(path string) (*wsdlSet, error) {
	s := &wsdlSet{
		elements: map[qname]*etree.Element{}, complexTypes: map[qname]*etree.Element{},
		simpleTypes: map[qname]*etree.Element{}, groups: map[qname]*etree.Element{},
		attrGroups: map[qname]*etree.Element{}, schemaOf: map[*etree.Element]*schemaDoc{},
		messages: map[qname]*etree.Element{}, portTypes: map[qname]*etree.Element{},
		bindings: map[qname]*etree.Element{}, loaded: map[string]bool{},
	}
	if err := s.loadFile(path, true); err != nil {
		return nil, err
	}
	return s, nil
}

func readXML(path string) (*etree.Document, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", filepath.Base(path), unwrapPathErr(err))
	}
	if fi.Size() > maxWSDLBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), maxWSDLBytes)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromFile(path); err != nil {
		return nil, fmt.Errorf("%s is not well-formed XML: %v", filepath.Base(path), err)
	}
	if doc.Root() == nil {
		return nil, fmt.Errorf("%s has no root element", filepath.Base(path))
	}
	return doc, nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func (s *wsdlSet) markLoaded(path string) (bool, error) {
	abs, _ := filepath.Abs(path)
	if s.loaded[abs] {
		return true, nil
	}
	if len(s.loaded) >= maxWSDLFiles {
		return false, fmt.Errorf("more than %d imported files", maxWSDLFiles)
	}
	s.loaded[abs] = true
	s.stamps = append(s.stamps, stampOf(abs))
	return false, nil
}

// localRef resolves an import location against the importing file; only
// local files are read.
func localRef(base string, el *etree.Element, attr string) (string, error) {
	loc := el.SelectAttrValue(attr, "")
	if loc == "" {
		return "", nil
	}
	if u, err := url.Parse(loc); err == nil && u.Scheme != "" && u.Scheme != "file" && len(u.Scheme) > 1 {
		return "", errAt(el, "%s %q is not a local file (only local imports are read)", attr, loc)
	}
	loc = strings.TrimPrefix(loc, "file://")
	if !filepath.IsAbs(loc) {
		loc = filepath.Join(filepath.Dir(base), loc)
	}
	return loc, nil
}

func (s *wsdlSet) loadFile(path string, top bool) error {
	if seen, err := s.markLoaded(path); seen || err != nil {
		return err
	}
	doc, err := readXML(path)
	if err != nil {
		return err
	}
	root := doc.Root()
	switch {
	case root.NamespaceURI() == nsWSDL && root.Tag == "definitions":
		return s.addDefinitions(path, root)
	case root.NamespaceURI() == nsXSD && root.Tag == "schema" && !top:
		return s.addSchema(path, root, "")
	case root.NamespaceURI() == nsWSDL && root.Tag == "description":
		return errAt(root, "WSDL 2.0 is not supported (WSDL 1.1 only)")
	}
	return errAt(root, "not a WSDL 1.1 document (expected <wsdl:definitions>)")
}

func (s *wsdlSet) addDefinitions(path string, root *etree.Element) error {
	tns := root.SelectAttrValue("targetNamespace", "")
	for _, el := range root.ChildElements() {
		if el.NamespaceURI() != nsWSDL {
			continue
		}
		name := el.SelectAttrValue("name", "")
		q := qname{tns, name}
		switch el.Tag {
		case "import":
			loc, err := localRef(path, el, "location")
			if err != nil {
				return err
			}
			if loc == "" {
				return errAt(el, "has no location")
			}
			if err := s.loadFile(loc, false); err != nil {
				return fmt.Errorf("%s: %w", describe(el), err)
			}
		case "types":
			for _, sc := range el.ChildElements() {
				if sc.NamespaceURI() == nsXSD && sc.Tag == "schema" {
					if err := s.addSchema(path, sc, ""); err != nil {
						return err
					}
				}
			}
		case "message":
			s.messages[q] = el
		case "portType":
			s.portTypes[q] = el
		case "binding":
			s.bindings[q] = el
		case "service":
			s.services = append(s.services, el)
		}
	}
	return nil
}

// addSchema registers the global declarations of one schema; chameleon is
// the target namespace an include without one adopts.
func (s *wsdlSet) addSchema(path string, sc *etree.Element, chameleon string) error {
	sd := &schemaDoc{
		el:            sc,
		tns:           sc.SelectAttrValue("targetNamespace", chameleon),
		qualified:     sc.SelectAttrValue("elementFormDefault", "") == "qualified",
		attrQualified: sc.SelectAttrValue("attributeFormDefault", "") == "qualified",
	}
	for _, el := range sc.ChildElements() {
		if el.NamespaceURI() != nsXSD {
			continue
		}
		q := qname{sd.tns, el.SelectAttrValue("name", "")}
		switch el.Tag {
		case "import", "include", "redefine":
			loc, err := localRef(path, el, "schemaLocation")
			if err != nil {
				return err
			}
			if loc == "" {
				continue // an import of a namespace declared elsewhere
			}
			if seen, err := s.markLoaded(loc); err != nil {
				return errAt(el, "%v", err)
			} else if seen {
				continue
			}
			doc, err := readXML(loc)
			if err != nil {
				return fmt.Errorf("%s: %w", describe(el), err)
			}
			r := doc.Root()
			if r.NamespaceURI() != nsXSD || r.Tag != "schema" {
				return errAt(el, "%s is not an XML schema", filepath.Base(loc))
			}
			ch := ""
			if el.Tag != "import" {
				ch = sd.tns
			}
			if err := s.addSchema(loc, r, ch); err != nil {
				return err
			}
		case "element":
			s.elements[q] = el
		case "complexType":
			s.complexTypes[q] = el
		case "simpleType":
			s.simpleTypes[q] = el
		case "group":
			s.groups[q] = el
		case "attributeGroup":
			s.attrGroups[q] = el
		default:
			continue
		}
		s.schemaOf[el] = sd
	}
	// Local declarations need their schema too.
	for _, el := range sc.FindElements(".//*") {
		if _, ok := s.schemaOf[el]; !ok {
			s.schemaOf[el] = sd
		}
	}
	return nil
}

// resolveQName resolves a prefixed name in the scope of el.
func resolveQName(el *etree.Element, v string) (qname, error) {
	v = strings.TrimSpace(v)
	prefix, local := "", v
	if i := strings.IndexByte(v, ':'); i >= 0 {
		prefix, local = v[:i], v[i+1:]
	}
	for e := el; e != nil; e = e.Parent() {
		for _, a := range e.Attr {
			if (prefix == "" && a.Space == "" && a.Key == "xmlns") || (prefix != "" && a.Space == "xmlns" && a.Key == prefix) {
				return qname{a.Value, local}, nil
			}
		}
	}
	if prefix == "" {
		return qname{"", local}, nil
	}
	if prefix == "xml" {
		return qname{"http://www.w3.org/XML/1998/namespace", local}, nil
	}
	return qname{}, errAt(el, "prefix %q of %q is not declared", prefix, v)
}

func attrQName(el *etree.Element, attr string) (qname, bool, error) {
	v := el.SelectAttrValue(attr, "")
	if v == "" {
		return qname{}, false, nil
	}
	q, err := resolveQName(el, v)
	return q, true, err
}

func occurs(el *etree.Element) (min, max int, err error) {
	min, max = 1, 1
	if v := el.SelectAttrValue("minOccurs", ""); v != "" {
		if min, err = strconv.Atoi(v); err != nil || min < 0 {
			return 0, 0, errAt(el, "minOccurs %q is not a non-negative integer", v)
		}
	}
	if v := el.SelectAttrValue("maxOccurs", ""); v != "" {
		if v == "unbounded" {
			max = -1
		} else if max, err = strconv.Atoi(v); err != nil || max < 0 {
			return 0, 0, errAt(el, "maxOccurs %q is not a non-negative integer or unbounded", v)
		}
	}
	return min, max, nil
}

// fileStamp identifies a version of a file.
type fileStamp struct {
	path string
	mod  int64
	size int64
}

func stampOf(path string) fileStamp {
	st := fileStamp{path: path, mod: -1, size: -1}
	if fi, err := os.Stat(path); err == nil {
		st.mod, st.size = fi.ModTime().UnixNano(), fi.Size()
	}
	return st
}

// changed reports whether any of the files changed since they were read.
func changed(stamps []fileStamp) bool {
	for _, st := range stamps {
		if stampOf(st.path) != st {
			return true
		}
	}
	return false
}
