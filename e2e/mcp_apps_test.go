package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// MCP Apps (SEP-1865): the official example servers of the ext-apps SDK,
// from e2e/apps's lockfile (`make apps-deps`), federated through Crank.

var appsModules = filepath.Join(repoRoot, "e2e", "apps", "node_modules")

// appsServer is the entry point of an MCP Apps example server (basic-vanillajs,
// map), with node; it skips the test without them (fails it on CI).
func appsServer(t *testing.T, name string) (node, js string) {
	t.Helper()
	js = filepath.Join(appsModules, "@modelcontextprotocol", "server-"+name, "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		msg := "e2e/apps/node_modules is missing: run `make apps-deps` (npm ci in e2e/apps)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	return node, js
}

// appsClient connects a go-sdk client that supports MCP Apps (it declares
// the io.modelcontextprotocol/ui extension, as a host that renders Apps
// does) to url.
func appsClient(t *testing.T, ctx context.Context, url string) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension("io.modelcontextprotocol/ui", map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}})
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-apps-host", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// appsOps federates server-basic-vanillajs over stdio and server-map over
// Streamable HTTP, with their resources (the ui:// resources of their
// Apps).
func appsOps(t *testing.T) (ops, mapURL string) {
	node, basic := appsServer(t, "basic-vanillajs")
	_, maps := appsServer(t, "map")
	port := freePort(t)
	cmd := exec.Command(node, maps)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	mapURL, _ = serveHTTPProcess(t, "server-map", cmd, port)
	return basicAppOps(node, basic) + fmt.Sprintf(`
  - name: map
    description: The MCP Apps map example over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config: {url: %q, resources: true}
`, mapURL), mapURL
}

// basicAppOps federates server-basic-vanillajs over stdio with its
// resources.
func basicAppOps(node, basic string) string {
	return fmt.Sprintf(`
operations:
  - name: basic
    description: The MCP Apps basic example (vanilla JS) over stdio.
    adapter: mcp
    timeout: 30s
    config: {command: %q, args: [%q, --stdio], resources: true}`, node, basic)
}

// The official MCP Apps servers federated through Crank are what they are
// directly: their tools keep _meta.ui (the nested resourceUri and the
// flat ui/resourceUri), their ui:// resources list and read with the App's
// MIME type and their _meta (server-map's CSP) untouched, the gateway
// declares the io.modelcontextprotocol/ui extension, and the App's tool
// answers through it.
func TestMCPApps(t *testing.T) {
	t.Parallel()
	ops, mapURL := appsOps(t)
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := appsClient(t, ctx, g.MCPURL)
	if ext := cs.InitializeResult().Capabilities.Extensions; ext["io.modelcontextprotocol/ui"] == nil {
		t.Errorf("the gateway declares the extensions %v, want io.modelcontextprotocol/ui", ext)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
	}
	for name, uri := range map[string]string{"get-time": "ui://get-time/mcp-app.html", "show-map": "ui://cesium-map/mcp-app.html"} {
		tool := tools[name]
		if tool == nil {
			t.Fatalf("no tool %s in %v", name, list.Tools)
		}
		ui, _ := tool.Meta["ui"].(map[string]any)
		if ui["resourceUri"] != uri || tool.Meta["ui/resourceUri"] != uri {
			t.Errorf("%s: _meta %v, want ui.resourceUri and ui/resourceUri %s", name, tool.Meta, uri)
		}
	}
	if geocode := tools["geocode"]; geocode == nil || geocode.Meta["ui"] != nil {
		t.Errorf("geocode: %+v", geocode)
	}

	// The map's App resource reads as it does directly: its contents,
	// MIME type and _meta (the App's CSP) unchanged.
	direct := appsClient(t, ctx, mapURL)
	for _, s := range []*mcp.ClientSession{cs, direct} {
		res, err := s.ListResources(ctx, nil)
		if err != nil || !slices.ContainsFunc(res.Resources, func(r *mcp.Resource) bool {
			return r.URI == "ui://cesium-map/mcp-app.html" && r.MIMEType == "text/html;profile=mcp-app"
		}) {
			t.Errorf("resources/list: %v %v", res, err)
		}
	}
	read := func(s *mcp.ClientSession) []*mcp.ResourceContents {
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ui://cesium-map/mcp-app.html"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Contents
	}
	through, want := read(cs), read(direct)
	if len(through) != 1 || !reflect.DeepEqual(through, want) {
		t.Errorf("the App's resource through Crank differs from its read directly")
	}
	if ui, _ := through[0].Meta["ui"].(map[string]any); through[0].MIMEType != "text/html;profile=mcp-app" || ui["csp"] == nil {
		t.Errorf("the App's resource: mimeType %q, _meta %v", through[0].MIMEType, through[0].Meta)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-time", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("get-time: %+v %v", res, err)
	}
	if sc, _ := res.StructuredContent.(map[string]any); !isoTime.MatchString(fmt.Sprint(sc["time"])) {
		t.Errorf("get-time: structuredContent %v", res.StructuredContent)
	}
}

var isoTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)

// appHost is the page of an MCP Apps host: it renders the App's HTML in a
// sandboxed iframe and connects the ext-apps AppBridge to it, which sends
// the App the tool's input and result and passes the App's tool calls to
// /call (the test's MCP client, talking to Crank).
const appHost = `<!doctype html>
<html><head><title>Crank MCP Apps host</title>
<style>body{font-family:sans-serif;margin:8px}iframe{width:760px;height:520px;border:1px solid #888}</style></head>
<body><h3>An MCP App through Crank</h3>
<iframe id="app" sandbox="allow-scripts allow-same-origin"></iframe>
<script type="module">
import { AppBridge, PostMessageTransport } from "/bridge.js";
const iframe = document.getElementById("app");
const html = await (await fetch("/app.html")).text();
const first = await (await fetch("/first")).json();
// The bridge listens before the App loads: the App asks first (ui/initialize).
const bridge = new AppBridge(null, { name: "crank-e2e-host", version: "1.0.0" }, { serverTools: {}, logging: {} });
bridge.oncalltool = async (params) => (await fetch("/call", { method: "POST", body: JSON.stringify(params) })).json();
bridge.oninitialized = async () => {
  await bridge.sendToolInput({ arguments: {} });
  await bridge.sendToolResult(first);
  window.appInitialized = true;
};
await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
iframe.srcdoc = html;
</script></body></html>`

// An MCP App renders through Crank in Chromium: a host page with the
// ext-apps AppBridge (bundled from e2e/apps with esbuild) shows the App
// of server-basic-vanillajs's get-time tool, read as its ui:// resource
// through the gateway, hands it the tool's result (the time shows), and
// the App's own call of get-time (its button) reaches the upstream
// through Crank and its answer shows. CRANK_APP_SCREENSHOT names a file
// for a screenshot of the rendered App.
func TestMCPAppRendersThroughCrank(t *testing.T) {
	t.Parallel()
	node, basic := appsServer(t, "basic-vanillajs")
	br := browsertest.New(t, 800, 640)
	bundle := filepath.Join(t.TempDir(), "bridge.js")
	esbuild := exec.Command(filepath.Join(appsModules, ".bin", "esbuild"), "--bundle", "--format=esm", "--platform=browser", "--log-level=warning",
		filepath.Join(appsModules, "@modelcontextprotocol", "ext-apps", "dist", "src", "app-bridge.js"), "--outfile="+bundle)
	if out, err := esbuild.CombinedOutput(); err != nil {
		t.Fatalf("bundling the AppBridge: %v\n%s", err, out)
	}
	g := startGateway(t, gatewayOptions{Operations: basicAppOps(node, basic) + "\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := appsClient(t, ctx, g.MCPURL)

	// What a host does: the tool's App from its _meta, the App's HTML from
	// its ui:// resource, the tool's result for the App.
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uri string
	for _, tool := range list.Tools {
		if ui, _ := tool.Meta["ui"].(map[string]any); tool.Name == "get-time" && ui != nil {
			uri, _ = ui["resourceUri"].(string)
		}
	}
	if uri == "" {
		t.Fatalf("get-time names no App: %v", list.Tools)
	}
	app, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(app.Contents) != 1 || app.Contents[0].MIMEType != "text/html;profile=mcp-app" {
		t.Fatalf("the App's resource: %+v %v", app, err)
	}
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-time", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var called []string // the tools the App called
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, appHost)
	})
	mux.HandleFunc("/bridge.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, bundle)
	})
	mux.HandleFunc("/app.html", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, app.Contents[0].Text) })
	mux.HandleFunc("/first", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(first) })
	mux.HandleFunc("/call", func(w http.ResponseWriter, r *http.Request) {
		var p mcp.CallToolParams
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		called = append(called, p.Name)
		mu.Unlock()
		res, err := cs.CallTool(r.Context(), &p)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		_ = json.NewEncoder(w).Encode(res)
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)

	timeText := `(document.getElementById("app").contentDocument?.getElementById("server-time")?.textContent ?? "")`
	br.Step("open the host", chromedp.Navigate(site.URL+"/"))
	br.Until("the App renders the tool's result", fmt.Sprintf(`window.appInitialized === true && /^\d{4}-\d\d-\d\dT/.test(%s)`, timeText))
	shown, err := chromedp.Run(br.Ctx, chromedp.Evaluate[string](timeText))
	if err != nil {
		t.Fatal(err)
	}
	firstTime, _ := first.StructuredContent.(map[string]any)["time"].(string)
	if shown != firstTime {
		t.Errorf("the App shows %q, the tool answered %q", shown, firstTime)
	}
	br.Step("press the App's Get Server Time", chromedp.Evaluate[chromedp.Void](
		`document.getElementById("app").contentDocument.getElementById("get-time-btn").click()`))
	br.Until("the App shows the time of its own call", fmt.Sprintf(`/^\d{4}-\d\d-\d\dT/.test(%[1]s) && %[1]s !== %q`, timeText, firstTime))
	mu.Lock()
	if len(called) != 1 || called[0] != "get-time" {
		t.Errorf("the App called %v through Crank, want get-time", called)
	}
	mu.Unlock()
	if path := os.Getenv("CRANK_APP_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(br.Ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(path, png, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
}
