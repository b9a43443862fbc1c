package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// startOps is an operations file with one REST tool on up, served by the
// adapter command given (the first %s: a YAML flow sequence of the
// command and its arguments).
const startOps = `
adapters:
  rest: {command: %q, args: %s}
operations:
  - name: get_user
    description: Fetch a user.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%s/users/{id}"}
`

// BenchmarkAdapterStart measures the adapter process's life cycle as the
// gateway sees it, with the real REST adapter executable: the one `make
// build` and the container image put beside the gateway,
// plugins/rest/cmd/crank-adapter-rest (built here), which the gateway runs
// for `adapter: rest` when it is there, and, as "-builtin", the gateway's
// own executable (`crank crank-adapter rest`, the binary the harness
// built), which a gateway without it (an xcaddy build) runs.
//
//	cold       spawn to first answered call: a host is built from the
//	           operations file (the supervisor starts the process, the
//	           go-plugin handshake with AutoMTLS, Describe, Validate), then
//	           one tool call reaches the loopback upstream; ms/start
//	crash      the process is killed (SIGKILL) between calls; from the kill
//	           until a call is answered again, calling in a loop as a
//	           client retrying at once would (the supervisor notices the
//	           exit and starts a new process on the next call); ms/recovery
//
// Each iteration is one start or one crash; both report ns/op and the
// milliseconds as a custom metric with p50 and max.
func BenchmarkAdapterStart(b *testing.B) {
	up := newUpstream(b)
	standalone := adaptertest.Build(b, filepath.Join(repoRoot, "plugins", "rest", "cmd", "crank-adapter-rest"))
	ctx := context.Background()
	args := json.RawMessage(`{"id": 1}`)
	for _, exe := range []struct {
		name, command, args string
	}{
		{"", standalone.Path, "[]"},
		{"-builtin", crankBin, "[crank-adapter, rest]"},
	} {
		cat, err := opsfile.Parse("ops.yaml", fmt.Appendf(nil, startOps, exe.command, exe.args, up.URL), opsfile.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// newHost builds a host whose adapter starts now; its supervisor
		// is returned for the process id.
		newHost := func(b *testing.B) (*host.Host, *host.Supervisor) {
			var sup *host.Supervisor
			h, err := host.New(ctx, host.Options{File: cat, Logger: zap.NewNop(), Adapter: func(name string) (*host.Supervisor, error) {
				spec, err := host.AdapterSpecOf(cat, name, nil)
				if err != nil {
					return nil, err
				}
				sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
				return sup, nil
			}})
			if err != nil {
				if sup != nil {
					sup.Close()
				}
				b.Fatal(err)
			}
			return h, sup
		}
		call := func(h *host.Host) (*host.Result, error) {
			return h.Call(ctx, host.CallRequest{Tool: h.Tool("get_user"), Arguments: args})
		}
		report := func(b *testing.B, took []time.Duration, unit string) {
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), unit)
			b.ReportMetric(float64(took[len(took)-1])/float64(time.Millisecond), "max-"+unit)
		}
		b.Run("cold"+exe.name, func(b *testing.B) {
			var took []time.Duration
			for range b.N {
				start := time.Now()
				h, sup := newHost(b)
				res, err := call(h)
				took = append(took, time.Since(start))
				b.StopTimer()
				sup.Close()
				if err != nil || res.IsError {
					b.Fatalf("first call: %v %+v", err, res)
				}
				b.StartTimer()
			}
			report(b, took, "ms/start")
		})
		b.Run("crash"+exe.name, func(b *testing.B) {
			h, sup := newHost(b)
			defer sup.Close()
			var took []time.Duration
			for range b.N {
				b.StopTimer()
				if res, err := call(h); err != nil || res.IsError {
					b.Fatalf("call before the crash: %v %+v", err, res)
				}
				p, err := os.FindProcess(sup.PID())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := p.Signal(syscall.SIGKILL); err != nil {
					b.Fatal(err)
				}
				for deadline := start.Add(60 * time.Second); ; {
					res, err := call(h)
					if err != nil {
						b.Fatal(err)
					}
					if !res.IsError {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("no answered call within 60s of the crash: %s", res.Text)
					}
				}
				took = append(took, time.Since(start))
			}
			report(b, took, "ms/recovery")
		})
	}
}
