package soap

import (
	"github.com/beevik/etree"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Kinds of xsdType.
const (
	kindSimple  = "simple"
	kindComplex = "complex"
	kindAny     = "any" // anyType, xsd:any, or a type past the depth limit
)

// xsdType is the resolved shape of an XML schema type.
type xsdType struct {
	Kind string `json:"k"`
	// Simple types: the built-in base (local name in the XSD namespace)
	// and facets.
	Base      string   `json:"b,omitempty"`
	Enum      []string `json:"e,omitempty"`
	Pattern   string   `json:"p,omitempty"`
	MinLength *int     `json:"minl,omitempty"`
	MaxLength *int     `json:"maxl,omitempty"`
	MinInc    string   `json:"mini,omitempty"`
	MaxInc    string   `json:"maxi,omitempty"`
	MinExc    string   `json:"mine,omitempty"`
	MaxExc    string   `json:"maxe,omitempty"`
	List      bool     `json:"list,omitempty"`
	// Complex types.
	Fields []*xsdField `json:"f,omitempty"`
	Attrs  []*xsdAttr  `json:"a,omitempty"`
	// Value is the simple content of a complex type with attributes.
	Value *xsdType `json:"v,omitempty"`
}

type xsdField struct {
	Name     string   `json:"n"`
	NS       string   `json:"ns,omitempty"` // empty for unqualified
	Type     *xsdType `json:"t"`
	Min      int      `json:"min"`
	Max      int      `json:"max"` // -1 unbounded
	Nillable bool     `json:"nil,omitempty"`
	Choice   bool     `json:"c,omitempty"` // one of a choice
}

type xsdAttr struct {
	Name     string   `json:"n"`
	NS       string   `json:"ns,omitempty"`
	Type     *xsdType `json:"t"`
	Required bool     `json:"r,omitempty"`
}

func (f *xsdField) repeated() bool { return f.Max == -1 || f.Max > 1 }

var anyType = &xsdType{Kind: kindAny}

// resolver turns schema declarations into xsdTypes.
type resolver struct {
	s     *wsdlSet
	depth int
	nodes int // element declarations resolved, bounded by maxTypeNodes
}

// maxTypeNodes bounds the elements one body resolves to, so that types
// that refer to themselves several times cannot blow up.
const maxTypeNodes = 5000

func (r *resolver) schema(el *etree.Element) *schemaDoc {
	if sd := r.s.schemaOf[el]; sd != nil {
		return sd
	}
	return &schemaDoc{}
}

// typeByName resolves a named type.
func (r *resolver) typeByName(at *etree.Element, q qname) (*xsdType, error) {
	if q.ns == nsXSD {
		switch q.local {
		case "anyType":
			return anyType, nil
		case "anySimpleType":
			return &xsdType{Kind: kindSimple, Base: "string"}, nil
		}
		return &xsdType{Kind: kindSimple, Base: q.local}, nil
	}
	if el := r.s.simpleTypes[q]; el != nil {
		return r.simpleType(el)
	}
	if el := r.s.complexTypes[q]; el != nil {
		return r.complexType(el)
	}
	return nil, errAt(at, "type %s is not defined", q)
}

// element resolves an element declaration (global or local, or a ref) to
// a field.
func (r *resolver) element(el *etree.Element, global bool) (*xsdField, error) {
	r.depth++
	defer func() { r.depth-- }()
	min, max, err := occurs(el)
	if err != nil {
		return nil, err
	}
	if q, ok, err := attrQName(el, "ref"); err != nil {
		return nil, err
	} else if ok {
		g := r.s.elements[q]
		if g == nil {
			return nil, errAt(el, "element %s is not defined", q)
		}
		f, err := r.element(g, true)
		if err != nil {
			return nil, err
		}
		f.Min, f.Max = min, max
		return f, nil
	}
	name := el.SelectAttrValue("name", "")
	if name == "" {
		return nil, errAt(el, "element has neither name nor ref")
	}
	sd := r.schema(el)
	f := &xsdField{Name: name, Min: min, Max: max, Nillable: el.SelectAttrValue("nillable", "") == "true"}
	if global {
		f.Min, f.Max = 1, 1
	}
	if global || sd.qualified && el.SelectAttrValue("form", "") != "unqualified" || el.SelectAttrValue("form", "") == "qualified" {
		f.NS = sd.tns
	}
	r.nodes++
	if r.depth > maxTypeDepth || r.nodes > maxTypeNodes {
		f.Type = anyType
		return f, nil
	}
	if q, ok, err := attrQName(el, "type"); err != nil {
		return nil, err
	} else if ok {
		if f.Type, err = r.typeByName(el, q); err != nil {
			return nil, err
		}
		return f, nil
	}
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD {
			continue
		}
		switch c.Tag {
		case "complexType":
			f.Type, err = r.complexType(c)
			return f, err
		case "simpleType":
			f.Type, err = r.simpleType(c)
			return f, err
		}
	}
	f.Type = anyType
	return f, nil
}

func (r *resolver) simpleType(el *etree.Element) (*xsdType, error) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxTypeDepth {
		return &xsdType{Kind: kindSimple, Base: "string"}, nil
	}
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD {
			continue
		}
		switch c.Tag {
		case "restriction":
			return r.restriction(c)
		case "list":
			return &xsdType{Kind: kindSimple, Base: "string", List: true}, nil
		case "union":
			return &xsdType{Kind: kindSimple, Base: "string"}, nil
		}
	}
	return nil, errAt(el, "simpleType has no restriction, list or union")
}

func (r *resolver) restriction(el *etree.Element) (*xsdType, error) {
	t := &xsdType{Kind: kindSimple, Base: "string"}
	if q, ok, err := attrQName(el, "base"); err != nil {
		return nil, err
	} else if ok {
		bt, err := r.typeByName(el, q)
		if err != nil {
			return nil, err
		}
		if bt.Kind != kindSimple {
			return nil, errAt(el, "restriction of the complex type %s is not supported here", q)
		}
		c := *bt
		t = &c
		t.Enum = append([]string(nil), bt.Enum...)
	}
	var enum []string
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD {
			continue
		}
		v := c.SelectAttrValue("value", "")
		switch c.Tag {
		case "enumeration":
			enum = append(enum, v)
		case "pattern":
			p, err := sdk.PortablePattern(v, sdk.PatternXSD)
			if err != nil {
				r.s.notes = append(r.s.notes, errAt(c, "%v", err))
				continue
			}
			t.Pattern = p
		case "length":
			n, err := atoiFacet(c, v)
			if err != nil {
				return nil, err
			}
			t.MinLength, t.MaxLength = &n, &n
		case "minLength":
			n, err := atoiFacet(c, v)
			if err != nil {
				return nil, err
			}
			t.MinLength = &n
		case "maxLength":
			n, err := atoiFacet(c, v)
			if err != nil {
				return nil, err
			}
			t.MaxLength = &n
		case "minInclusive":
			t.MinInc = v
		case "maxInclusive":
			t.MaxInc = v
		case "minExclusive":
			t.MinExc = v
		case "maxExclusive":
			t.MaxExc = v
		}
	}
	if enum != nil {
		t.Enum = enum
	}
	return t, nil
}

func atoiFacet(el *etree.Element, v string) (int, error) {
	n := 0
	if v == "" {
		return 0, errAt(el, "facet has no value")
	}
	for _, c := range v {
		if c < '0' || c > '9' || n > 1<<30 {
			return 0, errAt(el, "facet value %q is not a non-negative integer", v)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

func (r *resolver) complexType(el *etree.Element) (*xsdType, error) {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxTypeDepth {
		return anyType, nil
	}
	t := &xsdType{Kind: kindComplex}
	if err := r.content(el, t, false); err != nil {
		return nil, err
	}
	return t, nil
}

// content adds the particles and attributes of a complexType (or of an
// extension) to t.
func (r *resolver) content(el *etree.Element, t *xsdType, choice bool) error {
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD {
			continue
		}
		switch c.Tag {
		case "sequence", "all":
			if err := r.particles(c, t, choice, c.SelectAttrValue("minOccurs", "1") == "0"); err != nil {
				return err
			}
		case "choice":
			if err := r.particles(c, t, true, false); err != nil {
				return err
			}
		case "group":
			if err := r.group(c, t, choice); err != nil {
				return err
			}
		case "attribute":
			if err := r.attribute(c, t); err != nil {
				return err
			}
		case "attributeGroup":
			q, ok, err := attrQName(c, "ref")
			if err != nil {
				return err
			}
			if !ok || r.s.attrGroups[q] == nil {
				return errAt(c, "attributeGroup %s is not defined", q)
			}
			if err := r.content(r.s.attrGroups[q], t, choice); err != nil {
				return err
			}
		case "complexContent", "simpleContent":
			if err := r.derived(c, t); err != nil {
				return err
			}
		case "anyAttribute":
		}
	}
	return nil
}

func (r *resolver) group(c *etree.Element, t *xsdType, choice bool) error {
	q, ok, err := attrQName(c, "ref")
	if err != nil {
		return err
	}
	if !ok || r.s.groups[q] == nil {
		return errAt(c, "group %s is not defined", q)
	}
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxTypeDepth {
		return nil
	}
	return r.content(r.s.groups[q], t, choice || c.SelectAttrValue("minOccurs", "1") == "0")
}

func (r *resolver) particles(el *etree.Element, t *xsdType, choice, optional bool) error {
	_, gmax, err := occurs(el)
	if err != nil {
		return err
	}
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD {
			continue
		}
		switch c.Tag {
		case "element":
			f, err := r.element(c, false)
			if err != nil {
				return err
			}
			if choice {
				f.Choice = true
				f.Min = 0
			}
			if optional {
				f.Min = 0
			}
			if gmax != 1 && f.Max != -1 {
				f.Max = -1 // a repeated group repeats its elements
			}
			t.Fields = append(t.Fields, f)
		case "sequence", "all":
			if err := r.particles(c, t, choice, optional || c.SelectAttrValue("minOccurs", "1") == "0"); err != nil {
				return err
			}
		case "choice":
			if err := r.particles(c, t, true, optional); err != nil {
				return err
			}
		case "group":
			if err := r.group(c, t, choice || optional); err != nil {
				return err
			}
		case "any":
			t.Fields = append(t.Fields, &xsdField{Name: "*", Type: anyType, Min: 0, Max: -1})
		}
	}
	return nil
}

func (r *resolver) attribute(c *etree.Element, t *xsdType) error {
	a := &xsdAttr{Required: c.SelectAttrValue("use", "") == "required"}
	decl := c
	if q, ok, err := attrQName(c, "ref"); err != nil {
		return err
	} else if ok {
		a.Name, a.NS = q.local, q.ns
		a.Type = &xsdType{Kind: kindSimple, Base: "string"}
		t.Attrs = append(t.Attrs, a)
		return nil
	}
	if c.SelectAttrValue("use", "") == "prohibited" {
		return nil
	}
	a.Name = decl.SelectAttrValue("name", "")
	if a.Name == "" {
		return errAt(c, "attribute has neither name nor ref")
	}
	if r.schema(c).attrQualified || c.SelectAttrValue("form", "") == "qualified" {
		a.NS = r.schema(c).tns
	}
	a.Type = &xsdType{Kind: kindSimple, Base: "string"}
	if q, ok, err := attrQName(c, "type"); err != nil {
		return err
	} else if ok {
		at, err := r.typeByName(c, q)
		if err != nil {
			return err
		}
		if at.Kind == kindSimple {
			a.Type = at
		}
	} else if st := c.SelectElement("simpleType"); st != nil {
		at, err := r.simpleType(st)
		if err != nil {
			return err
		}
		a.Type = at
	}
	t.Attrs = append(t.Attrs, a)
	return nil
}

// derived handles complexContent and simpleContent (extension and
// restriction).
func (r *resolver) derived(el *etree.Element, t *xsdType) error {
	for _, c := range el.ChildElements() {
		if c.NamespaceURI() != nsXSD || (c.Tag != "extension" && c.Tag != "restriction") {
			continue
		}
		q, ok, err := attrQName(c, "base")
		if err != nil {
			return err
		}
		if !ok {
			return errAt(c, "has no base")
		}
		if el.Tag == "simpleContent" {
			bt, err := r.typeByName(c, q)
			if err != nil {
				return err
			}
			switch {
			case bt.Kind == kindSimple:
				t.Value = bt
			case bt.Value != nil:
				t.Value = bt.Value
				t.Attrs = append(t.Attrs, bt.Attrs...)
			default:
				t.Value = &xsdType{Kind: kindSimple, Base: "string"}
			}
			if c.Tag == "restriction" {
				rt, err := r.restriction(c)
				if err == nil && (rt.Enum != nil || rt.Pattern != "") {
					t.Value = rt
				}
			}
			return r.content(c, t, false)
		}
		// complexContent: an extension inherits the base's content; a
		// restriction restates it.
		if c.Tag == "extension" && q.ns != nsXSD {
			bt, err := r.typeByName(c, q)
			if err != nil {
				return err
			}
			if bt.Kind == kindComplex {
				t.Fields = append(t.Fields, bt.Fields...)
				t.Attrs = append(t.Attrs, bt.Attrs...)
				t.Value = bt.Value
			}
		}
		return r.content(c, t, false)
	}
	return errAt(el, "has neither extension nor restriction")
}
