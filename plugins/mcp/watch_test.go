package mcp

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// An upstream whose tools change (notifications/tools/list_changed) has
// the adapter name the entries expanded against it to the hosts watching,
// over Streamable HTTP and over stdio; expanding them again lists the new
// tool. Entries of other upstreams are not named.
func TestWatchListChanged(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	other := newHTTPUpstream(t, false)
	for name, base := range transports(t, up) {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			info, err := h.Describe(ctxT(t))
			if err != nil || !info.Capabilities.Watch {
				t.Fatalf("describe: %+v %v", info, err)
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			events := make(chan []string, 16)
			watched := make(chan error, 1)
			go func() {
				watched <- h.Client.WatchOperations(ctx, "test", func(ops []string) { events <- ops })
			}()
			expand := func(entry string, cfg map[string]any) []string {
				tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Operation: entry, Config: cfg, Timeout: 20 * time.Second})
				if err != nil || len(diags) > 0 {
					t.Fatalf("expand %s: %v %v", entry, diags, err)
				}
				return toolNames(tools)
			}
			if tools := expand("ups", base); slices.Contains(tools, "grown") {
				t.Fatalf("grown before grow: %v", tools)
			}
			expand("others", map[string]any{"url": other.srv.URL})
			if res, ue := call(t, h, base, "grow", `{}`, 20*time.Second); ue != nil || res.Text != "grew" {
				t.Fatalf("grow: %+v %+v", res, ue)
			}
			select {
			case ops := <-events:
				if !slices.Equal(ops, []string{"ups"}) {
					t.Fatalf("named %v, want [ups]", ops)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no change named within 30s")
			}
			if tools := expand("ups", base); !slices.Contains(tools, "grown") {
				t.Fatalf("expanded again: %v", tools)
			}
			cancel()
			if err := <-watched; err != nil && ctx.Err() == nil {
				t.Fatalf("watch: %v", err)
			}
		})
	}
}
