package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/crankmcp/crank/e2e
BenchmarkUnaryREST/latency-2   1000  10242641 ns/op  2.749 crank/bare-p50  1.950 crank/bare-p99  2667 crank-p50-µs
BenchmarkUnaryREST/latency-2   1000  10494093 ns/op  1.2 crank/bare-p50  1.628 crank/bare-p99  2679 crank-p50-µs
BenchmarkUnaryREST/latency-2   1000  11200937 ns/op  1.4 crank/bare-p50  2.5 crank/bare-p99  2382 crank-p50-µs
BenchmarkUnaryREST/throughput-2 1000 10539004 ns/op  0.7695 crank/bare-calls/s  1.05 crank/bare-calls/s-sessionless  257321 crank-alloc-B/call  28500 crank-sessionless-alloc-B/call  160 crank-adapter-cpu-µs/call  200 floor-adapter-cpu-µs/call
BenchmarkUnaryGraphQL/direct-2  2000  100 ns/op  200 p50-µs
BenchmarkUnaryGraphQL/crank-2   2000  100 ns/op  500 p50-µs
pkg: github.com/crankmcp/crank/host
BenchmarkCall-2   2000   250000 ns/op
BenchmarkStreamSessionMemory-2   1   5 ns/op  19456 heap-B/session  47104 adapter-rss-B/session
pkg: github.com/crankmcp/crank/plugins/mcp
BenchmarkCall-2   2000   999999 ns/op
`

func TestReport(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	report(&out, nil, res)
	for _, want := range []string{
		// The median of three runs is judged; min and max are shown.
		"unary p50 Crank/bare go-sdk process, session     1.40 (1.20–2.75, 3 runs)",
		"MISS (goal ≤ 1.00)",
		"unary p99 Crank/bare go-sdk process, session     1.95 (1.63–2.50, 3 runs)     PASS (goal ≤ 2.00)",
		"unary throughput (8 callers) Crank/bare, session 0.77                         MISS (goal ≥ 1.00)",
		// Both protocol generations; allocation in KB.
		"unary throughput Crank/bare, sessionless         1.05                         PASS (goal ≥ 1.00)",
		"unary gateway allocation/call, session (KB)      257                          MISS (goal ≤ 30.0)",
		"unary gateway allocation/call, sessionless (KB)  28.5                         PASS (goal ≤ 30.0)",
		"unary p50 Crank/bare go-sdk process, sessionless not measured",
		"live session, gateway heap+stacks (KiB)          19.0                         PASS (goal ≤ 20.0)",
		"live session, adapter RSS (KiB)                  46.0                         MISS (goal ≤ 10.0)",
		"adapter cold start, spawn to first answer (ms)   not measured",
		// Ratios of two benchmarks, and packages kept apart.
		"GraphQL unary p50 Crank / direct                 2.50",
		"host call to an adapter process (µs)             250",
		"unary REST adapter CPU per call Crank / floor    0.80",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	report(&out, res, res)
	if !strings.Contains(out.String(), "before 2.50") || !strings.Contains(out.String(), "after 2.50") {
		t.Errorf("side by side report:\n%s", out.String())
	}
}
