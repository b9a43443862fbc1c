package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An external etcd with authentication: Crank signs in with the username
// and password of its Caddyfile (the password from the environment,
// through an {env.*} placeholder), keeps its state under its prefix, and
// a wrong password fails the load with a clear error instead of serving.
// (Client-certificate TLS to an external etcd is what every replica test
// already uses: storetest's server requires a client certificate.)
func TestExternalEtcdWithPassword(t *testing.T) {
	t.Parallel()
	c := startEtcdCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const prefix, password = "/crank-auth/", "s3cret-etcd-pass"
	admin, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, step := range []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pass"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "crank"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "crank", prefix, clientv3.GetPrefixRangeEnd(prefix),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "crank", password); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "crank", "crank"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up etcd authentication: %v", err)
		}
	}
	etcdBlock := func(user string) string {
		return fmt.Sprintf(`etcd {
			endpoints %s
			prefix %s
			username %s
			password {env.CRANK_ETCD_PASSWORD}
		}`, strings.Join(c.endpoints(), " "), prefix, user)
	}

	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Crank: etcdBlock("crank"),
		Env: []string{"CRANK_ETCD_PASSWORD=" + password}})
	cs := g.connect(ctx)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 3}}); err != nil || res.IsError {
		t.Fatalf("a call with etcd authentication: %v %+v", err, res)
	}
	// The MCP session's record is in etcd under Crank's prefix.
	root, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 10 * time.Second,
		Username: "root", Password: "root-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	keys, err := root.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range keys.Kvs {
		found = found || strings.Contains(string(kv.Key), cs.ID())
	}
	if !found {
		t.Errorf("no key of MCP session %s under %s (%d keys)", cs.ID(), prefix, len(keys.Kvs))
	}
	// The password is not in the config Caddy serves on its admin API.
	resp, err := http.Get(g.AdminURL + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(cfg), password) || !strings.Contains(string(cfg), "{env.CRANK_ETCD_PASSWORD}") {
		t.Errorf("the admin API's config holds the etcd password, or not its placeholder:\n%s", cfg)
	}

	// A wrong password fails the start, saying so.
	_, err = tryStartGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Crank: etcdBlock("crank"),
		Env: []string{"CRANK_ETCD_PASSWORD=wrong"}})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("a wrong etcd password: %v", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Error("the load error shows the password")
	}
}
