package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
)

// The demo Caddyfile (`make run`) serves http://127.0.0.1:8080/mcp and
// http://localhost:8080/mcp alike, and answers any other Host — a DNS
// rebinding probe — with a clear 4xx that never reaches the endpoint. The
// test runs the repository's Caddyfile itself, its ports and data directory
// moved.
func TestDemoCaddyfileHosts(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(repoRoot, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports := map[string]int{}
	text := regexp.MustCompile(`:(8080|8081|8082|8083|8084|2019|23790|23800)\b`).ReplaceAllStringFunc(string(src), func(m string) string {
		if ports[m] == 0 {
			ports[m] = freePort(t)
		}
		return fmt.Sprintf(":%d", ports[m])
	})
	if !strings.Contains(text, "data_dir .crank/etcd") {
		t.Fatal("the demo Caddyfile's data_dir moved; update this test")
	}
	text = strings.Replace(text, "data_dir .crank/etcd", "data_dir "+filepath.Join(dir, "etcd"), 1)
	writeFile(t, filepath.Join(dir, "Caddyfile"), text)

	cmd := exec.Command(crankBin, "run", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	cmd.Dir = repoRoot // the operations files are relative to it
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir, "CRANK_DEMO_TOKEN=demo-token")
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quietShutdown(t, log.String()) }) // metrics_test.go; runs after the stop below
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("crank log:\n%s", log.String())
		}
	})

	port := ports[":8080"]
	do := func(method, host, path, body string) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	waitFor(t, "the demo gateway to listen", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port)} {
		resp, body := do(http.MethodPost, host, "/mcp", mcptest.InitializeBody)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(body, `"serverInfo"`) {
			t.Errorf("initialize with Host %s: %s %s", host, resp.Status, body)
		}
		if resp, body := do(http.MethodGet, host, "/", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "/mcp") {
			t.Errorf("GET / with Host %s: %s %s", host, resp.Status, body)
		}
	}
	for _, host := range []string{"evil.example.com", fmt.Sprintf("evil.example.com:%d", port), fmt.Sprintf("127.0.0.1.nip.io:%d", port)} {
		for _, path := range []string{"/mcp", "/"} {
			resp, body := do(http.MethodPost, host, path, mcptest.InitializeBody)
			if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Mcp-Session-Id") != "" ||
				!strings.Contains(body, fmt.Sprintf("http://localhost:%d/mcp", port)) {
				t.Errorf("%s with Host %s: %s %q", path, host, resp.Status, body)
			}
		}
	}

	// A go-sdk client pointed at localhost lists the demo's tools.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-hosts", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://localhost:%d/mcp", port)}, nil)
	if err != nil {
		t.Fatalf("connect to localhost: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list via localhost: %v %v", tools, err)
	}
	demoMetrics(t, fmt.Sprintf("http://localhost:%d", ports[":2019"])) // metrics_test.go
}
