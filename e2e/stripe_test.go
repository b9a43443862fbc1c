package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestStripeMock: Stripe's whole OpenAPI document, imported by a REST
// entry, called through the official TypeScript client (which checks
// each answer against the tool's output schema, shared $defs and all,
// where the default output_schema_limits kept one)
// against stripe-mock, which validates every request against the same
// document: a customer created with metadata (a form body with
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
	began := time.Now()
	ctx, g, _, tools := importTools(t, doc, base, `
        credentials: {bearerAuth: sk_test_123}`, "PostCustomers", "GetCharges", "PostFiles")
	t.Logf("Stripe's whole document: %d tools served and listed in %v", len(tools), time.Since(began).Round(time.Millisecond))
	in, _ := json.Marshal(tools["PostCustomers"].InputSchema)
	if !strings.Contains(string(in), `"metadata"`) || !strings.Contains(string(in), `"email"`) {
		t.Errorf("PostCustomers publishes no body arguments: %s", in)
	}
	in, _ = json.Marshal(tools["GetCharges"].InputSchema)
	if strings.Contains(string(in), `"body"`) {
		t.Errorf("GetCharges publishes an empty form body as an argument: %s", in)
	}

	steps := tsSteps(ctx, t, g.MCPURL, `[
	  {"op":"listTools","all":true,"summary":true},
	  {"op":"callTool","name":"PostCustomers","arguments":{"email":"ann@example.com",
	    "metadata":{"order_id":"6735","source":"crank e2e"},"expand":["tax"]}},
	  {"op":"callTool","name":"GetCharges","arguments":{"expand":["data.customer","data.balance_transaction"],"limit":3,
	    "created":{"gte":1}}},
	  {"op":"callTool","name":"PostFiles","arguments":{"file":"`+base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 crank e2e evidence"))+`",
	    "purpose":"dispute_evidence","file_link_data":{"create":true}}},
	  {"op":"callTool","name":"PostCustomers","arguments":{"metadata":"not-a-map","balance":"x"}}
	]`)
	if len(steps) != 5 {
		t.Fatalf("client.mjs ran %d steps, want 5", len(steps))
	}
	if l := steps[0]; !l.OK || l.Result.Count < len(tools) || l.Result.OutputSchemas == 0 {
		t.Fatalf("the TypeScript client's tools/list: %+v", l)
	} else {
		t.Logf("the TypeScript client listed %d tools, compiled %d output schemas", l.Result.Count, l.Result.OutputSchemas)
	}
	accepted := 0
	call := func(i int, name string) map[string]any {
		t.Helper()
		s := steps[i]
		switch {
		case !s.OK || s.Result.IsError:
			t.Errorf("%s refused: %s", name, s.text())
			return nil
		case tools[name].OutputSchema == nil:
			// Within the default output_schema_limits (PostCustomers's
			// customer graph is over a tool's 32 KiB).
			t.Logf("%s publishes no output schema: its answer is not checked", name)
		case !s.Result.Validated:
			t.Errorf("%s: the TypeScript client held no output schema to check the answer with", name)
		}
		accepted++
		return s.Result.StructuredContent
	}

	for _, name := range []string{"GetCharges", "PostFiles"} {
		if tools[name].OutputSchema == nil {
			t.Errorf("%s publishes no output schema", name)
		}
	}
	if cus := call(1, "PostCustomers"); cus != nil && (cus["object"] != "customer" || cus["email"] != "ann@example.com") {
		t.Errorf("customer = %v", cus)
	}
	if charges := call(2, "GetCharges"); charges != nil {
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
	if file := call(3, "PostFiles"); file != nil && file["object"] != "file" {
		t.Errorf("file = %v", file)
	}
	t.Logf("stripe-mock accepted %d/3 requests", accepted)
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
	if s := steps[4]; s.OK && !s.Result.IsError {
		t.Errorf("a string balance was accepted: %s", s.text())
	}
	if n := strings.Count(all, "\n---\n") + 1; n != 3 {
		t.Errorf("stripe-mock got %d requests, want 3:\n%s", n, all)
	}
}
