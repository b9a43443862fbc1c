package soap_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Open content (xsd:anyType, xsd:any) takes element and attribute names
// from the arguments: only XML names may become names, so an argument
// cannot add markup to the envelope.
func TestOpenContentNames(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Open", map[string]any{"wsdl": "open.wsdl"})

	res, ue := c.invoke(t, "Submit", map[string]any{
		"title": "t",
		"doc":   map[string]any{"@lang": "en", "p": []any{"a", "b"}, "meta": map[string]any{"@k": 1, "_value": "x"}, "gone": nil},
		"extra": "e", "@flag": true, "more": []any{1, 2},
	})
	if ue != nil {
		t.Error(ue)
	}
	want := `<ns1:Submit flag="true"><ns1:title>t</ns1:title><ns1:doc lang="en"><gone ns2:nil="true"/><meta k="1">x</meta><p>a</p><p>b</p></ns1:doc>` +
		`<extra>e</extra><more>1</more><more>2</more></ns1:Submit>`
	if res["echo"] != want || asJSON(res["operations"]) != "1" {
		t.Errorf("the service read %v (%v Body elements)\nwant %s", res["echo"], res["operations"], want)
	}

	cases := []struct {
		args map[string]any
		msg  string
	}{
		// The attack of the review: an attribute name that closes the tag.
		{map[string]any{"title": "t", "doc": map[string]any{`@x="1"/><Injected>2</Injected><y z`: "q"}},
			`argument doc.@x="1"/><Injected>2</Injected><y z: is not a valid XML attribute name`},
		// An open element name that closes the request element.
		{map[string]any{"title": "t", "a></ns1:Submit><Evil>1</Evil><b": "x"}, "is not a valid XML element name"},
		{map[string]any{"title": "t", "@a b": "x"}, "argument @a b: is not a valid XML attribute name"},
		{map[string]any{"title": "t", "doc": map[string]any{"x": map[string]any{"bad name": 1}}}, "argument doc.x.bad name: is not a valid XML element name"},
		// Prefixes would borrow the envelope's namespaces; xmlns would
		// declare new ones.
		{map[string]any{"title": "t", "doc": map[string]any{"soap:Body": "x"}}, "argument doc.soap:Body: is not a valid XML element name"},
		{map[string]any{"title": "t", "doc": map[string]any{"@xmlns": "urn:evil", "p": "x"}}, "argument doc.@xmlns: is not a valid XML attribute name"},
		{map[string]any{"title": "t", "doc": map[string]any{"@xmlns:soap": "urn:evil"}}, "is not a valid XML attribute name"},
		{map[string]any{"title": "t", "doc": map[string]any{"@": "x"}}, "is not a valid XML attribute name"},
		{map[string]any{"title": "t", "<" + strings.Repeat("x", 5000): "x"}, "argument <" + strings.Repeat("x", 63) + "…: is not a valid XML element name"},
		{map[string]any{"title": "t", "doc": map[string]any{"": "x"}}, "is not a valid XML element name"},
		// Values: scalars only where XML has text, no control characters.
		{map[string]any{"title": "t", "doc": map[string]any{"@a": map[string]any{"b": 1}}}, "argument doc.@a: must be a string, number or boolean"},
		{map[string]any{"title": "t", "doc": map[string]any{"_value": []any{1}}}, "argument doc._value: must be a string, number or boolean"},
		{map[string]any{"title": "t", "doc": map[string]any{"p": "a\x01"}}, "argument doc.p: contains a control character"},
		{map[string]any{"title": "t", "doc": map[string]any{"@a": "a\x00"}}, "argument doc.@a: contains a control character"},
	}
	for _, tc := range cases {
		_, ue := c.invoke(t, "Submit", tc.args)
		if ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, tc.msg) {
			t.Errorf("%s: %v, want an invalid argument %q", asJSON(tc.args), ue, tc.msg)
		}
	}
}

// The input schema of a type with open content allows further members,
// explicitly: the host refuses arguments a schema does not declare.
func TestOpenContentSchema(t *testing.T) {
	t.Parallel()
	tools, diags := expand(t, newCall(t, newSOAPServer(t), "Open", nil).h, map[string]any{"wsdl": "open.wsdl"})
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	in := string(tools["Submit"].InputSchema)
	if !strings.Contains(in, `"additionalProperties":true`) || strings.Contains(in, `"additionalProperties":false`) {
		t.Errorf("Submit input schema: %s", in)
	}
}
