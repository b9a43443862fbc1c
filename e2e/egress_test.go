package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a catalog entry may reach is checked where it is dialled. Under
// `upstreams *`, names that DNS (here the gateway's own hosts file) points
// at a loopback, link-local (cloud metadata) or private address are
// refused when the adapter is about to connect — on a call, a test run
// and a validation that reads a document — with an error naming the name,
// the address and the rule; nothing reaches the upstream behind them. A
// redirect to such a name is not followed, and a rule that names an
// address lets its name through.
func TestCatalogEgressCheckedWhereDialled(t *testing.T) {
	t.Parallel()
	needsHostsFile(t)
	up := newUpstream(t)
	var reached atomic.Int32
	up.Config.Handler = countRequests(up.Config.Handler, &reached)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())

	// A server the rules name by its address, 127.0.0.2, which redirects
	// to a name of the gateway's own host.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	redirector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/users/1" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":1,"name":"named"}`)
			return
		}
		http.Redirect(w, r, "http://internal.corp.example:"+port+"/users/1", http.StatusFound)
	})}
	go func() { _ = redirector.Serve(ln) }()
	t.Cleanup(func() { redirector.Close() })
	_, port2, _ := net.SplitHostPort(ln.Addr().String())

	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Env: []string{"CRANK_E2E_TOKEN=" + secretToken},
		Handler: "catalog reach {\n\t\t\tupstreams * 127.0.0.2\n\t\t}",
		Hosts: "127.0.0.1 localhost\n127.0.0.1 internal.corp.example\n169.254.169.254 metadata.corp.example\n" +
			"10.255.255.1 private.corp.example\n127.0.0.2 partner.corp.example\n"})
	entry := func(name, url string) string {
		return fmt.Sprintf(`{"name": %q, "description": "d", "adapter": "rest",
			"input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}},
			"config": {"method": "GET", "url": %q}}`, name, url)
	}
	refusals := map[string]string{
		"loopback": "internal.corp.example (127.0.0.1:" + port + ") is a loopback address",
		"metadata": "metadata.corp.example (169.254.169.254:80) is a link-local address",
		"private":  "private.corp.example (10.255.255.1:" + port + ") is a private address",
	}
	urls := map[string]string{
		"loopback": "http://internal.corp.example:" + port + "/users/{id}",
		"metadata": "http://metadata.corp.example/latest/meta-data",
		"private":  "http://private.corp.example:" + port + "/users/{id}",
	}
	version := 1
	for _, name := range []string{"loopback", "metadata", "private"} {
		want := refusals[name]
		// A test run of a draft entry, then the saved entry's.
		run := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/reach/test", `{"entry": `+entry("draft_"+name, urls[name])+`, "arguments": {"id": 1}}`)
		if !strings.Contains(string(run.Body), want) || !strings.Contains(string(run.Body), "egress refused") {
			t.Fatalf("%s: the test run, want %q: %s", name, want, run.Body)
		}
		hdr := []string{"If-None-Match", "*"}
		if version > 1 {
			hdr = []string{"If-Match", fmt.Sprintf(`"%d"`, version-1)}
		}
		g.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/reach/operations", entry(name, urls[name]), hdr...)
		version++
	}
	// A call through an MCP client.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	defer cs.Close()
	waitFor(t, "the catalog's tools", func() bool {
		_, ok := toolDescription(t, ctx, cs, "private")
		return ok
	})
	for name, want := range refusals {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"id": 1}})
		if err != nil || !res.IsError || !strings.Contains(textOf(res), want) {
			t.Fatalf("%s: %v %s, want an error result saying %q", name, err, textOf(res), want)
		}
	}
	// A validation that reads a document by URL.
	doc := `{"name": "spec", "description": "d", "adapter": "rest", "config": {"openapi": {"document": "http://internal.corp.example:` + port + `/openapi.json"}}}`
	v := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/reach/validate?entry=true", doc)
	if !strings.Contains(string(v.Body), refusals["loopback"]) {
		t.Fatalf("the validation of a document on a loopback name: %s", v.Body)
	}
	// A name whose address a rule names is reached; its redirect to a
	// loopback name is not followed.
	named := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/reach/test", `{"entry": `+entry("named", "http://partner.corp.example:"+port2+"/users/{id}")+`, "arguments": {"id": 1}}`)
	if !strings.Contains(string(named.Body), `named`) || strings.Contains(string(named.Body), "egress refused") {
		t.Fatalf("a named address: %s", named.Body)
	}
	redirected := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/reach/test", `{"entry": `+entry("redirected", "http://partner.corp.example:"+port2+"/go/{id}")+`, "arguments": {"id": 1}}`)
	if !strings.Contains(string(redirected.Body), "302") {
		t.Fatalf("a redirect to a loopback name: %s", redirected.Body)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the loopback upstream behind the names", n)
	}
	// The gateway's own operations file is the operator's: its entries
	// reach the same upstream.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
	if err != nil || res.IsError {
		t.Fatalf("the operations file's entry: %v %s", err, textOf(res))
	}
}

func countRequests(h http.Handler, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Host, "corp.example") {
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}
