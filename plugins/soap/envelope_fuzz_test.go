package soap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
)

// fuzzOp is an operation whose request has a typed attribute and typed
// fields, an xsd:anyType field and open content (xsd:any).
var fuzzOp = func() *operation {
	str := &xsdType{Kind: kindSimple, Base: "string"}
	return &operation{Name: "Submit", In: &xsdField{Name: "Submit", NS: "urn:crank:open", Min: 1, Max: 1, Type: &xsdType{
		Kind:  kindComplex,
		Attrs: []*xsdAttr{{Name: "flag", Type: &xsdType{Kind: kindSimple, Base: "boolean"}}},
		Fields: []*xsdField{
			{Name: "id", Type: &xsdType{Kind: kindSimple, Base: "long"}, Min: 0, Max: 1},
			{Name: "title", NS: "urn:crank:open", Type: str, Min: 0, Max: 1, Nillable: true},
			{Name: "doc", Type: anyType, Min: 0, Max: 1, Nillable: true},
			{Name: "*", Type: anyType, Min: 0, Max: -1},
		},
	}}}
}()

// FuzzBuildEnvelope builds envelopes from arbitrary arguments: either the
// arguments are refused with an argument error, or the envelope is
// well-formed XML whose Body holds exactly the request element, and that
// element holds exactly the elements, attributes and text the arguments
// describe (names, namespaces, order per name, values). Seeds are also in
// testdata/fuzz/FuzzBuildEnvelope.
func FuzzBuildEnvelope(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"id":7,"title":"a\rb","@flag":true,"doc":{"@lang":"en","p":["a","b"],"meta":{"@k":1,"_value":"x"},"gone":null}}`,
		`{"title":null,"extra":"e","@x":"1","more":[1,{"a":"b"},null],"_value":"text"}`,
		`{"doc":{"@x=\"1\"/><Injected>2</Injected><y z":"q"}}`,
		`{"a></ns0:Submit><Evil>1</Evil><b":"x"}`,
		`{"doc":{"@xmlns":"urn:evil","p":"x"}}`,
		`{"doc":{"soap:Body":"x","Größe":"1","名前":"2"}}`,
		`{"doc":"\u0001"}`,
		`{"doc":{"t":" \t\n "},"x":"]]>&<'\""}`,
		`{"id":"1"}`, `[1]`, `null`, `{"doc":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, version := range []string{"1.1", "1.2"} {
			op := *fuzzOp
			op.Version = version
			env, err := buildEnvelope(&op, args, nil, time.Time{})
			if err != nil {
				var ae *argError
				if !errors.As(err, &ae) {
					t.Fatalf("%s: error %T %v, want an argument error", args, err, err)
				}
				continue
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(args))
			dec.UseNumber()
			if len(bytes.TrimSpace(args)) == 0 {
				v = map[string]any{}
			} else if dec.Decode(&v) != nil {
				t.Fatalf("%s: invalid JSON accepted", args)
			}
			if v == nil {
				v = map[string]any{}
			}
			if err := checkEnvelope(env, version, v); err != nil {
				t.Fatalf("arguments %s\nenvelope %s\n%v", args, env, err)
			}
		}
	})
}

// checkEnvelope parses env strictly and compares its request element with
// the arguments.
func checkEnvelope(env []byte, version string, args any) error {
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(env); err != nil {
		return fmt.Errorf("not well-formed: %v", err)
	}
	envNS := envSOAP11
	if version == "1.2" {
		envNS = envSOAP12
	}
	root := doc.Root()
	if root == nil || root.Tag != "Envelope" || root.NamespaceURI() != envNS || len(root.ChildElements()) != 1 {
		return errors.New("the envelope is not one Envelope with one child")
	}
	body := root.ChildElements()[0]
	if body.Tag != "Body" || body.NamespaceURI() != envNS || len(body.ChildElements()) != 1 || len(body.Attr) != 0 {
		return errors.New("the Body is not one request element")
	}
	req := body.ChildElements()[0]
	if req.Tag != "Submit" || req.NamespaceURI() != "urn:crank:open" {
		return fmt.Errorf("the request element is {%s}%s", req.NamespaceURI(), req.Tag)
	}
	return checkElement(req, args, "")
}

// checkElement compares one element with its JSON value: null is
// xsi:nil, an object gives attributes ("@name"), text ("_value") and
// child elements (arrays repeat them), a scalar is the text.
func checkElement(el *etree.Element, v any, path string) error {
	attrs := map[string]string{}
	isNil := false
	for _, a := range el.Attr {
		switch {
		case a.Space == "xmlns":
			continue
		case a.Space == "" && a.Key == "xmlns":
			return fmt.Errorf("%s: a default namespace is declared", orArgs(path))
		case a.Key == "nil" && a.NamespaceURI() == nsXSI:
			isNil = a.Value == "true"
			continue
		case a.Space != "":
			return fmt.Errorf("%s: attribute %s:%s has a prefix", orArgs(path), a.Space, a.Key)
		}
		attrs[a.Key] = a.Value
	}
	if v == nil {
		if !isNil || len(attrs) > 0 || len(el.ChildElements()) > 0 || el.Text() != "" {
			return fmt.Errorf("%s: null is not an empty xsi:nil element", orArgs(path))
		}
		return nil
	}
	if isNil {
		return fmt.Errorf("%s: xsi:nil on a value", orArgs(path))
	}
	m, ok := v.(map[string]any)
	if !ok {
		if s := render(v); el.Text() != s || len(attrs) > 0 || len(el.ChildElements()) > 0 {
			return fmt.Errorf("%s: text %q, want %q alone", orArgs(path), el.Text(), s)
		}
		return nil
	}
	wantAttrs := map[string]string{}
	wantText := ""
	children := map[string][]any{}
	count := 0
	for k, x := range m {
		switch {
		case strings.HasPrefix(k, attrPrefix):
			if x != nil {
				wantAttrs[k[1:]] = render(x)
			}
		case k == valueKey:
			if x != nil {
				wantText = render(x)
			}
		default:
			if arr, ok := x.([]any); ok {
				children[k] = arr
			} else {
				children[k] = []any{x}
			}
			count += len(children[k])
		}
	}
	if fmt.Sprint(sortedMap(attrs)) != fmt.Sprint(sortedMap(wantAttrs)) {
		return fmt.Errorf("%s: attributes %v, want %v", orArgs(path), attrs, wantAttrs)
	}
	if el.Text() != wantText {
		return fmt.Errorf("%s: text %q, want %q", orArgs(path), el.Text(), wantText)
	}
	if got := len(el.ChildElements()); got != count {
		return fmt.Errorf("%s: %d child elements, want %d", orArgs(path), got, count)
	}
	seen := map[string]int{}
	for _, c := range el.ChildElements() {
		want, ok := children[c.Tag]
		if !ok || seen[c.Tag] >= len(want) {
			return fmt.Errorf("%s: unexpected element %s", orArgs(path), c.FullTag())
		}
		ns := ""
		if path == "" && c.Tag == "title" {
			ns = "urn:crank:open"
		}
		if c.NamespaceURI() != ns {
			return fmt.Errorf("%s: element %s in namespace %q", orArgs(path), c.Tag, c.NamespaceURI())
		}
		cp := join(path, c.Tag) + "[" + strconv.Itoa(seen[c.Tag]) + "]"
		if err := checkElement(c, want[seen[c.Tag]], cp); err != nil {
			return err
		}
		seen[c.Tag]++
	}
	return nil
}

func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprintf("(not a scalar: %T)", v)
}

func sortedMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, strconv.Quote(k)+"="+strconv.Quote(v))
	}
	sort.Strings(out)
	return out
}
