package e2e

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/crankmcp/crank/demo"
	"github.com/crankmcp/crank/plugins/sdk/sdktest"
	"github.com/crankmcp/crank/plugins/soap"
)

const soapSecret = "soap-9f2b-very-secret"

// TestSOAPAdapter drives the SOAP adapter end to end against the demo SOAP
// service (demo/soap.go and its WSDL demo/soap.wsdl) on loopback: tools
// from the WSDL, SOAP 1.1 and 1.2 calls, faults as isError results, and a
// WS-Security password that never leaks.
func TestSOAPAdapter(t *testing.T) {
	t.Parallel()
	svc := demo.NewSOAPHandler()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(">"+soapSecret+"</wsse:Password>")) {
			http.Error(w, "no credentials", http.StatusUnauthorized)
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
      security: {username: demo, password: "{env.CRANK_E2E_SOAP_PASSWORD}"}
  - name: order_lookup_soap12
    description: Looks an order up over SOAP 1.2.
    adapter: soap
    config:
      wsdl: %[1]s
      port: Soap12
      endpoint: %[2]s/soap
      operation: GetOrder
      security: {username: demo, password: "{env.CRANK_E2E_SOAP_PASSWORD}"}
`, wsdl, up.URL)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_E2E_SOAP_PASSWORD=" + soapSecret}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

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
	if strings.Join(names, ",") != "order_Add,order_Divide,order_GetOrder,order_ListOrders,order_lookup_soap12" {
		t.Fatalf("tools = %v", names)
	}
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
	h := sdktest.New(t, soap.New())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var names []string
	for _, e := range file.Operations {
		resp, err := h.Expand(ctx, sdktest.Call{Operation: e.Name, Config: e.Config, BaseDir: dir})
		if err != nil || e.Adapter != "soap" || len(resp.GetDiagnostics()) > 0 {
			t.Fatalf("%s: %v %v", e.Name, err, resp.GetDiagnostics())
		}
		for _, tl := range resp.GetTools() {
			n := tl.GetName()
			if n == "" {
				n = e.Name
			}
			names = append(names, n)
		}
	}
	if got := strings.Join(names, ","); got != "order_Add,order_Divide,order_GetOrder,order_ListOrders,order_lookup_soap12" {
		t.Errorf("demo tools = %s", got)
	}
}
