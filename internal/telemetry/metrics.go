package telemetry

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const ns = "crank"

// Buckets for latencies from well under a millisecond (a refused call, a
// small etcd read) to minutes (a window, a job's adapter call).
var (
	callBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	etcdBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	fillBuckets = []float64{0, .1, .25, .5, .75, .9, 1}
)

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
}

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
}

// The collectors, created once per process. docs/observability.md
// describes each.
var (
	// MCP requests (host/mcpserver).
	mcpRequests        = counter("mcp_requests_total", "MCP requests (JSON-RPC requests and notifications) handled, by method and outcome (ok, error, cancelled).", "method", "outcome")
	mcpRequestDuration = histogram("mcp_request_duration_seconds", "Time to answer an MCP request, by method.", callBuckets, "method")
	mcpSessions        = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "mcp_sessions", Help: "Live MCP sessions this replica holds (created here or restored from etcd)."})
	mcpSessionsOpened  = counter("mcp_sessions_opened_total", "MCP sessions this replica started holding, by how (initialize, restored from etcd).", "how")
	progressSent       = counter("progress_notifications_total", "Progress notifications sent for window tools' chunks, by tool and outcome (sent, failed).", "tool", "outcome")

	// Tool calls (host).
	toolCalls        = counter("tool_calls_total", "Tool calls, by tool, mode, role in a session or job family (call for unary and window tools) and outcome.", "tool", "mode", "role", "outcome")
	toolCallDuration = histogram("tool_call_duration_seconds", "Duration of tool calls, by tool and mode.", callBuckets, "tool", "mode")
	outputMismatches = counter("output_mismatch_total", "Tool results whose structuredContent did not match the output schema the tool publishes, delivered as text instead, by tool.", "tool")
	toolCallsRunning = gauge("tool_calls_in_flight", "Tool calls being served, by tool and mode.", "tool", "mode")

	// Windows (host).
	windows          = counter("windows_total", "Windows collected (window tools and window jobs), by tool and end reason.", "tool", "end_reason")
	windowItems      = counter("window_items_total", "Items counted into windows, by tool.", "tool")
	windowBytes      = counter("window_bytes_total", "Bytes of the items counted into windows, by tool.", "tool")
	windowsTruncated = counter("windows_truncated_total", "Windows whose result is truncated (cut by max_items or max_bytes, oversize items skipped, fields cut, gaps), by tool.", "tool")

	// Stream sessions and jobs (host).
	sessionsEnded   = counter("stream_sessions_ended_total", "Stream sessions whose reader ended on this replica, by operation and status (completed, stopped, failed, expired).", "operation", "status")
	sessionsRunning = gauge("stream_sessions_running", "Stream sessions whose reader runs on this replica, by operation.", "operation")
	sessionFill     = histogram("stream_session_buffer_fill_ratio", "How full a stream session's buffer was when polled (buffered items / max_items), by operation.", fillBuckets, "operation")
	jobsRunning     = gauge("jobs_running", "Async jobs running on this replica, by operation.", "operation")
	jobsEnded       = counter("jobs_ended_total", "Async jobs that ended on this replica, by operation and status (succeeded, failed, canceled).", "operation", "status")
	ownerLost       = counter("owner_lost_total", "Stream sessions and jobs of a replica that died, swept by this replica, by kind (session, job) and action (failed, adopted).", "kind", "action")
	expiredDeleted  = counter("expired_deleted_total", "Expired stream sessions and jobs deleted by this replica's cleanup (the sweep leader's), by kind (session, job).", "kind")
	quotaRefusals   = counter("quota_refusals_total", "Session and job starts refused by a quota, by quota.", "quota")
	rateLimited     = counter("rate_limited_total", "Tool calls (and requests without a session) a rate limit refused, by limit (its name) and scope (endpoint, tool, family, toolset, upstream, requests).", "limit", "scope")

	// Adapters (host).
	adapterStarts        = counter("adapter_starts_total", "Adapter processes started (or attached to), by adapter.", "adapter")
	adapterRestarts      = counter("adapter_restarts_total", "Adapter processes started again after an earlier one of the same adapter, by adapter.", "adapter")
	adapterStartFailures = counter("adapter_start_failures_total", "Failed adapter starts, by adapter.", "adapter")
	adapterCrashes       = counter("adapter_crashes_total", "Adapter processes found gone without the gateway stopping them (a crash, a kill), by adapter.", "adapter")
	adapterPingFailures  = counter("adapter_health_ping_failures_total", "Failed health pings (each stops the process; the next call restarts it), by adapter.", "adapter")
	adapterCalls         = counter("adapter_calls_total", "Calls across the adapter hop, by adapter, rpc (invoke, stream) and result.", "adapter", "rpc", "result")
	adapterCallDuration  = histogram("adapter_call_duration_seconds", "Duration of calls across the adapter hop (for a stream, until it ends), by adapter and rpc.", callBuckets, "adapter", "rpc")
	entryLoadFailures    = counter("entry_load_failures_total", "Failed loads of an operations-file or catalog entry (its adapter did not start, its expansion failed), the first and every retry, by entry.", "entry")

	// etcd (store).
	etcdDuration    = histogram("etcd_request_duration_seconds", "Duration of etcd requests, by store operation.", etcdBuckets, "operation")
	etcdEvents      = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "etcd_event_log_events_total", Help: "SSE events written to etcd event logs (for Last-Event-ID resumption)."})
	etcdEventBytes  = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "etcd_event_log_bytes_total", Help: "Bytes of the SSE events written to etcd event logs."})
	etcdLeases      = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "etcd_leases", Help: "Bucket leases this replica granted that have not expired yet."})
	etcdLeaseGrants = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "etcd_lease_grants_total", Help: "Bucket leases this replica granted."})
	etcdErrors      = counter("etcd_request_errors_total", "Failed etcd requests, by store operation and error (unavailable, no_space, too_large, conflict, cancelled, other).", "operation", "error")

	// mcp-mesh registration (host/mesh).
	meshRequests   = counter("mesh_registry_requests_total", "Requests to an mcp-mesh registry, by request (register, heartbeat, deregister) and result (ok, error).", "request", "result")
	meshRegistered = gauge("mesh_registered", "1 while this replica holds an endpoint's mcp-mesh registration and the registry has it, else 0, by agent id.", "agent")

	// Users' grants at upstreams (host, upstream_auth authorization_code).
	upstreamConsents    = counter("upstream_consents_total", "Consents to upstreams (authorization_code), by upstream and stage (started, completed, failed, refused: a callback refused as another user's, replayed or not issued).", "upstream", "stage")
	upstreamRefreshes   = counter("upstream_grant_refreshes_total", "Refreshes of users' upstream tokens, by upstream and result (ok, error, invalid: the provider refused the refresh token, so the user consents again).", "upstream", "result")
	upstreamRevocations = counter("upstream_grant_revocations_total", "Users' grants revoked, by upstream and where (gateway: the grant deleted; provider: its token revoked there, RFC 7009) and result (ok, error, unsupported).", "upstream", "where", "result")

	// Tracing.
	adapterSpansDropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "trace_adapter_spans_dropped_total", Help: "Spans adapters sent back that could not be exported (tracing was off, or the export queue was full)."})
)

// collectors are every collector Register registers.
var collectors = []prometheus.Collector{
	mcpRequests, mcpRequestDuration, mcpSessions, mcpSessionsOpened, progressSent,
	toolCalls, toolCallDuration, toolCallsRunning, outputMismatches,
	windows, windowItems, windowBytes, windowsTruncated,
	sessionsRunning, sessionsEnded, sessionFill,
	jobsRunning, jobsEnded, quotaRefusals, rateLimited, ownerLost, expiredDeleted,
	adapterStarts, adapterRestarts, adapterStartFailures, adapterCrashes, adapterPingFailures, adapterCalls, adapterCallDuration,
	adapterUp, entryLoadFailures, entriesFailed,
	etcdDuration, etcdErrors, etcdEvents, etcdEventBytes, etcdLeases, etcdLeaseGrants,
	meshRequests, meshRegistered,
	upstreamConsents, upstreamRefreshes, upstreamRevocations,
	adapterSpansDropped,
}

func init() {
	// Series of closed label sets exist from the start (at 0), so that a
	// dashboard or an alert sees 0 instead of nothing.
	for _, how := range []string{"initialize", "restored"} {
		mcpSessionsOpened.WithLabelValues(how)
	}
	for _, req := range []string{"register", "heartbeat", "deregister"} {
		for _, result := range []string{"ok", "error"} {
			meshRequests.WithLabelValues(req, result)
		}
	}
	for _, kind := range []string{"session", "job"} {
		for _, action := range []string{"failed", "adopted"} {
			ownerLost.WithLabelValues(kind, action)
		}
		expiredDeleted.WithLabelValues(kind)
	}
	for _, q := range Quotas {
		quotaRefusals.WithLabelValues(q)
	}
}

// Quotas are the quota label values: the names of the options that set them.
var Quotas = []string{
	"max_sessions_per_workspace", "max_sessions_per_agent", "max_jobs_per_workspace", "max_jobs_per_agent",
	"max_sessions_per_replica", "max_jobs_per_replica",
	"max_retained_jobs_per_workspace", "max_retained_job_bytes_per_workspace", "max_retained_job_bytes_per_agent",
	"max_sessions_per_client", "max_jobs_per_client", "max_retained_jobs_per_client", "max_retained_job_bytes_per_client",
}

// Register registers every collector with reg. A collector reg already
// has is not an error: Caddy gives every config a registry of its own,
// and a reload provisions the new config while the old one still runs.
func Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) && are.ExistingCollector == c {
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var metricsOff atomic.Bool

// SetMetricsEnabled turns recording on (the default) or off; collectors
// stay registered and keep their values.
func SetMetricsEnabled(on bool) { metricsOff.Store(!on) }

// MetricsEnabled reports whether metrics are recorded.
func MetricsEnabled() bool { return !metricsOff.Load() }

func since(start time.Time) float64 { return time.Since(start).Seconds() }

// MeshRequest records a request to an mcp-mesh registry: request is
// register, heartbeat or deregister.
func MeshRequest(request string, ok bool) {
	if metricsOff.Load() {
		return
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	meshRequests.WithLabelValues(request, result).Inc()
}

// UpstreamConsent counts a consent to an upstream reaching stage
// (started, completed, failed, refused).
func UpstreamConsent(upstream, stage string) {
	if metricsOff.Load() {
		return
	}
	upstreamConsents.WithLabelValues(upstream, stage).Inc()
}

// UpstreamRefresh counts a refresh of a user's upstream token (ok,
// error, invalid).
func UpstreamRefresh(upstream, result string) {
	if metricsOff.Load() {
		return
	}
	upstreamRefreshes.WithLabelValues(upstream, result).Inc()
}

// UpstreamRevocation counts a grant's revocation at the gateway or the
// provider (ok, error, unsupported).
func UpstreamRevocation(upstream, where, result string) {
	if metricsOff.Load() {
		return
	}
	upstreamRevocations.WithLabelValues(upstream, where, result).Inc()
}

// MeshRegistered records whether this replica holds the mcp-mesh
// registration of the agent and the registry has it.
func MeshRegistered(agent string, registered bool) {
	v := 0.0
	if registered {
		v = 1
	}
	meshRegistered.WithLabelValues(agent).Set(v)
}
