package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store/storetest"
)

// A live gateway's state backed up with `crank snapshot save` and restored
// with `crank snapshot restore` into a new etcd, where another gateway
// serves it: the client's MCP session goes on there, a window's cursor
// continues, a finished job keeps its result, the job in flight ends
// (adopted, or failed owner_lost, retryable, by the new replica once the
// old owner's restored lease expires), and the catalog keeps its versions
// and history.
func TestSnapshotRestoreGateway(t *testing.T) {
	t.Parallel()
	up := loadUpstream(t)
	handler := fmt.Sprintf("catalog fleet {\n\t\t\tupstreams %s\n\t\t}", up.URL)
	a := startGateway(t, gatewayOptions{Operations: loadOps(up.URL), Handler: handler})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lb := &balancer{}
	lb.to(a)
	cs := connectThrough(t, ctx, lb)
	c := &loadClient{t: t, cs: cs}
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		m, o := c.call(name, args, "")
		if o != nil {
			t.Fatalf("%s %v: %v", name, args, o.err)
		}
		return m
	}
	w := call("tail", map[string]any{})
	done := call("export_start", map[string]any{"ms": 10})
	waitFor(t, "the short job to finish", func() bool {
		return call("export_status", map[string]any{"job_id": done["job_id"]})["status"] == "succeeded"
	})
	flight := call("export_start", map[string]any{"ms": 60000})
	cat := &fleetCatalog{t: t, base: up.URL}
	cat.edit(a)
	cat.edit(a)

	file := filepath.Join(t.TempDir(), "crank.snapshot")
	snapshot := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(crankBin, append([]string{"snapshot"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("crank snapshot %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Log(snapshot("save", file, "--embedded", filepath.Join(a.dir, "etcd"), "--client-url", fmt.Sprintf("http://127.0.0.1:%d", a.etcd)))
	a.stop()

	etcd := storetest.NewServer(t)
	tls := etcd.TLS()
	t.Log(snapshot("restore", file, "--endpoints", strings.Join(etcd.Endpoints(), ","), "--cacert", tls.CAFile, "--cert", tls.CertFile, "--key", tls.KeyFile))
	b := startGateway(t, gatewayOptions{Operations: loadOps(up.URL), Handler: handler,
		Crank: fmt.Sprintf("etcd {\n\t\t\t%s\n\t\t\towner_ttl 2s\n\t\t}", etcd.Caddyfile())})

	// The same MCP session, on the new gateway.
	lb.to(b)
	w2 := call("tail", map[string]any{"cursor": w["cursor"]})
	last := -1
	sequence(w["items"].([]any), &last, false)
	if lost, dup := sequence(w2["items"].([]any), &last, false); lost+dup != 0 {
		t.Fatalf("the window continued from its cursor with %d lost, %d duplicated", lost, dup)
	}
	if r := call("export_result", map[string]any{"job_id": done["job_id"]}); fmt.Sprint(r["result"]) != "map[rows:10]" {
		t.Fatalf("the finished job's result after the restore: %v", r)
	}
	var st map[string]any
	// Its owner's restored lease lasts the owner TTL (10s) from the
	// restore; then the new replica's sweeper takes the job over.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if st = call("export_status", map[string]any{"job_id": flight["job_id"]}); st["status"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	if st["status"] != "succeeded" && !strings.Contains(fmt.Sprint(st["error"]), "owner_lost") {
		t.Fatalf("the job in flight after the restore: %v", st)
	}
	t.Logf("the job in flight after the restore: %v", st["status"])
	for _, p := range cat.check(t, b) {
		t.Error(p)
	}
	if r := b.adminCall("GET", "/crank/catalogs/fleet/versions/1", ""); r.Status != http.StatusOK {
		t.Errorf("the catalog's first version after the restore: %d %s", r.Status, r.Body)
	}
}
