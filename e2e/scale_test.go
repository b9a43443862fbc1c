package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scenario is one load phase with a fault injected while it runs.
type scenario struct {
	name string
	// min is the phase's shortest length (the fault needs it).
	min time.Duration
	// fault runs at the phase's start and returns when the fault
	// was injected, or the zero time for none; it may heal the fault
	// before returning.
	fault func(t *testing.T, c *crankCluster, d time.Duration) time.Time
	// after checks what the fault must leave behind once the load ended.
	after func(t *testing.T, c *crankCluster)
}

// TestClusterUnderFaults runs real MCP clients through a Caddy
// reverse_proxy (round-robin, no affinity) over three Crank replicas on a
// three-member etcd cluster, and injects one fault per phase. Every
// answer is checked; no operation may be lost, duplicated or fail other
// than retryably. CRANK_LOAD_DURATION lengthens each phase (make
// loadtest); the table it logs is the report.
func TestClusterUnderFaults(t *testing.T) {
	t.Parallel()
	d, workers := loadDuration(t), loadWorkers()
	var report strings.Builder
	var problems []string
	// Registered first, so it runs last: the report and what failed
	// come after the processes' logs, at the end of the output.
	t.Cleanup(func() {
		t.Logf("load through the balancer, %d clients:\n%s", workers, report.String())
		if len(problems) > 0 {
			t.Logf("failed:\n  %s", strings.Join(problems, "\n  "))
		}
	})
	up := loadUpstream(t)
	c := startCrankCluster(t, loadOps(up.URL), 3)

	var killedAdapter int
	for _, s := range []scenario{
		{name: "steady"},
		{name: "replica-sigkill", fault: func(t *testing.T, c *crankCluster, d time.Duration) time.Time {
			time.Sleep(d / 3)
			killedAdapter = c.replicas[2].adapter("rest").PID
			c.replicas[2].kill()
			return time.Now()
		}, after: func(t *testing.T, c *crankCluster) {
			waitFor(t, "the killed replica's adapter process to exit", func() bool { return !processAlive(killedAdapter, crankBin) })
			c.replicas[2].restart()
		}},
		{name: "etcd-leader-sigkill", fault: func(t *testing.T, c *crankCluster, d time.Duration) time.Time {
			time.Sleep(d / 3)
			leader := c.etcd.leader()
			if leader == nil {
				t.Error("no etcd leader")
				return time.Time{}
			}
			c.etcd.kill(leader)
			at := time.Now()
			time.Sleep(d / 3)
			c.etcd.start(leader)
			return at
		}},
		{name: "etcd-member-sigstop-10s", min: 12 * time.Second, fault: func(t *testing.T, c *crankCluster, d time.Duration) time.Time {
			time.Sleep(time.Second)
			m := c.etcd.members[0]
			c.etcd.pause(m)
			at := time.Now()
			time.Sleep(10 * time.Second)
			c.etcd.resume(m)
			return at
		}},
		{name: "etcd-quorum-lost-3s", min: 6 * time.Second, fault: func(t *testing.T, c *crankCluster, d time.Duration) time.Time {
			time.Sleep(time.Second)
			a, b := c.etcd.members[1], c.etcd.members[2]
			c.etcd.kill(a)
			c.etcd.kill(b)
			at := time.Now()
			time.Sleep(3 * time.Second)
			c.etcd.start(a)
			c.etcd.start(b)
			return at
		}},
		{name: "adapter-sigkill", fault: func(t *testing.T, c *crankCluster, d time.Duration) time.Time {
			time.Sleep(d / 3)
			a := c.replicas[0].adapter("rest")
			killedAdapter = a.PID
			if err := killPID(a.PID); err != nil {
				t.Error(err)
			}
			return time.Now()
		}, after: func(t *testing.T, c *crankCluster) {
			waitFor(t, "the adapter to be restarted", func() bool {
				a := c.replicas[0].adapter("rest")
				return a.Running && a.PID != killedAdapter
			})
		}},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			phase := max(d, s.min)
			var at time.Time
			var fault func()
			if s.fault != nil {
				fault = func() { at = s.fault(t, c, phase) }
			}
			rep := runLoad(t, c.URL, workers, phase, fault)
			report.WriteString(rep.table(s.name))
			if !at.IsZero() {
				rec := time.Duration(0)
				if rep.lastFailure.After(at) {
					rec = rep.lastFailure.Sub(at)
				}
				report.WriteString("  recovery after the fault: " + rec.Round(10*time.Millisecond).String() + "\n")
			}
			problems = append(problems, rep.check(t, s.name)...)
			if s.after != nil {
				s.after(t, c)
			}
			c.etcd.waitHealthy(30 * time.Second)
			if s.fault != nil {
				problems = append(problems, recovered(t, c.URL, s.name)...)
			}
		}) {
			return
		}
	}
}

// BenchmarkClusterThroughput measures unary tool calls through a Caddy
// reverse_proxy over one replica and over three, in the same run and on
// the same three-member etcd cluster; each parallel goroutine is one MCP
// client session. Compare the two ns/op figures as a ratio.
func BenchmarkClusterThroughput(b *testing.B) {
	up := loadUpstream(b)
	c := startCrankCluster(b, loadOps(up.URL), 3)
	one := startFront(b, c.replicas[:1])
	for _, bc := range []struct {
		name string
		url  string
	}{{"replicas=1", one.MCPURL}, {"replicas=3", c.URL}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				client := mcp.NewClient(&mcp.Implementation{Name: "crank-bench", Version: "1"}, nil)
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: bc.url}, sessionProtocol)
				if err != nil {
					b.Error(err)
					return
				}
				defer cs.Close()
				for i := 1; pb.Next(); i++ {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": i%1000 + 1}})
					if err != nil || res.IsError {
						b.Errorf("get_user: %v %v", err, res)
						return
					}
				}
			})
		})
	}
}
