package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchProfileEnv names a directory: when set, BenchmarkUnaryREST (and
// BenchmarkFederation, with its federated echo call) ends by
// loading the gateway with 8 callers for benchProfileSeconds and writes the
// gateway process's CPU profile of that load and its allocation profile
// there (gateway.cpu.pprof, gateway.allocs.pprof), read from Caddy's admin
// endpoint (/debug/pprof). `go tool pprof -top` reads them; the "Cost of a
// call" table in docs/performance.md comes from them.
const benchProfileEnv = "CRANK_BENCH_PROFILE"

const benchProfileSeconds = 10

// profileGateway profiles g under 8 concurrent callers of call, when the
// environment asks for it.
func profileGateway(b *testing.B, g *gateway, call func() error) {
	dir := os.Getenv(benchProfileEnv)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				if err := call(); err != nil {
					errs <- err
					return
				}
				calls.Add(1)
			}
		})
	}
	fetch := func(path, file string) { saveProfile(b, g, path, filepath.Join(dir, file)) }
	start := time.Now()
	fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", benchProfileSeconds), "gateway.cpu.pprof")
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	fetch("/debug/pprof/allocs", "gateway.allocs.pprof")
	fmt.Printf("\ngateway profiled under %d calls in %v (8 callers): %s\n", calls.Load(), time.Since(start).Round(time.Millisecond), dir)
}

// saveProfile writes the profile at path of g's admin endpoint
// (/debug/pprof/...) to file.
func saveProfile(b *testing.B, g *gateway, path, file string) {
	resp, err := http.Get(g.AdminURL + path)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Fatal(err)
	}
}
