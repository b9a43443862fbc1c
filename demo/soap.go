package demo

import (
	_ "embed"
	"fmt"
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/crankmcp/crank/plugins/soap/wsse"
)

// The demo SOAP service of `make run` (handler module
// http.handlers.crank_demo_soap): the calculator and order desk of
// soap.wsdl at POST /soap, answering SOAP 1.1 (text/xml) or SOAP 1.2
// (application/soap+xml) as asked; GET /soap?wsdl serves the WSDL.
// Dividing by zero and unknown order ids answer SOAP faults. The batch
// desk (service BatchDesk) invoices orders in the background: SubmitBatch
// answers a ticket at once, GetBatchStatus reports the batch through it,
// CancelBatch cancels it. Like the report jobs of demo/streams.go, batches
// keep no state: the ticket carries the start time, the duration and the
// order ids, so any replica answers for any ticket (and a cancel is only
// acknowledged).

//go:embed soap.wsdl
var soapWSDL string

func init() {
	caddy.RegisterModule(SOAPService{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_soap", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		s := new(SOAPService)
		return s, s.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_soap", httpcaddyfile.Before, "respond")
}

// SOAPService is the demo SOAP service.
type SOAPService struct{}

var _ caddyhttp.MiddlewareHandler = (*SOAPService)(nil)

// CaddyModule returns the Caddy module information.
func (SOAPService) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_soap", New: func() caddy.Module { return new(SOAPService) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo_soap`.
func (s *SOAPService) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// ServeHTTP serves the service.
func (s *SOAPService) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	NewSOAPHandler().ServeHTTP(w, r)
	return nil
}

// NewSOAPHandler returns the demo SOAP service as a plain handler (for
// tests).
func NewSOAPHandler() http.Handler { return http.HandlerFunc(serveSOAP) }

const (
	soapEnv11 = "http://schemas.xmlsoap.org/soap/envelope/"
	soapEnv12 = "http://www.w3.org/2003/05/soap-envelope"
	demoNS    = "urn:crank:demo:orders"
)

type demoLine struct {
	sku   string
	qty   int
	price string
}

type demoOrder struct {
	id       int
	customer string
	status   string
	lines    []demoLine
	note     string
}

var demoOrders = []demoOrder{
	{1, "Ada", "OPEN", []demoLine{{"BOOK-0001", 1, "12.50"}}, ""},
	{2, "Grace", "SHIPPED", []demoLine{{"PEN-0002", 10, "1.20"}, {"INK-0003", 2, "4.00"}}, "leave at the door"},
	{3, "Linus", "CANCELLED", []demoLine{{"MUG-0004", 1, "8"}}, ""},
}

func (o demoOrder) xml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<order><id>%d</id><customer>%s</customer><status>%s</status>", o.id, html.EscapeString(o.customer), o.status)
	for _, l := range o.lines {
		fmt.Fprintf(&b, `<line><sku>%s</sku><quantity>%d</quantity><price currency="EUR">%s</price></line>`, l.sku, l.qty, l.price)
	}
	if o.note == "" {
		b.WriteString(`<note xsi:nil="true"/>`)
	} else {
		fmt.Fprintf(&b, "<note>%s</note>", html.EscapeString(o.note))
	}
	b.WriteString("</order>")
	return b.String()
}

func serveSOAP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/soap" {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodGet {
		if _, ok := r.URL.Query()["wsdl"]; ok {
			w.Header().Set("Content-Type", "text/xml; charset=utf-8")
			io.WriteString(w, soapWSDL)
			return
		}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST a SOAP envelope, or GET /soap?wsdl", http.StatusMethodNotAllowed)
		return
	}
	v12 := strings.HasPrefix(r.Header.Get("Content-Type"), "application/soap+xml")
	doc := etree.NewDocument()
	if _, err := doc.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20)); err != nil || doc.Root() == nil || doc.Root().Tag != "Envelope" {
		soapFault(w, v12, true, "the request is not a SOAP envelope")
		return
	}
	var op *etree.Element
	for _, c := range doc.Root().ChildElements() {
		if c.Tag == "Body" && len(c.ChildElements()) > 0 {
			op = c.ChildElements()[0]
		}
	}
	if op == nil {
		soapFault(w, v12, true, "the Body is empty")
		return
	}
	if op.NamespaceURI() != demoNS {
		soapFault(w, v12, true, "unknown operation "+op.Tag)
		return
	}
	arg := func(name string) string {
		if e := op.SelectElement(name); e != nil {
			return strings.TrimSpace(e.Text())
		}
		return ""
	}
	var out string
	switch op.Tag {
	case "Add":
		a, err1 := strconv.Atoi(arg("a"))
		b, err2 := strconv.Atoi(arg("b"))
		if err1 != nil || err2 != nil {
			soapFault(w, v12, true, "a and b must be integers")
			return
		}
		out = fmt.Sprintf("<AddResponse><result>%d</result></AddResponse>", a+b)
	case "Divide":
		a, err1 := strconv.ParseFloat(arg("a"), 64)
		b, err2 := strconv.ParseFloat(arg("b"), 64)
		if err1 != nil || err2 != nil {
			soapFault(w, v12, true, "a and b must be numbers")
			return
		}
		if b == 0 {
			soapFault(w, v12, true, "division by zero")
			return
		}
		out = fmt.Sprintf("<DivideResponse><result>%s</result></DivideResponse>", strconv.FormatFloat(a/b, 'g', -1, 64))
	case "RefundOrder":
		// The refund desk wants a digest UsernameToken and a Timestamp:
		// the user crank-demo with the demo's secret (SOAPRefundPassword).
		user, f := soapRefundChecker().Check(doc.Root(), time.Now())
		if f != nil {
			soapSecurityFault(w, v12, f)
			return
		}
		id, _ := strconv.Atoi(arg("orderId"))
		if id < 1 || id > len(demoOrders) {
			soapFault(w, v12, true, fmt.Sprintf("order %d not found", id))
			return
		}
		out = fmt.Sprintf("<RefundOrderResponse><orderId>%d</orderId><refundedBy>%s</refundedBy></RefundOrderResponse>", id, html.EscapeString(user))
	case "GetOrder":
		id, _ := strconv.Atoi(arg("orderId"))
		for _, o := range demoOrders {
			if o.id == id {
				out = "<GetOrderResponse>" + o.xml() + "</GetOrderResponse>"
			}
		}
		if out == "" {
			soapFault(w, v12, true, fmt.Sprintf("order %d not found", id))
			return
		}
	case "ListOrders":
		want := map[string]bool{}
		for _, s := range op.SelectElements("status") {
			want[strings.TrimSpace(s.Text())] = true
		}
		var b strings.Builder
		for _, o := range demoOrders {
			if len(want) == 0 || want[o.status] {
				b.WriteString(o.xml())
			}
		}
		out = "<ListOrdersResponse>" + b.String() + "</ListOrdersResponse>"
	case "SubmitBatch":
		var ticket strings.Builder
		dur := defaultBatchDuration
		if s := arg("durationMs"); s != "" {
			d, err := strconv.Atoi(s)
			if err != nil || d < 0 || d > maxBatchDuration {
				soapFault(w, v12, true, fmt.Sprintf("durationMs must be an integer from 0 to %d", maxBatchDuration))
				return
			}
			dur = d
		}
		ids := op.SelectElements("orderId")
		if len(ids) == 0 || len(ids) > maxBatchOrders {
			soapFault(w, v12, true, fmt.Sprintf("a batch takes 1 to %d orderId elements", maxBatchOrders))
			return
		}
		fmt.Fprintf(&ticket, "batch-%d-%d-", time.Now().UnixMilli(), dur)
		for i, e := range ids {
			id, err := strconv.Atoi(strings.TrimSpace(e.Text()))
			if err != nil {
				soapFault(w, v12, true, "orderId must be an integer")
				return
			}
			if i > 0 {
				ticket.WriteByte('.')
			}
			ticket.WriteString(strconv.Itoa(id))
		}
		out = fmt.Sprintf("<SubmitBatchResponse><ticket>%s</ticket><state>RUNNING</state></SubmitBatchResponse>", ticket.String())
	case "GetBatchStatus", "CancelBatch":
		b, err := parseBatchTicket(arg("ticket"), time.Now())
		if err != nil {
			soapFault(w, v12, true, err.Error())
			return
		}
		if op.Tag == "CancelBatch" {
			out = fmt.Sprintf("<CancelBatchResponse><ticket>%s</ticket><state>CANCELLED</state></CancelBatchResponse>", html.EscapeString(b.ticket))
			break
		}
		var ok bool
		if out, ok = b.status(time.Now()); !ok {
			soapFault(w, v12, false, out)
			return
		}
	default:
		soapFault(w, v12, true, "unknown operation "+op.Tag)
		return
	}
	env, ct := soapEnv11, "text/xml; charset=utf-8"
	if v12 {
		env, ct = soapEnv12, "application/soap+xml; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	// The answer's elements are in the service namespace (a default
	// namespace on the wrapper, as many .NET services write it).
	out = strings.Replace(out, "Response>", `Response xmlns="`+demoNS+`" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`, 1)
	io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><soap:Envelope xmlns:soap="`+env+`"><soap:Body>`+out+`</soap:Body></soap:Envelope>`)
}

// soapRefundChecker verifies the refund desk's WS-Security headers (its
// nonce cache is shared by every request).
var soapRefundChecker = sync.OnceValue(func() *wsse.Checker {
	return &wsse.Checker{Users: map[string]string{"crank-demo": SOAPRefundPassword()}, RequireDigest: true, RequireTimestamp: true}
})

// SOAPRefundPassword is the refund desk's password for its user
// crank-demo: the demo's secret (DemoSecret), which demo/soap.yaml sends
// through a placeholder.
func SOAPRefundPassword() string { return DemoSecret() }

// soapSecurityFault answers a WS-Security fault: the faultcode
// wsse:<code> in SOAP 1.1, Sender with that subcode in SOAP 1.2.
func soapSecurityFault(w http.ResponseWriter, v12 bool, f *wsse.Fault) {
	reason := html.EscapeString(f.Reason)
	if v12 {
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `<soap:Envelope xmlns:soap="`+soapEnv12+`" xmlns:wsse="`+wsse.NS+`"><soap:Body><soap:Fault><soap:Code><soap:Value>soap:Sender</soap:Value><soap:Subcode><soap:Value>wsse:`+f.Code+
			`</soap:Value></soap:Subcode></soap:Code><soap:Reason><soap:Text xml:lang="en">`+reason+`</soap:Text></soap:Reason></soap:Fault></soap:Body></soap:Envelope>`)
		return
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, `<soap:Envelope xmlns:soap="`+soapEnv11+`" xmlns:wsse="`+wsse.NS+`"><soap:Body><soap:Fault><faultcode>wsse:`+f.Code+`</faultcode><faultstring>`+reason+
		`</faultstring></soap:Fault></soap:Body></soap:Envelope>`)
}

// soapFault answers a fault of the client (sender) or the server
// (receiver) in the request's SOAP version.
func soapFault(w http.ResponseWriter, v12, client bool, reason string) {
	reason = html.EscapeString(reason)
	if v12 {
		code, status := "soap:Receiver", http.StatusInternalServerError
		if client {
			code, status = "soap:Sender", http.StatusBadRequest
		}
		w.Header().Set("Content-Type", "application/soap+xml; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, `<soap:Envelope xmlns:soap="`+soapEnv12+`"><soap:Body><soap:Fault><soap:Code><soap:Value>`+code+
			`</soap:Value></soap:Code><soap:Reason><soap:Text xml:lang="en">`+reason+`</soap:Text></soap:Reason></soap:Fault></soap:Body></soap:Envelope>`)
		return
	}
	code := "soap:Server"
	if client {
		code = "soap:Client"
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, `<soap:Envelope xmlns:soap="`+soapEnv11+`"><soap:Body><soap:Fault><faultcode>`+code+`</faultcode><faultstring>`+reason+
		`</faultstring></soap:Fault></soap:Body></soap:Envelope>`)
}

// Demo batch bounds.
const (
	defaultBatchDuration = 3000
	maxBatchDuration     = 600000
	maxBatchOrders       = 50
	batchTicketLife      = time.Hour
)

// demoBatch is what a batch ticket carries.
type demoBatch struct {
	ticket string
	start  time.Time
	dur    time.Duration
	ids    []int
}

// parseBatchTicket reads a ticket of SubmitBatch
// ("batch-<start ms>-<duration ms>-<id>.<id>..."); an unknown, future or
// expired one is an error worded for a Client fault.
func parseBatchTicket(t string, now time.Time) (*demoBatch, error) {
	unknown := fmt.Errorf("unknown batch ticket %q", t)
	parts := strings.SplitN(t, "-", 4)
	if len(parts) != 4 || parts[0] != "batch" {
		return nil, unknown
	}
	start, err1 := strconv.ParseInt(parts[1], 10, 64)
	dur, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || dur < 0 || dur > maxBatchDuration {
		return nil, unknown
	}
	b := &demoBatch{ticket: t, start: time.UnixMilli(start), dur: time.Duration(dur) * time.Millisecond}
	for _, s := range strings.Split(parts[3], ".") {
		id, err := strconv.Atoi(s)
		if err != nil || len(b.ids) == maxBatchOrders {
			return nil, unknown
		}
		b.ids = append(b.ids, id)
	}
	if b.start.After(now.Add(time.Minute)) {
		return nil, unknown
	}
	if now.Sub(b.start) > b.dur+batchTicketLife {
		return nil, fmt.Errorf("batch ticket %q expired (tickets are kept for %s after their batch ends)", t, batchTicketLife)
	}
	return b, nil
}

// status is the batch's GetBatchStatusResponse at now, or, when ok is
// false, why the batch aborted (answered as a Server fault).
func (b *demoBatch) status(now time.Time) (out string, ok bool) {
	pct := 100
	if elapsed := now.Sub(b.start); elapsed < b.dur {
		pct = max(0, int(100*elapsed/b.dur))
	}
	head := fmt.Sprintf("<GetBatchStatusResponse><ticket>%s</ticket>", html.EscapeString(b.ticket))
	if pct < 100 {
		return head + fmt.Sprintf("<state>RUNNING</state><percent>%d</percent><done>false</done></GetBatchStatusResponse>", pct), true
	}
	var inv strings.Builder
	var total float64
	for _, id := range b.ids {
		var o *demoOrder
		for i := range demoOrders {
			if demoOrders[i].id == id {
				o = &demoOrders[i]
			}
		}
		switch {
		case o == nil:
			return head + fmt.Sprintf("<state>FAILED</state><percent>100</percent><done>true</done><error>order %d not found</error></GetBatchStatusResponse>", id), true
		case o.status == "CANCELLED":
			return fmt.Sprintf("batch %s aborted: order %d is cancelled and cannot be invoiced", b.ticket, id), false
		}
		sum := 0.0
		for _, l := range o.lines {
			p, _ := strconv.ParseFloat(l.price, 64)
			sum += float64(l.qty) * p
		}
		total += sum
		fmt.Fprintf(&inv, `<invoice><orderId>%d</orderId><customer>%s</customer><total currency="EUR">%.2f</total></invoice>`, o.id, html.EscapeString(o.customer), sum)
	}
	return head + fmt.Sprintf(`<state>DONE</state><percent>100</percent><done>true</done><result>%s<total currency="EUR">%.2f</total></result></GetBatchStatusResponse>`, inv.String(), total), true
}
