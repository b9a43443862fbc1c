package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdBin is the etcd server executable, built on first use from the etcd
// module Crank requires.
var etcdBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "crank-e2e-etcd-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "etcd")
	build := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building etcd: %v\n%s", err, out)
	}
	return bin, nil
})

// etcdMember is one etcd server process of an etcdCluster.
type etcdMember struct {
	name       string
	dir        string
	client     int
	peer       int
	args       []string
	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	log        *syncBuffer
	stoppedSig bool // SIGSTOPped
}

func (m *etcdMember) clientURL() string { return fmt.Sprintf("http://127.0.0.1:%d", m.client) }
func (m *etcdMember) peerURL() string   { return fmt.Sprintf("http://127.0.0.1:%d", m.peer) }

// etcdCluster is a three-member etcd cluster of real etcd processes on
// loopback, each with its own data directory.
type etcdCluster struct {
	t       testing.TB
	members []*etcdMember
}

// startEtcdCluster starts n etcd members and waits until the cluster has
// a leader. Elections are tuned short (heartbeat 50ms, election 500ms) so
// that a leader's loss is noticed in well under a second. History is
// compacted every minute, as docs/operations.md recommends (there: an
// hour), so that a long run (the soak) does not grow the db unbounded.
func startEtcdCluster(t testing.TB, n int) *etcdCluster {
	t.Helper()
	bin, err := etcdBin()
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdCluster{t: t}
	var initial []string
	for i := range n {
		m := &etcdMember{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), client: freePort(t), peer: freePort(t)}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL())
	}
	for _, m := range c.members {
		m.args = []string{bin, "--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", m.clientURL(), "--advertise-client-urls", m.clientURL(),
			"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "crank-e2e", "--heartbeat-interval", "50", "--election-timeout", "500",
			"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1m", "--log-level", "error"}
		c.start(m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
		if t.Failed() {
			for _, m := range c.members {
				t.Logf("etcd %s log (tail):\n%s", m.name, tail(m.log.String(), 3000))
			}
		}
	})
	c.waitHealthy(60 * time.Second)
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start (re)starts m's process on its data directory.
func (c *etcdCluster) start(m *etcdMember) {
	c.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log == nil {
		m.log = &syncBuffer{}
	}
	m.cmd = exec.Command(m.args[0], m.args[1:]...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan struct{})
	m.exited = exited
	cmd := m.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
}

// kill ends m with SIGKILL (after resuming it when it was stopped).
func (c *etcdCluster) kill(m *etcdMember) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.stoppedSig = false
}

// pause and resume send SIGSTOP and SIGCONT: a member that is alive to
// the kernel (its ports accept connections) but answers nothing.
func (c *etcdCluster) pause(m *etcdMember) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGSTOP)
	m.stoppedSig = true
}

func (c *etcdCluster) resume(m *etcdMember) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGCONT)
	m.stoppedSig = false
}

// endpoints are the client URLs of every member, for an etcd block.
func (c *etcdCluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.clientURL())
	}
	return out
}

// leader returns the member that is the Raft leader now, or nil.
func (c *etcdCluster) leader() *etcdMember {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		return nil
	}
	defer cli.Close()
	for _, m := range c.members {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, m.clientURL())
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}

// waitHealthy waits until every running member answers a linearizable
// read, and returns how long that took.
func (c *etcdCluster) waitHealthy(limit time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		if c.healthy() {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			c.t.Fatalf("the etcd cluster did not become healthy in %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *etcdCluster) healthy() bool {
	for _, m := range c.members {
		resp, err := http.Get(m.clientURL() + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// crankCluster is three Crank replicas sharing one etcd cluster, and a
// fourth Caddy process (the same crank binary, with no crank config) in
// front of them whose reverse_proxy balances round-robin with no session
// affinity.
type crankCluster struct {
	etcd     *etcdCluster
	replicas []*gateway
	front    *gateway
	URL      string // the MCP endpoint through the load balancer
}

// ownerTTL of the cluster's replicas: how long a killed replica's jobs
// stay marked running before another replica marks them failed.
const clusterOwnerTTL = "3s"

func startCrankCluster(t testing.TB, ops string, replicas int) *crankCluster {
	t.Helper()
	return startCrankClusterWith(t, gatewayOptions{Operations: ops}, replicas)
}

// startCrankClusterWith is startCrankCluster with the replicas' other
// options (their handler's lines, say) as opts has them; opts.Crank is
// the cluster's etcd block.
func startCrankClusterWith(t testing.TB, opts gatewayOptions, replicas int) *crankCluster {
	t.Helper()
	c := &crankCluster{etcd: startEtcdCluster(t, 3)}
	for i := range replicas {
		opts.Crank = fmt.Sprintf(`etcd {
			endpoints %s
			dial_timeout 2s
			op_timeout 2s
			owner_ttl %s
			replica_name r%d
		}`, strings.Join(c.etcd.endpoints(), " "), clusterOwnerTTL, i)
		c.replicas = append(c.replicas, startGateway(t, opts))
	}
	c.front = startFront(t, c.replicas)
	c.URL = c.front.MCPURL
	return c
}

// startFront starts a Caddy reverse_proxy over the replicas' MCP
// endpoints: round-robin, no affinity, streaming flushed at once, a
// replica that refuses connections skipped for 2s and the request tried on
// the next one. Request bodies are buffered so that a retry on the next
// replica carries the whole body: unbuffered, a POST whose connection to a
// replica killed a moment before failed could reach the next one empty
// (400).
func startFront(t testing.TB, replicas []*gateway) *gateway {
	t.Helper()
	var upstreams []string
	for _, r := range replicas {
		upstreams = append(upstreams, "127.0.0.1:"+strconv.Itoa(r.port))
	}
	g := &gateway{t: t, dir: t.TempDir(), port: freePort(t), admin: freePort(t), log: &syncBuffer{}}
	g.MCPURL = fmt.Sprintf("http://127.0.0.1:%d/mcp", g.port)
	g.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	writeFile(t, filepath.Join(g.dir, "Caddyfile"), fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
}

http://127.0.0.1:%d {
	bind 127.0.0.1
	reverse_proxy %s {
		lb_policy round_robin
		lb_try_duration 3s
		lb_try_interval 50ms
		fail_duration 2s
		flush_interval -1
		request_buffers 4MiB
	}
}
`, g.admin, g.port, strings.Join(upstreams, " ")))
	if err := g.launch(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.stop)
	g.waitAnswering("the load balancer to answer")
	return g
}

// kill ends g with SIGKILL: it cleans nothing up.
func (g *gateway) kill() {
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// restart starts g again on its own Caddyfile, ports and directory, and
// waits until its MCP endpoint answers.
func (g *gateway) restart() {
	g.t.Helper()
	if err := g.launch(nil); err != nil {
		g.t.Fatal(err)
	}
	g.waitAnswering("the restarted replica to answer")
}

// killPID sends SIGKILL to pid.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
