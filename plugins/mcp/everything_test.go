package mcp

import (
	"encoding/json"
	"github.com/crankmcp/crank/internal/missing"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// everything returns the entry point of @modelcontextprotocol/server-everything,
// the reference MCP server pinned in e2e/ts (make ts-deps installs it).
func everything(t *testing.T) string {
	t.Helper()
	js, err := filepath.Abs("../../e2e/ts/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err == nil {
		_, err = os.Stat(js)
	}
	if err != nil {
		missing.Tool(t, "server-everything is missing", "make ts-deps: npm ci in e2e/ts")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing.Tool(t, "node is not installed", "apt-get install nodejs npm")
	}
	return js
}

// checkEverything lists and calls the tools of server-everything through
// the adapter.
func checkEverything(t *testing.T, h *adaptertest.Harness, base map[string]any) {
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: base, Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 {
		t.Fatalf("expand: %v %v", diags, err)
	}
	sc := findTool(t, tools, "ev_get-structured-content")
	if sc.Title != "Get Structured Content Tool" || len(sc.OutputSchema) == 0 ||
		sc.Annotations.ReadOnly == nil || sc.Annotations.Destructive == nil || *sc.Annotations.Destructive {
		t.Errorf("get-structured-content: %+v", sc)
	}
	invoke := func(name, args string) *sdk.Result {
		t.Helper()
		res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: findTool(t, tools, "ev_"+name).Config, Args: args, Timeout: 20 * time.Second})
		if err != nil || ue != nil {
			t.Fatalf("%s: %+v %v", name, ue, err)
		}
		return res
	}
	if res := invoke("echo", `{"message": "hello"}`); !strings.Contains(res.Text, "hello") {
		t.Errorf("echo: %+v", res)
	}
	if res := invoke("get-sum", `{"a": 2, "b": 3}`); !strings.Contains(res.Text, "5") {
		t.Errorf("get-sum: %+v", res)
	}
	var weather struct{ Temperature *float64 }
	if res := invoke("get-structured-content", `{"location": "Chicago"}`); json.Unmarshal(res.Structured, &weather) != nil || weather.Temperature == nil {
		t.Errorf("get-structured-content: %s", res.Structured)
	}
	type block struct {
		Type, MimeType string
		Resource       struct{ URI string }
	}
	var blocks []block
	res := invoke("get-tiny-image", `{}`)
	if json.Unmarshal(res.Content, &blocks) != nil || len(blocks) == 0 {
		t.Fatalf("get-tiny-image: %s", res.Content)
	}
	image := false
	for _, b := range blocks {
		image = image || b.Type == "image" && b.MimeType == "image/png"
	}
	if !image {
		t.Errorf("get-tiny-image kept no image block: %s", res.Content)
	}
	res = invoke("get-resource-reference", `{"resourceType": "Text", "resourceId": 1}`)
	if json.Unmarshal(res.Content, &blocks) != nil || !slices.ContainsFunc(blocks, func(b block) bool { return b.Type == "resource" && b.Resource.URI != "" }) {
		t.Errorf("get-resource-reference kept no embedded resource: %s", res.Content)
	}
}

func TestEverythingStdio(t *testing.T) {
	t.Parallel()
	cfg := everythingStdio(t)
	cfg["prefix"] = "ev_"
	h := newHarness(t)
	checkEverything(t, h, cfg)
	checkEverythingPublished(t, h, cfg) // publish_test.go
}

func TestEverythingStreamableHTTP(t *testing.T) {
	t.Parallel()
	h, cfg := newHarness(t), map[string]any{"url": everythingHTTP(t), "prefix": "ev_"}
	checkEverything(t, h, cfg)
	checkEverythingPublished(t, h, cfg) // publish_test.go
}

// everythingStdio is the config of server-everything over stdio.
func everythingStdio(t *testing.T) map[string]any {
	js := everything(t)
	node, _ := exec.LookPath("node")
	return map[string]any{"command": node, "args": []string{js, "stdio"}}
}

// everythingHTTP starts server-everything over Streamable HTTP on a free
// port and returns its endpoint.
func everythingHTTP(t *testing.T) string {
	js := everything(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", js, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not listen within 20s")
		}
	}
	return "http://" + addr + "/mcp"
}
