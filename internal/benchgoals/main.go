// Command benchgoals reads the output of `go test -bench` (what `make
// bench` writes) and prints the performance goals of the gateway as the
// ratios and figures the benchmarks report, with PASS or MISS per goal,
// followed by the figures that must not get slower. A benchmark run
// several times (-count) gives several values: it prints their minimum,
// median and maximum and judges the median.
//
//	go run ./internal/benchgoals bench.txt
//	go run ./internal/benchgoals -before old.txt new.txt
//
// With -before, each figure is printed from both files side by side (the
// before/after table of a change measured on the same machine).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A goal is one reported metric of one benchmark and its bound.
type goal struct {
	what   string
	bench  string // benchmark name without the -GOMAXPROCS suffix
	metric string // the unit the benchmark reports it in
	max    bool   // the bound is a maximum (else a minimum)
	bound  float64
}

// The goals of the unary call (in both protocol generations: a
// 2025-11-25 session, and 2026-07-28 without one, the metrics suffixed
// -sessionless), the streaming path, the adapter process and live stream
// sessions; the ratios are to a bare go-sdk MCP server measured in the
// same run (the unary call's figures to the design floor, that server
// calling the upstream over the adapter hop, follow in figures).
var goals = []goal{
	{"unary p50 Crank/bare go-sdk process, session", "e2e.BenchmarkUnaryREST/latency", "crank/bare-p50", true, 1},
	{"unary p50 Crank/bare go-sdk process, sessionless", "e2e.BenchmarkUnaryREST/latency", "crank/bare-p50-sessionless", true, 1},
	{"unary p99 Crank/bare go-sdk process, session", "e2e.BenchmarkUnaryREST/latency", "crank/bare-p99", true, 2},
	{"unary p99 Crank/bare go-sdk process, sessionless", "e2e.BenchmarkUnaryREST/latency", "crank/bare-p99-sessionless", true, 2},
	{"unary throughput (8 callers) Crank/bare, session", "e2e.BenchmarkUnaryREST/throughput", "crank/bare-calls/s", false, 1},
	{"unary throughput Crank/bare, sessionless", "e2e.BenchmarkUnaryREST/throughput", "crank/bare-calls/s-sessionless", false, 1},
	{"unary gateway allocation/call, session (KB)", "e2e.BenchmarkUnaryREST/throughput", "crank-alloc-B/call", true, 30e3},
	{"unary gateway allocation/call, sessionless (KB)", "e2e.BenchmarkUnaryREST/throughput", "crank-sessionless-alloc-B/call", true, 30e3},
	{"unary p50 Crank sessionless/session", "e2e.BenchmarkUnaryREST/latency", "sessionless/session-crank-p50", true, 1},
	{"unary throughput Crank sessionless/session", "e2e.BenchmarkUnaryREST/throughput", "sessionless/session-crank-calls/s", false, 1},
	{"streaming chunks/s, Crank/bare go-sdk process", "e2e.BenchmarkStreamingTool/throughput", "crank/bare-process-chunks/s", false, 0.9},
	{"streaming added latency per chunk p50 over the bare process (µs)", "e2e.BenchmarkStreamingTool/latency", "crank-bare-process-p50-µs/chunk", true, 100},
	{"adapter cold start, spawn to first answer (ms)", "e2e.BenchmarkAdapterStart/cold", "ms/start", true, 150},
	{"adapter crash to next answered call (ms)", "e2e.BenchmarkAdapterStart/crash", "ms/recovery", true, 500},
	// The same, run from the gateway's own executable (no adapter
	// executables beside it: an xcaddy build).
	{"adapter cold start, gateway executable (ms)", "e2e.BenchmarkAdapterStart/cold-builtin", "ms/start", true, 150},
	{"adapter crash to answer, gateway executable (ms)", "e2e.BenchmarkAdapterStart/crash-builtin", "ms/recovery", true, 500},
	// Rate limits on the hot path: the limiter's step of a call (three
	// limits), in ns; its figures show the call with and without limits.
	{"rate limits' cost per call on the hot path (ns)", "mcpserver.BenchmarkRateLimit/admit", "limiter-ns/call", true, 1000},
	{"output schema check's share of a hot-path call's CPU, session (%)", "mcpserver.BenchmarkOutputCheck", "output-check-cpu-%", true, 3},
	{"output schema check's share of a hot-path call's CPU, sessionless (%)", "mcpserver.BenchmarkOutputCheck", "output-check-cpu-%-sessionless", true, 3},
	// Real documents at scale (issue 44): Stripe's and GitHub's whole
	// OpenAPI documents through a gateway, output schemas on.
	{"Stripe's document: load with output schemas (s)", "e2e.BenchmarkOpenAPIScale/stripe/output-schemas-on", "load-s", true, 10},
	{"Stripe's document: gateway peak RSS (MiB)", "e2e.BenchmarkOpenAPIScale/stripe/output-schemas-on", "gateway-rss-MiB", true, 250},
	{"Stripe's document: tools/list (MB)", "e2e.BenchmarkOpenAPIScale/stripe/output-schemas-on", "tools-list-MB", true, 5},
	{"GitHub's document: load with output schemas (s)", "e2e.BenchmarkOpenAPIScale/github/output-schemas-on", "load-s", true, 5},
	// Federation: an MCP upstream's tool through the mcp adapter, against
	// a bare go-sdk proxy process (a go-sdk server forwarding each call
	// with a go-sdk client) measured in the same run.
	{"federated echo p50 Crank/proxy, session", "e2e.BenchmarkFederation/latency", "crank/proxy-p50-echo", true, 1.2},
	{"federated echo calls/s Crank/proxy, session", "e2e.BenchmarkFederation/throughput", "crank/proxy-calls/s-echo", false, 1},
	{"federated 1 KB p50 Crank/proxy, session", "e2e.BenchmarkFederation/latency", "crank/proxy-p50-lookup", true, 1.2},
	{"federated 1 KB calls/s Crank/proxy, session", "e2e.BenchmarkFederation/throughput", "crank/proxy-calls/s-lookup", false, 1},
	{"federated echo p50 Crank/proxy, sessionless", "e2e.BenchmarkFederation/latency", "crank/proxy-p50-echo-sessionless", true, 1.2},
	{"federated echo calls/s Crank/proxy, sessionless", "e2e.BenchmarkFederation/throughput", "crank/proxy-calls/s-echo-sessionless", false, 1},
	{"federated 1 KB p50 Crank/proxy, sessionless", "e2e.BenchmarkFederation/latency", "crank/proxy-p50-lookup-sessionless", true, 1.2},
	{"federated 1 KB calls/s Crank/proxy, sessionless", "e2e.BenchmarkFederation/throughput", "crank/proxy-calls/s-lookup-sessionless", false, 1},
	// With CRANK_BENCH_FED_LOAD=10m: the gateway's RSS after 10 minutes
	// of federation load / after the first minute.
	{"federation load, gateway RSS end / first minute", "e2e.BenchmarkFederation/rss", "crank-rss-end/1m", true, 1.25},
	{"live session, gateway heap+stacks (KiB)", "host.BenchmarkStreamSessionMemory", "heap-B/session", true, 20 * 1024},
	{"live session, adapter RSS (KiB)", "host.BenchmarkStreamSessionMemory", "adapter-rss-B/session", true, 10 * 1024},
}

// A figure is a reported metric that must not get slower, or its ratio
// to another (a baseline in the same run, paired run by run); it is
// printed, not judged (compare it with -before).
type figure struct {
	what, bench, metric string
	perBench, perMetric string // the divisor, if any
}

var figures = []figure{
	{what: "unary REST p50 Crank (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank-p50-µs"},
	{what: "unary REST p50 bare go-sdk process (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "bare-mcp-process-p50-µs"},
	{what: "unary REST p50 design floor (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "floor-p50-µs"},
	{what: "unary REST p50 upstream directly (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "direct-p50-µs"},
	{what: "unary REST p50 Crank / design floor", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/floor-p50"},
	{what: "unary REST p50 design floor / bare", bench: "e2e.BenchmarkUnaryREST/latency", metric: "floor/bare-p50"},
	{what: "unary REST p50 no log / bare", bench: "e2e.BenchmarkUnaryREST/latency", metric: "no-log/bare-p50"},
	{what: "unary REST calls/s Crank", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank-calls/s"},
	{what: "unary REST calls/s bare go-sdk process", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "bare-mcp-process-calls/s"},
	{what: "unary REST calls/s design floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor-calls/s"},
	{what: "unary REST throughput Crank / design floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/floor-calls/s"},
	{what: "unary REST throughput design floor / bare", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor/bare-calls/s"},
	{what: "unary REST throughput no log / bare", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "no-log/bare-calls/s"},
	{what: "unary REST server CPU per call Crank / bare", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/bare-cpu"},
	{what: "unary REST server CPU per call Crank / floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/floor-cpu"},
	{what: "unary REST adapter CPU per call Crank (µs)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank-adapter-cpu-µs/call"},
	{what: "unary REST adapter CPU per call Crank / floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank-adapter-cpu-µs/call",
		perBench: "e2e.BenchmarkUnaryREST/throughput", perMetric: "floor-adapter-cpu-µs/call"},
	{what: "unary REST allocation per call bare process (KB)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "bare-mcp-process-alloc-B/call"},
	{what: "unary REST allocation per call design floor (KB)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor-alloc-B/call"},
	// The same without a session (2026-07-28).
	{what: "sessionless p50 Crank (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank-sessionless-p50-µs"},
	{what: "sessionless p50 bare go-sdk process (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "bare-mcp-process-sessionless-p50-µs"},
	{what: "sessionless p50 design floor (µs)", bench: "e2e.BenchmarkUnaryREST/latency", metric: "floor-sessionless-p50-µs"},
	{what: "sessionless p50 Crank / design floor", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/floor-p50-sessionless"},
	{what: "sessionless p50 design floor / bare", bench: "e2e.BenchmarkUnaryREST/latency", metric: "floor/bare-p50-sessionless"},
	{what: "sessionless p50 no log / bare", bench: "e2e.BenchmarkUnaryREST/latency", metric: "no-log/bare-p50-sessionless"},
	{what: "sessionless calls/s Crank", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank-sessionless-calls/s"},
	{what: "sessionless calls/s bare go-sdk process", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "bare-mcp-process-sessionless-calls/s"},
	{what: "sessionless calls/s design floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor-sessionless-calls/s"},
	{what: "sessionless throughput Crank / design floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/floor-calls/s-sessionless"},
	{what: "sessionless throughput design floor / bare", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor/bare-calls/s-sessionless"},
	{what: "sessionless server CPU per call Crank / bare", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/bare-cpu-sessionless"},
	{what: "sessionless server CPU per call Crank / floor", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/floor-cpu-sessionless"},
	{what: "sessionless adapter CPU per call Crank (µs)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank-sessionless-adapter-cpu-µs/call"},
	{what: "sessionless allocation per call bare (KB)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "bare-mcp-process-sessionless-alloc-B/call"},
	{what: "sessionless allocation per call floor (KB)", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "floor-sessionless-alloc-B/call"},
	{what: "sessionless/session server CPU per call Crank", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "sessionless/session-crank-cpu"},
	{what: "sessionless/session p50 bare go-sdk process", bench: "e2e.BenchmarkUnaryREST/latency", metric: "sessionless/session-bare-p50"},
	{what: "sessionless/session calls/s bare go-sdk process", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "sessionless/session-bare-calls/s"},
	{what: "streaming chunks/s no log / bare", bench: "e2e.BenchmarkStreamingTool/throughput", metric: "no-log/bare-chunks/s"},
	{what: "streaming chunks/s Crank / bare in the benchmark's process", bench: "e2e.BenchmarkStreamingTool/throughput", metric: "crank/bare-chunks/s"},
	{what: "streaming added latency per chunk over the bare server in the benchmark's process (µs)", bench: "e2e.BenchmarkStreamingTool/latency", metric: "crank-bare-p50-µs/chunk"},
	{what: "streaming server CPU per chunk Crank / bare process", bench: "e2e.BenchmarkStreamingTool/throughput", metric: "crank/bare-process-cpu"},
	// With CRANK_BENCH_BEFORE: Crank against the gateway before a change,
	// in the same run.
	{what: "unary REST p50 Crank / before", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/before-p50"},
	{what: "unary REST p99 Crank / before", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/before-p99"},
	{what: "unary REST throughput Crank / before", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/before-calls/s"},
	{what: "sessionless p50 Crank / before", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/before-p50-sessionless"},
	{what: "sessionless p99 Crank / before", bench: "e2e.BenchmarkUnaryREST/latency", metric: "crank/before-p99-sessionless"},
	{what: "sessionless throughput Crank / before", bench: "e2e.BenchmarkUnaryREST/throughput", metric: "crank/before-calls/s-sessionless"},
	{what: "streaming chunks/s Crank / before", bench: "e2e.BenchmarkStreamingTool/throughput", metric: "crank/before-chunks/s"},
	{what: "federated echo CPU/call Crank/proxy, session", bench: "e2e.BenchmarkFederation/throughput", metric: "crank/proxy-cpu-echo"},
	{what: "federated 1 KB CPU/call Crank/proxy, session", bench: "e2e.BenchmarkFederation/throughput", metric: "crank/proxy-cpu-lookup"},
	{what: "federated echo CPU/call Crank/proxy, sessionless", bench: "e2e.BenchmarkFederation/throughput", metric: "crank/proxy-cpu-echo-sessionless"},
	{what: "federated 1 KB CPU/call Crank/proxy, sessionless", bench: "e2e.BenchmarkFederation/throughput", metric: "crank/proxy-cpu-lookup-sessionless"},
	{what: "federated echo p99 Crank/proxy, session", bench: "e2e.BenchmarkFederation/latency", metric: "crank/proxy-p99-echo"},
	{what: "federated gateway RSS after throughput / warm", bench: "e2e.BenchmarkFederation/throughput", metric: "crank-rss/warm"},
	{what: "hot path sessionless call with three rate limits (µs)", bench: "mcpserver.BenchmarkRateLimit/call", metric: "limited-µs/call"},
	{what: "hot path sessionless call without rate limits, same run (µs)", bench: "mcpserver.BenchmarkRateLimit/call", metric: "unlimited-µs/call"},
	{what: "hot path call with rate limits / without", bench: "mcpserver.BenchmarkRateLimit/call", metric: "limited-µs/call",
		perBench: "mcpserver.BenchmarkRateLimit/call", perMetric: "unlimited-µs/call"},
	{what: "window ingest 100k small / baseline", bench: "host.BenchmarkWindow/100k_small", metric: "x-baseline"},
	{what: "window ingest 64 KiB events / baseline", bench: "host.BenchmarkWindow/large_64KiB", metric: "x-baseline"},
	{what: "session polls/s / raw store polls", bench: "host.BenchmarkStreamSessionPoll", metric: "x-baseline"},
	{what: "job starts/s / unary calls", bench: "host.BenchmarkJobStart", metric: "x-unary-starts"},
	{what: "host call to an adapter process (µs)", bench: "host.BenchmarkCall", metric: "ns/op"},
	{what: "REST adapter over the protocol / direct", bench: "rest.BenchmarkInvoke", metric: "ns/op", perBench: "rest.BenchmarkDirect", perMetric: "ns/op"},
	{what: "GraphQL subscription items per CPU-second, graphql-transport-ws", bench: "graphql.BenchmarkSubscriptionIngest", metric: "graphql_ws_items/cpu_s"},
	{what: "GraphQL subscription items per CPU-second, GraphQL over SSE", bench: "graphql.BenchmarkSubscriptionIngest", metric: "graphql_sse_items/cpu_s"},
	{what: "WebSocket adapter items per CPU-second, same data and run", bench: "graphql.BenchmarkSubscriptionIngest", metric: "websocket_items/cpu_s"},
	{what: "GraphQL subscription CPU per item / WebSocket adapter", bench: "graphql.BenchmarkSubscriptionIngest", metric: "x_ws_cpu"},
	{what: "REST adapter process CPU per unary call (µs)", bench: "rest.BenchmarkHop", metric: "adapter-cpu-µs/call"},
	{what: "REST adapter process CPU / direct client's", bench: "rest.BenchmarkHop", metric: "adapter/direct-cpu"},
	{what: "REST adapter process CPU, Invoke calls / direct", bench: "rest.BenchmarkHop", metric: "invoke-adapter/direct-cpu"},
	{what: "REST hop, host side allocations per call", bench: "rest.BenchmarkHop", metric: "host-allocs/call"},
	{what: "GraphQL unary p50 Crank / direct", bench: "e2e.BenchmarkUnaryGraphQL/crank", metric: "p50-µs", perBench: "e2e.BenchmarkUnaryGraphQL/direct", perMetric: "p50-µs"},
	{what: "gRPC unary p50 over the protocol / direct", bench: "grpc.BenchmarkUnary/harness", metric: "p50-µs", perBench: "grpc.BenchmarkUnary/direct", perMetric: "p50-µs"},
	{what: "SOAP over the protocol / direct", bench: "soap.BenchmarkSOAPInvoke", metric: "ns/op", perBench: "soap.BenchmarkSOAPDirect", perMetric: "ns/op"},
}

// values is the figure's values in r, one per run.
func (f figure) values(r results) []float64 {
	vs := r[f.bench][f.metric]
	if f.perBench == "" {
		if f.metric == "ns/op" {
			return scaled(vs, 1e-3)
		}
		return vs
	}
	per := r[f.perBench][f.perMetric]
	var out []float64
	for i := range min(len(vs), len(per)) {
		if per[i] > 0 {
			out = append(out, vs[i]/per[i])
		}
	}
	return out
}

func scaled(vs []float64, k float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * k
	}
	return out
}

// results holds, per benchmark and metric, the values of its runs in order.
type results map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads benchmark lines; a benchmark is named after the last element
// of its package ("host.BenchmarkCall"), from the "pkg:" line before it.
func parse(r io.Reader) (results, error) {
	res := results{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "pkg: "); ok {
			pkg = path.Base(strings.TrimSpace(p)) + "."
			continue
		}
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		m[1] = pkg + m[1]
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			if res[m[1]] == nil {
				res[m[1]] = map[string][]float64{}
			}
			res[m[1]][f[i+1]] = append(res[m[1]][f[i+1]], v)
		}
	}
	return res, sc.Err()
}

func load(path string) (results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(f)
}

// stats is min, median and max of vs (sorted in place).
func stats(vs []float64) (lo, med, hi float64) {
	slices.Sort(vs)
	n := len(vs)
	med = vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[0], med, vs[n-1]
}

// format is "median (min–max, n runs)" of vs, scaled.
func format(vs []float64, scale float64) string {
	if len(vs) == 0 {
		return "not measured"
	}
	lo, med, hi := stats(slices.Clone(vs))
	if len(vs) == 1 {
		return trim(med / scale)
	}
	return fmt.Sprintf("%s (%s–%s, %d runs)", trim(med/scale), trim(lo/scale), trim(hi/scale), len(vs))
}

func trim(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// scaleOf converts bytes to KiB for the memory goals and to KB for the
// allocation per call.
func scaleOf(metric string) float64 {
	switch {
	case strings.HasSuffix(metric, "B/session"):
		return 1024
	case strings.HasSuffix(metric, "alloc-B/call"):
		return 1000
	}
	return 1
}

func report(w io.Writer, before, after results) {
	col := func(r results, bench, metric string) string {
		return format(r[bench][metric], scaleOf(metric))
	}
	fmt.Fprintln(w, "goals (median of the runs judged; ratios to a bare go-sdk server in the same run):")
	for _, g := range goals {
		vs := after[g.bench][g.metric]
		verdict := ""
		if len(vs) > 0 {
			_, med, _ := stats(slices.Clone(vs))
			med /= scaleOf(g.metric)
			bound := g.bound / scaleOf(g.metric)
			ok, rel := med <= bound, "≤"
			if !g.max {
				ok, rel = med >= bound, "≥"
			}
			verdict = fmt.Sprintf("MISS (goal %s %s)", rel, trim(bound))
			if ok {
				verdict = fmt.Sprintf("PASS (goal %s %s)", rel, trim(bound))
			}
		}
		line := fmt.Sprintf("  %-48s %-28s %s", g.what, col(after, g.bench, g.metric), verdict)
		if before != nil {
			line = fmt.Sprintf("  %-48s before %-28s after %-28s %s", g.what, col(before, g.bench, g.metric), col(after, g.bench, g.metric), verdict)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w, "figures that must not get slower:")
	for _, f := range figures {
		scale := 1.0
		if f.perBench == "" {
			scale = scaleOf(f.metric)
		}
		if before != nil {
			fmt.Fprintf(w, "  %-48s before %-28s after %s\n", f.what, format(f.values(before), scale), format(f.values(after), scale))
			continue
		}
		fmt.Fprintf(w, "  %-48s %s\n", f.what, format(f.values(after), scale))
	}
}

func main() {
	beforePath := flag.String("before", "", "`file` of an earlier run to print side by side")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: benchgoals [-before file] file")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	after, err := load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchgoals:", err)
		os.Exit(1)
	}
	var before results
	if *beforePath != "" {
		if before, err = load(*beforePath); err != nil {
			fmt.Fprintln(os.Stderr, "benchgoals:", err)
			os.Exit(1)
		}
	}
	report(os.Stdout, before, after)
}
