package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/missing"
)

// startStripeMock runs stripe-mock (make stripe-deps) on a free loopback
// port and returns its base URL and the path of Stripe's OpenAPI
// document it embeds.
func startStripeMock(t *testing.T) (string, string) {
	t.Helper()
	bin := filepath.Join(repoRoot, "bin", "stripe-mock")
	doc := filepath.Join(repoRoot, "bin", "stripe-spec3.json")
	for _, f := range []string{bin, doc} {
		if _, err := os.Stat(f); err != nil {
			missing.Tool(t, f+" is missing", "make stripe-deps: go install github.com/stripe/stripe-mock")
		}
	}
	addr := startAnnounced(t, exec.Command(bin, "-http-addr", "127.0.0.1:"), "Listening for HTTP at address: ")
	return "http://" + addr, doc
}

// TestStripeMock: Stripe's own OpenAPI document, imported by a REST entry,
// called against stripe-mock, which validates every request against the
// same document: a customer created with metadata (a form body with
// metadata[k]=v), charges listed with expand[] (deepObject list in the
// query), a file uploaded (multipart with a base64 file and a
// deepObject-styled field). A wrong encoding is refused by stripe-mock,
// and fails the call.
func TestStripeMock(t *testing.T) {
	t.Parallel()
	base, doc := startStripeMock(t)
	// A recording proxy in front of stripe-mock shows what went on the
	// wire (stripe-mock does not echo every field it parsed).
	base, wire := recordingProxy(t, base)
	ctx, cs, tools := importTools(t, doc, base, `
        credentials: {bearerAuth: sk_test_123}
        include: {operation_ids: [PostCustomers, GetCharges, PostFiles]}`, "PostCustomers", "GetCharges", "PostFiles")
	in, _ := json.Marshal(tools["PostCustomers"].InputSchema)
	if !strings.Contains(string(in), `"metadata"`) || !strings.Contains(string(in), `"email"`) {
		t.Errorf("PostCustomers publishes no body arguments: %s", in)
	}
	in, _ = json.Marshal(tools["GetCharges"].InputSchema)
	if strings.Contains(string(in), `"body"`) {
		t.Errorf("GetCharges publishes an empty form body as an argument: %s", in)
	}

	accepted, sent := 0, 0
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		sent++
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Errorf("%s refused: %s", name, textOf(res))
			return nil
		}
		accepted++
		out, _ := res.StructuredContent.(map[string]any)
		return out
	}

	cus := call("PostCustomers", map[string]any{
		"email":    "ann@example.com",
		"metadata": map[string]any{"order_id": "6735", "source": "crank e2e"},
		"expand":   []string{"tax"},
	})
	if cus != nil && (cus["object"] != "customer" || cus["email"] != "ann@example.com") {
		t.Errorf("customer = %v", cus)
	}

	charges := call("GetCharges", map[string]any{"expand": []string{"data.customer", "data.balance_transaction"}, "limit": 3,
		"created": map[string]any{"gte": 1}})
	if charges != nil {
		data, _ := charges["data"].([]any)
		if charges["object"] != "list" || len(data) == 0 {
			t.Errorf("charges = %v", charges)
		} else if c, _ := data[0].(map[string]any); c == nil {
			t.Errorf("charge = %v", data[0])
		} else if cu, ok := c["customer"].(map[string]any); !ok || cu["object"] != "customer" {
			// expand[]=data.customer made stripe-mock expand it.
			t.Errorf("charge customer not expanded: %v", c["customer"])
		}
	}

	file := call("PostFiles", map[string]any{
		"file":           base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 crank e2e evidence")),
		"purpose":        "dispute_evidence",
		"file_link_data": map[string]any{"create": true},
	})
	if file != nil && file["object"] != "file" {
		t.Errorf("file = %v", file)
	}
	t.Logf("stripe-mock accepted %d/%d requests", accepted, sent)
	all := wire()
	for _, want := range []string{
		"email=ann%40example.com&expand%5B%5D=tax&metadata%5Border_id%5D=6735&metadata%5Bsource%5D=crank+e2e",
		"GET /v1/charges?created[gte]=1&expand[]=data.customer&expand[]=data.balance_transaction&limit=3 ",
		`Content-Disposition: form-data; name="file"; filename="file"`,
		`Content-Disposition: form-data; name="file_link_data[create]"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the wire lacks %q:\n%s", want, all)
		}
	}

	// A body property of the wrong type is refused by the gateway's
	// schema check, before stripe-mock sees it.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "PostCustomers", Arguments: map[string]any{"metadata": "not-a-map", "balance": "x"}})
	if err == nil && !res.IsError {
		t.Errorf("a string balance was accepted: %s", textOf(res))
	}
}
