package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// balancer sends each request of a client to the replica it currently
// points at, as a load balancer without session affinity may.
type balancer struct {
	mu   sync.Mutex
	host string
	// sse, when set, is told when the client reads the first event of an
	// SSE answer to a POST (without blocking).
	sse chan struct{}
}

func (b *balancer) to(g *gateway) {
	u, _ := url.Parse(g.MCPURL)
	b.mu.Lock()
	b.host = u.Host
	b.mu.Unlock()
}

func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	host := b.host
	b.mu.Unlock()
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = host, host
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && b.sse != nil && req.Method == http.MethodPost && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &firstRead{ReadCloser: resp.Body, read: b.sse}
	}
	return resp, err
}

// firstRead tells read of the first bytes read from its body.
type firstRead struct {
	io.ReadCloser
	read chan struct{}
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 {
		f.once.Do(func() {
			select {
			case f.read <- struct{}{}:
			default:
			}
		})
	}
	return n, err
}

// connectThrough opens a go-sdk client session through lb.
func connectThrough(t *testing.T, ctx context.Context, lb *balancer) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e-replica", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://balancer/mcp", HTTPClient: &http.Client{Transport: lb},
	}, sessionProtocol)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// replicaPair starts two gateways sharing the etcd at endpoint.
func replicaPair(t *testing.T, up *upstream, etcd *storetest.Server) (a, b *gateway) {
	t.Helper()
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: opsFile(t, up, "2s", ""), Crank: fmt.Sprintf(`etcd {
			%s
			op_timeout 2s
			owner_ttl 2s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	return startGateway(t, opts("a")), startGateway(t, opts("b"))
}

func getUser(ctx context.Context, cs *mcp.ClientSession, id int) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": id}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", textOf(res))
	}
	return textOf(res), nil
}

// Two Crank processes share one etcd: an MCP session initialized on A is
// served by B (tools/list, tools/call with the same Mcp-Session-Id), and
// after A is killed with SIGKILL, B serves A's sessions — also one that B
// had never seen before A died.
func TestStreamSessionMovesBetweenReplicas(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := newUpstream(t)
	a, b := replicaPair(t, up, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	lb1, lb2 := &balancer{}, &balancer{}
	lb1.to(a)
	lb2.to(a)
	moved := connectThrough(t, ctx, lb1)
	stayed := connectThrough(t, ctx, lb2)
	for _, cs := range []*mcp.ClientSession{moved, stayed} {
		if got, err := getUser(ctx, cs, 1); err != nil || !strings.Contains(got, "User 1") {
			t.Fatalf("call on A: %q, %v", got, err)
		}
	}

	lb1.to(b)
	tools, err := moved.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list on B: %v\nB log:\n%s", err, b.log.String())
	}
	if len(tools.Tools) != 4 {
		t.Fatalf("tools on B: %d", len(tools.Tools))
	}
	if got, err := getUser(ctx, moved, 2); err != nil || !strings.Contains(got, "User 2") {
		t.Fatalf("call on B: %q, %v", got, err)
	}

	// SIGKILL: A cleans nothing up. Its adapter process notices that its
	// host is gone and exits by itself.
	adapterPID := a.adapter("rest").PID
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	waitFor(t, "A's adapter process to exit after A was killed", func() bool { return !processAlive(adapterPID, crankBin) })

	lb2.to(b)
	for _, cs := range []*mcp.ClientSession{moved, stayed} {
		if got, err := getUser(ctx, cs, 3); err != nil || !strings.Contains(got, "User 3") {
			t.Fatalf("call on B after A was killed: %q, %v\nB log:\n%s", got, err, b.log.String())
		}
	}
	if _, err := stayed.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list on B after A was killed: %v", err)
	}
}

// postRaw sends one JSON-RPC message in session id to g and returns the
// status and the first SSE data line or the body.
func postRaw(t *testing.T, g *gateway, id, msg string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.MCPURL, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return resp.StatusCode, resp.Header, d
			}
		}
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// etcd stops while tool calls run: calls in a session the replica holds
// keep working (they need no state); a replica asked for a session it
// does not hold answers a retryable 503 naming etcd; once etcd is back,
// that replica serves the session.
func TestEtcdStopStartDuringReplicaTraffic(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := newUpstream(t)
	a, b := replicaPair(t, up, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lb := &balancer{}
	lb.to(a)
	cs := connectThrough(t, ctx, lb)
	if _, err := getUser(ctx, cs, 1); err != nil {
		t.Fatal(err)
	}

	var (
		down     atomic.Bool
		okDown   atomic.Int64
		failures atomic.Int64
		firstErr atomic.Value
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := getUser(ctx, cs, i%50+1); err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				continue
			}
			if down.Load() {
				okDown.Add(1)
			}
		}
	})

	etcd.Stop()
	down.Store(true)
	waitFor(t, "tool calls while etcd is down", func() bool { return okDown.Load() >= 20 })
	status, hdr, body := postRaw(t, b, cs.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" ||
		!strings.Contains(body, "etcd") || !strings.Contains(body, `"retryable":true`) {
		t.Fatalf("B during the outage: %d %s", status, body)
	}

	etcd.Start()
	down.Store(false)
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, _, body = postRaw(t, b, cs.ID(), `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not recover: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, "get_user") {
		t.Fatalf("tools/list on B after the outage: %s", body)
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d tool calls failed on A (first: %v)", n, firstErr.Load())
	}
	lb.to(b)
	if _, err := getUser(ctx, cs, 5); err != nil {
		t.Fatalf("call on B: %v", err)
	}
}

// A gateway runs the store's sweeper: a job whose owner replica is gone
// (here a store client that closed, revoking its owner lease) is marked
// failed by the gateway, with no one polling it.
func TestGatewaySweepsOrphanedJobs(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	startGateway(t, gatewayOptions{Operations: opsFile(t, newUpstream(t), "2s", ""), Crank: fmt.Sprintf(`etcd {
			%s
		}`, etcd.Caddyfile())})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(name string) *store.Etcd {
		st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: etcd.Endpoints(), TLS: etcd.TLS(), ReplicaName: name, OwnerTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	dying, reader := open("dying"), open("reader")
	scope := store.Scope{WorkspaceID: "default"}
	job, err := dying.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "get_user", MaxRuntime: time.Hour, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := dying.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gateway to mark the orphaned job failed", func() bool {
		j, err := reader.GetJob(ctx, scope, job.ID)
		return err == nil && j.Status == store.JobFailed
	})
}

// processAlive reports whether pid is still a live (not zombie) process
// running exe.
func processAlive(pid int, exe string) bool {
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmd), exe) {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) {
		return st[i+2] != 'Z' && st[i+2] != 'X'
	}
	return true
}
