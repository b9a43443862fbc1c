package soap_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/soap"
	"github.com/crankmcp/crank/plugins/soap/wsse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, buf.Bytes(), want)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testdataDir(t *testing.T) string {
	d, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// expand returns the tools of an entry by name.
func expand(t *testing.T, h *adaptertest.Harness, cfg map[string]any) (map[string]sdk.Tool, []sdk.Diagnostic) {
	t.Helper()
	list, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg, BaseDir: testdataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]sdk.Tool{}
	for _, tl := range list {
		tools[tl.Name] = tl
	}
	return tools, diags
}

func TestExpandSchemas(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, soap.New())
	tools, diags := expand(t, h, map[string]any{"wsdl": "service.wsdl", "tool_prefix": "calc_"})
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "calc_Add,calc_Divide,calc_FindOrders,calc_LookupOrder,calc_PlaceOrder" {
		t.Fatalf("tools = %v", names)
	}
	// Broken is skipped and reported with the element at fault; the rest load.
	if len(diags) != 1 || diags[0].Severity != sdk.SeverityWarning ||
		!strings.Contains(diags[0].Message, `<wsdl:part name="parameters">: element {urn:crank:calc}Missing is not defined`) ||
		!strings.Contains(diags[0].Message, `name="Broken"`) {
		t.Errorf("diagnostics = %v", diags)
	}
	if d := tools["calc_Add"].Description; d != "Adds two integers." {
		t.Errorf("Add description = %q", d)
	}
	for _, n := range names {
		golden(t, n+".json", tools[n].InputSchema)
		// The host resolves input schemas with google/jsonschema-go.
		var js jsonschema.Schema
		if err := json.Unmarshal(tools[n].InputSchema, &js); err != nil {
			t.Fatal(err)
		}
		r, err := js.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: schema does not resolve: %v", n, err)
		}
		if n == "calc_PlaceOrder" {
			bad := map[string]any{"order": map[string]any{"id": 1, "status": "PENDING", "gift": true,
				"line": []any{map[string]any{"sku": "abc", "quantity": 0, "price": map[string]any{"@currency": "EUR"}}}}}
			if err := r.Validate(bad); err == nil || !strings.Contains(err.Error(), "sku") && !strings.Contains(err.Error(), "quantity") {
				t.Errorf("PlaceOrder schema accepts a bad sku and quantity: %v", err)
			}
		}
		var cfg map[string]any
		if err := json.Unmarshal(tools[n].Config, &cfg); err != nil || cfg["operation"] != strings.TrimPrefix(n, "calc_") || cfg["tool_prefix"] != nil {
			t.Errorf("%s config = %s", n, tools[n].Config)
		}
	}
	// rpc/literal: one argument per part.
	tools, _ = expand(t, h, map[string]any{"wsdl": "service.wsdl", "port": "Rpc"})
	golden(t, "Multiply.json", tools["Multiply"].InputSchema)
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, soap.New())
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bad.xml", "<definitions")
	write("wsdl2.wsdl", `<description xmlns="http://schemas.xmlsoap.org/wsdl/"/>`)
	write("remote.wsdl", `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"><import location="http://example.com/x.wsdl"/></definitions>`)
	write("noport.wsdl", `<definitions xmlns="http://schemas.xmlsoap.org/wsdl/"/>`)
	write("encoded.wsdl", strings.ReplaceAll(mustRead(t, "testdata/service.wsdl"), `location="abstract.wsdl"`, `location="`+filepath.Join(testdataDir(t), "abstract.wsdl")+`"`))
	cases := []struct {
		cfg   map[string]any
		field string
		msg   string
	}{
		{map[string]any{}, "wsdl", "is required"},
		{map[string]any{"wsdl": "x", "bogus": 1}, "bogus", "unknown field"},
		{map[string]any{"wsdl": "x", "timeout": "soon"}, "timeout", "not a valid duration"},
		{map[string]any{"wsdl": "x", "endpoint": "ftp://x"}, "endpoint", "absolute http"},
		{map[string]any{"wsdl": "x", "headers": map[string]any{"Content-Length": "1"}}, "headers.Content-Length", "set by the adapter"},
		{map[string]any{"wsdl": "x", "security": map[string]any{"password": "p"}}, "security.username", "required"},
		{map[string]any{"wsdl": "missing.wsdl"}, "wsdl", "cannot read missing.wsdl"},
		{map[string]any{"wsdl": "bad.xml"}, "wsdl", "not well-formed XML"},
		{map[string]any{"wsdl": "wsdl2.wsdl"}, "wsdl", "WSDL 2.0 is not supported"},
		{map[string]any{"wsdl": "remote.wsdl"}, "wsdl", `<import>: location "http://example.com/x.wsdl" is not a local file`},
		{map[string]any{"wsdl": "noport.wsdl"}, "wsdl", "has no SOAP port"},
		{map[string]any{"wsdl": "encoded.wsdl", "port": "Nope"}, "port", `no port "Nope" (ports: Soap11, Soap12, Rpc)`},
		{map[string]any{"wsdl": "encoded.wsdl", "operation": "Broken"}, "operation", "Broken cannot be used"},
		{map[string]any{"wsdl": "encoded.wsdl", "operations": []string{"Nope"}}, "operations", "Nope is not an operation of port Soap11"},
	}
	for _, c := range cases {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: c.cfg, BaseDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, d := range diags {
			if d.Field == c.field && strings.Contains(d.Message, c.msg) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%v: diagnostics %v, want %s: %s", c.cfg, diags, c.field, c.msg)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type call struct {
	h   *adaptertest.Harness
	cfg map[string]any
	dir string
}

func newCall(t *testing.T, srv *soapServer, port string, extra map[string]any) call {
	cfg := map[string]any{"wsdl": "service.wsdl", "port": port, "endpoint": srv.URL + "/soap"}
	for k, v := range extra {
		cfg[k] = v
	}
	return call{h: adaptertest.New(t, soap.New()), cfg: cfg, dir: testdataDir(t)}
}

func (c call) invoke(t *testing.T, op string, args any) (map[string]any, *sdk.UpstreamError) {
	t.Helper()
	cfg := map[string]any{"operation": op}
	for k, v := range c.cfg {
		cfg[k] = v
	}
	res, ue, err := c.h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: args, BaseDir: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	if ue != nil {
		return nil, ue
	}
	var m map[string]any
	if err := json.Unmarshal(res.Structured, &m); err != nil {
		t.Fatalf("result %s: %v", res.Structured, err)
	}
	return m, nil
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCallsSOAP11And12(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	for _, port := range []string{"Soap11", "Soap12"} {
		c := newCall(t, srv, port, nil)
		res, ue := c.invoke(t, "Add", map[string]any{"a": 2, "b": 40})
		if ue != nil || asJSON(res) != `{"result":42}` {
			t.Fatalf("%s Add = %v, %v", port, res, ue)
		}
		body, hdr := srv.last()
		if port == "Soap11" {
			if hdr.Get("SOAPAction") != `"urn:crank:calc/Add"` || !strings.HasPrefix(hdr.Get("Content-Type"), "text/xml") {
				t.Errorf("SOAP 1.1 headers: %v", hdr)
			}
			if !strings.Contains(body, `xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"`) {
				t.Errorf("SOAP 1.1 envelope: %s", body)
			}
		} else {
			if ct := hdr.Get("Content-Type"); ct != `application/soap+xml; charset=utf-8; action="urn:crank:calc/Add"` || hdr.Get("SOAPAction") != "" {
				t.Errorf("SOAP 1.2 headers: %v", hdr)
			}
		}
		if !strings.Contains(body, `<ns1:Add xmlns:ns1="urn:crank:calc"><ns1:a>2</ns1:a><ns1:b>40</ns1:b></ns1:Add>`) &&
			!strings.Contains(body, `<ns1:Add><ns1:a>2</ns1:a><ns1:b>40</ns1:b></ns1:Add>`) {
			t.Errorf("%s body: %s", port, body)
		}
		// Extension: Divide has a, b from Operands and its own precision.
		res, ue = c.invoke(t, "Divide", map[string]any{"a": 1, "b": 4, "precision": 2})
		if ue != nil || asJSON(res) != `{"result":0.25}` {
			t.Errorf("%s Divide = %v, %v", port, res, ue)
		}
		res, ue = c.invoke(t, "LookupOrder", map[string]any{"orderId": 12})
		want := `{"order":{"@priority":true,"gift":false,"id":12,"line":[{"note":null,"price":{"@currency":"EUR","_value":9.5},"quantity":2,"sku":"ABC-0001"}],"status":"SHIPPED"}}`
		if ue != nil || asJSON(res) != want {
			t.Errorf("%s LookupOrder = %s, %v\nwant %s", port, asJSON(res), ue, want)
		}
	}
}

func TestNestedRepeatedOptionalEnum(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Soap11", nil)
	res, ue := c.invoke(t, "FindOrders", map[string]any{
		"status": []any{"PENDING", "SHIPPED"}, "email": "a@example.com",
		"shipTo": map[string]any{"street": "1 Main St", "city": "Springfield"},
	})
	if ue != nil {
		t.Fatal(ue)
	}
	body, _ := srv.last()
	for _, frag := range []string{`<ns1:status>PENDING</ns1:status><ns1:status>SHIPPED</ns1:status><ns1:email>a@example.com</ns1:email>`,
		`<ns1:shipTo><ns1:street>1 Main St</ns1:street><ns1:city>Springfield</ns1:city></ns1:shipTo>`} {
		if !strings.Contains(body, frag) {
			t.Errorf("envelope lacks %s:\n%s", frag, body)
		}
	}
	orders, _ := res["order"].([]any)
	if len(orders) != 2 {
		t.Fatalf("orders = %s", asJSON(res))
	}
	o := orders[1].(map[string]any)
	if asJSON(o["status"]) != `"SHIPPED"` || asJSON(o["gift"]) != "true" || len(o["line"].([]any)) != 2 {
		t.Errorf("order = %s", asJSON(o))
	}
	// One repeated element is still an array; none with minOccurs 0 is left out.
	res, ue = c.invoke(t, "FindOrders", map[string]any{"status": []any{"CANCELLED"}, "customerId": 3})
	if ue != nil || len(res["order"].([]any)) != 1 {
		t.Errorf("one order = %v, %v", res, ue)
	}
	res, ue = c.invoke(t, "FindOrders", map[string]any{"customerId": 3})
	if ue != nil || asJSON(res) != `{}` {
		t.Errorf("no order = %v, %v", res, ue)
	}
	// Optional element omitted; the lines come back empty-free.
	res, ue = c.invoke(t, "LookupOrder", map[string]any{"orderId": 5, "includeLines": false})
	if ue != nil || !strings.Contains(asJSON(res), `"line":[]`) {
		t.Errorf("no lines = %v, %v", asJSON(res), ue)
	}
}

func TestPlaceOrderNested(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Soap11", nil)
	res, ue := c.invoke(t, "PlaceOrder", map[string]any{
		"@dryRun": true,
		"order": map[string]any{
			"@priority": false, "id": 9, "status": "PENDING", "gift": true,
			"line": []any{
				map[string]any{"sku": "ABC-0001", "quantity": 2, "price": map[string]any{"@currency": "EUR", "_value": 9.5}, "note": nil},
				map[string]any{"sku": "ABC-0002", "quantity": 1, "price": map[string]any{"@currency": "EUR", "_value": 3}, "note": "gift wrap"},
			},
		},
	})
	if ue != nil || asJSON(res["orderId"]) != "102" {
		t.Fatalf("PlaceOrder = %v, %v", res, ue)
	}
	want := `<ns1:PlaceOrder dryRun="true"><ns1:order priority="false"><ns1:id>9</ns1:id><ns1:status>PENDING</ns1:status>` +
		`<ns1:line><ns1:sku>ABC-0001</ns1:sku><ns1:quantity>2</ns1:quantity><ns1:price currency="EUR">9.5</ns1:price><ns1:note ns2:nil="true"/></ns1:line>` +
		`<ns1:line><ns1:sku>ABC-0002</ns1:sku><ns1:quantity>1</ns1:quantity><ns1:price currency="EUR">3</ns1:price><ns1:note>gift wrap</ns1:note></ns1:line>` +
		`<ns1:gift>true</ns1:gift></ns1:order></ns1:PlaceOrder>`
	body, _ := srv.last()
	if res["echo"] != want || !strings.Contains(body, `xmlns:ns1="urn:crank:orders" xmlns:ns2="http://www.w3.org/2001/XMLSchema-instance"><soap:Body>`+want) {
		t.Errorf("the service read\n%s\nwant\n%s", body, want)
	}
}

func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Soap11", nil)
	cases := []struct {
		op   string
		args any
		msg  string
	}{
		{"Add", map[string]any{"a": 1}, "argument b: is required"},
		{"Add", map[string]any{"a": "1", "b": 2}, "argument a: must be a integer"},
		{"Add", map[string]any{"a": 1.5, "b": 2}, "argument a: must be an integer"},
		{"Add", map[string]any{"a": 1, "b": 2, "c": 3}, "argument c: is not a field"},
		{"FindOrders", map[string]any{"status": "PENDING", "email": "x"}, "argument status: must be an array"},
		{"FindOrders", map[string]any{"status": []any{"LOST"}, "email": "x"}, "argument status[0]: must be one of PENDING, SHIPPED, CANCELLED"},
		{"FindOrders", map[string]any{"email": "x", "shipTo": map[string]any{"street": "s"}}, "argument shipTo.city: is required"},
		{"FindOrders", map[string]any{"email": "x\x01"}, "control character"},
		{"Add", []any{1}, "must be an object"},
	}
	for _, tc := range cases {
		_, ue := c.invoke(t, tc.op, tc.args)
		if ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, tc.msg) {
			t.Errorf("%s %v: %v, want %q", tc.op, tc.args, ue, tc.msg)
		}
	}
}

func TestFaultsAndHTTPFailures(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c11 := newCall(t, srv, "Soap11", nil)
	c12 := newCall(t, srv, "Soap12", nil)
	cases := []struct {
		c      call
		op     string
		args   any
		kind   sdk.ErrorKind
		status string
		detail string
	}{
		{c11, "Divide", map[string]any{"a": 1, "b": 0}, sdk.KindUpstreamStatus, "Client",
			`{"fault":{"code":"Client","detail":{"info":{"@code":"E1","_value":"see logs"}},"reason":"division by zero","subcodes":["DivisionByZero"]},"soap_version":"1.1","status_code":500}`},
		{c12, "Divide", map[string]any{"a": 1, "b": 0}, sdk.KindUpstreamStatus, "Sender",
			`{"fault":{"code":"Sender","detail":{"info":{"@code":"E1","_value":"see logs"}},"reason":"division by zero","subcodes":["DivisionByZero"]},"soap_version":"1.2","status_code":400}`},
		{c11, "LookupOrder", map[string]any{"orderId": 404}, sdk.KindUpstreamStatus, "Server", `"retry"`},
		{c12, "LookupOrder", map[string]any{"orderId": 404}, sdk.KindUpstreamStatus, "Receiver", `"retry"`},
		{c11, "LookupOrder", map[string]any{"orderId": 500}, sdk.KindUpstreamStatus, "500", `{"content_type":"text/html","status_code":500}`},
		{c12, "LookupOrder", map[string]any{"orderId": 503}, sdk.KindUpstreamStatus, "503", `{"content_type":"text/plain","status_code":503}`},
		{c11, "LookupOrder", map[string]any{"orderId": 200}, sdk.KindBadResponse, "", ""},
		{c11, "LookupOrder", map[string]any{"orderId": 201}, sdk.KindBadResponse, "", ""},
	}
	for _, tc := range cases {
		_, ue := tc.c.invoke(t, tc.op, tc.args)
		if ue == nil || ue.Kind != tc.kind || ue.Status != tc.status {
			t.Errorf("%s %v: %v", tc.op, tc.args, ue)
			continue
		}
		// The endpoint's scheme and host only: a path may carry a secret.
		if want := "SOAP " + tc.op + " " + srv.URL; ue.Upstream != want {
			t.Errorf("%s %v: upstream = %q, want %q", tc.op, tc.args, ue.Upstream, want)
		}
		if rejected := tc.status == "Client" || tc.status == "Sender"; ue.Rejected != rejected {
			t.Errorf("%s %v: rejected = %v, want %v", tc.op, tc.args, ue.Rejected, rejected)
		}
		switch tc.detail {
		case `"retry"`:
			if !ue.Retryable || !strings.Contains(ue.Message, "order store unavailable") {
				t.Errorf("server fault: %v", ue)
			}
		case "":
		default:
			if string(ue.Detail) != tc.detail {
				t.Errorf("%s %v detail = %s\nwant %s", tc.op, tc.args, ue.Detail, tc.detail)
			}
		}
	}
	// Transport failure: nothing listens.
	dead := newCall(t, srv, "Soap11", map[string]any{"endpoint": "http://127.0.0.1:1/soap"})
	if _, ue := dead.invoke(t, "Add", map[string]any{"a": 1, "b": 1}); ue == nil || ue.Kind != sdk.KindTransport {
		t.Errorf("dead endpoint: %v", ue)
	}
	// A service slower than the timeout.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leaving
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	late := newCall(t, srv, "Soap11", map[string]any{"endpoint": slow.URL, "timeout": "200ms"})
	if _, ue := late.invoke(t, "Add", map[string]any{"a": 1, "b": 1}); ue == nil || ue.Kind != sdk.KindTimeout || !strings.Contains(ue.Message, "within 200ms") {
		t.Errorf("slow endpoint: %v", ue)
	}
	// Too large an answer.
	small := newCall(t, srv, "Soap11", map[string]any{"max_response_bytes": 10})
	if _, ue := small.invoke(t, "Add", map[string]any{"a": 1, "b": 1}); ue == nil || ue.Kind != sdk.KindBadResponse || !strings.Contains(ue.Message, "max_response_bytes (10)") {
		t.Errorf("too large: %v", ue)
	}
}

func TestRPCLiteral(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Rpc", nil)
	res, ue := c.invoke(t, "Multiply", map[string]any{"x": 6, "y": 7})
	if ue != nil || asJSON(res) != `{"product":42}` {
		t.Fatalf("Multiply = %v, %v", res, ue)
	}
	body, _ := srv.last()
	if !strings.Contains(body, `<ns1:Multiply xmlns:ns1="urn:crank:calc:rpc"><x>6</x><y>7</y></ns1:Multiply>`) && !strings.Contains(body, `<ns1:Multiply><x>6</x><y>7</y></ns1:Multiply>`) {
		t.Errorf("rpc envelope: %s", body)
	}
}

func TestWSSecurityAndHeaders(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Soap11", map[string]any{
		"security": map[string]any{"username": "alice", "password": "s3cret", "password_type": "text"}, // loopback: allowed
		"headers":  map[string]any{"X-Tenant": "acme"},
	})
	if res, ue := c.invoke(t, "Add", map[string]any{"a": 1, "b": 2}); ue != nil || asJSON(res) != `{"result":3}` {
		t.Fatalf("Add = %v, %v", res, ue)
	}
	body, hdr := srv.last()
	if !strings.Contains(body, `<wsse:Username>alice</wsse:Username><wsse:Password Type="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText">s3cret</wsse:Password>`) || hdr.Get("X-Tenant") != "acme" {
		t.Errorf("security header: %s %v", body, hdr)
	}
	bad := newCall(t, srv, "Soap12", map[string]any{"security": map[string]any{"username": "alice", "password": "wrong-pw-123", "password_type": "text"}})
	_, ue := bad.invoke(t, "Add", map[string]any{"a": 1, "b": 2})
	if ue == nil || ue.Status != "FailedAuthentication" || strings.Contains(asJSON(ue), "wrong-pw-123") {
		t.Errorf("bad credentials: %v", ue)
	}
	// Config errors never quote the values.
	diags, _ := bad.h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"wsdl": "service.wsdl", "headers": map[string]any{"X-Key": "secret-val\n"}}, BaseDir: bad.dir})
	if len(diags) == 0 || strings.Contains(asJSON(diags), "secret-val") {
		t.Errorf("header diagnostics: %v", diags)
	}
}

// TestWSSecurityDigestAndTimestamp: a digest token (nonce, created) and a
// Timestamp are sent fresh with every call and verified by a checking
// service; the password never travels; wrong credentials and an expired
// message are security faults: clear, refused and not retried, in both
// SOAP versions.
func TestWSSecurityDigestAndTimestamp(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	srv.checker.RequireDigest, srv.checker.RequireTimestamp = true, true
	var good string // a request the service accepted
	for _, port := range []string{"Soap11", "Soap12"} {
		c := newCall(t, srv, port, map[string]any{
			"security": map[string]any{"username": "alice", "password": "s3cret", "password_type": "digest", "timestamp": "5m"},
		})
		var nonces []string
		for i := range 2 {
			if res, ue := c.invoke(t, "Add", map[string]any{"a": i, "b": 2}); ue != nil || asJSON(res) != fmt.Sprintf(`{"result":%d}`, i+2) {
				t.Fatalf("%s Add = %v, %v", port, res, ue)
			}
			body, _ := srv.last()
			doc := etree.NewDocument()
			if err := doc.ReadFromString(body); err != nil {
				t.Fatal(err)
			}
			ut, ts := doc.FindElement("//UsernameToken"), doc.FindElement("//Timestamp")
			if ut == nil || ts == nil || ts.FindElement("Expires") == nil || strings.Contains(body, "s3cret") ||
				ut.FindElement("Password").SelectAttrValue("Type", "") != wsse.PasswordDigest {
				t.Fatalf("%s security header: %s", port, body)
			}
			nonces = append(nonces, ut.FindElement("Nonce").Text())
			good = body
		}
		if nonces[0] == nonces[1] || nonces[0] == "" {
			t.Errorf("%s nonces %v: want a fresh one per call", port, nonces)
		}

		for what, cfg := range map[string]map[string]any{
			"wrong password": {"username": "alice", "password": "wrong-pw-123", "password_type": "digest", "timestamp": "5m"},
			"unknown user":   {"username": "mallory", "password": "wrong-pw-123", "password_type": "digest", "timestamp": "5m"},
			"text password":  {"username": "alice", "password": "s3cret", "password_type": "text", "timestamp": "5m"},
			"no timestamp":   {"username": "alice", "password": "s3cret", "password_type": "digest"},
		} {
			_, ue := newCall(t, srv, port, map[string]any{"security": cfg}).invoke(t, "Add", map[string]any{"a": 1, "b": 2})
			if ue == nil || ue.Kind != sdk.KindUpstreamStatus || ue.Retryable || !ue.Rejected ||
				!strings.HasPrefix(ue.Message, "SOAP security fault ") || !strings.Contains(ue.Message, "the service refused the WS-Security header") ||
				strings.Contains(asJSON(ue), "wrong-pw-123") || strings.Contains(asJSON(ue), "s3cret") {
				t.Errorf("%s %s: %+v", port, what, ue)
			}
		}
	}
	// The Checker refuses a replayed nonce and an expired message.
	doc := etree.NewDocument()
	_ = doc.ReadFromString(good)
	if _, f := srv.checker.Check(doc.Root(), time.Now()); f == nil || f.Code != wsse.FailedAuthentication {
		t.Errorf("a replayed message: %v", f)
	}
	if _, f := (&wsse.Checker{Users: map[string]string{"alice": "s3cret"}}).Check(doc.Root(), time.Now().Add(time.Hour)); f == nil || f.Code != wsse.MessageExpired {
		t.Errorf("an expired message: %v", f)
	}

	// The config's bounds, named by field.
	plain := newCall(t, srv, "Soap11", nil)
	diags, err := plain.h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"wsdl": "service.wsdl",
		"security": map[string]any{"username": "a", "password_type": "md5", "timestamp": "48h"}}, BaseDir: plain.dir})
	if err != nil || !strings.Contains(asJSON(diags), "security.password_type") || !strings.Contains(asJSON(diags), "security.timestamp") {
		t.Errorf("diagnostics: %v %v", diags, err)
	}
	// A password as text only over https or to loopback; a digest by
	// default.
	for endpoint, ok := range map[string]bool{"http://erp.example:8080/soap": false, "https://erp.example/soap": true, "http://127.0.0.1:1/soap": true} {
		for typ, want := range map[string]bool{"text": ok, "": true} {
			diags, err := plain.h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"wsdl": "service.wsdl", "endpoint": endpoint,
				"security": map[string]any{"username": "a", "password": "pw-of-a", "password_type": typ}}, BaseDir: plain.dir})
			refused := strings.Contains(asJSON(diags), "security.password_type")
			if err != nil || refused == want {
				t.Errorf("%s, password_type %q: %v %v", endpoint, typ, diags, err)
			}
		}
	}
}

// TestWSSecuritySignature: with security.sign the Body and the Timestamp
// are signed with the configured X.509 key, and a service that requires
// the signature accepts the call; a service that trusts another
// certificate answers a security fault, refused and not retried; a
// missing key file is a config error on the field.
func TestWSSecuritySignature(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	signer, err := wsse.LoadSigner(filepath.Join("testdata", "sign-cert.pem"), filepath.Join("testdata", "sign-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	srv.checker.RequireSignature, srv.checker.Certs = true, []*x509.Certificate{signer.Certificate()}
	sign := map[string]any{"cert_file": "sign-cert.pem", "key_file": "sign-key.pem"}
	for _, port := range []string{"Soap11", "Soap12"} {
		c := newCall(t, srv, port, map[string]any{"security": map[string]any{
			"username": "alice", "password": "s3cret", "password_type": "digest", "timestamp": "5m", "sign": sign}})
		if res, ue := c.invoke(t, "Add", map[string]any{"a": 2, "b": 3}); ue != nil || asJSON(res) != `{"result":5}` {
			t.Fatalf("%s signed Add = %v, %v", port, res, ue)
		}
		body, _ := srv.last()
		if !strings.Contains(body, "<ds:SignatureValue>") || !strings.Contains(body, `wsu:Id="Body-1"`) || strings.Contains(body, "PRIVATE KEY") {
			t.Errorf("%s signed envelope: %s", port, body)
		}
	}
	// Unsigned, or signed by a key the service does not trust.
	unsigned := newCall(t, srv, "Soap11", map[string]any{"security": map[string]any{"username": "alice", "password": "s3cret", "timestamp": "5m"}})
	if _, ue := unsigned.invoke(t, "Add", map[string]any{"a": 2, "b": 3}); ue == nil || ue.Status != "InvalidSecurity" || ue.Retryable {
		t.Errorf("unsigned: %+v", ue)
	}
	srv2 := newSOAPServer(t)
	srv2.checker.RequireSignature = true
	other := newCall(t, srv2, "Soap12", map[string]any{"security": map[string]any{"username": "alice", "password": "s3cret", "sign": sign}})
	if _, ue := other.invoke(t, "Add", map[string]any{"a": 2, "b": 3}); ue == nil || ue.Status != "SecurityTokenUnavailable" || ue.Retryable || !ue.Rejected {
		t.Errorf("untrusted: %+v", ue)
	}
	diags, err := other.h.Validate(ctxT(t), adaptertest.Call{Config: map[string]any{"wsdl": "service.wsdl",
		"security": map[string]any{"username": "a", "sign": map[string]any{"cert_file": "sign-cert.pem", "key_file": "nope.pem"}}}, BaseDir: other.dir})
	if err != nil || !strings.Contains(asJSON(diags), `"security.sign"`) || !strings.Contains(asJSON(diags), "cannot load the certificate and key") {
		t.Errorf("diagnostics: %v %v", diags, err)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, soap.New())
	d, err := h.Describe(ctxT(t))
	if err != nil || d.Name != soap.Name || !json.Valid(d.ConfigSchema) || !d.Serves(sdk.ModeUnary) {
		t.Fatalf("describe: %v %v", d, err)
	}
}

// Normalisation descends one element level at a time: an answer nesting
// deeper than 256 levels is refused, not normalised.
func TestAnswerDepthLimit(t *testing.T) {
	t.Parallel()
	srv := newSOAPServer(t)
	c := newCall(t, srv, "Soap11", nil)
	for _, depth := range []int{256, 100000} {
		_, ue := c.invoke(t, "LookupOrder", map[string]any{"orderId": depth})
		if ue == nil || ue.Kind != sdk.KindBadResponse || !strings.Contains(ue.Message, "the answer is not XML that can be read") ||
			depth == 256 && !strings.Contains(ue.Message, "elements nest more than 256 levels deep") {
			t.Errorf("an answer %d+4 levels deep: %v", depth, ue)
		}
	}
	// 252 levels below the order's 4 still make a result.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<s:Envelope xmlns:s="`+"http://schemas.xmlsoap.org/soap/envelope/"+`"><s:Body><o:LookupOrderResponse xmlns:o="urn:crank:orders"><o:order>`+
			strings.Repeat("<x>", 252)+"deep"+strings.Repeat("</x>", 252)+`</o:order></o:LookupOrderResponse></s:Body></s:Envelope>`)
	}))
	t.Cleanup(srv2.Close)
	ok := newCall(t, srv, "Soap11", map[string]any{"endpoint": srv2.URL})
	res, ue := ok.invoke(t, "LookupOrder", map[string]any{"orderId": 1})
	if ue != nil || !strings.Contains(asJSON(res), `"deep"`) {
		t.Errorf("an answer 256 levels deep: %.200s, %v", asJSON(res), ue)
	}
}
