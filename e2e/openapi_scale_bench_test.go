package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/missing"
)

// stripeMockModule holds Stripe's OpenAPI document (make corpus-deps
// downloads it).
const stripeMockModule = "github.com/stripe/stripe-mock@v0.203.0"

// BenchmarkOpenAPIScale measures loading real documents at scale through
// the gateway: Stripe's (the Go module stripe-mock) and GitHub's REST
// description (npm @octokit/openapi, make corpus-deps), each imported
// whole as one entry, with output schemas off ("before": what loaded
// before output schemas scaled) and on, in the same run. An iteration is
// one gateway start with the entry, until tools/list answers. It reports:
//
//	load-s          gateway start to the first tools/list answered
//	tools-list-MB   the tools/list answer's JSON
//	tools           the tools listed
//	gateway-rss-MiB the gateway's peak resident memory (VmHWM)
//	adapter-rss-MiB the REST adapter's resident memory after the load
func BenchmarkOpenAPIScale(b *testing.B) {
	docs := []struct{ name, path string }{
		{"stripe", stripeDocument()},
		{"github", filepath.Join(repoRoot, "e2e/corpus/node_modules/@octokit/openapi/generated/api.github.com.json")},
	}
	for _, d := range docs {
		if _, err := os.Stat(d.path); err != nil {
			missing.Tool(b, "the "+d.name+" OpenAPI document is not there", "make corpus-deps")
		}
		for _, out := range []bool{false, true} {
			name := d.name + "/output-schemas-off"
			if out {
				name = d.name + "/output-schemas-on"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					loadOpenAPIScale(b, d.path, out)
				}
			})
		}
	}
}

// stripeDocument is Stripe's document in the module cache, "" if absent.
func stripeDocument() string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return filepath.Join(strings.TrimSpace(string(out)), stripeMockModule, "embedded/openapi/spec3.json")
}

func loadOpenAPIScale(b *testing.B, doc string, outputSchemas bool) {
	ops := fmt.Sprintf(`version: 1
operations:
  - name: api
    adapter: rest
    timeout: 60s
    config:
      openapi:
        document: %s
        base_url: http://127.0.0.1:9
        output_schemas: %v
        portable_names: true
        credentials: {basicAuth: {username: u, password: p}, bearerAuth: "{env.E2E_SCALE_TOKEN}"}
`, doc, outputSchemas)
	start := time.Now()
	g := startGateway(b, gatewayOptions{Operations: ops, Env: []string{"E2E_SCALE_TOKEN=sk_test_scale"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := g.connect(ctx)
	// Every page of tools/list.
	var load time.Duration
	size, tools := 0, 0
	params := &mcp.ListToolsParams{}
	for {
		list, err := cs.ListTools(ctx, params)
		if err != nil {
			b.Fatal(err)
		}
		if load == 0 {
			load = time.Since(start)
		}
		raw, _ := json.Marshal(list)
		size += len(raw)
		tools += len(list.Tools)
		if list.NextCursor == "" {
			break
		}
		params.Cursor = list.NextCursor
	}
	b.ReportMetric(load.Seconds(), "load-s")
	b.ReportMetric(float64(size)/1e6, "tools-list-MB")
	b.ReportMetric(float64(tools), "tools")
	if kb := procStatus(g.cmd.Process.Pid, "VmHWM"); kb >= 0 {
		b.ReportMetric(float64(kb)/1024, "gateway-rss-MiB")
	}
	for _, a := range g.adapters() {
		if a.Running && a.Name == "rest" {
			if kb := procStatus(a.PID, "VmRSS"); kb >= 0 {
				b.ReportMetric(float64(kb)/1024, "adapter-rss-MiB")
			}
		}
	}
	cs.Close()
	g.stop()
}
