package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A catalog entry never starts a process: an mcp entry with a stdio
// command that would create a marker file is refused, naming the field,
// through every path that reaches a catalog — the admin API's create,
// replace, merge-patch, import, validation and test runs, the console, a
// rollback to a version holding it, and a replica following a version
// written into etcd by someone else — and no marker appears.
func TestCatalogNeverRunsACommand(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := newUpstream(t)
	hash, err := exec.Command(crankBin, "hash-password", "--plaintext", "pw-of-op").Output()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	evil := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "description": "d", "adapter": "mcp",
			"config": {"command": "/bin/sh", "args": ["-c", "touch %s"]}}`, name, marker)
	}
	evilYAML := fmt.Sprintf("version: 1\noperations:\n  - name: evil\n    description: d\n    adapter: mcp\n    config: {command: /bin/sh, args: [-c, \"touch %s\"]}\n", marker)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: opsFile(t, up, "2s", ""),
			Handler: "catalog reach {\n\t\t\tupstreams " + up.URL + "\n\t\t\tplaceholders env.CRANK_E2E_TOKEN\n\t\t}",
			Env:     []string{"CRANK_E2E_TOKEN=" + secretToken},
			Site:    "route /console* {\n\t\tbasic_auth {\n\t\t\top " + strings.TrimSpace(string(hash)) + "\n\t\t}\n\t\tcrank_console\n\t}",
			Crank:   fmt.Sprintf("etcd {\n%s\nreplica_name %s\n}", etcd.Caddyfile(), name)}
	}
	g := startGateway(t, opts("a"))
	g.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/reach/operations", catalogEntry(up, "fine", "v1"), "If-None-Match", "*")

	noMarker := func(path string) {
		t.Helper()
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s ran the entry's command", path)
		}
	}
	refused := func(path string, r adminReply) {
		t.Helper()
		noMarker(path)
		body := string(r.Body)
		if r.Status != http.StatusUnprocessableEntity && r.Status != http.StatusOK || !strings.Contains(body, "/config/command") ||
			!strings.Contains(body, "cannot start a process") {
			t.Fatalf("%s: %d, want a refusal naming /config/command: %s", path, r.Status, body)
		}
		if r.Status == http.StatusOK && !strings.Contains(body, `"valid":false`) && !strings.Contains(body, `"valid": false`) {
			t.Fatalf("%s: 200 without valid false: %s", path, body)
		}
	}
	v1 := []string{"If-Match", `"1"`}
	refused("create", g.adminCall("POST", "/crank/catalogs/reach/operations", evil("evil"), v1...))
	refused("replace", g.adminCall("PUT", "/crank/catalogs/reach/operations/fine", evil("fine"), v1...))
	refused("merge-patch", g.adminCall("PATCH", "/crank/catalogs/reach/operations/fine",
		fmt.Sprintf(`{"adapter": "mcp", "config": {"method": null, "url": null, "headers": null, "command": "/bin/sh", "args": ["-c", "touch %s"]}}`, marker),
		append(v1, "Content-Type", "application/merge-patch+json")...))
	refused("import", g.adminCall("PUT", "/crank/catalogs/reach", evilYAML, v1...))
	refused("validate", g.adminCall("POST", "/crank/catalogs/reach/validate", evilYAML))
	refused("validate an entry", g.adminCall("POST", "/crank/catalogs/reach/validate?entry=true", evil("evil")))
	refused("test run of a draft", g.adminCall("POST", "/crank/catalogs/reach/test", `{"entry": `+evil("evil")+`}`))

	// The console, as an authenticated operator on its own page.
	consoleURL := fmt.Sprintf("http://127.0.0.1:%d/console/api/catalogs/reach/validate?entry=true", g.port)
	req, _ := http.NewRequest("POST", consoleURL, strings.NewReader(evil("evil")))
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("op:pw-of-op")))
	req.Header.Set("Origin", fmt.Sprintf("http://127.0.0.1:%d", g.port))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refused("the console", adminReply{Status: resp.StatusCode, Body: data})

	// A version written into etcd by someone else (an older replica, a
	// hand-made write): the replica following the catalog refuses to
	// build it and keeps serving version 1; a rollback to it is refused.
	st, err := store.NewEtcd(context.Background(), etcd.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	doc, ps := catalog.ParseDocument([]byte(evilYAML))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.PutCatalog(ctx, store.CatalogWrite{Catalog: "reach", Expect: 1, Author: "elsewhere", Action: "replace",
		Operations: 1, Document: doc.JSON()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower to refuse version 2", func() bool {
		return strings.Contains(g.log.String(), "cannot start a process")
	})
	noMarker("following a version written elsewhere")
	g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/reach/rollback?version=1", "", "If-Match", `"2"`)
	refused("rollback", g.adminCall("POST", "/crank/catalogs/reach/rollback?version=2", "", "If-Match", `"3"`))

	// A replica that starts while the refused version is current fails
	// its load, naming the field, and runs nothing.
	if _, err := st.PutCatalog(ctx, store.CatalogWrite{Catalog: "reach", Expect: 3, Author: "elsewhere", Action: "replace",
		Operations: 1, Document: doc.JSON()}); err != nil {
		t.Fatal(err)
	}
	if b, err := tryStartGateway(t, opts("b")); err == nil {
		b.stop()
		t.Fatal("a replica started serving a catalog entry with a command")
	} else if !strings.Contains(err.Error(), "/config/command") {
		t.Fatalf("the replica's start failed, but not naming /config/command: %v", err)
	}
	noMarker("a replica starting on a version written elsewhere")
}

// A catalog entry reaches only the placeholders, upstreams and files its
// handler allows: an environment variable or a file of the gateway, a
// loopback address not listed, a private address, and a local file are
// refused at write, validation and test time, naming the field and the
// rule; what is allowed works.
func TestCatalogReachesOnlyWhatItIsAllowed(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""),
		Handler: "catalog allow {\n\t\t\tupstreams " + up.URL + "/users/\n\t\t\tplaceholders env.CRANK_E2E_TOKEN\n\t\t}",
		Env:     []string{"CRANK_E2E_TOKEN=" + secretToken, "CRANK_E2E_OTHER=other-secret-value"}})
	g.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/allow/operations", catalogEntry(up, "fine", "allowed"), "If-None-Match", "*")
	run := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/allow/test", `{"operation": "fine", "arguments": {"id": 4}}`).json(t)
	if run["is_error"] != false || !strings.Contains(fmt.Sprint(run["result"]), "User 4") {
		t.Fatalf("the allowed entry's test run: %v", run)
	}
	hostname, _ := os.ReadFile("/etc/hostname")
	for _, c := range []struct {
		name, config, pointer, message string
	}{
		{"another variable", `{"method": "GET", "url": "` + up.URL + `/users/{id}", "headers": {"X-Token": "{env.CRANK_E2E_OTHER}"}}`,
			"/config/headers/X-Token", "placeholder {env.CRANK_E2E_OTHER} is not allowed"},
		{"a file", `{"method": "GET", "url": "` + up.URL + `/users/{id}", "headers": {"X-Token": "{file./etc/hostname}"}}`,
			"/config/headers/X-Token", "placeholder {file./etc/hostname} is not allowed"},
		{"a path outside the prefix", `{"method": "GET", "url": "` + up.URL + `/admin/{id}"}`,
			"/config/url", "is not allowed for catalog entries"},
		{"a dot segment", `{"method": "GET", "url": "` + up.URL + `/users/../admin/{id}"}`,
			"/config/url", ". or .. segments"},
		{"loopback not listed", `{"method": "GET", "url": "http://127.0.0.1:1/users/{id}"}`,
			"/config/url", "a local address must be listed itself"},
		{"cloud metadata", `{"method": "GET", "url": "http://169.254.169.254/latest/meta-data"}`,
			"/config/url", "is not allowed for catalog entries"},
		{"an OpenAPI file", `{"openapi": {"document": "/etc/hostname"}}`,
			"/config/openapi/document", "cannot read local files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			entry := `{"name": "probe", "description": "d", "adapter": "rest",
				"input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}, "config": ` + c.config + `}`
			for _, r := range []adminReply{
				g.adminCall("POST", "/crank/catalogs/allow/operations", entry, "If-Match", `"1"`),
				g.adminCall("POST", "/crank/catalogs/allow/validate?entry=true", entry),
				g.adminCall("POST", "/crank/catalogs/allow/test", `{"entry": `+entry+`, "arguments": {"id": 1}}`),
			} {
				if !strings.Contains(string(r.Body), c.pointer) || !strings.Contains(string(r.Body), c.message) {
					t.Fatalf("%d, want a refusal at %s saying %q: %s", r.Status, c.pointer, c.message, r.Body)
				}
				if strings.Contains(string(r.Body), "other-secret-value") || len(hostname) > 4 && strings.Contains(string(r.Body), strings.TrimSpace(string(hostname))) {
					t.Fatalf("a refusal carries what it refused to read: %s", r.Body)
				}
			}
		})
	}
	head := g.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/allow", "").json(t)["catalog"].(map[string]any)
	if head["version"] != float64(1) {
		t.Fatalf("a refused entry was saved: %v", head)
	}
	var raw json.RawMessage = g.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/allow/operations/fine", "").Body
	if !strings.Contains(string(raw), "{env.CRANK_E2E_TOKEN}") {
		t.Fatalf("the stored entry lost its placeholder: %s", raw)
	}
}
