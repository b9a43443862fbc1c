package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/mcpserver"
)

// A handler without quotas gets non-zero defaults, one that sets a quota
// to 0 gets no limit, and every host shares the process's replica caps.
func TestQuotaDefaults(t *testing.T) {
	got := (*Quotas)(nil).host()
	want := host.Quotas{
		StreamSessionsPerWorkspace: host.DefaultStreamSessionsPerWorkspace, StreamSessionsPerAgent: host.DefaultStreamSessionsPerAgent,
		JobsPerWorkspace: host.DefaultJobsPerWorkspace, JobsPerAgent: host.DefaultJobsPerAgent,
		RetainedJobsPerAgent: host.DefaultRetainedJobsPerAgent, RetainedJobsPerWorkspace: host.DefaultRetainedJobsPerWorkspace,
		RetainedJobBytesPerAgent: host.DefaultRetainedJobBytesPerAgent, RetainedJobBytesPerWorkspace: host.DefaultRetainedJobBytesPerWorkspace,
		StreamSessionsPerClient: host.DefaultStreamSessionsPerClient, JobsPerClient: host.DefaultJobsPerClient,
		RetainedJobsPerClient: host.DefaultRetainedJobsPerClient, RetainedJobBytesPerClient: host.DefaultRetainedJobBytesPerClient,
		Replica: replicaLimits,
	}
	if got != want || want.StreamSessionsPerAgent == 0 || want.JobsPerAgent == 0 || want.RetainedJobBytesPerAgent == 0 ||
		want.JobsPerClient == 0 || want.RetainedJobsPerClient == 0 || want.RetainedJobBytesPerClient == 0 {
		t.Fatalf("no quotas configured: %+v, want the defaults %+v", got, want)
	}
	if ev := (*Quotas)(nil).events(0); ev.PerSession != mcpserver.DefaultEventBytesPerSession || ev.PerClient != mcpserver.DefaultEventBytesPerClient || ev.PerSession == 0 {
		t.Fatalf("event-log quotas by default: %+v", ev)
	}
	var q Quotas
	if err := json.Unmarshal([]byte(`{"max_sessions_per_agent": 0, "max_jobs_per_workspace": 7, "max_retained_job_bytes_per_agent": 0,
		"max_event_bytes_per_client": 2097152}`), &q); err != nil {
		t.Fatal(err)
	}
	got = q.host()
	if got.StreamSessionsPerAgent != 0 || got.JobsPerWorkspace != 7 || got.StreamSessionsPerWorkspace != host.DefaultStreamSessionsPerWorkspace ||
		got.RetainedJobBytesPerAgent != 0 || got.RetainedJobsPerAgent != host.DefaultRetainedJobsPerAgent {
		t.Fatalf("explicit quotas: %+v", got)
	}
	if ev := q.events(0); ev.PerClient != 2<<20 || ev.PerSession != mcpserver.DefaultEventBytesPerSession {
		t.Fatalf("explicit event-log quotas: %+v", ev)
	}
	if s, j := (*ReplicaQuotas)(nil).limits(); s != host.DefaultStreamSessionsPerReplica || j != host.DefaultJobsPerReplica || s == 0 || j == 0 {
		t.Fatalf("replica caps by default: %d, %d", s, j)
	}
	zero := 0
	if s, j := (&ReplicaQuotas{MaxSessionsPerReplica: &zero}).limits(); s != 0 || j != host.DefaultJobsPerReplica {
		t.Fatalf("replica caps with sessions 0: %d, %d", s, j)
	}
}

func TestValidateReplicaQuotas(t *testing.T) {
	var cfg caddy.Config
	if err := json.Unmarshal([]byte(`{"admin": {"disabled": true}, "apps": {"crank": {"quotas": {"max_jobs_per_replica": -1}}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err == nil || !strings.Contains(err.Error(), "quotas.max_jobs_per_replica: must not be negative") {
		t.Fatalf("a negative replica cap: %v", err)
	}
}

// An event-log quota below what one stream keeps fails at load, naming
// both options.
func TestValidateEventQuotas(t *testing.T) {
	small := int64(512 << 10)
	q := &Quotas{MaxEventBytesPerSession: &small}
	if err := q.validate(0); err == nil || !strings.Contains(err.Error(), "quotas.max_event_bytes_per_session") ||
		!strings.Contains(err.Error(), "event_max_bytes 1048576") {
		t.Fatalf("a session quota below the stream bound: %v", err)
	}
	if err := q.validate(256 << 10); err != nil {
		t.Fatalf("a session quota above a lowered stream bound: %v", err)
	}
	// Unset, they grow with a large event_max_bytes instead of failing.
	if err := (*Quotas)(nil).validate(16 << 20); err != nil {
		t.Fatalf("defaults with event_max_bytes 16MiB: %v", err)
	}
	if ev := (*Quotas)(nil).events(16 << 20); ev.PerSession != 16<<20 || ev.PerClient != mcpserver.DefaultEventBytesPerClient {
		t.Fatalf("defaults with event_max_bytes 16MiB: %+v", ev)
	}
	neg := int64(-1)
	if err := (&Quotas{MaxRetainedJobBytesPerAgent: &neg}).validate(0); err == nil ||
		!strings.Contains(err.Error(), "quotas.max_retained_job_bytes_per_agent: must not be negative") {
		t.Fatalf("a negative byte quota: %v", err)
	}
}

// The endpoint gets the handler's event-log quotas, the defaults unless
// set.
func TestEndpointEventQuotas(t *testing.T) {
	if got := (&Handler{}).endpointOptions().EventQuota; got != (mcpserver.EventQuota{PerSession: mcpserver.DefaultEventBytesPerSession,
		PerClient: mcpserver.DefaultEventBytesPerClient}) {
		t.Fatalf("default event-log quotas: %+v", got)
	}
	zero := int64(0)
	if got := (&Handler{Quotas: &Quotas{MaxEventBytesPerClient: &zero}}).endpointOptions().EventQuota; got.PerClient != 0 || got.PerSession == 0 {
		t.Fatalf("event-log quotas with the client's off: %+v", got)
	}
}
