package soap_test

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beevik/etree"

	"github.com/crankmcp/crank/plugins/soap/wsse"
)

// A real SOAP service on loopback for the adapter's tests: the calculator
// and order lookup of testdata/service.wsdl, answering SOAP 1.1 or 1.2 as
// asked, with faults and HTTP failures on chosen inputs.
type soapServer struct {
	*httptest.Server
	mu       sync.Mutex
	lastBody string
	lastHdr  http.Header
	// checker verifies a request's WS-Security header, when it has one.
	checker wsse.Checker
}

const (
	env11 = "http://schemas.xmlsoap.org/soap/envelope/"
	env12 = "http://www.w3.org/2003/05/soap-envelope"
)

func newSOAPServer(t testing.TB) *soapServer {
	s := &soapServer{checker: wsse.Checker{Users: map[string]string{"alice": "s3cret"}}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *soapServer) last() (string, http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastBody, s.lastHdr
}

func (s *soapServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.lastBody, s.lastHdr = string(body), r.Header.Clone()
	s.mu.Unlock()
	ct := r.Header.Get("Content-Type")
	v12 := strings.HasPrefix(ct, "application/soap+xml")
	envNS := env11
	if v12 {
		envNS = env12
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(body); err != nil || doc.Root() == nil {
		http.Error(w, "bad xml", 400)
		return
	}
	var op *etree.Element
	secured := false
	for _, c := range doc.Root().ChildElements() {
		if c.Tag == "Body" && len(c.ChildElements()) > 0 {
			op = c.ChildElements()[0]
		}
		if c.Tag == "Header" && c.FindElement("./Security") != nil {
			secured = true
		}
	}
	if op == nil {
		s.fault(w, v12, "Client", "", "no operation")
		return
	}
	if secured {
		if _, f := s.checker.Check(doc.Root(), time.Now()); f != nil {
			s.securityFault(w, v12, f)
			return
		}
	}
	get := func(name string) string {
		if e := op.SelectElement(name); e != nil {
			return e.Text()
		}
		return ""
	}
	var resp string
	switch op.Tag {
	case "Add":
		a, _ := strconv.Atoi(get("a"))
		b, _ := strconv.Atoi(get("b"))
		resp = fmt.Sprintf(`<c:AddResponse xmlns:c="urn:crank:calc"><c:result>%d</c:result></c:AddResponse>`, a+b)
	case "Multiply":
		a, _ := strconv.Atoi(get("x"))
		b, _ := strconv.Atoi(get("y"))
		resp = fmt.Sprintf(`<r:MultiplyResponse xmlns:r="urn:crank:calc:rpc"><product>%d</product></r:MultiplyResponse>`, a*b)
	case "Divide":
		a, _ := strconv.ParseFloat(get("a"), 64)
		b, _ := strconv.ParseFloat(get("b"), 64)
		if b == 0 {
			s.fault(w, v12, "Client", "DivisionByZero", "division by zero")
			return
		}
		resp = fmt.Sprintf(`<DivideResponse xmlns="urn:crank:calc"><result>%g</result></DivideResponse>`, a/b)
	case "LookupOrder":
		switch id := get("orderId"); id {
		case "404":
			s.fault(w, v12, "Server", "", "order store unavailable")
			return
		case "500":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(500)
			io.WriteString(w, "<html><body>Internal Server Error</body></html>")
			return
		case "503":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(503)
			io.WriteString(w, "maintenance")
			return
		case "200":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "hello, not xml")
			return
		case "201":
			w.Header().Set("Content-Type", "text/xml")
			io.WriteString(w, "<notsoap/>")
			return
		case "256", "100000":
			// An order whose note nests elements n levels deep: with the
			// Envelope, Body, response and order, that many plus 4.
			n, _ := strconv.Atoi(id)
			w.Header().Set("Content-Type", "text/xml")
			io.WriteString(w, `<s:Envelope xmlns:s="`+envNS+`"><s:Body><o:LookupOrderResponse xmlns:o="urn:crank:orders"><o:order>`+
				strings.Repeat("<x>", n)+strings.Repeat("</x>", n)+`</o:order></o:LookupOrderResponse></s:Body></s:Envelope>`)
			return
		default:
			lines := `<o:line><o:sku>ABC-0001</o:sku><o:quantity>2</o:quantity><o:price currency="EUR">9.50</o:price><o:note xsi:nil="true"/></o:line>`
			if get("includeLines") == "false" {
				lines = ""
			}
			resp = `<o:LookupOrderResponse xmlns:o="urn:crank:orders" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><o:order priority="true"><o:id>` + id +
				`</o:id><o:status>SHIPPED</o:status>` + lines + `<o:gift>false</o:gift></o:order></o:LookupOrderResponse>`
		}
	case "PlaceOrder":
		n := len(op.FindElements("./order/line"))
		resp = fmt.Sprintf(`<o:PlaceOrderResponse xmlns:o="urn:crank:orders"><o:orderId>%d</o:orderId><o:echo>%s</o:echo></o:PlaceOrderResponse>`, 100+n, html.EscapeString(body2string(op)))
	case "Submit":
		// Echo the request element and count the Body's elements: an
		// argument that smuggled markup shows in both.
		n := 0
		for _, c := range doc.Root().ChildElements() {
			if c.Tag == "Body" {
				n = len(c.ChildElements())
			}
		}
		resp = fmt.Sprintf(`<o:SubmitResponse xmlns:o="urn:crank:open"><o:echo>%s</o:echo><o:operations>%d</o:operations></o:SubmitResponse>`, html.EscapeString(body2string(op)), n)
	case "FindOrders":
		var sb strings.Builder
		for _, st := range op.SelectElements("status") {
			fmt.Fprintf(&sb, `<order><id>7</id><status>%s</status><line><sku>XYZ-0002</sku><quantity>1</quantity><price currency="USD">1</price></line><line><sku>XYZ-0003</sku><quantity>3</quantity><price currency="USD">2.25</price><note>fragile</note></line><gift>1</gift></order>`, st.Text())
		}
		resp = `<FindOrdersResponse xmlns="urn:crank:orders">` + sb.String() + `</FindOrdersResponse>`
	default:
		s.fault(w, v12, "Client", "", "unknown operation "+op.Tag)
		return
	}
	if v12 {
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	}
	io.WriteString(w, `<?xml version="1.0"?><s:Envelope xmlns:s="`+envNS+`"><s:Body>`+resp+`</s:Body></s:Envelope>`)
}

func body2string(el *etree.Element) string {
	d := etree.NewDocument()
	d.SetRoot(el.Copy())
	s, _ := d.WriteToString()
	return s
}

// securityFault answers a WS-Security fault: in SOAP 1.1 the faultcode
// wsse:<code>, in SOAP 1.2 Sender with the subcode wsse:<code>.
func (s *soapServer) securityFault(w http.ResponseWriter, v12 bool, f *wsse.Fault) {
	if v12 {
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
		w.WriteHeader(400)
		io.WriteString(w, `<s:Envelope xmlns:s="`+env12+`" xmlns:wsse="`+wsse.NS+`"><s:Body><s:Fault><s:Code><s:Value>s:Sender</s:Value><s:Subcode><s:Value>wsse:`+f.Code+
			`</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang="en">`+f.Reason+`</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>`)
		return
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(500)
	io.WriteString(w, `<s:Envelope xmlns:s="`+env11+`" xmlns:wsse="`+wsse.NS+`"><s:Body><s:Fault><faultcode>wsse:`+f.Code+`</faultcode><faultstring>`+f.Reason+
		`</faultstring></s:Fault></s:Body></s:Envelope>`)
}

func (s *soapServer) fault(w http.ResponseWriter, v12 bool, code, sub, reason string) {
	if v12 {
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
		if code == "Client" {
			code = "Sender"
		} else {
			code = "Receiver"
		}
		w.WriteHeader(map[bool]int{true: 400, false: 500}[code == "Sender"])
		subXML := ""
		if sub != "" {
			subXML = `<s:Subcode><s:Value>m:` + sub + `</s:Value></s:Subcode>`
		}
		io.WriteString(w, `<s:Envelope xmlns:s="`+env12+`" xmlns:m="urn:crank:calc"><s:Body><s:Fault><s:Code><s:Value>s:`+code+`</s:Value>`+subXML+
			`</s:Code><s:Reason><s:Text xml:lang="en">`+reason+`</s:Text></s:Reason><s:Detail><m:info code="E1">see logs</m:info></s:Detail></s:Fault></s:Body></s:Envelope>`)
		return
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(500)
	if sub != "" {
		code += "." + sub
	}
	io.WriteString(w, `<s:Envelope xmlns:s="`+env11+`"><s:Body><s:Fault><faultcode>s:`+code+`</faultcode><faultstring>`+reason+
		`</faultstring><detail><info code="E1">see logs</info></detail></s:Fault></s:Body></s:Envelope>`)
}
