package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/crankmcp/crank/demo"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/soap"
)

const soapSecret = "soap-9f2b-very-secret"

// TestSOAPAdapter drives the SOAP adapter end to end against the demo SOAP
// service (demo/soap.go and its WSDL demo/soap.wsdl) on loopback: tools
// from the WSDL, SOAP 1.1 and 1.2 calls, faults as isError results, and a
// WS-Security password that never leaks.
func TestSOAPAdapter(t *testing.T) {
	t.Parallel()
	up, wsdl := demoSOAPService(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(">"+soapSecret+"</wsse:Password>")) {
			http.Error(w, "no credentials", http.StatusUnauthorized)
			return false
		}
		return true
	})
	ops := fmt.Sprintf(`
operations:
  - name: orders
    adapter: soap
    timeout: 5s
    config:
      wsdl: %[1]s
      port: Soap11
      endpoint: %[2]s/soap
      tool_prefix: order_
      security: {username: demo, password: "{env.CRANK_E2E_SOAP_PASSWORD}", password_type: text}
  - name: order_lookup_soap12
    description: Looks an order up over SOAP 1.2.
    adapter: soap
    config:
      wsdl: %[1]s
      port: Soap12
      endpoint: %[2]s/soap
      operation: GetOrder
      security: {username: demo, password: "{env.CRANK_E2E_SOAP_PASSWORD}", password_type: text}
`, wsdl, up.URL)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_E2E_SOAP_PASSWORD=" + soapSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	tools := listToolsNamed(ctx, t, cs, "order_Add,order_Divide,order_GetOrder,order_ListOrders,order_lookup_soap12")
	if d := tools["order_Divide"].Description; !strings.HasPrefix(d, "Divides a by b.") {
		t.Errorf("order_Divide description = %q", d)
	}
	in, _ := json.Marshal(tools["order_ListOrders"].InputSchema)
	if !strings.Contains(string(in), `"status":{"items":{"enum":["OPEN","SHIPPED","CANCELLED"],"type":"string"},"type":"array"}`) {
		t.Errorf("order_ListOrders input schema: %s", in)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(textOf(res), soapSecret) {
			t.Errorf("%s: the password leaks: %q", name, textOf(res))
		}
		return res
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"order_Add", map[string]any{"a": 2, "b": 40}, `{"result":42}`},
		{"order_Divide", map[string]any{"a": 1, "b": 8}, `{"result":0.125}`},
		{"order_GetOrder", map[string]any{"orderId": 2}, `{"order":{"customer":"Grace","id":2,"line":[{"price":{"@currency":"EUR","_value":1.2},"quantity":10,"sku":"PEN-0002"},{"price":{"@currency":"EUR","_value":4},"quantity":2,"sku":"INK-0003"}],"note":"leave at the door","status":"SHIPPED"}}`},
		{"order_lookup_soap12", map[string]any{"orderId": 3}, `{"order":{"customer":"Linus","id":3,"line":[{"price":{"@currency":"EUR","_value":8},"quantity":1,"sku":"MUG-0004"}],"note":null,"status":"CANCELLED"}}`},
	} {
		res := call(c.tool, c.args)
		sc, _ := json.Marshal(res.StructuredContent)
		if res.IsError || string(sc) != c.want {
			t.Errorf("%s: isError=%v %s %q\nwant %s", c.tool, res.IsError, sc, textOf(res), c.want)
		}
	}
	res := call("order_ListOrders", map[string]any{"status": []any{"OPEN"}})
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.HasPrefix(string(sc), `{"order":[{"customer":"Ada"`) {
		t.Errorf("order_ListOrders: %s %q", sc, textOf(res))
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"order_Divide", map[string]any{"a": 1, "b": 0}, "SOAP fault Client: division by zero"},
		{"order_lookup_soap12", map[string]any{"orderId": 9}, "SOAP fault Sender: order 9 not found"},
		{"order_ListOrders", map[string]any{"status": []any{"LOST"}}, `invalid arguments for tool "order_ListOrders"`},
	} {
		res := call(c.tool, c.args)
		if !res.IsError || !strings.Contains(textOf(res), c.want) {
			t.Errorf("%s %v: want isError with %q, got isError=%v %q", c.tool, c.args, c.want, res.IsError, textOf(res))
		}
	}
	if strings.Contains(g.log.String(), soapSecret) {
		t.Error("the password appears in the gateway log")
	}
}

// TestSOAPDemoOperations checks that the entries of demo/soap.yaml (what
// `make run` serves) load with the SOAP adapter against demo/soap.wsdl.
func TestSOAPDemoOperations(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../demo/soap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Operations []struct {
			Name    string         `json:"name"`
			Adapter string         `json:"adapter"`
			Config  map[string]any `json:"config"`
		} `json:"operations"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("../demo")
	h := adaptertest.New(t, soap.New())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for _, e := range file.Operations {
		tools, diags, err := h.Expand(ctx, adaptertest.Call{Operation: e.Name, Config: e.Config, BaseDir: dir})
		if err != nil || e.Adapter != "soap" || len(diags) > 0 {
			t.Fatalf("%s: %v %v", e.Name, err, diags)
		}
		for _, tl := range tools {
			n := tl.Name
			if n == "" {
				n = e.Name
			}
			names = append(names, n)
		}
	}
	if got := strings.Join(names, ","); got != "order_Add,order_Divide,order_GetOrder,order_ListOrders,order_lookup_soap12,invoice_batch,batch_GetBatchStatus,batch_CancelBatch,order_refund" {
		t.Errorf("demo tools = %s", got)
	}
}

// demoSOAPService serves the demo SOAP service (demo/soap.go) on loopback
// behind check, which sees each request's body first and answers it
// itself when it returns false; it returns the server and the demo WSDL's
// absolute path.
func demoSOAPService(t *testing.T, check func(w http.ResponseWriter, r *http.Request, body []byte) bool) (*httptest.Server, string) {
	t.Helper()
	svc := demo.NewSOAPHandler()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !check(w, r, body) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		svc.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	wsdl, err := filepath.Abs("../demo/soap.wsdl")
	if err != nil {
		t.Fatal(err)
	}
	return up, wsdl
}

// listToolsNamed lists the gateway's tools by name, failing unless their
// sorted names are want (comma-separated).
func listToolsNamed(ctx context.Context, t *testing.T, cs *mcp.ClientSession, want string) map[string]*mcp.Tool {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("tools = %s, want %s", got, want)
	}
	return tools
}

// soapBatchOps serves the demo batch desk (service BatchDesk of
// demo/soap.wsdl at endpoint) as an async_job whose upstream answers a
// ticket, with the ticket operations as plain tools.
func soapBatchOps(wsdl, endpoint string) string {
	return fmt.Sprintf(`
operations:
  - name: invoice_batch
    description: Invoice a batch of orders.
    adapter: soap
    mode: async_job
    timeout: 2m
    job:
      status_operation: batch_GetBatchStatus
      status_arguments: {ticket: $.ticket}
      poll_interval_ms: 20
      done_path: $.done
      status_path: $.state
      progress_path: $.percent
      error_path: $.error
      result_path: $.result
      cancel_operation: batch_CancelBatch
      cancel_arguments: {ticket: $.ticket}
    config: {wsdl: %[1]s, service: BatchDesk, endpoint: %[2]s, operation: SubmitBatch}
  - name: batch_tickets
    adapter: soap
    timeout: 5s
    config: {wsdl: %[1]s, service: BatchDesk, endpoint: %[2]s, operations: [GetBatchStatus, CancelBatch], tool_prefix: batch_}
`, wsdl, endpoint)
}

// TestSOAPBatchJob follows SOAP batches through the host's async_job
// family: SubmitBatch answers a ticket, the host polls GetBatchStatus with
// it until done, and the job ends succeeded (the invoices, normalised from
// XML), canceled (CancelBatch reaches the service with the ticket), or
// failed (the status's error element, or a fault of the status
// operation), each seen through the MCP tools of the family.
func TestSOAPBatchJob(t *testing.T) {
	t.Parallel()
	cancels := make(chan string, 16)
	up, wsdl := demoSOAPService(t, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Header.Get("SOAPAction") == `"urn:crank:demo:orders/CancelBatch"` {
			cancels <- string(body)
		}
		return true
	})
	g := startGateway(t, gatewayOptions{Operations: soapBatchOps(wsdl, up.URL+"/soap")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	tools := listToolsNamed(ctx, t, cs, "batch_CancelBatch,batch_GetBatchStatus,invoice_batch_cancel,invoice_batch_result,invoice_batch_start,invoice_batch_status")
	// The start tool takes SubmitBatch's arguments, from the WSDL.
	if in, _ := json.Marshal(tools["invoice_batch_start"].InputSchema); !strings.Contains(string(in), `"orderId":{"items":{"maximum":2147483647,"minimum":-2147483648,"type":"integer"},"maxItems":50,"minItems":1,"type":"array"}`) {
		t.Errorf("invoice_batch_start input schema: %s", in)
	}

	start := func(args map[string]any) string {
		t.Helper()
		return callOK(t, cs, "invoice_batch_start", args)["job_id"].(string)
	}
	ok := start(map[string]any{"orderId": []any{1, 2}, "durationMs": 200})
	long := start(map[string]any{"orderId": []any{2, 1}, "durationMs": 600000})
	failed := start(map[string]any{"orderId": []any{1, 9}, "durationMs": 0})
	aborted := start(map[string]any{"orderId": []any{3}, "durationMs": 0})

	status := func(id, want string) map[string]any {
		t.Helper()
		var st map[string]any
		waitFor(t, "job "+id+" "+want, func() bool {
			st = callOK(t, cs, "invoice_batch_status", map[string]any{"job_id": id})
			return st["status"] == want
		})
		return st
	}

	// Succeeded: the result is the status answer's result element, as JSON.
	status(ok, "succeeded")
	r := callOK(t, cs, "invoice_batch_result", map[string]any{"job_id": ok})
	got, _ := json.Marshal(r["result"])
	want := `{"invoice":[{"customer":"Ada","orderId":1,"total":{"@currency":"EUR","_value":12.5}},` +
		`{"customer":"Grace","orderId":2,"total":{"@currency":"EUR","_value":20}}],"total":{"@currency":"EUR","_value":32.5}}`
	if r["ready"] != true || string(got) != want {
		t.Errorf("result: ready=%v %s\nwant %s", r["ready"], got, want)
	}

	// Running: the upstream's state and percent show as progress; a cancel
	// calls CancelBatch with the job's ticket.
	waitFor(t, "the long batch's progress", func() bool {
		p, _ := callOK(t, cs, "invoice_batch_status", map[string]any{"job_id": long})["progress"].(map[string]any)
		_, pct := p["progress"].(float64)
		return p["status"] == "RUNNING" && pct
	})
	if c := callOK(t, cs, "invoice_batch_cancel", map[string]any{"job_id": long}); c["status"] != "canceling" && c["status"] != "canceled" {
		t.Errorf("cancel: %v", c)
	}
	select {
	case body := <-cancels:
		if !regexp.MustCompile(`<ns\d+:ticket>batch-\d+-600000-2\.1</ns\d+:ticket>`).MatchString(body) {
			t.Errorf("CancelBatch request does not carry the job's ticket: %s", body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("CancelBatch never reached the SOAP service")
	}
	status(long, "canceled")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "invoice_batch_result", Arguments: map[string]any{"job_id": long}})
	if err != nil || !res.IsError {
		t.Errorf("result of a canceled batch: %v %v", err, res)
	}

	// Failed through error_path: the batch reports an error once done.
	st := status(failed, "failed")
	if e, _ := json.Marshal(st["error"]); !strings.Contains(string(e), `order 9 not found`) {
		t.Errorf("failed batch error: %s", e)
	}
	// Failed through the status operation's fault.
	st = status(aborted, "failed")
	if e, _ := json.Marshal(st["error"]); !strings.Contains(string(e), "batch_GetBatchStatus failed 3 times") ||
		!strings.Contains(string(e), "SOAP fault Server: batch batch-") || !strings.Contains(string(e), "order 3 is cancelled") {
		t.Errorf("aborted batch error: %s", e)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "invoice_batch_result", Arguments: map[string]any{"job_id": aborted}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "order 3 is cancelled") {
		t.Errorf("result of an aborted batch: %v %v", err, res)
	}

	// The ticket operations are tools too: an unknown ticket is a Client
	// fault, bad arguments are refused before the job starts.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "batch_GetBatchStatus", Arguments: map[string]any{"ticket": "nope"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), `SOAP fault Client: unknown batch ticket "nope"`) {
		t.Errorf("unknown ticket: %v %q", err, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "invoice_batch_start", Arguments: map[string]any{"orderId": "1"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "orderId") {
		t.Errorf("bad start arguments: %v %q", err, textOf(res))
	}
}

// TestSOAPDemoBatch runs demo/soap.yaml (what `make run` serves) through a
// gateway against the demo SOAP service on loopback and invoices a batch
// with invoice_batch.
func TestSOAPDemoBatch(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(demo.NewSOAPHandler())
	t.Cleanup(up.Close)
	dir := t.TempDir()
	wsdl, err := os.ReadFile(filepath.Join(repoRoot, "demo", "soap.wsdl"))
	if err != nil {
		t.Fatal(err)
	}
	wsdlPath := filepath.Join(dir, "soap.wsdl")
	writeFile(t, wsdlPath, strings.ReplaceAll(string(wsdl), "http://127.0.0.1:8084", up.URL))
	ops, err := os.ReadFile(filepath.Join(repoRoot, "demo", "soap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{Operations: strings.ReplaceAll(string(ops), "wsdl: soap.wsdl", "wsdl: "+wsdlPath)})
	cs := g.connect(context.Background())

	if r := callOK(t, cs, "order_Add", map[string]any{"a": 1, "b": 2}); r["result"] != float64(3) {
		t.Errorf("order_Add: %v", r)
	}
	job := callOK(t, cs, "invoice_batch_start", map[string]any{"orderId": []any{2}, "durationMs": 100})["job_id"].(string)
	waitFor(t, "the batch", func() bool {
		return callOK(t, cs, "invoice_batch_status", map[string]any{"job_id": job})["status"] == "succeeded"
	})
	r := callOK(t, cs, "invoice_batch_result", map[string]any{"job_id": job})
	if got, _ := json.Marshal(r["result"]); !strings.Contains(string(got), `"total":{"@currency":"EUR","_value":20}`) {
		t.Errorf("result: %s", got)
	}
}

const soapWrongPassword = "soap-wrong-4c1d-secret"

// soapRefundOps serves the demo's refund desk (a SOAP operation that
// requires a digest UsernameToken and a Timestamp) with the right
// password and with a wrong one.
func soapRefundOps(wsdl, endpoint string) string {
	entry := func(name, env string) string {
		return fmt.Sprintf(`
  - name: %s
    description: Refunds an order.
    adapter: soap
    timeout: 5s
    config:
      wsdl: %s
      endpoint: %s/soap
      service: RefundDesk
      operation: RefundOrder
      security: {username: crank-demo, password: "{env.%s}", password_type: digest, timestamp: 5m}
`, name, wsdl, endpoint, env)
	}
	return "operations:" + entry("refund", "CRANK_E2E_SOAP_REFUND") + entry("refund_wrong", "CRANK_E2E_SOAP_WRONG")
}

// TestSOAPWSSecurity drives the demo SOAP endpoint that checks the
// UsernameToken (digest, nonce, created) and Timestamp, through the go-sdk
// and TypeScript clients: the right password works and never travels,
// wrong credentials are refused clearly, and no secret reaches a result
// or the gateway's log.
func TestSOAPWSSecurity(t *testing.T) {
	t.Parallel()
	password := demo.SOAPRefundPassword()
	var clear atomic.Int64 // requests that carried a password in clear
	up, wsdl := demoSOAPService(t, func(_ http.ResponseWriter, _ *http.Request, body []byte) bool {
		if bytes.Contains(body, []byte(password)) || bytes.Contains(body, []byte(soapWrongPassword)) {
			clear.Add(1)
		}
		return true
	})
	g := startGateway(t, gatewayOptions{Operations: soapRefundOps(wsdl, up.URL),
		Env: []string{"CRANK_E2E_SOAP_REFUND=" + password, "CRANK_E2E_SOAP_WRONG=" + soapWrongPassword}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	for i := range 2 { // twice: each call has its own nonce
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"orderId": 2}})
		if err != nil || res.IsError {
			t.Fatalf("refund %d: %v %s", i, err, textOf(res))
		}
		if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"orderId":2,"refundedBy":"crank-demo"}` {
			t.Errorf("refund = %s", got)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_wrong", Arguments: map[string]any{"orderId": 2}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "SOAP security fault FailedAuthentication") ||
		!strings.Contains(textOf(res), "the service refused the WS-Security header") || strings.Contains(textOf(res), soapWrongPassword) {
		t.Errorf("wrong credentials: %v %s", err, textOf(res))
	}

	if tsClientAvailable(t) {
		run := runTSCalls(t, g.MCPURL, `[
			{"op":"callTool","name":"refund","arguments":{"orderId":3}},
			{"op":"callTool","name":"refund_wrong","arguments":{"orderId":3}}
		]`, 2)
		if s := run.Steps[0]; !s.OK || s.Result.IsError || s.Result.StructuredContent["refundedBy"] != "crank-demo" {
			t.Errorf("TypeScript refund: %+v", s)
		}
		if s := run.Steps[1]; !s.OK || !s.Result.IsError || len(s.Result.Content) == 0 ||
			!strings.Contains(s.Result.Content[0].Text, "SOAP security fault FailedAuthentication") {
			t.Errorf("TypeScript wrong credentials: %+v", s)
		}
	}

	if n := clear.Load(); n != 0 {
		t.Errorf("%d requests carried a password in clear", n)
	}
	if log := g.log.String(); strings.Contains(log, soapWrongPassword) || strings.Contains(log, password) {
		t.Error("a password shows in the gateway's log")
	}
}

// A Crank-signed envelope verifies with xmlsec1 (Debian's, libxmlsec1 on
// OpenSSL: an implementation that shares nothing with Crank's signer):
// the SOAP adapter signs the Body and the Timestamp with an X.509 key
// (exclusive c14n, SHA-256, RSA), and xmlsec1 checks the references and
// the signature value with the certificate; an envelope whose Body was
// changed afterwards does not verify.
func TestSOAPSignatureVerifiesWithXMLSec(t *testing.T) {
	t.Parallel()
	xmlsec, err := exec.LookPath("xmlsec1")
	if err != nil {
		missing.Tool(t, "xmlsec1 is not installed", "apt-get install xmlsec1")
	}
	var mu sync.Mutex
	var envelopes [][]byte
	up, wsdl := demoSOAPService(t, func(_ http.ResponseWriter, _ *http.Request, body []byte) bool {
		mu.Lock()
		envelopes = append(envelopes, body)
		mu.Unlock()
		return true
	})
	dir := t.TempDir()
	for _, f := range []string{"sign-cert.pem", "sign-key.pem"} {
		b, err := os.ReadFile(filepath.Join("..", "plugins", "soap", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), string(b))
	}
	ops := fmt.Sprintf(`
operations:
  - name: orders
    adapter: soap
    timeout: 5s
    config:
      wsdl: %s
      port: Soap11
      endpoint: %s/soap
      tool_prefix: order_
      security: {username: crank-demo, password: "{env.CRANK_E2E_SOAP_SIGNER}", timestamp: 5m, sign: {cert_file: %s, key_file: %s}}
`, wsdl, up.URL, filepath.Join(dir, "sign-cert.pem"), filepath.Join(dir, "sign-key.pem"))
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_E2E_SOAP_SIGNER=" + soapSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "order_Add", Arguments: map[string]any{"a": 2, "b": 3}})
	if err != nil || res.IsError {
		t.Fatalf("a signed call: %v %s", err, textOf(res))
	}
	mu.Lock()
	signed := envelopes[len(envelopes)-1]
	mu.Unlock()
	verify := func(name string, envelope []byte) (string, error) {
		path := filepath.Join(dir, name)
		writeFile(t, path, string(envelope))
		out, err := exec.Command(xmlsec, "--verify", "--pubkey-cert-pem", filepath.Join(dir, "sign-cert.pem"),
			"--id-attr:Id", "http://schemas.xmlsoap.org/soap/envelope/:Body",
			"--id-attr:Id", "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd:Timestamp",
			path).CombinedOutput()
		return string(out), err
	}
	if out, err := verify("signed.xml", signed); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("xmlsec1 refuses Crank's signature: %v\n%s\n%s", err, out, signed)
	}
	tampered := bytes.Replace(signed, []byte("<ns1:a>2</ns1:a>"), []byte("<ns1:a>9</ns1:a>"), 1)
	if bytes.Equal(tampered, signed) {
		t.Fatalf("the envelope has no <ns1:a>2</ns1:a> to change:\n%s", signed)
	}
	if out, err := verify("tampered.xml", tampered); err == nil {
		t.Fatalf("xmlsec1 verifies a changed Body:\n%s", out)
	}
}
