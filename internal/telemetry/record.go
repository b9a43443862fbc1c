package telemetry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The recording functions: each does nothing while metrics are off. Their
// label arguments must be bounded (see the package documentation);
// mcpMethod and ToolLabel bound the two that come from requests and
// configuration.

// MCPRequest records one MCP request: its method (anything outside the
// protocol's methods counts as "other"), its outcome (ok, error,
// cancelled) and how long it took.
func MCPRequest(method, outcome string, d time.Duration) {
	if metricsOff.Load() {
		return
	}
	m := mcpMethod(method)
	mcpRequests.WithLabelValues(m, outcome).Inc()
	mcpRequestDuration.WithLabelValues(m).Observe(d.Seconds())
}

// MCPSessionOpened counts a session this replica starts holding, created
// by an initialize (restored false) or rebuilt from its store record.
func MCPSessionOpened(restored bool) {
	if metricsOff.Load() {
		return
	}
	how := "initialize"
	if restored {
		how = "restored"
	}
	mcpSessionsOpened.WithLabelValues(how).Inc()
}

// MCPSessionsHeld moves the gauge of live MCP sessions by delta. It is
// kept while metrics are off, so that it stays true when they are turned
// on again.
func MCPSessionsHeld(delta int) { mcpSessions.Add(float64(delta)) }

// ProgressNotification counts one progress notification of a window tool.
func ProgressNotification(tool string, sent bool) {
	if metricsOff.Load() {
		return
	}
	outcome := "sent"
	if !sent {
		outcome = "failed"
	}
	progressSent.WithLabelValues(ToolLabel(tool), outcome).Inc()
}

// Tool holds the series of one tool (a host builds one per tool it
// serves), so that a call costs no label lookup for them.
type Tool struct {
	tool, mode, role string
	duration         prometheus.Observer
	running          prometheus.Gauge
}

// NewTool returns the series of a tool in mode (unary, window, session,
// async_job); role is its role in a session or job family, "" for other
// tools.
func NewTool(tool, mode, role string) *Tool {
	if role == "" {
		role = "call"
	}
	label := ToolLabel(tool)
	return &Tool{tool: label, mode: mode, role: role,
		duration: toolCallDuration.WithLabelValues(label, mode),
		running:  toolCallsRunning.WithLabelValues(label, mode)}
}

var toolSeries sync.Map // tool\x00mode\x00role -> *Tool

// ToolSeries returns NewTool(tool, mode, role), made once per process.
func ToolSeries(tool, mode, role string) *Tool {
	key := tool + "\x00" + mode + "\x00" + role
	if t, ok := toolSeries.Load(key); ok {
		return t.(*Tool)
	}
	t, _ := toolSeries.LoadOrStore(key, NewTool(tool, mode, role))
	return t.(*Tool)
}

// Begin records the start of a call and returns its start time, for End.
// A nil *Tool records nothing.
func (t *Tool) Begin() time.Time {
	if t != nil && !metricsOff.Load() {
		t.running.Inc()
		return time.Now()
	}
	return time.Time{}
}

// End records the end of a call Begin started, with its outcome.
func (t *Tool) End(start time.Time, outcome string) {
	if t == nil || start.IsZero() {
		return
	}
	t.running.Dec()
	t.duration.Observe(since(start))
	toolCalls.WithLabelValues(t.tool, t.mode, t.role, outcome).Inc()
}

// OutputMismatch counts a result of tool whose structuredContent did not
// match the tool's published output schema.
func OutputMismatch(tool string) {
	if !metricsOff.Load() {
		outputMismatches.WithLabelValues(ToolLabel(tool)).Inc()
	}
}

// Window records one finished window of tool: why it ended, the items and
// bytes it counted, whether its result is truncated.
func Window(tool, endReason string, items int, bytes int64, truncated bool) {
	if metricsOff.Load() {
		return
	}
	tool = ToolLabel(tool)
	windows.WithLabelValues(tool, endReason).Inc()
	windowItems.WithLabelValues(tool).Add(float64(items))
	windowBytes.WithLabelValues(tool).Add(float64(bytes))
	if truncated {
		windowsTruncated.WithLabelValues(tool).Inc()
	}
}

// StreamSessionRunning moves the gauge of the stream sessions of
// operation running here by delta (kept while metrics are off).
func StreamSessionRunning(operation string, delta int) {
	sessionsRunning.WithLabelValues(ToolLabel(operation)).Add(float64(delta))
}

// StreamSessionEnded counts a stream session whose reader ended here, by
// its final status (completed, stopped, failed, expired).
func StreamSessionEnded(operation, status string) {
	if metricsOff.Load() {
		return
	}
	sessionsEnded.WithLabelValues(ToolLabel(operation), status).Inc()
}

// StreamSessionPolled records how full a session's buffer was when polled.
func StreamSessionPolled(operation string, buffered, max int) {
	if metricsOff.Load() || max <= 0 {
		return
	}
	sessionFill.WithLabelValues(ToolLabel(operation)).Observe(min(float64(buffered)/float64(max), 1))
}

// JobRunning moves the gauge of the jobs of operation running here by
// delta (kept while metrics are off).
func JobRunning(operation string, delta int) {
	jobsRunning.WithLabelValues(ToolLabel(operation)).Add(float64(delta))
}

// JobEnded counts a job that ended here, by its final status.
func JobEnded(operation, status string) {
	if metricsOff.Load() {
		return
	}
	jobsEnded.WithLabelValues(ToolLabel(operation), status).Inc()
}

// QuotaRefusal counts a start a quota refused; quota is one of Quotas.
func QuotaRefusal(quota string) {
	if metricsOff.Load() {
		return
	}
	quotaRefusals.WithLabelValues(quota).Inc()
}

// RateLimited counts a call (or request) the rate limit named limit, of
// scope, refused. Limit names come from the configuration, bounded as
// tool names are (ToolLabel).
func RateLimited(limit, scope string) {
	if metricsOff.Load() {
		return
	}
	rateLimited.WithLabelValues(ToolLabel(limit), scope).Inc()
}

// AdapterStarted counts a started adapter process; restart says an
// earlier process of the adapter ran before it.
func AdapterStarted(adapter string, restart bool) {
	if metricsOff.Load() {
		return
	}
	adapterStarts.WithLabelValues(adapter).Inc()
	if restart {
		adapterRestarts.WithLabelValues(adapter).Inc()
	}
}

// AdapterStartFailed counts a failed adapter start.
func AdapterStartFailed(adapter string) {
	if metricsOff.Load() {
		return
	}
	adapterStartFailures.WithLabelValues(adapter).Inc()
}

// AdapterCrashed counts an adapter process found gone without the
// gateway having stopped it.
func AdapterCrashed(adapter string) {
	if metricsOff.Load() {
		return
	}
	adapterCrashes.WithLabelValues(adapter).Inc()
}

// AdapterPingFailed counts a failed health ping.
func AdapterPingFailed(adapter string) {
	if metricsOff.Load() {
		return
	}
	adapterPingFailures.WithLabelValues(adapter).Inc()
}

// AdapterCall records one call across the adapter hop: rpc invoke or
// stream, its result (ok, upstream_error, cancelled, deadline_exceeded,
// unavailable, unimplemented, internal, unknown) and duration.
func AdapterCall(adapter, rpc, result string, d time.Duration) {
	if metricsOff.Load() {
		return
	}
	adapterCalls.WithLabelValues(adapter, rpc, result).Inc()
	adapterCallDuration.WithLabelValues(adapter, rpc).Observe(d.Seconds())
}

// EtcdRequest records one etcd request of a store operation (a name from
// a closed set, see store) and its error class ("" when it succeeded).
func EtcdRequest(operation, errClass string, d time.Duration) {
	if metricsOff.Load() {
		return
	}
	etcdDuration.WithLabelValues(operation).Observe(d.Seconds())
	if errClass != "" {
		etcdErrors.WithLabelValues(operation, errClass).Inc()
	}
}

// OwnerLost counts orphans of a dead replica swept here: kind session or
// job, action failed or adopted.
func OwnerLost(kind, action string) {
	if metricsOff.Load() {
		return
	}
	ownerLost.WithLabelValues(kind, action).Inc()
}

// ExpiredDeleted counts expired sessions and jobs the cleanup deleted.
func ExpiredDeleted(sessions, jobs int) {
	if metricsOff.Load() {
		return
	}
	expiredDeleted.WithLabelValues("session").Add(float64(sessions))
	expiredDeleted.WithLabelValues("job").Add(float64(jobs))
}

// EventLogWritten counts SSE events (and their bytes) written to etcd.
func EventLogWritten(events int, bytes int) {
	if metricsOff.Load() {
		return
	}
	etcdEvents.Add(float64(events))
	etcdEventBytes.Add(float64(bytes))
}

// LeaseGranted counts a bucket lease granted for ttl; crank_etcd_leases
// counts it until ttl has passed. It is kept while metrics are off.
func LeaseGranted(ttl time.Duration) {
	etcdLeaseGrants.Inc()
	etcdLeases.Inc()
	time.AfterFunc(ttl, etcdLeases.Dec)
}
