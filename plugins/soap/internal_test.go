package soap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

func errDetail(err error) json.RawMessage {
	if ue, ok := err.(*sdk.UpstreamError); ok && ue.Detail != nil {
		return ue.Detail
	}
	return json.RawMessage(`null`)
}

// Self-referring types are cut at the depth and node limits instead of
// expanding forever.
func TestRecursiveTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wsdl := `<wsdl:definitions xmlns:wsdl="http://schemas.xmlsoap.org/wsdl/" xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
  xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:t="urn:t" targetNamespace="urn:t">
 <wsdl:types><xs:schema targetNamespace="urn:t">
  <xs:complexType name="Node"><xs:sequence>
   <xs:element name="a" type="t:Node" minOccurs="0"/><xs:element name="b" type="t:Node" minOccurs="0"/>
   <xs:element name="c" type="t:Node" minOccurs="0"/><xs:element name="d" type="t:Node" minOccurs="0"/>
   <xs:element name="v" type="xs:string"/>
  </xs:sequence></xs:complexType>
  <xs:element name="Walk"><xs:complexType><xs:sequence><xs:element name="root" type="t:Node"/></xs:sequence></xs:complexType></xs:element>
 </xs:schema></wsdl:types>
 <wsdl:message name="In"><wsdl:part name="p" element="t:Walk"/></wsdl:message>
 <wsdl:portType name="P"><wsdl:operation name="Walk"><wsdl:input message="t:In"/></wsdl:operation></wsdl:portType>
 <wsdl:binding name="B" type="t:P"><soap:binding style="document"/>
  <wsdl:operation name="Walk"><soap:operation soapAction="w"/><wsdl:input><soap:body use="literal"/></wsdl:input></wsdl:operation></wsdl:binding>
 <wsdl:service name="S"><wsdl:port name="Q" binding="t:B"><soap:address location="http://127.0.0.1:1/"/></wsdl:port></wsdl:service>
</wsdl:definitions>`
	if err := os.WriteFile(filepath.Join(dir, "r.wsdl"), []byte(wsdl), 0o644); err != nil {
		t.Fatal(err)
	}
	// A changed file is read again at the next load.
	a := New().(*adapter)
	op := &sdk.Operation{Config: json.RawMessage(`{"wsdl":"r.wsdl"}`), BaseDir: dir}
	if p := a.load(op, true); p.Err() != nil || len(p.Value.ops) != 1 || p.Value.ops[0].Action != "w" {
		t.Fatalf("first load: %v", p.Diagnostics())
	}
	if err := os.WriteFile(filepath.Join(dir, "r.wsdl"), []byte(strings.Replace(wsdl, `soapAction="w"`, `soapAction="w2"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := a.load(op, true); p.Err() != nil || len(p.Value.ops) != 1 || p.Value.ops[0].Action != "w2" {
		t.Fatalf("reload: %v", p.Diagnostics())
	}
	done := make(chan *sdk.Prepared[*loaded], 1)
	go func() { done <- newConfigs().Get(op) }()
	select {
	case p := <-done:
		l := p.Value
		if p.Err() != nil || len(l.ops) != 1 || !l.ops[0].OutOptional {
			t.Fatalf("load: %v", p.Diagnostics())
		}
		s, err := json.Marshal(typeSchema(l.ops[0].In.Type))
		if err != nil || len(s) > 8<<20 {
			t.Fatalf("schema: %d bytes, %v", len(s), err)
		}
		// Unqualified local elements (no elementFormDefault) carry no namespace.
		env, err := buildEnvelope(l.ops[0], json.RawMessage(`{"root":{"v":"x","a":{"v":"y"}}}`), nil, time.Time{})
		if err != nil || !strings.Contains(string(env), `<ns1:Walk xmlns:ns1="urn:t"><root><a><v>y</v></a><v>x</v></root></ns1:Walk>`) &&
			!strings.Contains(string(env), `<ns1:Walk><root><a><v>y</v></a><v>x</v></root></ns1:Walk>`) {
			t.Errorf("envelope: %s %v", env, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("loading a recursive schema does not end")
	}
}

func TestScalar(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, kind, want string }{
		{"+5", "integer", "5"}, {"007", "integer", "7"}, {"-00099999999999999999999", "integer", "-99999999999999999999"},
		{"12.50", "number", "12.50"}, {"+1.5", "number", "1.5"}, {".5", "number", "0.5"}, {"1e400", "number", `"1e400"`},
		{"NaN", "number", `"NaN"`}, {"1", "boolean", "true"}, {"yes", "boolean", `"yes"`}, {"x", "integer", `"x"`},
	} {
		v, _ := scalar(c.in, c.kind)
		b, err := json.Marshal(v)
		if err != nil || string(b) != c.want {
			t.Errorf("scalar(%q, %s) = %s, %v; want %s", c.in, c.kind, b, err, c.want)
		}
	}
}
