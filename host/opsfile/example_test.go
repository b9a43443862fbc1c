package opsfile_test

import (
	"fmt"

	"github.com/crankmcp/crank/host/opsfile"
)

// A window operation's config: what it sets is checked at load, and what
// it leaves out takes its defaults (the timeout of the whole call is the
// window's duration plus 5s).
func Example_window() {
	cat, err := opsfile.Parse("ops.yaml", []byte(`version: 1
operations:
  - name: recent_logs
    description: Watch the live log stream for a moment, counts per level.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 20000, max_items: 50}
    aggregation: {aggregation_mode: summary_only, group_by: $.level}
    config: {method: GET, url: "https://logs.example.com/stream"}
`), opsfile.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	op, _ := cat.Lookup("recent_logs")
	ex := op.Execution
	fmt.Println("transport:", ex.TransportBehavior)
	fmt.Println("window:", ex.Limits.Window(), "timeout:", op.Timeout, "each upstream request:", ex.Limits.UpstreamTimeout())
	fmt.Println("max items:", ex.Limits.MaxItems, "max bytes:", ex.Limits.MaxBytes, "idle timeout ms:", ex.Limits.IdleTimeoutMS)
	fmt.Println("aggregation:", ex.Aggregation.Mode, "by", ex.Aggregation.GroupBy)
	fmt.Println("truncate item fields:", ex.Safety.TruncateItemFields, "at", ex.Safety.MaxFieldLength, "bytes")
	// Output:
	// transport: server_stream
	// window: 20s timeout: 25s each upstream request: 10s
	// max items: 50 max bytes: 1048576 idle timeout ms: 0
	// aggregation: summary_only by $.level
	// truncate item fields: true at 4096 bytes
}
